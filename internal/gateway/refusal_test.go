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
		{"rid", "/v1/chat/completions", "no-such", 404, "model_not_found"},
		{"rid", "/v1/chat/completions", "", 400, "invalid_json"},
		{"rid", "/v1/chat/completions", "", 413, "request_too_large"},
		{"rid", "/v1/chat/completions", "", 405, "method_not_allowed"},
		{"rid", "/v1/messages", "gpt", 400, "protocol_mismatch"},
		{"rid", "/v1/models/no-such", "no-such", 404, "model_not_found"},
		{"rid", "/v2/nothing", "", 404, "not_found"},
		{"rid", "[redacted]", "", 404, "not_found"},
		{"rid", "/v1/chat/completions", "[redacted]", 404, "model_not_found"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("refusals (-got +want):\n%s", diff)
	}
}
