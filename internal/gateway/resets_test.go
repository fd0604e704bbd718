package gateway

import (
	"bytes"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/scootgate/scootgate/internal/clock"
)

// TestLimitResets: an HTTP/2 connection whose client resets streams
// while their handlers run is closed once its address has reset more
// than its bucket holds (2 here, at 2 a second), while the streams it
// lets finish cost it nothing; the bucket refills with time, and until
// it holds a reset again the address's new connections are closed at
// accept.
func TestLimitResets(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	started := make(chan struct{})
	finished := make(chan struct{})
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quick" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		started <- struct{}{}
		<-r.Context().Done() // the client's reset
	})
	limited := LimitResets(inner)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { finished <- struct{}{} }()
		limited.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	ln := LimitConns(srv.Listener, ConnBounds{Resets: 2, Now: clk.Now}).(*ConnLimit)
	srv.Listener = ln
	srv.Config.ConnContext = ConnContext
	srv.StartTLS()
	defer srv.Close()

	c := dialH2(t, srv)
	id := uint32(1)
	reset := func() {
		t.Helper()
		c.headers(id, "/hold")
		<-started
		c.write(func(f *http2.Framer) error { return f.WriteRSTStream(id, http2.ErrCodeCancel) })
		<-finished
		id += 2
	}
	quick := func() {
		t.Helper()
		c.headers(id, "/quick")
		<-finished
		id += 2
	}
	reset()
	quick()
	reset()
	if n := ln.ResetClosed(); n != 0 {
		t.Fatalf("closed %d connections after 2 resets within the bucket of 2", n)
	}
	clk.Advance(500 * time.Millisecond) // one reset's worth
	reset()
	quick()
	if n := ln.ResetClosed(); n != 0 {
		t.Fatalf("closed %d connections after a refilled reset", n)
	}
	reset()
	if n := ln.ResetClosed(); n != 1 {
		t.Fatalf("closed %d connections after the reset over the bucket, want 1", n)
	}
	// The client sees its connection end.
	for {
		if _, err := c.fr.ReadFrame(); err != nil {
			break
		}
	}
	// Until the address has a reset again, its new connections are
	// closed at accept; then it is served.
	cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	if conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), cfg); err == nil {
		conn.Close()
		t.Fatal("a connection from the address with no resets left was served")
	}
	clk.Advance(500 * time.Millisecond)
	c = dialH2(t, srv)
	id = 1
	quick()
	if n := ln.Refused(); n != 1 {
		t.Fatalf("refused %d connections at accept, want 1", n)
	}
}

type h2Client struct {
	t   *testing.T
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

func dialH2(t *testing.T, srv *httptest.Server) *h2Client {
	t.Helper()
	cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c := &h2Client{t: t, fr: http2.NewFramer(conn, conn)}
	c.enc = hpack.NewEncoder(&c.buf)
	c.write(func(f *http2.Framer) error { return f.WriteSettings() })
	return c
}

func (c *h2Client) write(fn func(*http2.Framer) error) {
	c.t.Helper()
	if err := fn(c.fr); err != nil {
		c.t.Fatal(err)
	}
}

// headers opens stream id with a GET of path, without a body.
func (c *h2Client) headers(id uint32, path string) {
	c.t.Helper()
	c.buf.Reset()
	for _, h := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "x"}, {":path", path}} {
		_ = c.enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
	}
	c.write(func(f *http2.Framer) error {
		return f.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.buf.Bytes(), EndHeaders: true, EndStream: true})
	})
}

var _ net.Conn = (*limitedConn)(nil)
