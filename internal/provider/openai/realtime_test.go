package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// realtimeFrames are client events and what the inspector makes of them
// for a session opened with model "pub" routed to "prov-1".
var realtimeFrames = []struct {
	name, frame string
	want        string // the frame sent; "" = the frame itself
	kind        provider.ClientKind
	code        string // a refusal's code
}{
	{"audio", `{"type":"input_audio_buffer.append","audio":"AAAA"}`, "", provider.ClientOther, ""},
	{"response.create", `{"event_id":"e1","type":"response.create","response":{"modalities":["text"]}}`, "", provider.ClientResponseCreate, ""},
	{"update without model", `{"type":"session.update","session":{"voice":"alloy"}}`, "", provider.ClientSessionUpdate, ""},
	{"update naming the public model", `{"type":"session.update","session":{"voice":"alloy", "model" : "pub","x":{"model":"inner"}}}`,
		`{"type":"session.update","session":{"voice":"alloy", "model" : "prov-1","x":{"model":"inner"}}}`, provider.ClientSessionUpdate, ""},
	{"escaped public model", `{"session":{"model":"p\u0075b"},"type":"session.update"}`, `{"session":{"model":"prov-1"},"type":"session.update"}`, provider.ClientSessionUpdate, ""},
	{"another model", `{"type":"session.update","session":{"model":"gpt-4o-realtime"}}`, "", 0, "invalid_model"},
	{"model not a string", `{"type":"session.update","session":{"model":7}}`, "", 0, "invalid_model"},
	{"model twice", `{"type":"session.update","session":{"model":"pub","model":"other"}}`, "", 0, "invalid_model"},
	{"model in another case", `{"type":"session.update","session":{"model":"pub","Model":"other"}}`, "", 0, "invalid_model"},
	{"type twice", `{"type":"response.create","type":"session.update","session":{"model":"other"}}`, "", 0, "duplicate_member"},
	{"type in another case", `{"type":"response.create","Type":"session.update"}`, "", 0, "duplicate_member"},
	{"session twice", `{"type":"session.update","session":{},"session":{"model":"other"}}`, "", 0, "duplicate_member"},
	{"session in another case", `{"type":"session.update","session":{},"Session":{"model":"other"}}`, "", 0, "duplicate_member"},
	{"not an object", `["session.update"]`, "", 0, "invalid_json"},
	{"truncated", `{"type":"session.update","session":{"model":"pub"}`, "", 0, "invalid_json"},
	{"model elsewhere is not looked at", `{"type":"conversation.item.create","session":{"model":"other"}}`, "", provider.ClientOther, ""},
}

func TestRealtimeClientFrame(t *testing.T) {
	model := []byte(`"prov-1"`)
	for _, tc := range realtimeFrames {
		t.Run(tc.name, func(t *testing.T) {
			out, ev, berr := RealtimeClientFrame([]byte(tc.frame), "pub", model)
			if tc.code != "" {
				if berr == nil || berr.Code != tc.code {
					t.Fatalf("got %s, %v; want refused with %s", out, berr, tc.code)
				}
				return
			}
			if berr != nil {
				t.Fatalf("refused: %v", berr)
			}
			want := tc.want
			if want == "" {
				want = tc.frame
			}
			if diff := cmp.Diff(string(out), want); diff != "" {
				t.Errorf("frame sent (-got +want):\n%s", diff)
			}
			if ev.Kind != tc.kind {
				t.Errorf("kind %v, want %v", ev.Kind, tc.kind)
			}
		})
	}
}

// FuzzRealtimeClientFrame: whatever the frame, the inspector never
// panics, and a frame it passes is the client's frame with at most the
// session's model value replaced: as JSON, the same document once the
// provider model is put back as the public model; and a session.update
// it passes names no model other than the provider's.
func FuzzRealtimeClientFrame(f *testing.F) {
	for _, tc := range realtimeFrames {
		f.Add([]byte(tc.frame))
	}
	model := []byte(`"prov-1"`)
	f.Fuzz(func(t *testing.T, frame []byte) {
		out, ev, berr := RealtimeClientFrame(frame, "pub", model)
		if berr != nil {
			return
		}
		if bytes.Equal(out, frame) {
			return
		}
		if ev.Kind != provider.ClientSessionUpdate {
			t.Fatalf("a %v frame was changed: %q → %q", ev.Kind, frame, out)
		}
		var in, sent struct {
			Session map[string]json.RawMessage `json:"session"`
		}
		if json.Unmarshal(frame, &in) != nil {
			return // encoding/json refuses what the scanner passes (invalid UTF-8 handling differs)
		}
		if err := json.Unmarshal(out, &sent); err != nil {
			t.Fatalf("sent frame is not JSON: %v: %q", err, out)
		}
		if string(sent.Session["model"]) != string(model) {
			t.Fatalf("sent session.model %s, want %s: %q", sent.Session["model"], model, out)
		}
		var m string
		if json.Unmarshal(in.Session["model"], &m) != nil || m != "pub" {
			t.Fatalf("passed a session.model other than the public one: %q", frame)
		}
	})
}

func TestRealtimeProviderFrame(t *testing.T) {
	done := `{"type":"response.done","event_id":"e9","response":{"id":"r1","status":"completed","usage":{"total_tokens":40,"input_tokens":30,"output_tokens":10,` +
		`"input_token_details":{"cached_tokens":8,"text_tokens":12,"audio_tokens":18},"output_token_details":{"text_tokens":4,"audio_tokens":6}}}}`
	for _, tc := range []struct {
		name, frame string
		want        provider.ProviderEvent
	}{
		{"audio delta", `{"type":"response.audio.delta","delta":"AAAA"}`, provider.ProviderEvent{}},
		{"created", `{"event_id":"e1","type":"response.created","response":{}}`, provider.ProviderEvent{Kind: provider.ProviderResponseCreated}},
		{"done", done, provider.ProviderEvent{Kind: provider.ProviderResponseDone, HasUsage: true,
			Usage: usageevent.Usage{InputTokens: 30, OutputTokens: 10, CacheReadTokens: 8}}},
		{"failed", `{"type":"response.done","response":{"status":"failed"}}`, provider.ProviderEvent{Kind: provider.ProviderResponseDone, Failed: true}},
		{"not JSON", `nope`, provider.ProviderEvent{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RealtimeProviderFrame([]byte(tc.frame))
			got.Raw = nil
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

// TestRealtimeHandshake: the model query, the browser key subprotocol,
// and the provider handshake's headers (never the client's key or its
// subprotocols).
func TestRealtimeHandshake(t *testing.T) {
	rs := Realtime.Realtime
	for q, code := range map[string]string{"": "missing_model", "model=": "invalid_model", "model=a&model=b": "invalid_model"} {
		v, _ := url.ParseQuery(q)
		if _, berr := rs.Model(v); berr == nil || berr.Code != code {
			t.Errorf("query %q: %v, want %s", q, berr, code)
		}
	}
	h := http.Header{}
	h.Add("Sec-WebSocket-Protocol", "realtime, openai-insecure-api-key.sk-client")
	h.Add("Sec-WebSocket-Protocol", "openai-beta.realtime-v1")
	h.Set("Authorization", "Bearer sk-client")
	h.Set("User-Agent", "sdk")
	if got := rs.Key(h); got != "sk-client" {
		t.Errorf("key %q", got)
	}
	up := rs.Header(h, "sk-provider")
	want := http.Header{"Authorization": {"Bearer sk-provider"}, "Openai-Beta": {"realtime=v1"}, "User-Agent": {"sdk"}}
	if diff := cmp.Diff(up, want); diff != "" {
		t.Errorf("provider handshake headers (-got +want):\n%s", diff)
	}
	var ev struct {
		Type  string `json:"type"`
		Error struct {
			Type, Code, Message string
			EventID             *string `json:"event_id"`
		} `json:"error"`
	}
	if err := json.Unmarshal(RealtimeErrorEvent("invalid_request_error", "invalid_model", "m", []byte(`"e7"`)), &ev); err != nil ||
		ev.Type != "error" || ev.Error.Code != "invalid_model" || ev.Error.EventID == nil || *ev.Error.EventID != "e7" {
		t.Errorf("error event %+v, %v", ev, err)
	}
}
