package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
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
// provider reported, the send state and the failure stage (docs/usage-events.md).
func TestUsageEvents(t *testing.T) {
	type want struct {
		Status        int
		SendState     string
		Stage         string
		Input         int64
		Output        int64
		HasUsage      bool
		ClientSees    string // substring the client body must contain
		ClientLacks   string // substring it must not contain
		ProviderSees  string // substring of the body the provider received
		ProviderLacks string // substring it must not contain
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
			name: "openai stream on a backend with include_usage = false: nothing asked, nothing hidden",
			path: "/v1/chat/completions",
			body: `{"model":"gpt-raw","stream":true,"messages":[{"role":"user","content":"one two [[chunks=2]]"}]}`,
			want: want{Status: 200, SendState: "response_received", ClientSees: "[DONE]", ProviderLacks: "stream_options"},
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
		{
			name: "responses non-stream: usage from the response object",
			path: "/v1/responses",
			body: `{"model":"gpt-all","input":"one two three [[cache_read=1]] [[reasoning=2]]"}`,
			want: want{Status: 200, SendState: "response_received", Input: 6, Output: 3 + 2, HasUsage: true, ClientSees: `"output_text"`},
		},
		{
			name: "responses stream: usage from response.completed, nothing injected",
			path: "/v1/responses",
			body: `{"model":"gpt-all","stream":true,"input":[{"role":"user","content":"one two [[chunks=2]]"}]}`,
			want: want{Status: 200, SendState: "response_received", Input: 3, Output: 2, HasUsage: true,
				ClientSees: "event: response.completed", ProviderLacks: "stream_options"},
		},
		{
			name: "responses stream cut: in-band error event, stage stream, no usage",
			path: "/v1/responses",
			body: `{"model":"gpt-all","stream":true,"input":"one two [[cut=after_events:4]]"}`,
			want: want{Status: 200, SendState: "response_received", Stage: "stream",
				ClientSees: "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"the provider stream ended without its terminator\",\"param\":null,\"sequence_number\":4}", ClientLacks: "response.completed"},
		},
		{
			name: "responses stream with the provider's error event",
			path: "/v1/responses",
			body: `{"model":"gpt-all","stream":true,"input":"one two [[error_event=after:2]]"}`,
			want: want{Status: 200, SendState: "response_received", Stage: "stream", ClientSees: `"type":"error"`, ClientLacks: "response.completed"},
		},
		{
			name: "responses reset after body is possibly sent",
			path: "/v1/responses",
			body: `{"model":"gpt-all","input":"[[reset=after_body]]"}`,
			want: want{Status: 502, SendState: "possibly_sent", Stage: "send"},
		},
		{
			name: "embeddings: usage.prompt_tokens",
			path: "/v1/embeddings",
			body: `{"model":"gpt-all","input":["one two","three"]}`,
			want: want{Status: 200, SendState: "response_received", Input: 3, HasUsage: true, ClientSees: `"embedding"`},
		},
		{
			name: "embeddings reset after body is possibly sent",
			path: "/v1/embeddings",
			body: `{"model":"gpt-all","input":"[[reset=after_body]]"}`,
			want: want{Status: 502, SendState: "possibly_sent", Stage: "send"},
		},
		{
			name: "count_tokens: a count, not usage",
			path: "/v1/messages/count_tokens",
			body: `{"model":"claude-all","messages":[{"role":"user","content":"one two three"}]}`,
			want: want{Status: 200, SendState: "response_received", ClientSees: `{"input_tokens":3}`},
		},
		{
			name: "gemini generateContent: usage from usageMetadata",
			path: "/v1beta/models/gemini:generateContent",
			body: `{"contents":[{"role":"user","parts":[{"text":"one two three"}]}]}`,
			want: want{Status: 200, SendState: "response_received", Input: 3, Output: 3, HasUsage: true, ClientSees: `"usageMetadata"`},
		},
		{
			name: "gemini stream: complete at finishReason, usage from the last chunk",
			path: "/v1beta/models/gemini:streamGenerateContent?alt=sse",
			body: `{"contents":[{"role":"user","parts":[{"text":"one two [[chunks=2]]"}]}]}`,
			want: want{Status: 200, SendState: "response_received", Input: 3, Output: 2, HasUsage: true, ClientSees: `"finishReason":"STOP"`},
		},
		{
			name: "gemini stream cut: in-band error in Google's shape, stage stream",
			path: "/v1beta/models/gemini:streamGenerateContent?alt=sse",
			body: `{"contents":[{"role":"user","parts":[{"text":"one two [[cut=after_events:2]]"}]}]}`,
			want: want{Status: 200, SendState: "response_received", Stage: "stream", Input: 3, HasUsage: true,
				ClientSees: `"status":"INTERNAL"`, ClientLacks: `"finishReason"`},
		},
		{
			name: "gemini reset after body is possibly sent",
			path: "/v1/models/gemini:generateContent",
			body: `{"contents":[{"role":"user","parts":[{"text":"[[reset=after_body]]"}]}]}`,
			want: want{Status: 502, SendState: "possibly_sent", Stage: "send"},
		},
		{
			name: "count_tokens reset after body is possibly sent",
			path: "/v1/messages/count_tokens",
			body: `{"model":"claude-all","messages":[{"role":"user","content":"[[reset=after_body]]"}]}`,
			want: want{Status: 502, SendState: "possibly_sent", Stage: "send"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &events{}
			h, prov := newHandler(t, Options{Recorders: []Recorder{rec}, InjectStreamUsage: true, NodeID: "node-1"})
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
			if tt.want.ProviderLacks != "" {
				if reqs := prov.Requests(); len(reqs) == 0 || strings.Contains(string(reqs[0].Body), tt.want.ProviderLacks) {
					t.Errorf("provider body contains %q (or no request arrived)", tt.want.ProviderLacks)
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
				ClientSees: tt.want.ClientSees, ClientLacks: tt.want.ClientLacks, ProviderSees: tt.want.ProviderSees, ProviderLacks: tt.want.ProviderLacks}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("event (-got +want):\n%s", diff)
			}
			if ev.NodeID != "node-1" || ev.TenantID != "t" || ev.KeyID != "k" || ev.Authoritative || ev.Attempt != 1 || ev.RequestBytes == 0 {
				t.Errorf("event identity fields wrong: %+v", ev)
			}
			// The endpoint is recorded; a possibly-sent failure is attempted
			// once and the client told not to retry.
			path, _, _ := strings.Cut(tt.path, "?")
			if spec, _ := catalog.ByPath(path); ev.Endpoint != spec.Endpoint.String() {
				t.Errorf("event endpoint %q, want %q", ev.Endpoint, spec.Endpoint.String())
			}
			if tt.want.SendState == "possibly_sent" {
				if n := prov.RequestCount(); n != 1 {
					t.Errorf("provider saw %d requests, want exactly 1", n)
				}
				if got := resp.Header.Get("X-Should-Retry"); got != "false" {
					t.Errorf("x-should-retry %q, want false", got)
				}
			}
		})
	}
}

// TestIncludeUsageSwitches: the node asks an OpenAI provider for stream
// usage only when both the node-wide switch (Options.InjectStreamUsage)
// and the backend's include_usage are on. Otherwise the provider gets the
// client's body with only the model rewritten, and the client gets the
// provider's stream byte for byte (docs/usage-events.md).
func TestIncludeUsageSwitches(t *testing.T) {
	const body = `{"model":%q,"stream":true,"messages":[{"role":"user","content":"one two three [[chunks=3]]"}]}`
	tests := []struct {
		name       string
		global     bool
		model      string // gpt: include_usage absent (on); gpt-raw: include_usage = false
		wantInject bool
	}{
		{name: "both on", global: true, model: "gpt", wantInject: true},
		{name: "backend off", global: true, model: "gpt-raw"},
		{name: "node off", global: false, model: "gpt"},
		{name: "both off", global: false, model: "gpt-raw"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			created := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
			h, prov := newHandlerWith(t, Options{InjectStreamUsage: tt.global},
				fakeprovider.Options{Clock: func() time.Time { return created }})
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(fmt.Sprintf(body, tt.model)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, read error %v:\n%s", resp.StatusCode, err, got)
			}
			reqs := prov.Requests()
			if len(reqs) != 1 {
				t.Fatalf("provider got %d requests, want 1", len(reqs))
			}
			if reqs[0].IncludeUsage != tt.wantInject {
				t.Fatalf("provider saw include_usage %v, want %v; body:\n%s", reqs[0].IncludeUsage, tt.wantInject, reqs[0].Body)
			}
			if tt.wantInject {
				if strings.Contains(string(got), `"prompt_tokens"`) {
					t.Errorf("client sees the usage chunk it did not ask for:\n%s", got)
				}
				return
			}
			if diff := cmp.Diff(string(reqs[0].Body), fmt.Sprintf(body, "provider-gpt")); diff != "" {
				t.Errorf("provider body (-got +want):\n%s", diff)
			}
			// The same body sent straight to the provider, as the first
			// request again (ids come from the sequence number).
			prov.Reset()
			direct, err := http.Post(provURL(t, h), "application/json", bytes.NewReader(reqs[0].Body))
			if err != nil {
				t.Fatal(err)
			}
			want, err := io.ReadAll(direct.Body)
			direct.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(got), string(want)); diff != "" {
				t.Errorf("client stream differs from the provider's (-client +provider):\n%s", diff)
			}
		})
	}
}

// TestUsageEventForClientCancel: a client that leaves mid-stream still
// yields an event, marked client_cancelled, with the usage seen so far.
func TestUsageEventForClientCancel(t *testing.T) {
	rec := &events{}
	h, _ := newHandler(t, Options{Recorders: []Recorder{rec}})
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
