package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Server hardening: slow clients, oversized and ambiguous requests, signals
// (docs/api.md "Request framing", "Body limit"). Every
// test talks to the node over real loopback sockets; the raw-TCP ones write
// bytes that net/http's client would refuse to send.

// dialAPI opens a raw TCP connection to the node's plaintext API listener.
func (s *stack) dialAPI(t *testing.T) net.Conn {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(t.Context(), "tcp", strings.TrimPrefix(s.api, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitClosed reads until the server closes c and returns what it sent. It
// fails the test if the connection is still open after bound: a read
// deadline that fires means the server kept the connection.
func waitClosed(t *testing.T, c net.Conn, bound time.Duration) []byte {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(bound)); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v (read %q)", bound, data)
	}
	// io.EOF (ReadAll returns nil) or a reset both mean closed.
	return data
}

// TestSlowlorisClosedAtHeaderTimeout (F3): a client that never finishes
// its headers is disconnected by limits.read_header_timeout, without an
// answer. With the default (10s) or no timeout the 5s bound fails.
func TestSlowlorisClosedAtHeaderTimeout(t *testing.T) {
	s := startStack(t, stackOptions{limits: `read_header_timeout = "300ms"`})
	c := s.dialAPI(t)
	if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: scootgate\r\nX-Slow: a"); err != nil {
		t.Fatal(err)
	}
	if data := waitClosed(t, c, 5*time.Second); len(data) != 0 {
		t.Fatalf("server answered a request whose headers never ended: %q", data)
	}
	if n := s.prov.RequestCount(); n != 0 {
		t.Fatalf("provider saw %d requests, want 0", n)
	}
}

// TestIdleConnectionClosed (E3): a keep-alive connection with no next
// request is closed after limits.idle_timeout.
func TestIdleConnectionClosed(t *testing.T) {
	s := startStack(t, stackOptions{limits: `idle_timeout = "300ms"`})
	c := s.dialAPI(t)
	if _, err := io.WriteString(c, "HEAD / HTTP/1.1\r\nHost: scootgate\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("HEAD /: status %d close %v, want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("idle keep-alive connection still open after 5s with idle_timeout 300ms")
	}
	if err == nil {
		t.Fatal("server sent bytes on an idle connection")
	}
}

// TestOversizeHeaders (F2): a header block over limits.max_header_bytes
// gets 431 on HTTP/1.1 and reaches nothing; one under it is served. The
// 16 KiB header would pass the 64 KiB default, so this also proves the
// configured value is the one in force.
func TestOversizeHeaders(t *testing.T) {
	s := startStack(t, stackOptions{limits: "max_header_bytes = 4096"})
	body := `{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name string
		pad  int
		want int
	}{
		// net/http allows 4096 bytes of slack over MaxHeaderBytes.
		{"under the limit", 2 << 10, 200},
		{"over the limit", 16 << 10, http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.dialAPI(t)
			req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: scootgate\r\nAuthorization: Bearer %s\r\nX-Pad: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				clientKey, strings.Repeat("a", tt.pad), len(body), body)
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
	if n := s.prov.RequestCount(); n != 1 {
		t.Fatalf("provider saw %d requests, want only the one under the limit", n)
	}
}

// TestSmugglingShapes (F5): ambiguous HTTP/1.1 framing never gets a
// request to the provider. Each request carries a valid key and, after its
// declared body, a complete second request for demo-gpt: if the node ever
// parsed those trailing bytes as a request, the provider would see it.
//
// net/http itself answers 400 to two different Content-Length headers and
// 501 (RFC 9112 §6.1) to a Transfer-Encoding other than one "chunked".
// Content-Length together with Transfer-Encoding: chunked it accepts,
// framed by the chunks; closeAfterChunked then closes the connection after
// the answer (RFC 9112 §6.3), so the trailing request is never read.
func TestSmugglingShapes(t *testing.T) {
	s := startStack(t, stackOptions{})
	inner := `{"model":"demo-gpt","messages":[{"role":"user","content":"smuggled"}]}`
	smuggled := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: scootgate\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		clientKey, len(inner), inner)
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: scootgate\r\nAuthorization: Bearer " + clientKey + "\r\nContent-Type: application/json\r\n"
	tests := []struct {
		name    string
		headers string // framing headers
		body    string // the body as framed by Transfer-Encoding when present
		want    int
	}{
		{
			// CL.TE: a front end framing by Content-Length forwards the
			// smuggled request as part of this body.
			name:    "content-length and chunked",
			headers: fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n", 5+len(smuggled)),
			body:    "0\r\n\r\n",
			want:    http.StatusBadRequest, // an empty body is not a request document
		},
		{
			name:    "chunked then content-length",
			headers: "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
			body:    "0\r\n\r\n",
			want:    http.StatusBadRequest,
		},
		{
			name:    "two different content-lengths",
			headers: "Content-Length: 0\r\nContent-Length: 5\r\n",
			want:    http.StatusBadRequest,
		},
		{
			name:    "chunked, identity",
			headers: "Transfer-Encoding: chunked, identity\r\n",
			body:    "0\r\n\r\n",
			want:    http.StatusNotImplemented,
		},
		{
			name:    "two transfer-encoding headers",
			headers: "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
			body:    "0\r\n\r\n",
			want:    http.StatusNotImplemented,
		},
		{
			name:    "obfuscated chunked",
			headers: "Transfer-Encoding: xchunked\r\n",
			body:    "0\r\n\r\n",
			want:    http.StatusNotImplemented,
		},
		{
			name:    "space before the colon",
			headers: "Transfer-Encoding : chunked\r\n",
			body:    "0\r\n\r\n",
			want:    http.StatusBadRequest,
		},
		{
			name:    "signed content-length",
			headers: "Content-Length: +0\r\n",
			want:    http.StatusBadRequest,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.dialAPI(t)
			if _, err := io.WriteString(c, head+tt.headers+"\r\n"+tt.body+smuggled); err != nil {
				t.Fatal(err)
			}
			if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if !resp.Close {
				t.Errorf("no Connection: close after ambiguous framing")
			}
			if rest := waitClosed(t, c, 5*time.Second); len(rest) != 0 {
				t.Errorf("the trailing bytes were served as a request; got %q", rest)
			}
		})
	}
	if n := s.prov.RequestCount(); n != 0 {
		t.Fatalf("provider saw %d requests, want 0", n)
	}
}

// zeros yields n zero bytes lazily (nothing is allocated up front) and
// counts what was read from it.
type zeros struct {
	n    int64
	read atomic.Int64
}

func (z *zeros) Read(p []byte) (int, error) {
	left := z.n - z.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	clear(p)
	z.read.Add(int64(len(p)))
	return len(p), nil
}

// TestHugeChunkedBody413 (E4): a 1 GiB chunked body (no Content-Length, so
// only the streaming limit can catch it) gets 413 while the client is still
// sending: the node stops reading at limits.body_bytes instead of buffering.
func TestHugeChunkedBody413(t *testing.T) {
	s := startStack(t, stackOptions{bodyLimit: 1 << 20})
	c := s.dialAPI(t)
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: scootgate\r\nAuthorization: Bearer " + clientKey +
		"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	body := &zeros{n: 1 << 30}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned: ends when the body is sent or the connection closes
		defer wg.Done()
		cw := httputil.NewChunkedWriter(c)
		if _, err := io.Copy(cw, body); err == nil {
			_ = cw.Close()
			_, _ = io.WriteString(c, "\r\n")
		}
	}()
	t.Cleanup(wg.Wait) // after dialAPI's cleanup closes c (cleanups run last-in first-out)

	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer while the body was being sent: %v", err)
	}
	sent := body.read.Load()
	resp.Body.Close()
	c.Close() // stops the writer
	if sent >= body.n {
		t.Errorf("the whole %d-byte body was sent before the answer: the node read it all", body.n)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
	t.Logf("413 after %d of %d bytes", sent, body.n)
	if n := s.prov.RequestCount(); n != 0 {
		t.Fatalf("provider saw %d requests, want 0", n)
	}
}

// TestConcurrencyCap (E2): beyond limits.max_concurrent_requests the node
// answers a fast 503 in the client's protocol shape, safe to retry, and
// forwards nothing; a freed slot serves again.
func TestConcurrencyCap(t *testing.T) {
	s := startStack(t, stackOptions{limits: "max_concurrent_requests = 2"})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.api+"/v1/chat/completions",
				strings.NewReader(`{"model":"demo-gpt","messages":[{"role":"user","content":"[[hang]]"}]}`))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	s.waitForProviderRequests(t, 2)

	tests := []struct {
		name   string
		path   string
		header map[string]string
		body   string
		shape  string // a fragment of the error document
	}{
		{"openai shape", "/v1/chat/completions", bearer(clientKey),
			`{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`, `"type":"server_error"`},
		{"anthropic shape", "/v1/messages", anthropicHeaders(clientKey),
			`{"model":"demo-claude","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, `"type":"overloaded_error"`},
		{"before authentication", "/v1/models", nil, "", `"type":"server_error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(http.MethodPost, tt.path, tt.header, tt.body)
			if r.status != 503 || r.header.Get("Retry-After") != "1" || r.header.Get("X-Should-Retry") != "true" || r.header.Get("X-Request-Id") == "" {
				t.Fatalf("over the cap: status %d Retry-After %q x-should-retry %q x-request-id %q, want 503, 1, true and an id",
					r.status, r.header.Get("Retry-After"), r.header.Get("X-Should-Retry"), r.header.Get("X-Request-Id"))
			}
			if !strings.Contains(r.body, tt.shape) || !strings.Contains(r.body, "concurrent request limit") {
				t.Fatalf("body %s, want %s and the reason", r.body, tt.shape)
			}
		})
	}
	if n := s.prov.RequestCount(); n != 2 {
		t.Fatalf("provider saw %d requests, want only the 2 hung ones", n)
	}

	// Free the slots: the hung requests end, and the node serves again.
	cancel()
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`)
		if r.status == 200 {
			break
		}
		if r.status != 503 || time.Now().After(deadline) {
			t.Fatalf("after the slots were freed: status %d %s", r.status, r.body)
		}
	}
}

// TestSIGTERMWithFiftyStreams (H1): with 50 live streams, shutdown fails
// /readyz at once, every stream still ends with its terminator, and Run
// returns within the bound. (The second-signal exit is cmd/scootgate's.)
func TestSIGTERMWithFiftyStreams(t *testing.T) {
	const streams = 50
	s := startStack(t, stackOptions{cap: 64, grace: "20s"})
	body := `{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"a b c d e f g h i j [[chunks=20]] [[event_delay_ms=50]]"}]}`
	type result struct {
		rest string
		err  error
	}
	live := make(chan struct{}, streams)
	results := make(chan result, streams)
	for range streams {
		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				live <- struct{}{}
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			rd := bufio.NewReader(resp.Body)
			first, err := rd.ReadString('\n')
			live <- struct{}{}
			if err != nil {
				results <- result{err: err}
				return
			}
			rest, err := readAll(rd)
			results <- result{rest: first + rest, err: err}
		}()
	}
	for range streams {
		<-live
	}
	if n := s.prov.RequestCount(); n != streams {
		t.Fatalf("provider has %d streams, want %d", n, streams)
	}

	stopped := make(chan struct{})
	go func() { s.shutdown(); close(stopped) }()
	s.events.waitFor(t, "draining", 10*time.Second)
	hr, err := http.Get(s.health + "/readyz")
	if err != nil {
		t.Fatalf("health listener gone during the drain: %v", err)
	}
	hr.Body.Close()
	if hr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while draining = %d, want 503", hr.StatusCode)
	}

	done := 0
	for range streams {
		r := <-results
		switch {
		case r.err != nil:
			t.Errorf("stream broken by the drain: %v", r.err)
		case !strings.Contains(r.rest, "data: [DONE]"):
			t.Errorf("stream ended without its terminator:\n%s", r.rest)
		default:
			done++
		}
	}
	if done != streams {
		t.Fatalf("%d of %d streams finished cleanly", done, streams)
	}
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("node did not stop after its last stream ended")
	}
}
