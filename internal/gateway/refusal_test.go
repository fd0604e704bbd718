package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRefused: every request the node refuses by itself with a 4xx is
// reported once, with the path, the model asked for and the error code;
// a request the provider answered is not, and a path or model holding
// the request's key is redacted.
func TestRefused(t *testing.T) {
	var (
		mu  sync.Mutex
		got []Refusal
	)
	h, _ := newHandler(t, Options{BodyLimit: 64, Refused: func(r Refusal) {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasPrefix(r.RequestID, "sg-") {
			t.Errorf("request id %q", r.RequestID)
		}
		r.RequestID = "rid" // random
		got = append(got, r)
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(method, path, key, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if rid := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(rid, "sg-") {
			t.Fatalf("no request id: %q", rid)
		}
	}
	do("POST", "/v1/chat/completions", "", `{"model":"gpt","messages":[]}`)     // served: not a refusal
	do("POST", "/v1/chat/completions", "", `{"model":"no-such","messages":[]}`) // unknown model
	do("POST", "/v1/chat/completions", "", `{"model":`)                         // bad JSON
	do("POST", "/v1/chat/completions", "", `{"model":"gpt","messages":[`+strings.Repeat(" ", 64)+`]}`)
	do("GET", "/v1/chat/completions", "", "")
	do("POST", "/v1/messages", "", `{"model":"gpt","max_tokens":1,"messages":[]}`) // OpenAI-only model
	do("GET", "/v1/models/no-such", "", "")
	do("GET", "/v2/nothing", "", "")
	do("GET", "/v1/sk-canary-in-path/x", "sk-canary-in-path", "")
	do("POST", "/v1/chat/completions", "sk-canary-model", `{"model":"sk-canary-model","messages":[]}`)

	want := []Refusal{
		{RequestID: "rid", Path: "/v1/chat/completions", Model: "no-such", Status: 404, Reason: "model_not_found"},
		{RequestID: "rid", Path: "/v1/chat/completions", Model: "", Status: 400, Reason: "invalid_json"},
		{RequestID: "rid", Path: "/v1/chat/completions", Model: "", Status: 413, Reason: "request_too_large"},
		{RequestID: "rid", Path: "/v1/chat/completions", Model: "", Status: 405, Reason: "method_not_allowed"},
		{RequestID: "rid", Path: "/v1/messages", Model: "gpt", Status: 400, Reason: "protocol_mismatch"},
		{RequestID: "rid", Path: "/v1/models/no-such", Model: "no-such", Status: 404, Reason: "model_not_found"},
		{RequestID: "rid", Path: "/v2/nothing", Model: "", Status: 404, Reason: "not_found"},
		{RequestID: "rid", Path: "[redacted]", Model: "", Status: 404, Reason: "not_found"},
		{RequestID: "rid", Path: "/v1/chat/completions", Model: "[redacted]", Status: 400, Reason: "invalid_model"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("refusals (-got +want):\n%s", diff)
	}
}
