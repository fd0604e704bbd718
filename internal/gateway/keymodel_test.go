package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// newPatternHandler is a Handler whose models are patterns only, one per
// protocol, each sending what its star matched as the provider model:
// "pub-*" (OpenAI), "cpub-*" (Anthropic), "gpub-*" (Gemini).
func newPatternHandler(tb testing.TB, o Options) (*Handler, *fakeprovider.Provider) {
	tb.Helper()
	prov := fakeprovider.New(fakeprovider.Options{})
	base, err := prov.Start("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { prov.Close() })
	doc := `node_id = "n"
[[egress.proxies]]
name = "p"
url = "socks5://127.0.0.1:1080"
[credentials.c]
env = "K"
hosts = ["127.0.0.1"]
[backends.oa]
protocol = "openai"
base_url = "` + base + `"
credential = "c"
max_inflight_per_node = 100
[backends.an]
protocol = "anthropic"
base_url = "` + base + `"
credential = "c"
max_inflight_per_node = 100
[backends.gm]
protocol = "gemini"
base_url = "` + strings.TrimSuffix(base, "/v1") + `/v1beta"
credential = "c"
max_inflight_per_node = 100
`
	for _, m := range [][2]string{{"pub-*", "oa"}, {"cpub-*", "an"}, {"gpub-*", "gm"}} {
		doc += fmt.Sprintf("[models.%q]\n[[models.%[1]q.targets]]\nbackend = %q\nmodel = \"*\"\nweight = 1\n", m[0], m[1])
	}
	doc += "[authz]\nsource = \"file:/dev/null\"\n"
	cfg, err := config.Parse([]byte(doc), func(string) (string, bool) { return "provider-key", true }, os.ReadFile)
	if err != nil {
		tb.Fatal(err)
	}
	tab, err := routes.Compile(cfg.Backends, cfg.Models, cfg.Credentials, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		tb.Fatal(err)
	}
	var holder routes.Holder
	holder.Store(tab)
	o.Auth, o.Routes, o.Picker = allowAll{}, &holder, &balance.WeightedRandom{}
	o.Transport = &http.Transport{}
	o.BodyLimit = 1 << 20
	o.MaxAttempts = 1
	o.FirstByte, o.StreamIdle, o.NonStreamTotal = 5*time.Second, 5*time.Second, 10*time.Second
	return New(o), prov
}

// TestModelHoldingTheKey: a model name that holds the caller's key is
// refused before anything is sent, on every protocol and wherever the key
// came from, even when a pattern would serve it: the key reaches neither
// the provider nor the request log, the refusal log or a usage event. A
// pattern name without the key is served as before.
func TestModelHoldingTheKey(t *testing.T) {
	var logs syncBuffer
	ev := &events{}
	var (
		mu       sync.Mutex
		refusals []Refusal
	)
	h, prov := newPatternHandler(t, Options{
		Logger:    slog.New(logline.NewHandler(&logs, nil)),
		Recorders: []Recorder{ev},
		Refused: func(r Refusal) {
			mu.Lock()
			defer mu.Unlock()
			refusals = append(refusals, r)
		},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	const key = "sk-client-secret-4f2a"
	send := func(path, model, header, value string) (int, string) {
		t.Helper()
		body := `{"model":"` + model + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
		if strings.HasPrefix(path, "/v1beta/") {
			body = `{"contents":[{"parts":[{"text":"hi"}]}]}`
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Anthropic-Version", "2023-06-01")
		if header != "" {
			req.Header.Set(header, value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(data)
	}
	for _, tc := range []struct {
		name, path, model, header, value string
	}{
		{"openai bearer", "/v1/chat/completions", "pub-" + key, "Authorization", "Bearer " + key},
		{"anthropic x-api-key", "/v1/messages", "cpub-" + key + "-x", "X-Api-Key", key},
		{"gemini header", "/v1beta/models/gpub-" + key + ":generateContent", "", "X-Goog-Api-Key", key},
		{"gemini query key", "/v1beta/models/gpub-" + key + ":generateContent?key=" + key, "", "", ""},
	} {
		status, body := send(tc.path, tc.model, tc.header, tc.value)
		if status != http.StatusBadRequest || !strings.Contains(body, "holds this request's API key") || strings.Contains(body, key) {
			t.Errorf("%s: %d %s; want a 400 without the key", tc.name, status, body)
		}
	}
	if n := prov.RequestCount(); n != 0 {
		t.Errorf("the provider saw %d requests holding the key", n)
	}
	// A pattern name without the key is served.
	if status, body := send("/v1/chat/completions", "pub-gpt", "Authorization", "Bearer "+key); status != http.StatusOK {
		t.Fatalf("pub-gpt: %d %s", status, body)
	}
	for _, r := range prov.Requests() {
		if strings.Contains(fmt.Sprintf("%+v", r), key) {
			t.Errorf("the provider got the key: %+v", r)
		}
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("the request log holds the key:\n%s", logs.String())
	}
	for _, e := range ev.all() {
		if strings.Contains(fmt.Sprintf("%+v", *e), key) {
			t.Errorf("a usage event holds the key: %+v", *e)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refusals) != 4 {
		t.Errorf("%d refusals logged, want 4", len(refusals))
	}
	for _, r := range refusals {
		if strings.Contains(fmt.Sprintf("%+v", r), key) || r.Reason != "invalid_model" {
			t.Errorf("refusal %+v: want invalid_model without the key", r)
		}
	}
}
