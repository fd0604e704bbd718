package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pipeTransport answers every request with a 200 event stream whose bytes
// the test writes into the pipe, so that the test decides what arrives in
// one read and when the provider falls silent.
type pipeTransport struct{ body *io.PipeReader }

func (p pipeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode:    http.StatusOK,
		Header:        http.Header{"Content-Type": {"text/event-stream"}},
		Body:          p.body,
		ContentLength: -1,
		Request:       r,
	}, nil
}

// countingListener counts the writes on the connections it accepts.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, writes: l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// pipeStream starts the handler (o as in newHandler) in front of a pipe
// provider, has the provider send first in one write (a goroutine: the
// write returns when the relay has read it all) and sends one chat stream
// request. It returns the provider's end of the pipe, the client's
// response and the count of writes on the client connection.
func pipeStream(t *testing.T, o Options, first string) (*io.PipeWriter, *http.Response, *atomic.Int64) {
	t.Helper()
	h, _ := newHandler(t, o)
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	h.o.Transport = pipeTransport{body: pr}
	writes := &atomic.Int64{}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = countingListener{Listener: srv.Listener, writes: writes}
	srv.Start()
	t.Cleanup(srv.Close)
	go func() { _, _ = pw.Write([]byte(first)) }()
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"gpt","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return pw, resp, writes
}

func chunk(i int) string {
	return fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d\"}}],\"usage\":null}\n\n", i)
}

// TestStreamCoalescesEventsThatArriveTogether: ten events and [DONE] that
// the provider sends in one write reach the client in one write (and the
// end of the chunked body), not in one write each, byte for byte.
func TestStreamCoalescesEventsThatArriveTogether(t *testing.T) {
	var in strings.Builder
	for i := range 10 {
		in.WriteString(chunk(i))
	}
	in.WriteString("data: [DONE]\n\n")

	pw, resp, writes := pipeStream(t, Options{}, in.String())
	pw.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte(in.String())) {
		t.Fatalf("client got %q, want the provider's bytes %q", got, in.String())
	}
	// Header and all events in one write, the chunked body's end in
	// another; one write per event was 12.
	if n := writes.Load(); n > 2 {
		t.Fatalf("%d writes on the client connection for 11 events that arrived together, want at most 2", n)
	}
}

// TestStreamFlushesBeforeSilence: whatever the provider has sent complete
// reaches the client while the provider is still silent, also when the
// last complete event is one the client does not see (the usage-only
// chunk the node asked for) and when a partial event follows.
func TestStreamFlushesBeforeSilence(t *testing.T) {
	usageOnly := "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n"
	tests := []struct {
		name   string
		o      Options
		first  string // sent in one write, then silence
		shown  string // what the client must get during the silence
		rest   string // sent after the client got shown
		remain string // what the client gets of rest
	}{
		{"one event", Options{}, chunk(0), chunk(0), "data: [DONE]\n\n", "data: [DONE]\n\n"},
		{"two events and half of a third", Options{}, chunk(0) + chunk(1) + chunk(2)[:20], chunk(0) + chunk(1),
			chunk(2)[20:] + "data: [DONE]\n\n", chunk(2) + "data: [DONE]\n\n"},
		{"hidden usage chunk last", Options{InjectStreamUsage: true}, chunk(0) + chunk(1) + usageOnly, chunk(0) + chunk(1),
			"data: [DONE]\n\n", "data: [DONE]\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pw, resp, _ := pipeStream(t, tt.o, tt.first)
			got := make(chan string, 1)
			go func() {
				buf := make([]byte, len(tt.shown))
				n, _ := io.ReadFull(resp.Body, buf)
				got <- string(buf[:n])
			}()
			select {
			case s := <-got:
				if s != tt.shown {
					t.Fatalf("client got %q during the silence, want %q", s, tt.shown)
				}
			case <-time.After(10 * time.Second): // a guard, not a synchronisation: the bytes are due at once
				t.Fatalf("the client did not get %q while the provider was silent", tt.shown)
			}
			go func() {
				_, _ = pw.Write([]byte(tt.rest))
				pw.Close()
			}()
			rest, err := io.ReadAll(resp.Body)
			if err != nil || string(rest) != tt.remain {
				t.Fatalf("after the silence the client got %q, %v; want %q", rest, err, tt.remain)
			}
		})
	}
}
