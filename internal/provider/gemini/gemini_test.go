package gemini

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

var matchCases = []struct {
	path, method, model string
	ok                  bool
}{
	{"/v1beta/models/gemini-2.5-flash:generateContent", "generateContent", "gemini-2.5-flash", true},
	{"/v1/models/gemini-2.5-flash:streamGenerateContent", "streamGenerateContent", "gemini-2.5-flash", true},
	{"/v1beta/models/org:model-1:countTokens", "countTokens", "org:model-1", true},
	{"/v1beta/models/a@b~c:embedContent", "embedContent", "a@b~c", true},
	{"/v1beta/models/gemini:generateContent", "streamGenerateContent", "", false},
	{"/v1beta/models/gemini:GenerateContent", "generateContent", "", false},
	{"/v1beta/models/:generateContent", "generateContent", "", false},
	{"/v1beta/models/a/b:generateContent", "generateContent", "", false},
	{"/v1beta/models/a%2Fb:generateContent", "generateContent", "", false},
	{"/v1beta/models/gemini%3AgenerateContent", "generateContent", "", false},
	{"/v1beta/models/g%65mini:generateContent", "generateContent", "", false},
	{"/v1beta/models/..:generateContent", "generateContent", "", false},
	{"/v1beta/models/.:generateContent", "generateContent", "", false},
	{"/v1beta/models/a b:generateContent", "generateContent", "", false},
	{"/v1beta/models/gemini:generateContent/x", "generateContent", "", false},
	{"/v1beta/models/gemini:generateContent:", "generateContent", "", false},
	{"/v1beta//models/gemini:generateContent", "generateContent", "", false},
	{"/v1beta/tunedModels/gemini:generateContent", "generateContent", "", false},
	{"/v2/models/gemini:generateContent", "generateContent", "", false},
	{"/V1beta/models/gemini:generateContent", "generateContent", "", false},
	{"/v1beta/models/gemini:generateContent?alt=sse", "generateContent", "", false},
	{"/v1beta/models/gémini:generateContent", "generateContent", "", false},
}

// TestMatch: canonical paths only; the model is one segment.
func TestMatch(t *testing.T) {
	for _, tt := range matchCases {
		m, ok := Match(tt.path, tt.method)
		if m != tt.model || ok != tt.ok {
			t.Errorf("Match(%q, %q) = %q, %v; want %q, %v", tt.path, tt.method, m, ok, tt.model, tt.ok)
		}
	}
}

// TestInspect: what each endpoint reads, the members that name the model
// (listed for the rewrite, refused when they name another), and the
// refusals of twins in either spelling.
func TestInspect(t *testing.T) {
	tests := []struct {
		name   string
		spec   string
		body   string
		need   string
		stream bool
		named  []string
		refuse string // a part of the refusal's message
	}{
		{name: "plain", spec: "generate", body: `{"contents":[]}`},
		{name: "stream", spec: "stream", body: `{"contents":[]}`, need: "stream", stream: true},
		{name: "tools", spec: "generate", body: `{"tools":[{"functionDeclarations":[]}]}`, need: "tools"},
		{name: "empty tools", spec: "generate", body: `{"tools":[]}`},
		{name: "schema", spec: "generate", body: `{"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT"}}}`, need: "json_schema"},
		{name: "json schema snake", spec: "generate", body: `{"generation_config":{"response_json_schema":{}}}`, need: "json_schema"},
		{name: "json mode only", spec: "generate", body: `{"generationConfig":{"responseMimeType":"application/json"}}`},
		{name: "null schema", spec: "generate", body: `{"generationConfig":{"responseSchema":null}}`},
		{name: "body model", spec: "generate", body: `{"model":"models/pub","contents":[]}`, named: []string{`"models/pub"`}},
		{name: "body model bare", spec: "stream", body: `{"model":"pub"}`, need: "stream", stream: true, named: []string{`"pub"`}},
		{name: "other model", spec: "generate", body: `{"model":"models/other"}`, refuse: `"model"`},
		{name: "config twice", spec: "generate", body: `{"generationConfig":{},"generation_config":{}}`, refuse: `"generation_config"`},
		{name: "config twin", spec: "generate", body: `{"generationConfig":{},"GenerationConfig":{}}`, refuse: `"generationConfig"`},
		{name: "schema twice", spec: "generate", body: `{"generationConfig":{"responseSchema":{},"response_schema":{}}}`, refuse: `"generationConfig.response_schema"`},
		{name: "schema twin", spec: "generate", body: `{"generationConfig":{"responseSchema":{},"responseschema":null}}`, refuse: `"generationConfig.responseSchema"`},
		{name: "tools twin", spec: "generate", body: `{"tools":[{}],"Tools":[]}`, refuse: `"tools"`},
		{name: "count", spec: "count", body: `{"contents":[]}`},
		{name: "count request", spec: "count", body: `{"generateContentRequest":{"model":"models/pub","tools":[{}],"generationConfig":{"responseSchema":{}}}}`,
			need: "tools,json_schema", named: []string{`"models/pub"`}},
		{name: "count request snake", spec: "count", body: `{"model":"models/pub","generate_content_request":{"model":"pub"}}`,
			named: []string{`"models/pub"`, `"pub"`}},
		{name: "count other model", spec: "count", body: `{"generateContentRequest":{"model":"models/other"}}`, refuse: `"generateContentRequest.model"`},
		{name: "count both spellings", spec: "count", body: `{"generateContentRequest":{},"generate_content_request":{}}`, refuse: `"generate_content_request"`},
		{name: "count nested twin", spec: "count", body: `{"generateContentRequest":{"model":"models/pub","MODEL":"x"}}`, refuse: `"generateContentRequest.model"`},
		{name: "embed", spec: "embed", body: `{"model":"models/pub","content":{"parts":[{"text":"hi"}]}}`, named: []string{`"models/pub"`}},
		{name: "embed without model", spec: "embed", body: `{"content":{}}`},
		{name: "embed other model", spec: "embed", body: `{"model":"models/pub2"}`, refuse: `"model"`},
		{name: "batch", spec: "batch", body: `{"requests":[{"model":"models/pub","content":{}},{"model":"pub"}]}`, named: []string{`"models/pub"`, `"pub"`}},
		{name: "batch other", spec: "batch", body: `{"requests":[{"model":"models/pub"},{"model":"models/x"}]}`, refuse: `"requests[1].model"`},
		{name: "batch twin", spec: "batch", body: `{"requests":[{"model":"models/pub","Model":"models/x"}]}`, refuse: `"requests[0].model"`},
		{name: "batch not a list", spec: "batch", body: `{"requests":{}}`},
	}
	for _, tt := range tests {
		spec := map[string]func([]byte, string) (r requestResult){
			"generate": wrap(GenerateContent.Inspect), "stream": wrap(StreamGenerateContent.Inspect),
			"count": wrap(CountTokens.Inspect), "embed": wrap(EmbedContent.Inspect), "batch": wrap(BatchEmbedContents.Inspect),
		}[tt.spec]
		body := []byte(tt.body)
		got := spec(body, "pub")
		if tt.refuse != "" {
			if got.err == "" || !strings.Contains(got.err, tt.refuse) {
				t.Errorf("%s: refusal %q, want one naming %s", tt.name, got.err, tt.refuse)
			}
			continue
		}
		if got.err != "" {
			t.Errorf("%s: refused: %s", tt.name, got.err)
			continue
		}
		var named []string
		for _, at := range got.r.Named {
			named = append(named, string(body[at[0]:at[1]]))
		}
		if diff := cmp.Diff(requestView{got.r.Model, got.r.Need.String(), got.r.Stream, named},
			requestView{"pub", tt.need, tt.stream, tt.named}); diff != "" {
			t.Errorf("%s: request (-got +want):\n%s", tt.name, diff)
		}
	}
}

type requestView struct {
	Model, Need string
	Stream      bool
	Named       []string
}

// TestRewriteNamesProviderModel: every member that names the model names
// the provider's after the rewrite, and the rest is the client's bytes.
func TestRewriteNamesProviderModel(t *testing.T) {
	body := []byte(`{"model":"pub", "generateContentRequest" : {"contents":[{"parts":[{"text":"models/pub"}]}],"model": "models/pub"}}`)
	r, berr := CountTokens.Inspect(body, "pub")
	if berr != nil {
		t.Fatal(berr)
	}
	got := string(r.Rewrite(body, nil, []byte(`"models/gemini-2.5-pro"`), false))
	want := `{"model":"models/gemini-2.5-pro", "generateContentRequest" : {"contents":[{"parts":[{"text":"models/pub"}]}],"model": "models/gemini-2.5-pro"}}`
	if got != want {
		t.Errorf("Rewrite = %s, want %s", got, want)
	}
}

// TestHeader: the allowlist and the credential; never the client's key.
func TestHeader(t *testing.T) {
	client := http.Header{
		"Content-Type": {"application/json"}, "User-Agent": {"GeminiCLI/0.61.0"}, "X-Goog-Api-Client": {"google-genai-sdk/1.0"},
		"X-Goog-Api-Key": {"client-key"}, "Authorization": {"Bearer client-key"}, "X-Goog-User-Project": {"p"},
		"X-Gemini-Api-Privileged-User-Id": {"install-1"}, "Accept-Encoding": {"gzip"}, "Cookie": {"c=1"},
	}
	want := http.Header{
		"Content-Type": {"application/json"}, "User-Agent": {"GeminiCLI/0.61.0"}, "X-Goog-Api-Client": {"google-genai-sdk/1.0"},
		"X-Goog-Api-Key": {"backend-key"},
	}
	if diff := cmp.Diff(Header(client, "backend-key"), want); diff != "" {
		t.Errorf("Header (-got +want):\n%s", diff)
	}
}

// TestStreamQuery: alt=sse and nothing else; never the key.
func TestStreamQuery(t *testing.T) {
	for q, want := range map[string]string{
		"alt=sse": "alt=sse", "alt=sse&key=secret": "alt=sse", "key=secret": "", "": "",
		"alt=json": "", "alt=sse&alt=json": "", "alt=SSE": "", "alt=sse&%24fields=x": "alt=sse",
	} {
		v, _ := url.ParseQuery(q)
		if got := StreamGenerateContent.UpstreamQuery(v); got != want {
			t.Errorf("UpstreamQuery(%q) = %q, want %q", q, got, want)
		}
	}
}

var terminalCases = []struct {
	name, data   string
	done, failed bool
}{
	{"text", `{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":3},"modelVersion":"gemini-2.5-flash"}`, false, false},
	{"finish", `{"candidates":[{"content":{"parts":[{"text":"."}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":5,"totalTokenCount":8}}`, true, false},
	{"finish null", `{"candidates":[{"finishReason":null}]}`, false, false},
	{"one of two finished", `{"candidates":[{"finishReason":"STOP","index":0},{"index":1}]}`, false, false},
	{"both finished", `{"candidates":[{"finishReason":"STOP"},{"finishReason":"MAX_TOKENS"}]}`, true, false},
	{"finish in text", `{"candidates":[{"content":{"parts":[{"text":"\"finishReason\":\"STOP\""}]}}]}`, false, false},
	{"blocked prompt", `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9}}`, true, false},
	{"feedback without block", `{"promptFeedback":{"safetyRatings":[]},"candidates":[{}]}`, false, false},
	{"error", `{"error":{"code":500,"message":"internal","status":"INTERNAL"}}`, false, true},
	{"error later", `{"x":1, "error" : {"code":503}}`, false, true},
	{"error null", `{"error":null,"candidates":[{}]}`, false, false},
	{"not json", `[DONE]`, false, false},
	{"empty", ``, false, false},
}

// TestTerminal: the chunk that says why generation stopped ends the
// stream; an error chunk is a failure.
func TestTerminal(t *testing.T) {
	for _, tt := range terminalCases {
		done, failed := Terminal(&sse.Event{Data: []byte(tt.data)})
		if done != tt.done || failed != tt.failed {
			t.Errorf("%s: Terminal = %v, %v; want %v, %v", tt.name, done, failed, tt.done, tt.failed)
		}
	}
}

// TestNormalize: the Gemini usage convention (docs/usage-events.md).
func TestNormalize(t *testing.T) {
	tests := []struct {
		name, obj string
		want      usageevent.Usage
	}{
		{"plain", `{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15}`, usageevent.Usage{InputTokens: 10, OutputTokens: 5}},
		{"everything", `{"promptTokenCount":100,"cachedContentTokenCount":60,"toolUsePromptTokenCount":7,"candidatesTokenCount":20,"thoughtsTokenCount":30,"totalTokenCount":157}`,
			usageevent.Usage{InputTokens: 107, CacheReadTokens: 60, OutputTokens: 50, ReasoningTokens: 30}},
		{"prompt only", `{"promptTokenCount":4,"totalTokenCount":4}`, usageevent.Usage{InputTokens: 4}},
		{"cache above prompt", `{"promptTokenCount":4,"cachedContentTokenCount":9}`, usageevent.Usage{InputTokens: 4, CacheReadTokens: 4}},
		{"garbage", `{"promptTokenCount":"4","candidatesTokenCount":-1,"thoughtsTokenCount":1.5}`, usageevent.Usage{}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(usageForm.Read([]byte(tt.obj)), tt.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", tt.name, diff)
		}
	}
}

// TestBodyUsage: a whole answer, a stream answered as one JSON array
// (no alt=sse), and answers without usage.
func TestBodyUsage(t *testing.T) {
	tests := []struct {
		name, body, raw string
	}{
		{"answer", `{"candidates":[],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1}}`, `{"promptTokenCount":2,"candidatesTokenCount":1}`},
		{"array", `[{"usageMetadata":{"promptTokenCount":2}},{"candidates":[]},{"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":9}},{}]`, `{"promptTokenCount":2,"candidatesTokenCount":9}`},
		{"none", `{"embedding":{"values":[0.1]}}`, ""},
		{"null", `{"usageMetadata":null}`, ""},
		{"broken array", `[{"usageMetadata":{"promptTokenCount":2}}`, ""},
	}
	for _, tt := range tests {
		_, raw, ok := BodyUsage([]byte(tt.body))
		if string(raw) != tt.raw || ok != (tt.raw != "") {
			t.Errorf("%s: BodyUsage = %s, %v; want %s", tt.name, raw, ok, tt.raw)
		}
	}
}

// TestStreamKeepsLast: usageMetadata is cumulative; the last one counts.
func TestStreamKeepsLast(t *testing.T) {
	s := NewStream()
	for _, d := range []string{
		`{"candidates":[{"content":{}}],"usageMetadata":{"promptTokenCount":3}}`,
		`{"candidates":[{"content":{}}]}`,
		`{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4,"thoughtsTokenCount":2}}`,
	} {
		if s.Observe(&sse.Event{Data: []byte(d)}) {
			t.Error("a chunk was hidden")
		}
	}
	u, raw, ok := s.Usage()
	if !ok || string(raw) != `{"promptTokenCount":3,"candidatesTokenCount":4,"thoughtsTokenCount":2}` ||
		u != (usageevent.Usage{InputTokens: 3, OutputTokens: 6, ReasoningTokens: 2}) {
		t.Errorf("Usage = %+v, %s, %v", u, raw, ok)
	}
}

// TestErrorBody: the Gemini error shape, the node's code and request id
// as google.rpc details.
func TestErrorBody(t *testing.T) {
	got := string(ErrorBody(404, "model_not_found", "unknown model", "sg-1"))
	want := `{"error":{"code":404,"message":"unknown model","status":"NOT_FOUND","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"MODEL_NOT_FOUND","domain":"scootgate"},` +
		`{"@type":"type.googleapis.com/google.rpc.RequestInfo","requestId":"sg-1"}]}}`
	if got != want {
		t.Errorf("ErrorBody = %s\nwant %s", got, want)
	}
	for status, want := range map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
		413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 502: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"} {
		if got := Status(status); got != want {
			t.Errorf("Status(%d) = %s, want %s", status, got, want)
		}
	}
	if got := string(ErrorBody(503, "", "busy", "")); got != `{"error":{"code":503,"message":"busy","status":"UNAVAILABLE"}}` {
		t.Errorf("ErrorBody without details = %s", got)
	}
}

// TestNotRouted: the stored resources and operations, not the routed
// methods nor the other APIs' paths.
func TestNotRouted(t *testing.T) {
	for path, want := range map[string]bool{
		"/v1beta/cachedContents":                          true,
		"/v1beta/cachedContents/abc":                      true,
		"/v1beta/files/abc":                               true,
		"/upload/v1beta/files":                            true,
		"/v1beta/tunedModels/t:generateContent":           true,
		"/v1beta/batches/b":                               true,
		"/v1beta/models/gemini:batchGenerateContent":      true,
		"/v1/models/veo:predictLongRunning":               true,
		"/v1/cachedContents":                              true,
		"/v1/files":                                       false, // OpenAI's
		"/v1/batches":                                     false, // OpenAI's
		"/v1beta/models/gemini:generateContent":           false,
		"/v1beta/models":                                  false,
		"/v1beta/models/gemini":                           false,
		"/v1/responses/abc":                               false,
		"/v1beta/filesystem":                              false,
		"/v1beta/models/gemini:streamGenerateContent":     false,
		"/v1beta/models/gemini:batchEmbedContents":        false,
		"/v1beta/models/gemini:asyncBatchEmbedContent":    true,
		"/v1beta/cachedContents:batchGenerateContent/xyz": true,
	} {
		if _, _, got := notRouted(path); got != want {
			t.Errorf("notRouted(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestListModels: Google's paging: pageSize (default 50, at most 1000)
// and an opaque pageToken that continues after the last name.
func TestListModels(t *testing.T) {
	names := make([]string, 1203)
	for i := range names {
		names[i] = fmt.Sprintf("m-%04d", i)
	}
	page := func(q string) (got []string, next string, code string) {
		v, _ := url.ParseQuery(q)
		b, berr := listModels(names, v, time.Time{})
		if berr != nil {
			return nil, "", berr.Code
		}
		var l ModelList
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		for _, m := range l.Models {
			if m.Name != "models/"+m.DisplayName || len(m.SupportedGenerationMethods) == 0 {
				t.Errorf("entry %+v", m)
			}
			got = append(got, m.DisplayName)
		}
		return got, l.NextPageToken, ""
	}
	got, next, _ := page("")
	if len(got) != 50 || got[0] != "m-0000" || next == "" {
		t.Fatalf("first page: %d models from %v, next %q", len(got), got[:1], next)
	}
	got, next, _ = page("pageSize=5000&pageToken=" + next)
	if len(got) != 1000 || got[0] != "m-0050" || next == "" {
		t.Fatalf("second page: %d from %s", len(got), got[0])
	}
	got, next, _ = page("pageSize=1000&pageToken=" + next)
	if len(got) != 153 || got[0] != "m-1050" || next != "" {
		t.Fatalf("last page: %d from %s, next %q", len(got), got[0], next)
	}
	for _, q := range []string{"pageSize=-1", "pageSize=x", "pageToken=!!", "pageToken="} {
		if _, _, code := page(q); code == "" && q != "pageToken=" {
			t.Errorf("%s accepted", q)
		}
	}
	if got, _, _ := page("pageSize=0"); len(got) != 50 {
		t.Errorf("pageSize=0: %d models, want the default 50", len(got))
	}
	if string(getModel("pub", time.Time{})) != `{"name":"models/pub","baseModelId":"pub","displayName":"pub","supportedGenerationMethods":["generateContent","streamGenerateContent","countTokens"]}` {
		t.Errorf("getModel = %s", getModel("pub", time.Time{}))
	}
}

// TestInspectOutputCap: generationConfig.maxOutputTokens (or its
// snake_case spelling) is read exactly (docs/routing.md "Context
// windows"); both spellings at once, a twin, or a value that is not a
// whole number are refused. countTokens asks for no output.
func TestInspectOutputCap(t *testing.T) {
	for _, tt := range []struct {
		spec   *provider.Spec
		body   string
		want   int64
		refuse string
	}{
		{spec: GenerateContent, body: `{"generationConfig":{"maxOutputTokens":8192}}`, want: 8192},
		{spec: StreamGenerateContent, body: `{"generation_config":{"max_output_tokens":100}}`, want: 100},
		{spec: GenerateContent, body: `{"generationConfig":{"maxOutputTokens":null}}`},
		{spec: GenerateContent, body: `{"generationConfig":{}}`},
		{spec: GenerateContent, body: `{}`},
		{spec: GenerateContent, body: `{"generationConfig":{"maxOutputTokens":"8192"}}`, refuse: `"generationConfig.maxOutputTokens"`},
		{spec: GenerateContent, body: `{"generationConfig":{"maxOutputTokens":1,"max_output_tokens":2}}`, refuse: `"generationConfig.max_output_tokens"`},
		{spec: GenerateContent, body: `{"generationConfig":{"maxOutputTokens":1,"maxoutputtokens":2}}`, refuse: `"generationConfig.maxOutputTokens"`},
		{spec: CountTokens, body: `{"generateContentRequest":{"generationConfig":{"maxOutputTokens":5}}}`},
	} {
		r, berr := tt.spec.Inspect([]byte(tt.body), "pub")
		switch {
		case tt.refuse != "":
			if berr == nil || !strings.Contains(berr.Msg, tt.refuse) {
				t.Errorf("%v %s: got %v, want a refusal naming %s", tt.spec.Endpoint, tt.body, berr, tt.refuse)
			}
		case berr != nil:
			t.Errorf("%v %s: refused: %s", tt.spec.Endpoint, tt.body, berr.Msg)
		case r.MaxOutput != tt.want:
			t.Errorf("%v %s: MaxOutput = %d, want %d", tt.spec.Endpoint, tt.body, r.MaxOutput, tt.want)
		}
	}
}
