package app

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/broker"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestUsageEventsReachTheOutbox: every attempt's event is on disk after a
// graceful shutdown, with identities but never a secret (docs/usage-events.md, docs/operations.md "Drain").
func TestUsageEventsReachTheOutbox(t *testing.T) {
	s := startStack(t, stackOptions{})
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"demo-gpt","messages":[{"role":"user","content":"one two"}]}`},
		{"/v1/chat/completions", `{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"one two"}]}`},
		{"/v1/messages", `{"model":"demo-claude","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"one"}]}`},
	} {
		h := bearer(clientKey)
		h["Anthropic-Version"] = "2023-06-01"
		if r := s.do(http.MethodPost, tc.path, h, tc.body); r.status != 200 {
			t.Fatalf("%s: status %d", tc.path, r.status)
		}
	}
	s.shutdown() // closes the outbox after the drain

	st, err := outbox.Open(outbox.Options{Path: filepath.Join(s.dir, "outbox.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Read(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("outbox holds %d events, want 3", len(recs))
	}
	ids := map[string]bool{}
	for _, rec := range recs {
		for _, c := range canaries {
			if strings.Contains(string(rec.Payload), c) {
				t.Fatal("a secret appeared in a usage event")
			}
		}
		ev, err := usageevent.Decode(rec.Payload)
		if err != nil {
			t.Fatalf("event %s: %v", rec.Payload, err)
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("event does not validate: %v", err)
		}
		if ev.NodeID != "test-node" || ev.KeyID != "k-full" || ev.TenantID != "t-1" || ev.Usage == nil || ev.Usage.InputTokens == 0 {
			t.Errorf("event fields: %+v", ev)
		}
		ids[ev.EventID] = true
	}
	if len(ids) != 3 {
		t.Fatalf("event ids not unique: %v", ids)
	}
}

// TestUsageEventsReachTheBroker: events go from the request path through
// the outbox to a real (embedded) MQTT broker with QoS 1; the outbox is
// empty once every PUBACK came back (docs/usage-events.md).
func TestUsageEventsReachTheBroker(t *testing.T) {
	got := make(chan []byte, 16)
	b, err := broker.Start(broker.Options{Addr: "127.0.0.1:0", OnMessage: func(_ string, p []byte) { got <- append([]byte(nil), p...) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s := startStack(t, stackOptions{extraTOML: "[mqtt]\nbroker = \"tcp://" + b.Addr() + "\"\ntopic = \"test/usage\"\n"})
	for range 3 {
		if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	ids := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(ids) < 3 {
		select {
		case p := <-got:
			ev, err := usageevent.Decode(p)
			if err != nil {
				t.Fatalf("broker got a non-event %q: %v", p, err)
			}
			ids[ev.EventID] = true
		case <-deadline:
			t.Fatalf("broker received %d distinct events, want 3", len(ids))
		}
	}
}

// TestSIGTERMUnderLoadLosesNoEvent: shutdown while 20 streams are in
// flight; each stream finishes within the grace, and every attempt's event
// is in the outbox after exit (docs/operations.md: nothing accepted is lost).
func TestSIGTERMUnderLoadLosesNoEvent(t *testing.T) {
	const n = 20
	s := startStack(t, stackOptions{grace: "20s", cap: 64})
	done := make(chan int, n)
	for range n {
		go func() {
			r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey),
				`{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"a b [[chunks=5]] [[event_delay_ms=40]]"}]}`)
			done <- r.status
		}()
	}
	s.waitForProviderRequests(t, n)
	s.shutdown()
	for range n {
		if status := <-done; status != 200 {
			t.Fatalf("a stream in flight at shutdown got %d", status)
		}
	}
	st, err := outbox.Open(outbox.Options{Path: filepath.Join(s.dir, "outbox.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Read(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("outbox holds %d events after shutdown under load, want %d", len(recs), n)
	}
}

// outboxEvents opens the stopped node's outbox and decodes every event.
func (s *stack) outboxEvents(t *testing.T) []*usageevent.Event {
	t.Helper()
	st, err := outbox.Open(outbox.Options{Path: filepath.Join(s.dir, "outbox.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Read(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []*usageevent.Event
	for _, rec := range recs {
		ev, err := usageevent.Decode(rec.Payload)
		if err != nil {
			t.Fatalf("event %s: %v", rec.Payload, err)
		}
		out = append(out, ev)
	}
	return out
}

// TestGzipAnswerDecoded: a provider that gzips its answer although the
// node sent no Accept-Encoding reaches the client as plain JSON, and its
// usage is recorded. Before, the client got the compressed bytes labelled
// application/json (no Content-Encoding) and the event had no usage.
func TestGzipAnswerDecoded(t *testing.T) {
	s := startStack(t, stackOptions{script: func(fakeprovider.Request) *fakeprovider.Behaviour {
		return &fakeprovider.Behaviour{Gzip: true}
	}})
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","messages":[{"role":"user","content":"one two"}]}`)
	if r.status != 200 || r.header.Get("Content-Encoding") != "" {
		t.Fatalf("status %d Content-Encoding %q, want 200 without an encoding", r.status, r.header.Get("Content-Encoding"))
	}
	var doc struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil || len(doc.Choices) == 0 || doc.Choices[0].Message.Content != "echo: one two" {
		t.Fatalf("body is not the provider's JSON answer (%v): %q", err, r.body)
	}
	s.shutdown()
	evs := s.outboxEvents(t)
	if len(evs) != 1 || evs[0].Usage == nil || evs[0].Usage.InputTokens == 0 {
		t.Fatalf("want one event with usage, got %+v", evs)
	}
}

// TestGzipStreamDecoded: a gzip-compressed event stream is decoded event
// by event: the client reads plain SSE to its terminator, and the usage in
// the stream is recorded.
func TestGzipStreamDecoded(t *testing.T) {
	s := startStack(t, stackOptions{script: func(fakeprovider.Request) *fakeprovider.Behaviour {
		return &fakeprovider.Behaviour{Gzip: true}
	}})
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey),
		`{"model":"demo-gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"one two"}]}`)
	if r.status != 200 || r.header.Get("Content-Encoding") != "" || !strings.HasSuffix(r.body, "data: [DONE]\n\n") || !strings.Contains(r.body, `"content":`) {
		t.Fatalf("status %d Content-Encoding %q, want a plain stream to [DONE]:\n%q", r.status, r.header.Get("Content-Encoding"), r.body)
	}
	s.shutdown()
	evs := s.outboxEvents(t)
	if len(evs) != 1 || evs[0].Usage == nil || evs[0].Usage.InputTokens == 0 {
		t.Fatalf("want one event with usage, got %+v", evs)
	}
}

// TestUndecodableEncodingIs502: an answer in an encoding the node does not
// decode is a 502 upstream_bad_encoding that tells the client not to retry
// (the provider ran the request), never the bytes themselves.
func TestUndecodableEncodingIs502(t *testing.T) {
	s := startStack(t, stackOptions{script: func(fakeprovider.Request) *fakeprovider.Behaviour {
		return &fakeprovider.Behaviour{ContentEncoding: "br"}
	}})
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat)
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, `"upstream_bad_encoding"`) || r.header.Get("X-Should-Retry") != "false" {
		t.Fatalf("status %d x-should-retry %q body %s, want 502 upstream_bad_encoding, false", r.status, r.header.Get("X-Should-Retry"), r.body)
	}
}
