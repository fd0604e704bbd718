package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// vertexClaude is the resource path Claude clients in Vertex mode post
// under.
const vertexClaude = "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"

// TestVertexClaudeDoorWhole: a Vertex rawPredict request for a model whose
// target is Anthropic's own API reaches it as a Messages request (model in
// the body, the envelope's members gone, betas as headers) and its answer
// comes back unchanged.
func TestVertexClaudeDoorWhole(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()

	body := `{"anthropic_version":"vertex-2023-10-16","anthropic_beta":["b1"],"max_tokens":5,"stream":false,"messages":[{"role":"user","content":"hello there"}]}`
	resp, data := postDoor(t, srv.URL, vertexClaude+"claude:rawPredict", body, "Authorization", "Bearer k")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var msg struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &msg); err != nil || msg.Type != "message" {
		t.Fatalf("answer is not a Messages document (%v): %s", err, data)
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
	if sent.Path != "/v1/messages" {
		t.Errorf("provider path %q", sent.Path)
	}
	if diff := cmp.Diff(sent.Header.Values("Anthropic-Beta"), []string{"b1"}); diff != "" {
		t.Errorf("anthropic-beta (-got +want):\n%s", diff)
	}
	if got := sent.Header.Get("Anthropic-Version"); got != "2023-06-01" {
		t.Errorf("anthropic-version %q, want the default", got)
	}
}

// TestVertexClaudeDoorStream: streamRawPredict streams Anthropic's SSE
// unchanged, whether or not the body says "stream": true; an API version
// in anthropic_version (anthropic-sdk-go/vertex sends its own) reaches a
// first-party target as anthropic-version.
func TestVertexClaudeDoorStream(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()

	for i, body := range []string{
		`{"anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[{"role":"user","content":"one two three [[chunks=3]]"}]}`,
		`{"anthropic_version":"2023-01-01","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"one two three [[chunks=3]]"}]}`,
	} {
		resp, data := postDoor(t, srv.URL, vertexClaude+"claude:streamRawPredict", body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("body %d: status %d: %s", i, resp.StatusCode, data)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("body %d: content-type %q", i, ct)
		}
		if !strings.HasPrefix(string(data), "event: message_start\n") || !strings.Contains(string(data), "event: message_stop\n") {
			t.Errorf("body %d: not an Anthropic stream:\n%s", i, data)
		}
	}
	reqs := prov.Requests()
	if len(reqs) != 2 || !reqs[0].Stream || !reqs[1].Stream {
		t.Fatalf("provider requests %+v, want two streaming requests", reqs)
	}
	if !strings.HasPrefix(string(reqs[1].Body), `{"model":"provider-claude","stream":true,"max_tokens":5,"messages"`) {
		t.Errorf("provider body %s", reqs[1].Body)
	}
	if got := reqs[1].Header.Get("Anthropic-Version"); got != "2023-01-01" {
		t.Errorf("anthropic-version %q, want the body's", got)
	}
}

// TestVertexClaudeCountTokens: Vertex's count-tokens model is count_tokens,
// with the model in the body.
func TestVertexClaudeCountTokens(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()

	body := `{"anthropic_version":"vertex-2023-10-16","model":"claude-all","messages":[{"role":"user","content":"four words right here"}]}`
	resp, data := postDoor(t, srv.URL, vertexClaude+"count-tokens:rawPredict", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	if !strings.Contains(string(data), `"input_tokens"`) {
		t.Errorf("answer %s", data)
	}
	reqs := prov.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/messages/count_tokens" {
		t.Fatalf("provider requests %+v, want one count_tokens request", reqs)
	}
	want := `{"model":"provider-claude","messages":[{"role":"user","content":"four words right here"}]}`
	if diff := cmp.Diff(string(reqs[0].Body), want); diff != "" {
		t.Errorf("provider body (-got +want):\n%s", diff)
	}
}

// googleErrorDoc is what a test reads of Google's error shape.
type googleErrorDoc struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type      string `json:"@type"`
			RequestID string `json:"requestId"`
		} `json:"details"`
	} `json:"error"`
}

// TestVertexClaudeDoorRefusals: what the door cannot serve is refused in
// Google's error shape, with the node's request id, before anything is
// sent.
func TestVertexClaudeDoorRefusals(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	const ok = `{"anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[]}`
	tests := []struct {
		name, path, body string
		status           int
		googleStatus     string
	}{
		{"model in the body", vertexClaude + "claude:rawPredict", `{"anthropic_version":"vertex-2023-10-16","model":"claude","messages":[]}`, 400, "INVALID_ARGUMENT"},
		{"stream against the path", vertexClaude + "claude:rawPredict", `{"anthropic_version":"vertex-2023-10-16","stream":true,"messages":[]}`, 400, "INVALID_ARGUMENT"},
		{"stream not a boolean", vertexClaude + "claude:streamRawPredict", `{"anthropic_version":"vertex-2023-10-16","stream":"yes","messages":[]}`, 400, "INVALID_ARGUMENT"},
		{"no version", vertexClaude + "claude:rawPredict", `{"max_tokens":5,"messages":[]}`, 400, "INVALID_ARGUMENT"},
		{"Bedrock's version", vertexClaude + "claude:rawPredict", `{"anthropic_version":"bedrock-2023-05-31","messages":[]}`, 400, "INVALID_ARGUMENT"},
		{"version twice", vertexClaude + "claude:rawPredict", `{"anthropic_version":"vertex-2023-10-16","anthropic_version":"vertex-2023-10-16","messages":[]}`, 400, "INVALID_ARGUMENT"},
		{"not JSON", vertexClaude + "claude:rawPredict", `{`, 400, "INVALID_ARGUMENT"},
		{"unknown model", vertexClaude + "nope@20250101:rawPredict", ok, 404, "NOT_FOUND"},
		{"doubly encoded model", vertexClaude + "a%252Fb:rawPredict", ok, 400, "INVALID_ARGUMENT"},
		{"dot segment in the model", vertexClaude + "a/../claude:rawPredict", ok, 400, "INVALID_ARGUMENT"},
		{"project not an id", "/v1/projects/My_Project/locations/us-east5/publishers/anthropic/models/claude:rawPredict", ok, 400, "INVALID_ARGUMENT"},
		{"location not one", "/v1/projects/my-project/locations/US/publishers/anthropic/models/claude:rawPredict", ok, 400, "INVALID_ARGUMENT"},
		{"count-tokens without a version", vertexClaude + "count-tokens:rawPredict", `{"model":"claude-all","messages":[]}`, 400, "INVALID_ARGUMENT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := postDoor(t, srv.URL, tt.path, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, data)
			}
			var doc googleErrorDoc
			if err := json.Unmarshal(data, &doc); err != nil || doc.Error.Message == "" {
				t.Fatalf("body %s: want Google's error shape (%v)", data, err)
			}
			if doc.Error.Code != tt.status || doc.Error.Status != tt.googleStatus {
				t.Errorf("code %d status %q, want %d %q", doc.Error.Code, doc.Error.Status, tt.status, tt.googleStatus)
			}
			rid := resp.Header.Get("X-Request-Id")
			if len(doc.Error.Details) != 1 || rid == "" || doc.Error.Details[0].RequestID != rid {
				t.Errorf("details %+v, want a RequestInfo with the request id %q", doc.Error.Details, rid)
			}
		})
	}
	if n := prov.RequestCount(); n != 0 {
		t.Errorf("provider saw %d requests, want 0", n)
	}
}

// TestVertexGeminiDoors: genai's Vertex paths, project-scoped under v1
// and v1beta1 and express mode's, reach a Gemini API target as the Gemini
// API's own requests, body unchanged; a stream keeps alt=sse.
func TestVertexGeminiDoors(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()

	const body = `{"contents":[{"role":"user","parts":[{"text":"hello there"}]}]}`
	tests := []struct {
		name, path, providerPath, answer string
	}{
		{"v1 generateContent", "/v1/projects/my-project/locations/us-central1/publishers/google/models/gemini:generateContent", "/v1beta/models/provider-gemini:generateContent", `"candidates"`},
		{"v1beta1 generateContent", "/v1beta1/projects/123456789/locations/global/publishers/google/models/gemini:generateContent", "/v1beta/models/provider-gemini:generateContent", `"candidates"`},
		{"express generateContent", "/v1beta1/publishers/google/models/gemini:generateContent", "/v1beta/models/provider-gemini:generateContent", `"candidates"`},
		{"stream", "/v1beta1/publishers/google/models/gemini:streamGenerateContent?alt=sse", "/v1beta/models/provider-gemini:streamGenerateContent", "data: {"},
		{"countTokens", "/v1/projects/example.com:my-project/locations/us-central1/publishers/google/models/gemini:countTokens", "/v1beta/models/provider-gemini:countTokens", `"totalTokens"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prov.Reset()
			resp, data := postDoor(t, srv.URL, tt.path, body, "X-Goog-Api-Key", "k")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, data)
			}
			if !strings.Contains(string(data), tt.answer) {
				t.Errorf("answer %s, want %s in it", data, tt.answer)
			}
			reqs := prov.Requests()
			if len(reqs) != 1 || reqs[0].Path != tt.providerPath || string(reqs[0].Body) != body {
				t.Fatalf("provider requests %+v, want one to %s with the body unchanged", reqs, tt.providerPath)
			}
		})
	}
}

// TestVertexGeminiDoorRefusals: refusals on genai's Vertex paths are in
// Google's error shape, as the Gemini API's are.
func TestVertexGeminiDoorRefusals(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	const body = `{"contents":[]}`
	tests := []struct {
		name, path string
		status     int
	}{
		{"unknown model", "/v1beta1/publishers/google/models/nope:generateContent", 404},
		{"bad location", "/v1/projects/my-project/locations/-x/publishers/google/models/gemini:generateContent", 400},
		{"doubly encoded model", "/v1/projects/my-project/locations/us/publishers/google/models/a%2540b:countTokens", 400},
		{"empty model", "/v1beta1/publishers/google/models/:generateContent", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := postDoor(t, srv.URL, tt.path, body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, data)
			}
			var doc googleErrorDoc
			if err := json.Unmarshal(data, &doc); err != nil || doc.Error.Code != tt.status || doc.Error.Status == "" {
				t.Errorf("body %s: want Google's error shape (%v)", data, err)
			}
		})
	}
	if n := prov.RequestCount(); n != 0 {
		t.Errorf("provider saw %d requests, want 0", n)
	}
}

// TestVertexPathsNotDoors: a Vertex path of another publisher or method
// is no door: 404.
func TestVertexPathsNotDoors(t *testing.T) {
	h, _ := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, path := range []string{
		"/v1/projects/my-project/locations/us-east5/publishers/meta/models/claude:rawPredict",
		"/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude:predict",
		"/v1/projects/my-project/locations/us-east5/publishers/google/models/gemini:rawPredict",
		"/v2/projects/my-project/locations/us-east5/publishers/google/models/gemini:generateContent",
	} {
		resp, data := postDoor(t, srv.URL, path, `{}`)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404: %s", path, resp.StatusCode, data)
		}
	}
}
