package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// events is a hand-written Recorder that keeps what it is given.
type events struct {
	mu  sync.Mutex
	got []*usageevent.Event
}

func (e *events) Record(ev *usageevent.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func (e *events) all() []*usageevent.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*usageevent.Event(nil), e.got...)
}

// TestUsageEvents: one schema-2 event per attempt, with the usage the
// provider reported, the send state and the failure stage (SPEC §8, §11).
func TestUsageEvents(t *testing.T) {
	type want struct {
		Status       int
		SendState    string
		Stage        string
		Input        int64
		Output       int64
		HasUsage     bool
		ClientSees   string // substring the client body must contain
		ClientLacks  string // substring it must not contain
		ProviderSees string // substring of the body the provider received
	}
	tests := []struct {
		name, path, body string
		want             want
	}{
		{
			name: "openai non-stream",
			path: "/v1/chat/completions",
			body: `{"model":"gpt","messages":[{"role":"user","content":"one two three"}]}`,
			want: want{Status: 200, SendState: "response_received", Input: 3, Output: 3, HasUsage: true, ClientSees: `"usage"`},
		},
		{
			name: "openai stream: usage asked for by the node and hidden",
			path: "/v1/chat/completions",
			body: `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"one two [[chunks=2]]"}]}`,
			want: want{Status: 200, SendState: "response_received", Input: 3, Output: 2, HasUsage: true,
				ClientSees: "[DONE]", ClientLacks: `"prompt_tokens"`, ProviderSees: `"stream_options":{"include_usage":true}`},
		},
		{
			name: "openai stream: usage the client asked for stays visible",
			path: "/v1/chat/completions",
			body: `{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"one [[chunks=2]]"}]}`,
			want: want{Status: 200, SendState: "response_received", Input: 2, Output: 2, HasUsage: true, ClientSees: `"prompt_tokens"`},
		},
		{
			name: "anthropic stream with cache",
			path: "/v1/messages",
			body: `{"model":"claude","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"a b [[chunks=4]] [[cache_read=5]]"}]}`,
			want: want{Status: 200, SendState: "response_received", Input: 4 + 5, Output: 4, HasUsage: true, ClientSees: "message_stop"},
		},
		{
			name: "cut stream keeps what was seen",
			path: "/v1/messages",
			body: `{"model":"claude","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"a b [[cut=after_events:3]]"}]}`,
			want: want{Status: 200, SendState: "response_received", Stage: "stream", Input: 3, Output: 1, HasUsage: true, ClientSees: "event: error"},
		},
		{
			name: "provider error status",
			path: "/v1/chat/completions",
			body: `{"model":"gpt","messages":[{"role":"user","content":"[[status=500]]"}]}`,
			want: want{Status: 500, SendState: "response_received", Stage: "provider_status"},
		},
		{
			name: "reset after body is possibly sent",
			path: "/v1/chat/completions",
			body: `{"model":"gpt","messages":[{"role":"user","content":"[[reset=after_body]]"}]}`,
			want: want{Status: 502, SendState: "possibly_sent", Stage: "send"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &events{}
			h, prov := newHandler(t, Options{Recorder: rec, InjectStreamUsage: true, NodeID: "node-1"})
			srv := httptest.NewServer(h)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(data), tt.want.ClientSees) {
				t.Errorf("client body lacks %q:\n%s", tt.want.ClientSees, data)
			}
			if tt.want.ClientLacks != "" && strings.Contains(string(data), tt.want.ClientLacks) {
				t.Errorf("client body shows %q it did not ask for:\n%s", tt.want.ClientLacks, data)
			}
			if tt.want.ProviderSees != "" {
				if reqs := prov.Requests(); len(reqs) == 0 || !strings.Contains(string(reqs[0].Body), tt.want.ProviderSees) {
					t.Errorf("provider body lacks %q", tt.want.ProviderSees)
				}
			}
			evs := rec.all()
			if len(evs) != 1 {
				t.Fatalf("got %d events, want 1", len(evs))
			}
			ev := evs[0]
			if err := ev.Validate(); err != nil {
				t.Fatalf("event does not validate: %v", err)
			}
			var in, out int64
			if ev.Usage != nil {
				in, out = ev.Usage.InputTokens, ev.Usage.OutputTokens
			}
			got := want{Status: ev.HTTPStatus, SendState: ev.SendState, Stage: ev.FailureStage, Input: in, Output: out, HasUsage: ev.Usage != nil,
				ClientSees: tt.want.ClientSees, ClientLacks: tt.want.ClientLacks, ProviderSees: tt.want.ProviderSees}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("event (-got +want):\n%s", diff)
			}
			if ev.NodeID != "node-1" || ev.TenantID != "t" || ev.KeyID != "k" || ev.Authoritative || ev.Attempt != 1 || ev.RequestBytes == 0 {
				t.Errorf("event identity fields wrong: %+v", ev)
			}
		})
	}
}

// TestUsageEventForClientCancel: a client that leaves mid-stream still
// yields an event, marked client_cancelled, with the usage seen so far.
func TestUsageEventForClientCancel(t *testing.T) {
	rec := &events{}
	h, _ := newHandler(t, Options{Recorder: rec})
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/messages",
		strings.NewReader(`{"model":"claude","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"a b [[chunks=40]] [[event_delay_ms=20]]"}]}`))
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 256)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the client goes away
	srv.Close()       // waits for the handler to return
	evs := rec.all()
	if len(evs) != 1 || evs[0].FailureStage != usageevent.StageClientCancelled || evs[0].Usage == nil {
		t.Fatalf("events = %+v, want one client_cancelled event with usage", evs)
	}
}
