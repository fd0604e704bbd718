package catalog_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/provider/openai"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

type u = usageevent.Usage

func TestFromOpenAIBody(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		want   u
		wantOK bool
	}{
		{
			name:   "chat completion with cache and reasoning",
			body:   `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":85,"total_tokens":1285,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":64}}}`,
			want:   u{InputTokens: 1200, OutputTokens: 85, CacheReadTokens: 1024, ReasoningTokens: 64},
			wantOK: true,
		},
		{
			name:   "no details",
			body:   `{"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`,
			want:   u{InputTokens: 9, OutputTokens: 12},
			wantOK: true,
		},
		{
			name:   "null details",
			body:   `{"usage":{"prompt_tokens":9,"completion_tokens":12,"prompt_tokens_details":null,"completion_tokens_details":null}}`,
			want:   u{InputTokens: 9, OutputTokens: 12},
			wantOK: true,
		},
		{
			name:   "integral floats from a compatible server",
			body:   `{"usage":{"prompt_tokens":9.0,"completion_tokens":1.2e1,"prompt_tokens_details":{"cached_tokens":2.0}}}`,
			want:   u{InputTokens: 9, OutputTokens: 12, CacheReadTokens: 2},
			wantOK: true,
		},
		{
			name:   "bad counts read as zero",
			body:   `{"usage":{"prompt_tokens":-5,"completion_tokens":"12","prompt_tokens_details":{"cached_tokens":1.5},"completion_tokens_details":{"reasoning_tokens":true}}}`,
			want:   u{},
			wantOK: true,
		},
		{
			name:   "parts above their wholes are clamped",
			body:   `{"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":50},"completion_tokens_details":{"reasoning_tokens":7}}}`,
			want:   u{InputTokens: 10, OutputTokens: 3, CacheReadTokens: 10, ReasoningTokens: 3},
			wantOK: true,
		},
		{
			name:   "huge counts saturate",
			body:   `{"usage":{"prompt_tokens":123456789012345678901234567890,"completion_tokens":1e300}}`,
			want:   u{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64},
			wantOK: true,
		},
		{
			name:   "empty usage object",
			body:   `{"usage":{}}`,
			want:   u{},
			wantOK: true,
		},
		{name: "usage null", body: `{"usage":null}`},
		{name: "usage not an object", body: `{"usage":[1,2]}`},
		{name: "no usage", body: `{"id":"x","choices":[]}`},
		{name: "nested usage only", body: `{"choices":[{"usage":{"prompt_tokens":1}}]}`},
		{name: "error answer", body: `{"error":{"message":"rate limited","type":"rate_limit_error"}}`},
		{name: "not JSON", body: `<html>502 Bad Gateway</html>`},
		{name: "empty", body: ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, raw, ok := openai.ChatBodyUsage([]byte(tc.body))
			checkUsage(t, tc.body, got, raw, ok, tc.want, tc.wantOK)
		})
	}
}

func TestFromAnthropicBody(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		want   u
		wantOK bool
	}{
		{
			name:   "message with cache reads and writes",
			body:   `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,"output_tokens":153,"service_tier":"standard"}}`,
			want:   u{InputTokens: 6156, OutputTokens: 153, CacheReadTokens: 4096, CacheWriteTokens: 2048},
			wantOK: true,
		},
		{
			name:   "no cache members",
			body:   `{"usage":{"input_tokens":25,"output_tokens":7}}`,
			want:   u{InputTokens: 25, OutputTokens: 7},
			wantOK: true,
		},
		{
			name:   "null cache members",
			body:   `{"usage":{"input_tokens":25,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"output_tokens":7}}`,
			want:   u{InputTokens: 25, OutputTokens: 7},
			wantOK: true,
		},
		{
			name:   "sum saturates and parts stay within it",
			body:   `{"usage":{"input_tokens":9223372036854775807,"cache_creation_input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807}}`,
			want:   u{InputTokens: math.MaxInt64, CacheReadTokens: math.MaxInt64},
			wantOK: true,
		},
		{name: "error answer", body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{name: "usage a string", body: `{"usage":"none"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, raw, ok := anthropic.BodyUsage([]byte(tc.body))
			checkUsage(t, tc.body, got, raw, ok, tc.want, tc.wantOK)
		})
	}
}

// checkUsage compares a Usage result and checks that raw is the body's
// usage member, byte for byte, and that an event carrying it validates.
func checkUsage(t *testing.T, body string, got u, raw json.RawMessage, ok bool, want u, wantOK bool) {
	t.Helper()
	if ok != wantOK {
		t.Fatalf("ok = %v, want %v", ok, wantOK)
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("usage (-got +want):\n%s", diff)
	}
	if !ok {
		if raw != nil {
			t.Errorf("raw = %s, want nil", raw)
		}
		return
	}
	var m struct {
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	if string(raw) != string(m.Usage) {
		t.Errorf("raw = %s, want the provider's bytes %s", raw, m.Usage)
	}
	e := eventWith(got, raw)
	if err := e.Validate(); err != nil {
		t.Errorf("an event with this usage is invalid: %v", err)
	}
}

// eventWith returns a valid event carrying the usage.
func eventWith(nu u, raw json.RawMessage) *usageevent.Event {
	return &usageevent.Event{
		EventID: "01936f4e-8a2b-7c3d-9e4f-0a1b2c3d4e5f", Schema: usageevent.Schema,
		NodeID: "n", RequestID: "r", TenantID: "t", KeyID: "k",
		PublicModel: "m", ProviderModel: "m", Backend: "b", Protocol: usageevent.ProtocolOpenAI,
		Attempt: 1, SendState: usageevent.SendResponseReceived, HTTPStatus: 200,
		StartedAt: time.Unix(1, 0), Usage: &nu, ProviderUsage: raw,
	}
}

// TestContractExamples ties the contract examples in testdata/usage to the
// code: normalizing each example's provider_usage gives its usage.
func TestContractExamples(t *testing.T) {
	paths, err := filepath.Glob("../../../testdata/usage/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		e, err := usageevent.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if e.Usage == nil {
			continue
		}
		body := []byte(`{"usage":` + string(e.ProviderUsage) + `}`)
		ep, ok := provider.ParseEndpoint(e.Endpoint)
		if !ok {
			t.Errorf("%s: endpoint %q is no endpoint of the catalog", filepath.Base(p), e.Endpoint)
			continue
		}
		got, _, ok := catalog.Spec(ep).BodyUsage(body)
		if !ok {
			t.Errorf("%s: no usage found in provider_usage", filepath.Base(p))
			continue
		}
		if diff := cmp.Diff(got, *e.Usage); diff != "" {
			t.Errorf("%s: usage (-normalized +example):\n%s", filepath.Base(p), diff)
		}
	}
}

func TestOpenAIStreamHide(t *testing.T) {
	const usageObj = `{"prompt_tokens":3,"completion_tokens":2}`
	tests := []struct {
		name      string
		data      string
		hide      bool
		wantUsage bool
	}{
		{name: "usage-only chunk", data: `{"id":"c","choices":[],"usage":` + usageObj + `}`, hide: true, wantUsage: true},
		{name: "usage-only chunk, spaced", data: `{ "choices" : [ ] , "usage" : ` + usageObj + ` }`, hide: true, wantUsage: true},
		{name: "choices absent", data: `{"id":"c","usage":` + usageObj + `}`, hide: true, wantUsage: true},
		{name: "choices null", data: `{"choices":null,"usage":` + usageObj + `}`, hide: true, wantUsage: true},
		{name: "usage with a choice", data: `{"choices":[{"index":0,"delta":{}}],"usage":` + usageObj + `}`, wantUsage: true},
		{name: "usage with an error", data: `{"choices":[],"usage":` + usageObj + `,"error":{"message":"x"}}`, wantUsage: true},
		{name: "usage null", data: `{"choices":[],"usage":null}`},
		{name: "usage null, spaced", data: `{"choices":[],"usage" :  null}`},
		{name: "usage empty object", data: `{"choices":[],"usage":{}}`, hide: true, wantUsage: true},
		{name: "usage a number", data: `{"choices":[],"usage":5}`},
		{name: "nested usage only", data: `{"choices":[{"usage":` + usageObj + `}],"usage":null}`},
		{name: "content says usage", data: `{"choices":[{"delta":{"content":"usage"}}]}`},
		{name: "content says usage, usage follows", data: `{"choices":[{"delta":{"content":"usage"}}],"usage":` + usageObj + `}`, wantUsage: true},
		{name: "nested usage null, usage follows", data: `{"x":{"usage":null},"choices":[],"usage":` + usageObj + `}`, hide: true, wantUsage: true},
		{name: "malformed", data: `{"choices":[],"usage":{"prompt_tokens":3`},
		{name: "done", data: `[DONE]`},
		{name: "empty", data: ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, hideChunk := range []bool{true, false} {
				s := openai.NewChatStream(hideChunk)
				ev := sse.Event{Data: []byte(tc.data)}
				if got, want := s.Observe(&ev), tc.hide && hideChunk; got != want {
					t.Errorf("hideUsageChunk %v: Observe = %v, want %v", hideChunk, got, want)
				}
				if _, _, ok := s.Usage(); ok != tc.wantUsage {
					t.Errorf("hideUsageChunk %v: Usage ok = %v, want %v", hideChunk, ok, tc.wantUsage)
				}
			}
		})
	}
}

// TestStreamUsageIsACopy checks that Usage does not alias the event
// buffers, which sse.Reader reuses.
func TestStreamUsageIsACopy(t *testing.T) {
	data := []byte(`{"choices":[],"usage":{"prompt_tokens":3}}`)
	o := openai.NewChatStream(false)
	o.Observe(&sse.Event{Data: data})
	a := anthropic.NewStream()
	adata := []byte(`{"type":"message_delta","usage":{"output_tokens":3}}`)
	a.Observe(&sse.Event{Type: "message_delta", Data: adata})
	clear(data)
	clear(adata)
	for name, tr := range map[string]provider.Tracker{"openai": o, "anthropic": a} {
		_, raw, ok := tr.Usage()
		if !ok || !json.Valid(raw) {
			t.Errorf("%s: Usage after the event buffer was reused = %q, %v", name, raw, ok)
		}
		clear(raw)
		if _, raw2, _ := tr.Usage(); !json.Valid(raw2) {
			t.Errorf("%s: Usage returns the tracker's own buffer", name)
		}
	}
}

func TestAnthropicStreamMerge(t *testing.T) {
	start := func(usage string) sse.Event {
		return sse.Event{Type: "message_start", Data: []byte(`{"type":"message_start","message":{"id":"m","usage":` + usage + `}}`)}
	}
	delta := func(usage string) sse.Event {
		return sse.Event{Type: "message_delta", Data: []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":` + usage + `}`)}
	}
	tests := []struct {
		name    string
		events  []sse.Event
		want    u
		wantRaw string // "" = no usage
	}{
		{name: "nothing", events: nil},
		{
			name:    "start only",
			events:  []sse.Event{start(`{"input_tokens":5,"output_tokens":1}`)},
			want:    u{InputTokens: 5, OutputTokens: 1},
			wantRaw: `{"input_tokens":5,"output_tokens":1}`,
		},
		{
			name:    "delta replaces, never adds",
			events:  []sse.Event{start(`{"input_tokens":5,"output_tokens":1}`), delta(`{"output_tokens":40}`), delta(`{"output_tokens":90}`)},
			want:    u{InputTokens: 5, OutputTokens: 90},
			wantRaw: `{"input_tokens":5,"output_tokens":90}`,
		},
		{
			name:    "delta repeats input and cache",
			events:  []sse.Event{start(`{"input_tokens":5,"cache_read_input_tokens":7,"output_tokens":1}`), delta(`{"input_tokens":5,"cache_read_input_tokens":7,"output_tokens":9}`)},
			want:    u{InputTokens: 12, OutputTokens: 9, CacheReadTokens: 7},
			wantRaw: `{"input_tokens":5,"cache_read_input_tokens":7,"output_tokens":9}`,
		},
		{
			name:    "null does not erase; new members are appended; white space of values kept",
			events:  []sse.Event{start(`{ "input_tokens": 5, "output_tokens": 1 }`), delta(`{"input_tokens":null,"output_tokens": 9 ,"server_tool_use":{ "web_search_requests":1 },"x":null}`)},
			want:    u{InputTokens: 5, OutputTokens: 9},
			wantRaw: `{ "input_tokens": 5, "output_tokens": 9,"server_tool_use":{ "web_search_requests":1 },"x":null }`,
		},
		{
			name:    "delta without start",
			events:  []sse.Event{delta(`{"output_tokens":9}`)},
			want:    u{OutputTokens: 9},
			wantRaw: `{"output_tokens":9}`,
		},
		{
			name: "other events and malformed usage are ignored",
			events: []sse.Event{
				start(`{"input_tokens":5,"output_tokens":1}`),
				{Type: "content_block_delta", Data: []byte(`{"type":"content_block_delta","usage":{"output_tokens":1000}}`)},
				{Type: "ping", Data: []byte(`{"type": "ping"}`)},
				{Type: "", Data: []byte(`{"type":"message_delta","usage":{"output_tokens":1000}}`)},
				{Type: "message_delta", Data: []byte(`{"type":"message_delta","usage":{"output_tokens":`)},
				delta(`[1]`),
				delta(`null`),
				{Type: "message_start", Data: []byte(`{"message":null}`)},
				{Type: "error", Data: []byte(`{"type":"error","error":{"type":"overloaded_error"}}`)},
			},
			want:    u{InputTokens: 5, OutputTokens: 1},
			wantRaw: `{"input_tokens":5,"output_tokens":1}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := anthropic.NewStream()
			for i := range tc.events {
				if s.Observe(&tc.events[i]) {
					t.Errorf("Observe hid event %d; Anthropic events are never hidden", i)
				}
			}
			got, raw, ok := s.Usage()
			if ok != (tc.wantRaw != "") {
				t.Fatalf("Usage ok = %v, want %v", ok, tc.wantRaw != "")
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("usage (-got +want):\n%s", diff)
			}
			if string(raw) != tc.wantRaw {
				t.Errorf("raw = %s\nwant  %s", raw, tc.wantRaw)
			}
		})
	}
}

// TestRawUsageBound checks that an oversized usage object is ignored, and
// that a message_delta that would grow the merged object past the bound
// leaves the last good merge.
func TestRawUsageBound(t *testing.T) {
	big := `{"prompt_tokens":1,"pad":"` + string(make([]byte, provider.MaxRawUsageBytes)) + `"}`
	big = regexp.MustCompile("\x00").ReplaceAllString(big, "x")
	if _, _, ok := openai.ChatBodyUsage([]byte(`{"usage":` + big + `}`)); ok {
		t.Error("FromOpenAIBody kept an oversized usage object")
	}
	o := openai.NewChatStream(true)
	if o.Observe(&sse.Event{Data: []byte(`{"choices":[],"usage":` + big + `}`)}) {
		t.Error("an oversized usage object was hidden")
	}
	if _, _, ok := o.Usage(); ok {
		t.Error("OpenAIStream kept an oversized usage object")
	}

	a := anthropic.NewStream()
	a.Observe(&sse.Event{Type: "message_start", Data: []byte(`{"message":{"usage":{"input_tokens":5,"output_tokens":1}}}`)})
	half := string(regexp.MustCompile("\x00").ReplaceAll(make([]byte, provider.MaxRawUsageBytes/2+1), []byte("y")))
	a.Observe(&sse.Event{Type: "message_delta", Data: []byte(`{"usage":{"output_tokens":2,"pad1":"` + half + `"}}`)})
	a.Observe(&sse.Event{Type: "message_delta", Data: []byte(`{"usage":{"output_tokens":3,"pad2":"` + half + `"}}`)})
	got, raw, ok := a.Usage()
	if !ok || got.OutputTokens != 2 || len(raw) > provider.MaxRawUsageBytes {
		t.Errorf("Usage = %+v (raw %d bytes), %v; want the merge before the oversized delta", got, len(raw), ok)
	}
}
