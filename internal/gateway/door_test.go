package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/provider/catalog"
)

// postDoor posts body to path on the node at base, as a Bedrock client
// does (no anthropic-version header: the version is in the body).
func postDoor(t *testing.T, base, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// TestBedrockDoorWhole: a Bedrock InvokeModel request for a model whose
// target is Anthropic's own API reaches it as a Messages request (model
// in the body, version member gone, betas as headers) and its answer comes
// back unchanged.
func TestBedrockDoorWhole(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()

	body := `{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["b1","b2"],"max_tokens":5,"messages":[{"role":"user","content":"hello there"}]}`
	resp, data := postDoor(t, srv.URL, "/model/claude/invoke", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var msg struct {
		Type  string `json:"type"`
		Model string `json:"model"`
	}
	if err := json.Unmarshal(data, &msg); err != nil || msg.Type != "message" {
		t.Fatalf("answer is not a Messages document (%v): %s", err, data)
	}
	if got := resp.Header.Get("X-Amzn-Requestid"); got == "" || got != resp.Header.Get("X-Request-Id") {
		t.Errorf("x-amzn-requestid %q, want the node's request id %q", got, resp.Header.Get("X-Request-Id"))
	}
	reqs := prov.Requests()
	if len(reqs) != 1 {
		t.Fatalf("provider saw %d requests, want 1", len(reqs))
	}
	sent := reqs[0]
	want := `{"model":"provider-claude","max_tokens":5,"messages":[{"role":"user","content":"hello there"}]}`
	if diff := cmp.Diff(string(sent.Body), want); diff != "" {
		t.Errorf("provider body (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(sent.Header.Values("Anthropic-Beta"), []string{"b1", "b2"}); diff != "" {
		t.Errorf("anthropic-beta (-got +want):\n%s", diff)
	}
}

// TestBedrockDoorStream: invoke-with-response-stream answers in AWS
// event-stream framing, one chunk per Messages stream event, whose bytes
// are the event's data unchanged; the provider got a streaming Messages
// request.
func TestBedrockDoorStream(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()

	body := `{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[{"role":"user","content":"one two three [[chunks=3]]"}]}`
	resp, data := postDoor(t, srv.URL, "/model/claude/invoke-with-response-stream", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.amazon.eventstream" {
		t.Fatalf("content-type %q", ct)
	}
	if reqs := prov.Requests(); len(reqs) != 1 || !reqs[0].Stream || reqs[0].Model != "provider-claude" {
		t.Fatalf("provider requests %+v, want one streaming request for provider-claude", reqs)
	}
	dec := eventstream.NewDecoder()
	r := bytes.NewReader(data)
	var types []string
	for {
		m, err := dec.Decode(r, nil)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("frame %d: %v", len(types), err)
		}
		if got := m.Headers.Get(":event-type"); got == nil || got.String() != "chunk" {
			t.Fatalf("frame %d event type %v, want chunk", len(types), got)
		}
		var chunk struct {
			Bytes string `json:"bytes"`
		}
		if err := json.Unmarshal(m.Payload, &chunk); err != nil {
			t.Fatalf("frame %d payload %s: %v", len(types), m.Payload, err)
		}
		ev, err := base64.StdEncoding.DecodeString(chunk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(ev, &e); err != nil {
			t.Fatalf("chunk %d is not a Messages event: %s", len(types), ev)
		}
		types = append(types, e.Type)
	}
	if len(types) < 4 || types[0] != "message_start" || types[len(types)-1] != "message_stop" {
		t.Fatalf("event types %v: want message_start … message_stop", types)
	}
}

// TestBedrockDoorRefusals: what the door cannot serve is refused in
// Bedrock's error shape before anything is sent.
func TestBedrockDoorRefusals(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	const ok = `{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[]}`
	tests := []struct {
		name, path, body string
		status           int
		errType          string
	}{
		{"model in the body", "/model/claude/invoke", `{"anthropic_version":"bedrock-2023-05-31","model":"claude","messages":[]}`, 400, "ValidationException"},
		{"stream in the body", "/model/claude/invoke", `{"anthropic_version":"bedrock-2023-05-31","stream":true,"messages":[]}`, 400, "ValidationException"},
		{"no version", "/model/claude/invoke", `{"max_tokens":5,"messages":[]}`, 400, "ValidationException"},
		{"another version", "/model/claude/invoke", `{"anthropic_version":"vertex-2023-10-16","messages":[]}`, 400, "ValidationException"},
		{"version not a string", "/model/claude/invoke", `{"anthropic_version":20230601,"messages":[]}`, 400, "ValidationException"},
		{"version not a date", "/model/claude/invoke", `{"anthropic_version":"2023-6-01x","messages":[]}`, 400, "ValidationException"},
		{"version twice in two cases", "/model/claude/invoke", `{"anthropic_version":"bedrock-2023-05-31","Anthropic_Version":"x","messages":[]}`, 400, "ValidationException"},
		{"betas not strings", "/model/claude/invoke", `{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":[1],"messages":[]}`, 400, "ValidationException"},
		{"unknown model", "/model/nope/invoke", ok, 404, "ResourceNotFoundException"},
		{"encoded id of an unknown model", "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/invoke", ok, 404, "ResourceNotFoundException"},
		{"doubly encoded id", "/model/a%253Ab/invoke", ok, 400, "ValidationException"},
		{"unencoded slash in the id", "/model/a/b/invoke", ok, 400, "ValidationException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := postDoor(t, srv.URL, tt.path, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, data)
			}
			if got := resp.Header.Get("X-Amzn-Errortype"); got != tt.errType {
				t.Errorf("x-amzn-errortype %q, want %q", got, tt.errType)
			}
			var doc map[string]string
			if err := json.Unmarshal(data, &doc); err != nil || doc["message"] == "" || len(doc) != 1 {
				t.Errorf("body %s: want Bedrock's {\"message\": …}", data)
			}
		})
	}
	// A guardrail the node cannot apply is refused, not dropped.
	resp, data := postDoor(t, srv.URL, "/model/claude/invoke-with-response-stream", ok,
		"X-Amzn-Bedrock-GuardrailIdentifier", "gr-1", "X-Amzn-Bedrock-GuardrailVersion", "1")
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-Errortype") != "ValidationException" || !strings.Contains(string(data), "guardrails") {
		t.Errorf("guardrail: %d %q %s", resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), data)
	}
	if n := prov.RequestCount(); n != 0 {
		t.Errorf("provider saw %d requests, want 0", n)
	}
}

// oneKey accepts one client key, found as the node finds keys.
type oneKey string

func (k oneKey) Authenticate(h http.Header, q []string, _ time.Time) (*authz.Principal, error) {
	key, ok := authz.ExtractKey(h, catalog.KeyHeaders(), q)
	switch {
	case !ok:
		return nil, authz.ErrMissingKey
	case key != string(k):
		return nil, authz.ErrUnknownKey
	}
	return &authz.Principal{KeyID: "k", TenantID: "t"}, nil
}

// TestBedrockDoorKeys: a Bedrock client presents its key as a Bedrock API
// key (Authorization: Bearer); one that signs with SigV4, or sends no
// key, is told so in Bedrock's shape, and a Messages client is still told
// the endpoint's own way.
func TestBedrockDoorKeys(t *testing.T) {
	h, prov := newHandler(t, Options{Auth: oneKey("sk-door")})
	srv := httptest.NewServer(h)
	defer srv.Close()
	const body = `{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	sigv4 := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261206/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc"
	tests := []struct {
		name   string
		header []string
		status int
		want   string // in the message
	}{
		{"bearer", []string{"Authorization", "Bearer sk-door"}, 200, ""},
		{"sigv4", []string{"Authorization", sigv4}, 401, "does not accept AWS SigV4 signatures: send the gateway key as a Bedrock API key, Authorization: Bearer <key> (AWS_BEARER_TOKEN_BEDROCK)"},
		{"none", nil, 401, "missing API key: send the gateway key as a Bedrock API key, Authorization: Bearer <key> (AWS_BEARER_TOKEN_BEDROCK)"},
		{"unknown key", []string{"Authorization", "Bearer sk-other"}, 401, "invalid API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := postDoor(t, srv.URL, "/model/claude/invoke", body, tt.header...)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, data)
			}
			if tt.status == 200 {
				return
			}
			var doc struct{ Message string }
			if err := json.Unmarshal(data, &doc); err != nil || !strings.Contains(doc.Message, tt.want) {
				t.Errorf("body %s: want a message with %q", data, tt.want)
			}
			if got := resp.Header.Get("X-Amzn-Errortype"); got != "UnrecognizedClientException" {
				t.Errorf("x-amzn-errortype %q", got)
			}
		})
	}
	if n := prov.RequestCount(); n != 1 {
		t.Errorf("provider saw %d requests, want 1", n)
	}
	// The Messages endpoint's own path keeps its own message.
	resp, data := postDoor(t, srv.URL, "/v1/messages", `{"model":"claude","max_tokens":5,"messages":[]}`, "Authorization", sigv4)
	if resp.StatusCode != 401 || !strings.Contains(string(data), "missing API key: send Authorization: Bearer") {
		t.Errorf("/v1/messages: %d %s", resp.StatusCode, data)
	}
}

// TestBedrockDoorVersions: the body's anthropic_version is Bedrock's, or
// the Anthropic API version that the Anthropic SDKs' Bedrock clients put
// there, which becomes the anthropic-version header; the member never
// reaches the provider.
func TestBedrockDoorVersions(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tt := range []struct{ version, header string }{
		{"bedrock-2023-05-31", "2023-06-01"}, // the node's default
		{"2026-10-21", "2026-10-21"},
	} {
		resp, data := postDoor(t, srv.URL, "/model/claude/invoke", `{"anthropic_version":"`+tt.version+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", tt.version, resp.StatusCode, data)
		}
		sent := prov.Requests()
		last := sent[len(sent)-1]
		if bytes.Contains(last.Body, []byte("anthropic_version")) {
			t.Errorf("%s: provider body %s", tt.version, last.Body)
		}
		if got := last.Header.Get("Anthropic-Version"); got != tt.header {
			t.Errorf("%s: anthropic-version %q, want %q", tt.version, got, tt.header)
		}
	}
}

// countBody is a CountTokens request around the InvokeModel body invoke.
func countBody(invoke string) string {
	return `{"input":{"invokeModel":{"body":"` + base64.StdEncoding.EncodeToString([]byte(invoke)) + `"}}}`
}

// TestBedrockCountTokensDoor: Bedrock's CountTokens path is count_tokens:
// the provider gets the Messages count request (the InvokeModel body less
// its envelope and the members that only steer generation), and the
// client gets {"inputTokens":N}.
func TestBedrockCountTokensDoor(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	invoke := `{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["b1"],"max_tokens":5,"temperature":0.5,"system":"s","messages":[{"role":"user","content":"one two three"}]}`
	resp, data := postDoor(t, srv.URL, "/model/claude-all/count-tokens", countBody(invoke))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil || len(doc) != 1 || doc["inputTokens"] == nil {
		t.Fatalf("answer %s, want {\"inputTokens\":N}", data)
	}
	if resp.Header.Get("Content-Length") != strconv.Itoa(len(data)) {
		t.Errorf("content-length %q for %d bytes", resp.Header.Get("Content-Length"), len(data))
	}
	reqs := prov.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/messages/count_tokens" {
		t.Fatalf("provider requests %+v", reqs)
	}
	want := `{"model":"provider-claude","system":"s","messages":[{"role":"user","content":"one two three"}]}`
	if diff := cmp.Diff(string(reqs[0].Body), want); diff != "" {
		t.Errorf("provider body (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(reqs[0].Header.Values("Anthropic-Beta"), []string{"b1"}); diff != "" {
		t.Errorf("anthropic-beta (-got +want):\n%s", diff)
	}
	var n struct {
		InputTokens int `json:"input_tokens"`
	}
	_ = json.Unmarshal(doc["inputTokens"], &n.InputTokens)
	if n.InputTokens == 0 {
		t.Errorf("inputTokens %s", doc["inputTokens"])
	}
}

// TestBedrockCountTokensRefusals: the CountTokens shape is closed, and
// its refusals are Bedrock's.
func TestBedrockCountTokensRefusals(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	tests := []struct{ name, body, want string }{
		{"not an object", `[]`, "must be an object"},
		{"no input", `{}`, "input is required"},
		{"unknown member", `{"input":{"invokeModel":{"body":"e30="}},"x":1}`, `unknown member "x"`},
		{"case variant", `{"Input":{"invokeModel":{"body":"e30="}}}`, `unknown member "Input"`},
		{"twice", `{"input":{"invokeModel":{"body":"e30="}},"input":{"invokeModel":{"body":"e30="}}}`, "input is given twice"},
		{"converse", `{"input":{"converse":{"messages":[]}}}`, "input.converse"},
		{"body not a string", `{"input":{"invokeModel":{"body":1}}}`, "must be a string"},
		{"body not base64", `{"input":{"invokeModel":{"body":"@@"}}}`, "not valid base64"},
		{"model in the invoke body", countBody(`{"anthropic_version":"bedrock-2023-05-31","model":"x","messages":[]}`), "input.invokeModel.body: model is named by the path"},
		{"no version", countBody(`{"messages":[]}`), "anthropic_version is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := postDoor(t, srv.URL, "/model/claude-all/count-tokens", tt.body)
			if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-Errortype") != "ValidationException" {
				t.Fatalf("status %d type %q: %s", resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), data)
			}
			var doc struct{ Message string }
			if err := json.Unmarshal(data, &doc); err != nil || !strings.Contains(doc.Message, tt.want) {
				t.Errorf("body %s, want it to say %q", data, tt.want)
			}
		})
	}
	if n := prov.RequestCount(); n != 0 {
		t.Errorf("provider saw %d requests", n)
	}
}

// getProfiles asks the node at base for Bedrock's inference profiles.
func getProfiles(t *testing.T, base, query string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/inference-profiles"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

type profileList struct {
	Summaries []struct {
		Name   string            `json:"inferenceProfileName"`
		ID     string            `json:"inferenceProfileId"`
		ARN    string            `json:"inferenceProfileArn"`
		Models []json.RawMessage `json:"models"`
		Status string            `json:"status"`
		Type   string            `json:"type"`
	} `json:"inferenceProfileSummaries"`
	NextToken *string `json:"nextToken"`
}

func (l profileList) ids() []string {
	var ids []string
	for _, s := range l.Summaries {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestBedrockInferenceProfiles: GET /inference-profiles lists the public
// Messages models as Bedrock's system-defined inference profiles, pages
// with maxResults and nextToken, and refuses in Bedrock's shape.
func TestBedrockInferenceProfiles(t *testing.T) {
	h, prov := newHandler(t, Options{Auth: oneKey("sk-door")})
	srv := httptest.NewServer(h)
	defer srv.Close()
	key := []string{"Authorization", "Bearer sk-door"}

	resp, data := getProfiles(t, srv.URL, "?type=SYSTEM_DEFINED", key...)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	var all profileList
	if err := json.Unmarshal(data, &all); err != nil {
		t.Fatal(err)
	}
	ids := all.ids()
	if !slices.Contains(ids, "claude") || !slices.Contains(ids, "claude-all") || slices.Contains(ids, "gpt") || !slices.IsSorted(ids) || all.NextToken != nil {
		t.Errorf("profiles %v (next %v): want the sorted Messages models, no OpenAI one", ids, all.NextToken)
	}
	p := all.Summaries[0]
	if p.Name != p.ID || p.Status != "ACTIVE" || p.Type != "SYSTEM_DEFINED" || p.ARN != "arn:aws:bedrock:::inference-profile/"+p.ID || p.Models == nil {
		t.Errorf("summary %+v", p)
	}

	var paged []string
	query := "?maxResults=1"
	for range len(ids) + 1 {
		resp, data := getProfiles(t, srv.URL, query, key...)
		var l profileList
		if resp.StatusCode != 200 || json.Unmarshal(data, &l) != nil {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		paged = append(paged, l.ids()...)
		if l.NextToken == nil {
			break
		}
		query = "?maxResults=1&nextToken=" + url.QueryEscape(*l.NextToken)
	}
	if diff := cmp.Diff(paged, ids); diff != "" {
		t.Errorf("paged (-got +want):\n%s", diff)
	}

	resp, data = getProfiles(t, srv.URL, "?type=APPLICATION", key...)
	if resp.StatusCode != 200 || string(data) != `{"inferenceProfileSummaries":[]}` {
		t.Errorf("APPLICATION: %d %s", resp.StatusCode, data)
	}

	for _, tt := range []struct {
		name, query string
		header      []string
		status      int
		errType     string
	}{
		{"no key", "", nil, 401, "UnrecognizedClientException"},
		{"unknown parameter", "?limit=2", key, 400, "ValidationException"},
		{"parameter twice", "?type=SYSTEM_DEFINED&type=APPLICATION", key, 400, "ValidationException"},
		{"bad type", "?type=OTHER", key, 400, "ValidationException"},
		{"maxResults out of range", "?maxResults=0", key, 400, "ValidationException"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := getProfiles(t, srv.URL, tt.query, tt.header...)
			if resp.StatusCode != tt.status || resp.Header.Get("X-Amzn-Errortype") != tt.errType {
				t.Fatalf("status %d type %q, want %d %s: %s", resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), tt.status, tt.errType, data)
			}
			var doc map[string]string
			if err := json.Unmarshal(data, &doc); err != nil || doc["message"] == "" || len(doc) != 1 {
				t.Errorf("body %s: want Bedrock's {\"message\": …}", data)
			}
		})
	}
	if resp, data := postDoor(t, srv.URL, "/inference-profiles", "{}", key...); resp.StatusCode != 405 || resp.Header.Get("X-Amzn-Errortype") == "" {
		t.Errorf("POST: %d %s", resp.StatusCode, data)
	}
	if n := prov.RequestCount(); n != 0 {
		t.Errorf("provider saw %d requests", n)
	}
}
