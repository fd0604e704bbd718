package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
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
	limited := LimitConns(ln, 2).(*ConnLimit)
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
