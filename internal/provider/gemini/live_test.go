package gemini

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// liveSetups are first client messages: the model LiveSetupModel reads,
// or the code of its refusal.
var liveSetups = []struct {
	name, frame string
	model, code string
}{
	{"sdk setup", `{"setup":{"generationConfig":{"responseModalities":["AUDIO"]},"model":"models/gem-live","systemInstruction":{"parts":[{"text":"hi"}]}}}`, "gem-live", ""},
	{"model only", `{"setup":{"model":"models/gem-live"}}`, "gem-live", ""},
	{"escaped key", `{"set\u0075p":{"model":"models/gem-live"}}`, "gem-live", ""},
	{"spaces", " {\n \"setup\" : { \"model\" : \"models/a:b\" } } ", "a:b", ""},
	{"no setup", `{"clientContent":{"turns":[],"turnComplete":true}}`, "", "setup_required"},
	{"empty object", `{}`, "", "setup_required"},
	{"setup not object", `{"setup":"models/x"}`, "", "invalid_request"},
	{"setup null", `{"setup":null}`, "", "invalid_request"},
	{"no model", `{"setup":{"generationConfig":{}}}`, "", "missing_model"},
	{"setup twice", `{"setup":{"model":"models/a"},"setup":{"model":"models/b"}}`, "", "duplicate_member"},
	{"setup case", `{"setup":{"model":"models/a"},"SETUP":{"model":"models/b"}}`, "", "duplicate_member"},
	{"model twice", `{"setup":{"model":"models/a","model":"models/b"}}`, "", "invalid_model"},
	{"model case", `{"setup":{"model":"models/a","Model":"models/b"}}`, "", "invalid_model"},
	{"model not string", `{"setup":{"model":7}}`, "", "invalid_model"},
	{"bare model", `{"setup":{"model":"gem-live"}}`, "", "invalid_model"},
	{"tuned model", `{"setup":{"model":"tunedModels/x"}}`, "", "invalid_model"},
	{"empty model", `{"setup":{"model":"models/"}}`, "", "invalid_model"},
	{"not JSON", `setup`, "", "invalid_json"},
	{"array", `[{"setup":{"model":"models/a"}}]`, "", "invalid_json"},
	{"trailing garbage", `{"setup":{"model":"models/a"}} x`, "", "invalid_json"},
}

func TestLiveSetupModel(t *testing.T) {
	for _, tc := range liveSetups {
		t.Run(tc.name, func(t *testing.T) {
			model, berr := LiveSetupModel([]byte(tc.frame))
			code := ""
			if berr != nil {
				code = berr.Code
			}
			if model != tc.model || code != tc.code {
				t.Errorf("got %q, %q; want %q, %q", model, code, tc.model, tc.code)
			}
		})
	}
}

func TestLiveClientFrame(t *testing.T) {
	model := []byte(`"models/prov-1"`)
	for _, tc := range []struct {
		name, frame, want string
		kind              provider.ClientKind
		code              string
	}{
		{"setup rewritten", `{"setup":{"generationConfig":{},"model":"models/pub","tools":[]}}`,
			`{"setup":{"generationConfig":{},"model":"models/prov-1","tools":[]}}`, provider.ClientSessionUpdate, ""},
		{"setup spaced", `{ "setup" : { "model" : "models/pub" } }`, `{ "setup" : { "model" : "models/prov-1" } }`, provider.ClientSessionUpdate, ""},
		{"setup without model", `{"setup":{"generationConfig":{}}}`, `{"setup":{"generationConfig":{}}}`, provider.ClientSessionUpdate, ""},
		{"setup naming another", `{"setup":{"model":"models/other"}}`, "", provider.ClientSessionUpdate, "invalid_model"},
		{"setup naming it bare", `{"setup":{"model":"pub"}}`, "", provider.ClientSessionUpdate, "invalid_model"},
		{"setup twice", `{"setup":{"model":"models/pub"},"setup":{"model":"models/pub"}}`, "", 0, "duplicate_member"},
		{"client content", `{"clientContent":{"turns":[{"role":"user","parts":[{"text":"hi"}]}],"turnComplete":true}}`,
			`{"clientContent":{"turns":[{"role":"user","parts":[{"text":"hi"}]}],"turnComplete":true}}`, provider.ClientResponseCreate, ""},
		{"client content, proto name", `{"client_content":{"turn_complete":true}}`, `{"client_content":{"turn_complete":true}}`, provider.ClientResponseCreate, ""},
		{"audio", `{"realtimeInput":{"audio":{"data":"AAAA","mimeType":"audio/pcm;rate=16000"}}}`,
			`{"realtimeInput":{"audio":{"data":"AAAA","mimeType":"audio/pcm;rate=16000"}}}`, provider.ClientOther, ""},
		{"tool response", `{"toolResponse":{"functionResponses":[]}}`, `{"toolResponse":{"functionResponses":[]}}`, provider.ClientOther, ""},
		{"not JSON", `{"realtimeInput":`, "", 0, "invalid_json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ev, berr := LiveClientFrame([]byte(tc.frame), "pub", model)
			code := ""
			if berr != nil {
				code = berr.Code
			}
			if string(out) != tc.want || ev.Kind != tc.kind || code != tc.code || ev.ID != nil {
				t.Errorf("got %q kind %v id %q code %q; want %q kind %v code %q", out, ev.Kind, ev.ID, code, tc.want, tc.kind, tc.code)
			}
		})
	}
}

// FuzzLiveSetup checks the setup inspector against encoding/json, a lax
// reader (any letter case, the last of two members wins): whatever the
// node passes on names, to such a reader, only the target's model; a
// first message LiveSetupModel accepts is one LiveClientFrame relays;
// and LiveProviderFrame never fails on any frame.
func FuzzLiveSetup(f *testing.F) {
	for _, tc := range liveSetups {
		f.Add([]byte(tc.frame))
	}
	f.Add([]byte(`{"serverContent":{"turnComplete":true},"usageMetadata":{"promptTokenCount":3}}`))
	const prov = "models/prov-1"
	model := []byte(`"` + prov + `"`)
	f.Fuzz(func(t *testing.T, frame []byte) {
		_ = LiveProviderFrame(frame)
		public, berr := LiveSetupModel(frame)
		if berr == nil {
			if _, _, cerr := LiveClientFrame(frame, public, model); cerr != nil {
				t.Fatalf("setup accepted (model %q) but refused as a frame: %v: %q", public, cerr.Msg, frame)
			}
		} else {
			public = "pub"
		}
		out, _, cerr := LiveClientFrame(frame, public, model)
		if cerr != nil {
			return
		}
		var in, sent struct {
			Setup *struct {
				Model *string `json:"model"`
			} `json:"setup"`
		}
		if json.Unmarshal(frame, &in) != nil {
			return // encoding/json refuses what the scanner passes (invalid UTF-8 handling differs)
		}
		if err := json.Unmarshal(out, &sent); err != nil {
			t.Fatalf("sent frame is not JSON: %v: %q", err, out)
		}
		if in.Setup == nil || in.Setup.Model == nil {
			if string(out) != string(frame) {
				t.Fatalf("a frame naming no model was changed: %q → %q", frame, out)
			}
			return
		}
		if sent.Setup == nil || sent.Setup.Model == nil || *sent.Setup.Model != prov {
			t.Fatalf("the provider would read another model than %q: %q → %q", prov, frame, out)
		}
	})
}

func TestLiveProviderFrame(t *testing.T) {
	full := `{"serverContent":{"turnComplete":true},"usageMetadata":{"promptTokenCount":30,"cachedContentTokenCount":8,"responseTokenCount":10,` +
		`"toolUsePromptTokenCount":2,"thoughtsTokenCount":4,"totalTokenCount":46,"promptTokensDetails":[{"modality":"AUDIO","tokenCount":30}]}}`
	done := func(u usageevent.Usage) provider.ProviderEvent {
		return provider.ProviderEvent{Kind: provider.ProviderResponseDone, Usage: u, HasUsage: true}
	}
	for _, tc := range []struct {
		name, frame string
		want        provider.ProviderEvent
	}{
		{"setup complete", `{"setupComplete":{}}`, provider.ProviderEvent{}},
		{"text", `{"serverContent":{"modelTurn":{"parts":[{"text":"hi"}]}}}`, provider.ProviderEvent{Kind: provider.ProviderResponseCreated}},
		{"audio", `{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"AAAA"}}]}}}`,
			provider.ProviderEvent{Kind: provider.ProviderResponseCreated}},
		{"tool call", `{"toolCall":{"functionCalls":[{"id":"1","name":"f"}]}}`, provider.ProviderEvent{Kind: provider.ProviderResponseCreated}},
		{"input transcription", `{"serverContent":{"inputTranscription":{"text":"hello"}}}`, provider.ProviderEvent{}},
		{"generation complete", `{"serverContent":{"generationComplete":true}}`, provider.ProviderEvent{}},
		{"turn complete with usage", full, done(usageevent.Usage{InputTokens: 32, OutputTokens: 14, CacheReadTokens: 8, ReasoningTokens: 4})},
		{"usage alone", `{"usageMetadata":{"promptTokenCount":5,"responseTokenCount":3}}`, done(usageevent.Usage{InputTokens: 5, OutputTokens: 3})},
		{"candidates count", `{"serverContent":{"turnComplete":true},"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":7}}`,
			done(usageevent.Usage{InputTokens: 5, OutputTokens: 7})},
		{"last part and end", `{"serverContent":{"modelTurn":{"parts":[{"text":"."}]},"turnComplete":true},"usageMetadata":{"promptTokenCount":1,"responseTokenCount":1}}`,
			done(usageevent.Usage{InputTokens: 1, OutputTokens: 1})},
		{"empty usage", `{"serverContent":{"turnComplete":true},"usageMetadata":{}}`, provider.ProviderEvent{Kind: provider.ProviderResponseDone}},
		{"turn complete alone", `{"serverContent":{"turnComplete":true}}`, provider.ProviderEvent{Kind: provider.ProviderResponseDone}},
		{"turn not complete", `{"serverContent":{"turnComplete":false}}`, provider.ProviderEvent{}},
		{"interrupted", `{"serverContent":{"interrupted":true}}`, provider.ProviderEvent{}},
		{"go away", `{"goAway":{"timeLeft":"10s"}}`, provider.ProviderEvent{}},
		{"not JSON", `nope`, provider.ProviderEvent{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := LiveProviderFrame([]byte(tc.frame))
			if got.HasUsage && !strings.HasPrefix(string(got.Raw), "{") {
				t.Errorf("raw usage %q", got.Raw)
			}
			got.Raw = nil
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

func TestLivePath(t *testing.T) {
	for base, want := range map[string]string{
		"/v1beta":        LivePath,
		"/gemini/v1beta": "/gemini" + LivePath,
		"":               LivePath,
		"/":              LivePath,
		"/v1":            LivePath,
	} {
		if got := livePath(base + LivePath); got != want {
			t.Errorf("base path %q: %q, want %q", base, got, want)
		}
	}
}

func TestLiveClose(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   int
	}{
		{http.StatusBadRequest, "invalid_model", 1007},
		{http.StatusBadRequest, "endpoint_not_served", 1007},
		{http.StatusUnauthorized, "invalid_api_key", 1007},
		{0, "invalid_api_key", 1007},
		{http.StatusForbidden, "forbidden", 1008},
		{http.StatusNotFound, "model_not_found", 1008},
		{http.StatusTooManyRequests, "key_rate_limited", 1011},
		{http.StatusServiceUnavailable, "no_capacity", 1011},
		{http.StatusBadGateway, "upstream_unreachable", 1011},
		{0, "upstream_failed", 1011},
		{0, "session_idle", 1000},
		{0, "session_expired", 1000},
		{0, "node_shutting_down", 1001},
	} {
		if got := liveClose(tc.status, tc.code); got != tc.want {
			t.Errorf("liveClose(%d, %q) = %d, want %d", tc.status, tc.code, got, tc.want)
		}
	}
	if ev := liveErrorEvent("server_error", "node_shutting_down", "", nil); string(ev) != `{"goAway":{"timeLeft":"0s"}}` {
		t.Errorf("drain message %q", ev)
	}
	if ev := liveErrorEvent("invalid_request_error", "invalid_model", "m", nil); ev != nil {
		t.Errorf("an error message %q: Gemini has none", ev)
	}
}

// TestLiveHeader: the provider handshake carries the credential as
// x-goog-api-key, the SDK's identification, and nothing else of the
// client's (its key least of all).
func TestLiveHeader(t *testing.T) {
	client := http.Header{"X-Goog-Api-Key": {"sk-client"}, "User-Agent": {"ua"}, "X-Goog-Api-Client": {"google-genai-sdk/1.77.0 gl-go/1.26"},
		"Authorization": {"Bearer sk-client"}, "Sec-Websocket-Protocol": {"x"}, "Cookie": {"c=1"}}
	want := http.Header{"X-Goog-Api-Key": {"pk-prov"}, "User-Agent": {"ua"}, "X-Goog-Api-Client": {"google-genai-sdk/1.77.0 gl-go/1.26"}}
	if diff := cmp.Diff(liveHeader(client, "pk-prov"), want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}
