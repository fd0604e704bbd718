package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
)

// TestConnLimitRatePenalty: an address that went over its connection
// rate has its new connections closed at accept for the whole penalty,
// although its bucket refills meanwhile (connecting again brings no
// fresh budget); another address is served all along, and once the
// penalty is over the address is served again.
func TestConnLimitRatePenalty(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	limited, dial, get := floodServer(t, ConnBounds{Rate: 2, Penalty: 5 * time.Second, Now: clk.Now})
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
	clk.Advance(time.Second) // the bucket is full again: the penalty is what refuses
	if served("127.0.0.2") {
		t.Fatal("a connection during the penalty was served")
	}
	if !served("127.0.0.1") {
		t.Fatal("another address was refused during the first one's penalty")
	}
	clk.Advance(4 * time.Second) // the penalty's end, 5 s after the refusal that began it
	if !served("127.0.0.2") {
		t.Fatal("a connection after the penalty was closed")
	}
	if n, p := limited.Refused(), limited.Penalties(); n != 2 || p != 1 {
		t.Fatalf("refused %d, penalties %d; want 2 and 1", n, p)
	}
}

// TestLimitResetsHTTP1: an HTTP/1.1 client that sends a request and
// resets its connection while the node works on it abandons the request:
// it counts against its address's resets, and once they are spent the
// address's new connections are closed at accept for the penalty. A
// request answered, and one whose body the node stopped waiting for (its
// own read deadline), count nothing. Once the address has given one up,
// its new connections prepay a reset at accept and get it back when a
// request on them is served. A connection opened before the penalty is
// closed at its first request during it, unless a request on it has
// authenticated.
func TestLimitResetsHTTP1(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	started := make(chan struct{}, 1)
	abandoned := make(chan struct{}, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limited := LimitConns(ln, ConnBounds{Resets: 3, Penalty: 5 * time.Second, Now: clk.Now}).(*ConnLimit)
	srv := &http.Server{ConnContext: ConnContext, Handler: LimitResets(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/quick":
			connAuthenticated(r)
			_, _ = io.WriteString(w, "ok")
		case "/slowbody":
			// The node's own deadline ends the body: not the client.
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Now())
			_, err := io.Copy(io.Discard, r.Body)
			fmt.Fprint(w, err != nil)
		default:
			started <- struct{}{}
			<-r.Context().Done() // the client's reset
			abandoned <- struct{}{}
		}
	}))}
	go func() { _ = srv.Serve(limited) }()
	defer srv.Close()
	dial := func() net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Skipf("cannot dial from 127.0.0.2: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	get := func(c net.Conn, path string) (string, error) {
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.Status + " " + string(b), nil
	}
	abandon := func(c net.Conn) {
		t.Helper()
		if _, err := fmt.Fprint(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		<-started
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close() // a reset
		<-abandoned
	}
	quick := func(c net.Conn) bool {
		t.Helper()
		st, err := get(c, "/quick")
		return err == nil && strings.HasPrefix(st, "200")
	}
	c, last, auth := dial(), dial(), dial() // opened with the bucket full: not prepaid
	for range 3 {
		if !quick(c) {
			t.Fatal("a request was not answered")
		}
	}
	if !quick(auth) {
		t.Fatal("a request was not answered")
	}
	slow := dial()
	if _, err := fmt.Fprint(slow, "POST /slowbody HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(slow), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the slow body's answer: %v", err)
	}
	abandon(dial()) // the bucket's first reset: 3 → 2
	// The address gave a request up: its new connections prepay a reset
	// at accept, given back once a request on them reaches the handler.
	early := dial()     // prepaid: 2 → 1; its first request comes during the penalty
	if !quick(dial()) { // prepaid (1 → 0), then given back (→ 1)
		t.Fatal("a prepaid connection's request was not served")
	}
	abandon(last) // 1 → 0
	if quick(dial()) {
		t.Fatal("a new connection with the address's resets spent was served")
	}
	if n := limited.Penalties(); n != 0 {
		t.Fatalf("penalties %d within the bucket", n)
	}
	abandon(c) // over: the penalty begins
	if quick(early) {
		t.Fatal("the first request of a connection opened before the penalty was served")
	}
	if quick(dial()) {
		t.Fatal("a new connection after the reset over the bucket was served")
	}
	clk.Advance(time.Second) // the bucket is full again: the penalty is what refuses
	if quick(dial()) {
		t.Fatal("a new connection during the penalty was served")
	}
	if !quick(auth) {
		t.Fatal("a connection authenticated before the penalty was not served during it")
	}
	clk.Advance(4 * time.Second)
	if !quick(dial()) {
		t.Fatal("a new connection after the penalty was not served")
	}
	if p := limited.Penalties(); p != 1 {
		t.Fatalf("penalties %d, want 1", p)
	}
}

// TestLimitResetsClosedConn: a request on a connection already closed
// for its address's resets (an HTTP/2 stream the flood queued before the
// close) is dropped before the handler does any work.
func TestLimitResetsClosedConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limited := LimitConns(ln, ConnBounds{Resets: 1}).(*ConnLimit)
	defer limited.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := limited.Accept()
	if err != nil {
		t.Fatal(err)
	}
	called := 0
	h := LimitResets(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called++ }))
	serve := func() {
		r := httptest.NewRequestWithContext(ConnContext(context.Background(), c), "POST", "/v1/chat/completions", strings.NewReader("{}"))
		r.ProtoMajor = 2
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	serve()
	c.Close()
	serve()
	if called != 1 {
		t.Fatalf("the handler ran %d times, want once (before the close)", called)
	}
}

// TestLimitResetsUnfinished: a connection its client resets or closes
// before any request on it reached the handler (a request sent and reset
// before the node read it, a header cut off) counts against its
// address's resets like an abandoned request, so that the cheapest
// request-then-reset flood, whose requests the node never reads, also
// has its new connections closed at accept once the bucket is spent. A connection the node itself closes
// (its header deadline) counts nothing, and neither does a client
// closing a connection after a request on it was served.
func TestLimitResetsUnfinished(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limited := LimitConns(ln, ConnBounds{Resets: 2, Penalty: 5 * time.Second, Now: clk.Now}).(*ConnLimit)
	closed := make(chan struct{}, 16) // one per connection net/http closed
	srv := &http.Server{
		ConnContext:       ConnContext,
		ReadHeaderTimeout: 50 * time.Millisecond,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				closed <- struct{}{}
			}
		},
		Handler: LimitResets(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			connAuthenticated(r)
			_, _ = io.WriteString(w, "ok")
		})),
	}
	go func() { _ = srv.Serve(limited) }()
	defer srv.Close()
	dial := func() *net.TCPConn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Skipf("cannot dial from 127.0.0.2: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.TCPConn)
	}
	// waitClosed waits for net/http to close a connection it served; a
	// connection closed at accept never gets there.
	waitClosed := func(what string) {
		t.Helper()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: never served (closed at accept?)", what)
		}
	}
	served := func(c net.Conn) bool {
		t.Helper()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}

	// Served, then closed by its client: not a reset.
	c := dial()
	if !served(c) {
		t.Fatal("a request within the bounds was not served")
	}
	c.Close()
	waitClosed("the served connection")
	// Opened and left silent: the node's header deadline closes it.
	_ = dial()
	waitClosed("the silent connection")
	// Two unfinished connections spend the bucket.
	for range 2 {
		c := dial()
		_, _ = io.WriteString(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Le")
		_ = c.SetLinger(0)
		c.Close() // a reset before the node could read a whole request
		waitClosed("an unfinished connection within the bucket")
	}
	if n := limited.Refused(); n != 0 {
		t.Fatalf("%d connections refused within the bucket", n)
	}
	if served(dial()) {
		t.Fatal("a new connection with the address's resets spent was served")
	}
	if n := limited.Refused(); n != 1 {
		t.Fatalf("refused %d connections at accept, want 1", n)
	}
	clk.Advance(time.Second) // the bucket holds two again
	if !served(dial()) {
		t.Fatal("a new connection after the bucket refilled was not served")
	}
}
