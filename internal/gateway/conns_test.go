package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
)

// TestConnLimitPerClient: a client address at its bound of open
// connections has its next connection closed at accept, before any byte
// is read, while another address is served; the connections it has keep
// working. (127.0.0.2 is a second loopback address on Linux.)
func TestConnLimitPerClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limited := LimitConns(ln, ConnBounds{Open: 2}).(*ConnLimit)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = srv.Serve(limited) }()
	defer srv.Close()
	addr := ln.Addr().String()

	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Skipf("cannot dial from %s: %v", from, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// get sends one request on c and returns the status line, or the
	// read error when the node closed the connection.
	get := func(c net.Conn) (string, error) {
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return "", err
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return "", err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Status, nil
	}

	var flood []net.Conn
	for range 2 {
		c := dial("127.0.0.2")
		if st, err := get(c); err != nil || !strings.HasPrefix(st, "200") {
			t.Fatalf("a connection within the bound: %q, %v", st, err)
		}
		flood = append(flood, c)
	}
	over := dial("127.0.0.2")
	if st, err := get(over); err == nil {
		t.Fatalf("the connection over its address's bound was served: %q", st)
	}
	if n := limited.Refused(); n != 1 {
		t.Fatalf("refused %d, want 1", n)
	}
	other := dial("127.0.0.1")
	if st, err := get(other); err != nil || !strings.HasPrefix(st, "200") {
		t.Fatalf("another address: %q, %v; want it served", st, err)
	}
	for _, c := range flood {
		if st, err := get(c); err != nil || !strings.HasPrefix(st, "200") {
			t.Fatalf("a connection held within the bound: %q, %v", st, err)
		}
	}
}

// floodServer serves ln through bounds b; a request with header
// "X-Key: good" counts as authenticated. It returns the listener and a
// dial from a loopback address, and get, which sends one request and
// returns its status or the error of a connection the node closed.
func floodServer(t *testing.T, b ConnBounds) (*ConnLimit, func(from string) net.Conn, func(c net.Conn, key string) (string, error)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limited := LimitConns(ln, b).(*ConnLimit)
	srv := &http.Server{ConnContext: ConnContext, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") == "good" {
			connAuthenticated(r)
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	})}
	go func() { _ = srv.Serve(limited) }()
	t.Cleanup(func() { srv.Close() })
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Skipf("cannot dial from %s: %v", from, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	get := func(c net.Conn, key string) (string, error) {
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Key: %s\r\n\r\n", key); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "", err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Status, nil
	}
	return limited, dial, get
}

// TestConnLimitUnauthenticated: an address at its bound of connections
// whose first request has not authenticated has its next connection
// closed at accept; once one of them authenticates, or closes, the
// address may open another; another address is served all along.
func TestConnLimitUnauthenticated(t *testing.T) {
	limited, dial, get := floodServer(t, ConnBounds{Unauthenticated: 1})
	first := dial("127.0.0.2")
	if st, err := get(first, "bad"); err != nil || !strings.HasPrefix(st, "401") {
		t.Fatalf("first connection: %q, %v; want 401", st, err)
	}
	if st, err := get(dial("127.0.0.2"), "good"); err == nil {
		t.Fatalf("a connection over the unauthenticated bound was served: %q", st)
	}
	if st, err := get(dial("127.0.0.1"), "bad"); err != nil || !strings.HasPrefix(st, "401") {
		t.Fatalf("another address: %q, %v; want it served", st, err)
	}
	if st, err := get(first, "good"); err != nil || !strings.HasPrefix(st, "200") {
		t.Fatalf("the first connection authenticating: %q, %v", st, err)
	}
	second := dial("127.0.0.2")
	if st, err := get(second, "bad"); err != nil || !strings.HasPrefix(st, "401") {
		t.Fatalf("after the first authenticated: %q, %v; want served", st, err)
	}
	// second is now the address's one unauthenticated connection; once it
	// is closed (by the client: the server sees it at its next read) the
	// address may open another.
	second.Close()
	for {
		c := dial("127.0.0.2")
		if _, err := get(c, "bad"); err == nil {
			break
		}
		// The server may not have seen the close yet: the refused
		// connection proves it still counts. Each try is one accept.
		if limited.Refused() > 100 {
			t.Fatal("the closed connection's count never came back")
		}
	}
	if n := limited.Refused(); n < 1 {
		t.Fatalf("refused %d, want at least 1", n)
	}
}

// TestConnLimitRate: an address over its rate of new connections has
// them closed at accept until its bucket refills; another address has
// its own bucket.
func TestConnLimitRate(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	limited, dial, get := floodServer(t, ConnBounds{Rate: 2, Now: clk.Now})
	served := func(from string) bool {
		t.Helper()
		st, err := get(dial(from), "good")
		return err == nil && strings.HasPrefix(st, "200")
	}
	for i := range 2 {
		if !served("127.0.0.2") {
			t.Fatalf("connection %d within the burst was closed", i+1)
		}
	}
	if served("127.0.0.2") {
		t.Fatal("the connection over the rate was served")
	}
	if !served("127.0.0.1") {
		t.Fatal("another address's first connection was closed")
	}
	clk.Advance(500 * time.Millisecond) // one connection's worth at 2 a second
	if !served("127.0.0.2") {
		t.Fatal("the refilled connection was closed")
	}
	if served("127.0.0.2") {
		t.Fatal("a second connection in the same half second was served")
	}
	if n := limited.Refused(); n != 2 {
		t.Fatalf("refused %d, want 2", n)
	}
}

func TestClientAddr(t *testing.T) {
	tests := []struct {
		in   *net.TCPAddr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 1}, "2001:db8:1:2::"},
	}
	for _, tt := range tests {
		got, ok := clientAddr(tt.in)
		if !ok || got.String() != tt.want {
			t.Errorf("clientAddr(%v) = %v, %v; want %s", tt.in, got, ok, tt.want)
		}
	}
}
