package gateway

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
	return pipeStreamAt(t, o, "/v1/chat/completions", `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"hi"}]}`, first)
}

// pipeStreamAt is pipeStream for a stream request body to path, with the
// provider's first bytes sent in one write per element of first.
func pipeStreamAt(t *testing.T, o Options, path, body string, first ...string) (*io.PipeWriter, *http.Response, *atomic.Int64) {
	t.Helper()
	h, _ := newHandler(t, o)
	pr, pw := io.Pipe()
	h.o.Transport = pipeTransport{body: pr}
	writes := &atomic.Int64{}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = countingListener{Listener: srv.Listener, writes: writes}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { pw.Close() }) // before srv.Close, which waits for the handler
	go func() {
		for _, p := range first {
			_, _ = pw.Write([]byte(p))
		}
	}()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	// The timeout is a guard, not a synchronisation: the node sends its
	// header with the first event, which is due at once.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("no answer with the provider's first bytes sent: %v", err)
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

// TestStreamFirstEventNotHeld: on every stream path, the provider's first
// event reaches the client while the provider is silent after it: the
// first event is not held for a second one, nor by the reader's switch to
// its small buffer after a short first read (a first event smaller than
// that buffer, one larger, and one whose first read brings only a part).
func TestStreamFirstEventNotHeld(t *testing.T) {
	messageStart := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\"," +
		"\"model\":\"provider-claude\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null," +
		"\"usage\":{\"input_tokens\":20,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n"
	created := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\"," +
		"\"object\":\"response\",\"created_at\":1,\"status\":\"in_progress\",\"error\":null,\"incomplete_details\":null," +
		"\"model\":\"provider-gpt\",\"output\":[],\"parallel_tool_calls\":true,\"store\":false,\"tools\":[],\"usage\":null}}\n\n"
	// Over the reader's 512-byte small buffer.
	bigCreated := strings.Replace(created, `"tools":[]`, `"tools":[],"instructions":"`+strings.Repeat("be brief ", 80)+`"`, 1)
	const (
		messages  = `{"model":"claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
		responses = `{"model":"gpt-all","stream":true,"input":"hi"}`
	)
	tests := []struct {
		name, path, body string
		parts            []string // sent one write each, the last followed by silence
	}{
		{"chat", "/v1/chat/completions", `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"hi"}]}`, []string{chunk(0)}},
		{"messages", "/v1/messages", messages, []string{messageStart}},
		{"messages in two reads", "/v1/messages", messages, []string{messageStart[:40], messageStart[40:]}},
		{"responses", "/v1/responses", responses, []string{created}},
		{"responses over the small buffer", "/v1/responses", responses, []string{bigCreated}},
		{"responses over the small buffer in two reads", "/v1/responses", responses, []string{bigCreated[:100], bigCreated[100:]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pw, resp, _ := pipeStreamAt(t, Options{}, tt.path, tt.body, tt.parts...)
			want := strings.Join(tt.parts, "")
			got := make(chan string, 1)
			go func() {
				buf := make([]byte, len(want))
				n, _ := io.ReadFull(resp.Body, buf)
				got <- string(buf[:n])
			}()
			select {
			case s := <-got:
				if s != want {
					t.Fatalf("client got %q, want the first event %q", s, want)
				}
			case <-time.After(10 * time.Second): // a guard, not a synchronisation: the event is due at once
				t.Fatalf("the first event did not reach the client while the provider was silent")
			}
			pw.Close()
		})
	}
}
