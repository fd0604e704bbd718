package gateway

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestKeepaliveBeforeFirstEvent: the provider sends its 200 and headers,
// then thinks before its first event (a reasoning model). With a
// keepalive configured the client's 200 is committed and kept alive
// through that silence: the first bytes it reads are a keepalive comment,
// not a wait of the whole silence. Before, nothing at all reached the
// client until the first event, so idle limits of load balancers cut it.
func TestKeepaliveBeforeFirstEvent(t *testing.T) {
	tests := []struct{ name, path, body, done string }{
		{"openai", "/v1/chat/completions", `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"a b [[first_event_delay_ms=500]] [[chunks=2]]"}]}`, "[DONE]"},
		{"anthropic", "/v1/messages", `{"model":"claude","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"a b [[first_event_delay_ms=500]] [[chunks=2]]"}]}`, "message_stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newHandler(t, Options{StreamKeepalive: 10 * time.Millisecond})
			srv := httptest.NewServer(h)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, Content-Type %q; want 200 and the provider's event stream type", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			rd := bufio.NewReader(resp.Body)
			first, err := rd.ReadString('\n')
			if err != nil || first != ": keepalive\n" {
				t.Fatalf("first line %q, %v; want the keepalive comment before the first event", first, err)
			}
			rest, _ := io.ReadAll(rd)
			if !strings.Contains(string(rest), tt.done) {
				t.Fatalf("stream did not finish:\n%s", rest)
			}
		})
	}
}

// TestFailureAfterKeepaliveCommit: once a keepalive has committed the
// 200, a provider that never sends its first event ends the stream in
// band (here the first-byte timeout), never with a terminator, and the
// event says timeout.
func TestFailureAfterKeepaliveCommit(t *testing.T) {
	rec := &events{}
	h, _ := newHandler(t, Options{Recorders: []Recorder{rec}, StreamKeepalive: 10 * time.Millisecond, FirstByte: 200 * time.Millisecond})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, data := postChat(t, srv.URL, `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"a [[first_event_delay_ms=60000]]"}]}`)
	got := string(data)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(got, ": keepalive\n\n") || !strings.Contains(got, `"error"`) || strings.Contains(got, "[DONE]") {
		t.Fatalf("status %d, body %q; want 200, keepalives, then the in-band error and no [DONE]", resp.StatusCode, got)
	}
	srv.Close() // waits for the handler to return
	evs := rec.all()
	if len(evs) != 1 || evs[0].FailureStage != usageevent.StageTimeout || evs[0].HTTPStatus != http.StatusOK {
		t.Fatalf("events = %+v, want one timeout event with status 200", evs)
	}
}
