package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/provider/catalog"
)

// TestEndpointRefusals: a request whose model has no backend serving its
// endpoint, or no backend of its protocol, is refused in the endpoint's
// shape before anything leaves the node (the provider's counter stays 0);
// the stateful Responses endpoints are a 404 that says why.
func TestEndpointRefusals(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string // OpenAI code, or Anthropic error type
	}{
		{"responses on a chat-only backend", "POST", "/v1/responses", `{"model":"gpt","input":"hi"}`, 400, "endpoint_not_served"},
		{"embeddings on a chat-only backend", "POST", "/v1/embeddings", `{"model":"gpt","input":"hi"}`, 400, "endpoint_not_served"},
		{"count_tokens on a messages-only backend", "POST", "/v1/messages/count_tokens", `{"model":"claude","messages":[]}`, 400, "invalid_request_error"},
		{"embeddings of an anthropic model", "POST", "/v1/embeddings", `{"model":"claude","input":"hi"}`, 400, "protocol_mismatch"},
		{"ambiguous stream on responses", "POST", "/v1/responses", `{"model":"gpt-all","stream":true,"Stream":false}`, 400, "ambiguous_member"},
		{"ambiguous text.format.type", "POST", "/v1/responses", `{"model":"gpt-all","text":{"format":{"type":"json_schema","Type":"text"}}}`, 400, "ambiguous_member"},
		{"ambiguous count_tokens tools", "POST", "/v1/messages/count_tokens", `{"model":"claude-all","tools":[{}],"TOOLS":[]}`, 400, "invalid_request_error"},
		{"embeddings with a duplicate model", "POST", "/v1/embeddings", `{"model":"gpt-all","model":"other"}`, 400, "invalid_model"},
		{"responses needing tools no target offers", "POST", "/v1/responses", `{"model":"gpt-all","tools":[{"type":"function"}],"input":"x"}`, 400, "capability_not_offered"},
		{"responses needing json_schema no target offers", "POST", "/v1/responses", `{"model":"gpt-all","text":{"format":{"type":"json_schema"}},"input":"x"}`, 400, "capability_not_offered"},
		{"count_tokens with tools no target offers", "POST", "/v1/messages/count_tokens", `{"model":"claude-all","tools":[{}],"messages":[]}`, 400, "invalid_request_error"},
		{"GET a stored response", "GET", "/v1/responses/resp_123", "", 404, "stateful_endpoint_not_supported"},
		{"cancel a stored response", "POST", "/v1/responses/resp_123/cancel", "", 404, "stateful_endpoint_not_supported"},
		{"conversations", "POST", "/v1/conversations", "{}", 404, "stateful_endpoint_not_supported"},
		{"compaction on a chat-only backend", "POST", "/v1/responses/compact", `{"model":"gpt","input":"hi"}`, 400, "endpoint_not_served"},
		{"input_tokens on a chat-only backend", "POST", "/v1/responses/input_tokens", `{"model":"gpt","input":"hi"}`, 400, "endpoint_not_served"},
		{"input_tokens without a model", "POST", "/v1/responses/input_tokens", `{"input":"hi"}`, 400, "missing_model"},
		{"an unknown path below responses is stateful", "POST", "/v1/responses/compact/x", "{}", 404, "stateful_endpoint_not_supported"},
		{"responses is POST only", "GET", "/v1/responses", "", 405, "method_not_allowed"},
		// A path rule in a load balancer in front sees the path as sent:
		// the node serves an endpoint only at its path written plainly.
		{"percent-encoded slash", "POST", "/v1/chat%2fcompletions", `{"model":"gpt-all","messages":[]}`, 400, "non_canonical_path"},
		{"percent-encoded letter", "POST", "/v1/chat/%63ompletions", `{"model":"gpt-all","messages":[]}`, 400, "non_canonical_path"},
		{"percent-encoded upper-case hex", "POST", "/v1/embedding%73", `{"model":"gpt-all","input":"x"}`, 400, "non_canonical_path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			anthropicShape := strings.HasPrefix(tt.path, "/v1/messages")
			if anthropicShape {
				req.Header.Set("Anthropic-Version", "2023-06-01")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, data)
			}
			var doc struct {
				Type  string `json:"type"`
				Error struct {
					Type    string  `json:"type"`
					Code    *string `json:"code"`
					Message string  `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatalf("not JSON: %s", data)
			}
			got := doc.Error.Type
			if !anthropicShape && doc.Error.Code != nil {
				got = *doc.Error.Code
			}
			if got != tt.code {
				t.Fatalf("code %q, want %q: %s", got, tt.code, data)
			}
			if anthropicShape && (doc.Type != "error" || resp.Header.Get("Request-Id") != resp.Header.Get("X-Request-Id")) {
				t.Fatalf("not the Anthropic shape with request-id: %s %v", data, resp.Header)
			}
			if tt.code == "stateful_endpoint_not_supported" && !strings.Contains(doc.Error.Message, "provider account that stored them") {
				t.Fatalf("the 404 does not say why: %s", doc.Error.Message)
			}
		})
	}
	if n := prov.RequestCount(); n != 0 {
		t.Fatalf("the provider saw %d requests; every refusal must happen before egress", n)
	}
}

// TestModelByID: GET /v1/models/{id} answers in the shape the list would,
// and 404 in that shape for a model the list would not hold.
func TestModelByID(t *testing.T) {
	h, _ := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tt := range []struct {
		id        string
		anthropic bool
		status    int
		want      string
	}{
		{"gpt", false, 200, `"object":"model"`},
		{"gpt", true, 404, `"not_found_error"`},
		{"claude", true, 200, `"type":"model"`},
		{"claude", false, 404, `"model_not_found"`},
		{"nope", false, 404, `"model_not_found"`},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/models/"+tt.id, nil)
		if tt.anthropic {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(data), tt.want) {
			t.Errorf("GET /v1/models/%s (anthropic %v) = %d %s; want %d with %s", tt.id, tt.anthropic, resp.StatusCode, data, tt.status, tt.want)
		}
	}
}

// TestAnswersNeverQuoteTheKey: a client that puts its own key in the
// model (or the model id of GET /v1/models/{id}) does not get it back in
// the error body: a request is refused as invalid_model
// (TestModelHoldingTheKey), a lookup is a 404.
func TestAnswersNeverQuoteTheKey(t *testing.T) {
	h, _ := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/chat/completions", `{"model":"x-sk-client-secret-y","messages":[]}`, 400},
		{"GET", "/v1/models/x-sk-client-secret", "", 404},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer sk-client-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || strings.Contains(string(data), "sk-client-secret") {
			t.Errorf("%s %s: %d %s; want a %d without the key", tc.method, tc.path, resp.StatusCode, data, tc.status)
		}
	}
}

// TestHostileRequests: the request bodies and paths of the last
// hostile-input review (testdata/hostile/requests.json), each refused
// before anything is sent, with the code that says why.
func TestHostileRequests(t *testing.T) {
	data, err := os.ReadFile("../../testdata/hostile/requests.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Finding, Method, Path, Body, Code string
		Status                            int
		Headers                           map[string]string // e.g. Content-Type, Authorization
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, c := range cases {
		req, _ := http.NewRequest(c.Method, srv.URL+c.Path, strings.NewReader(c.Body))
		for k, v := range c.Headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.Status || !strings.Contains(string(body), `"`+c.Code+`"`) {
			t.Errorf("%s: %d %s, want %d with %s", c.Finding, resp.StatusCode, body, c.Status, c.Code)
		}
	}
	if n := prov.RequestCount(); n != 0 {
		t.Errorf("the provider saw %d requests; every refusal must happen before egress", n)
	}
}

// TestEndpointTable: the handler's endpoint table finds every endpoint of
// every API at the path the catalog gives it (or, for an endpoint only
// doors reach, at its door's), with its own API, and the model a path
// names.
func TestEndpointTable(t *testing.T) {
	e := newEndpoints()
	n := 0
	for _, a := range catalog.APIs() {
		for _, s := range a.Endpoints {
			if s.Path == "" && s.Match == nil {
				// Reached only by its doors, whose paths are the
				// platform's: the upstream path with the model
				// percent-encoded as the platform's SDKs encode it.
				path := strings.Replace(s.UpstreamPath, "{model}", "m%3A1", 1)
				ep, m, _, berr := e.lookupDoor(path)
				if ep.spec != s || ep.api != a || m != "m:1" || berr != nil {
					t.Errorf("%s: lookupDoor(%s) = %v, %v, %q, %v", s.Endpoint, path, ep.spec, ep.api, m, berr)
				}
				n++
				continue
			}
			path, model := s.Path, ""
			if path == "" {
				path, model = "/v1beta/models/m-1:"+strings.TrimPrefix(s.UpstreamPath, "/models/{model}:"), "m-1"
			}
			ep, m := e.lookup(path)
			if ep.spec != s || ep.api != a || m != model {
				t.Errorf("%s: lookup(%s) = %v, %v, %q", s.Endpoint, path, ep.spec, ep.api, m)
			}
			if want, _ := catalog.ByPath(path); want != s {
				t.Errorf("%s: the catalog finds %v at %s", s.Endpoint, want, path)
			}
			for _, p := range s.AlsoPaths {
				if ep, _ := e.lookup(p); ep.spec != s {
					t.Errorf("%s: not found at its other path %s", s.Endpoint, p)
				}
			}
			n++
		}
	}
	if ep, _ := e.lookup("/v1/nothing"); ep.spec != nil {
		t.Errorf("an unknown path found %v", ep.spec.Endpoint)
	}
	if n < 10 {
		t.Errorf("only %d endpoints", n)
	}
}
