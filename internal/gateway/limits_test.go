package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// limitedAuth authenticates every request as one key bound to a limiter.
type limitedAuth struct{ p *authz.Principal }

func (a limitedAuth) Authenticate(http.Header, []string, time.Time) (*authz.Principal, error) {
	return a.p, nil
}

// limitObserver counts limit refusals by scope and kind.
type limitObserver struct {
	nopObserver
	mu      sync.Mutex
	refused map[string]int
}

func (o *limitObserver) ObserveLimitRefusal(scope, kind string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused[scope+"/"+kind]++
}

// limitedHandler is newHandler for one key with the given own and tenant
// limits, on a fake clock.
func limitedHandler(t *testing.T, key, tenant authsnap.Limits) (*Handler, *fakeprovider.Provider, *clock.Fake, *limitObserver, *[]Refusal) {
	t.Helper()
	fc := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	l := limits.New(limits.Options{Clock: fc.Now})
	b := l.Bind()
	p := &authz.Principal{KeyID: "k_1", TenantID: "t_1", Limits: key, TenantLimits: tenant}
	p.Limit = b.Subject(p.KeyID, p.TenantID, key, tenant)
	b.Done()
	obs := &limitObserver{refused: map[string]int{}}
	var refusals []Refusal
	h, prov := newHandler(t, Options{Auth: limitedAuth{p}, Now: fc.Now, Observer: obs, Refused: func(r Refusal) { refusals = append(refusals, r) }})
	return h, prov, fc, obs, &refusals
}

// answer is what a test reads of a response.
type answer struct {
	Status  int
	Headers map[string]string // the headers asked for; "" when absent
	Body    string            // a JSON document, compacted; "" to skip
}

func serve(h http.Handler, method, path, body string, headers []string) answer {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Anthropic-Version", "2023-06-01")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	a := answer{Status: w.Code, Headers: map[string]string{}}
	for _, k := range headers {
		a.Headers[k] = w.Header().Get(k)
	}
	if w.Code != 200 {
		var v any
		if json.Unmarshal(w.Body.Bytes(), &v) == nil {
			b, _ := json.Marshal(v)
			a.Body = string(b)
		}
	}
	return a
}

var openaiLimitHeaders = []string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests",
	"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", "Retry-After", "X-Should-Retry"}

var anthropicLimitHeaders = []string{"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset",
	"Anthropic-Ratelimit-Tokens-Limit", "X-Ratelimit-Limit-Requests", "Retry-After", "X-Should-Retry"}

const (
	chatBody     = `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`
	messagesBody = `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
)

// TestLimitRefusalOpenAI: answers of a limited key carry its own limits in
// place of the provider's; the request over them is refused before
// anything is sent, with a 429 in OpenAI's shape, Retry-After when a
// request fits, and x-should-retry: true; counted and noted with the key.
func TestLimitRefusalOpenAI(t *testing.T) {
	h, prov, _, obs, refusals := limitedHandler(t, authsnap.Limits{RequestsPerMinute: 2}, authsnap.Limits{})
	got := []answer{
		serve(h, "POST", "/v1/chat/completions", chatBody, openaiLimitHeaders),
		serve(h, "POST", "/v1/chat/completions", chatBody, openaiLimitHeaders),
		serve(h, "POST", "/v1/chat/completions", chatBody, openaiLimitHeaders),
	}
	lim := func(rem, reset string) map[string]string {
		return map[string]string{"X-Ratelimit-Limit-Requests": "2", "X-Ratelimit-Remaining-Requests": rem, "X-Ratelimit-Reset-Requests": reset,
			// The provider's tokens headers describe its account, shared by
			// every key: dropped.
			"X-Ratelimit-Limit-Tokens": "", "X-Ratelimit-Remaining-Tokens": "", "X-Ratelimit-Reset-Tokens": "", "Retry-After": "", "X-Should-Retry": ""}
	}
	refused := lim("0", "1m0s")
	refused["Retry-After"], refused["X-Should-Retry"] = "30", "true"
	want := []answer{
		{Status: 200, Headers: lim("1", "30s")},
		{Status: 200, Headers: lim("0", "1m0s")},
		{Status: 429, Headers: refused,
			Body: `{"error":{"code":"key_rate_limited","message":"this API key is over its limit of requests per minute","param":null,"type":"rate_limit_exceeded"}}`},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("answers (-got +want):\n%s", diff)
	}
	if n := prov.RequestCount(); n != 2 {
		t.Errorf("the provider got %d requests, want 2: the refused one must not leave the node", n)
	}
	if diff := cmp.Diff(obs.refused, map[string]int{"key/requests": 1}); diff != "" {
		t.Errorf("refusal metric (-got +want):\n%s", diff)
	}
	wantRefusals := []Refusal{{RequestID: (*refusals)[0].RequestID, Path: "/v1/chat/completions", Model: "gpt", Status: 429,
		Reason: "key_rate_limited", KeyID: "k_1", TenantID: "t_1", Limit: "requests"}}
	if diff := cmp.Diff(*refusals, wantRefusals); diff != "" {
		t.Errorf("refusals noted (-got +want):\n%s", diff)
	}
}

// TestLimitRefusalShapes: the tenant's limit refuses in Anthropic's and
// Gemini's shapes, with their headers.
func TestLimitRefusalShapes(t *testing.T) {
	h, _, fc, obs, _ := limitedHandler(t, authsnap.Limits{}, authsnap.Limits{RequestsPerMinute: 1})
	reset := fc.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	first := serve(h, "POST", "/v1/messages", messagesBody, anthropicLimitHeaders)
	second := serve(h, "POST", "/v1/messages", messagesBody, anthropicLimitHeaders)
	gem := serve(h, "POST", "/v1beta/models/gemini:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, []string{"X-Ratelimit-Remaining-Requests", "Retry-After", "X-Should-Retry"})
	gem.Body = strings.ReplaceAll(gem.Body, gemRequestID(gem.Body), "RID")
	second.Body = strings.ReplaceAll(second.Body, anthropicRequestID(second.Body), "RID")
	anth := func(retry, should string) map[string]string {
		return map[string]string{"Anthropic-Ratelimit-Requests-Limit": "1", "Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": reset,
			"Anthropic-Ratelimit-Tokens-Limit": "", "X-Ratelimit-Limit-Requests": "", "Retry-After": retry, "X-Should-Retry": should}
	}
	want := []answer{
		{Status: 200, Headers: anth("", "")},
		{Status: 429, Headers: anth("60", "true"),
			Body: `{"error":{"message":"this API key's tenant is over its limit of requests per minute","type":"rate_limit_error"},"request_id":"RID","type":"error"}`},
		{Status: 429, Headers: map[string]string{"X-Ratelimit-Remaining-Requests": "0", "Retry-After": "60", "X-Should-Retry": "true"},
			Body: `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"scootgate","reason":"TENANT_RATE_LIMITED"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"60s"},{"@type":"type.googleapis.com/google.rpc.RequestInfo","requestId":"RID"}],"message":"this API key's tenant is over its limit of requests per minute","status":"RESOURCE_EXHAUSTED"}}`},
	}
	if diff := cmp.Diff([]answer{first, second, gem}, want); diff != "" {
		t.Errorf("answers (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(obs.refused, map[string]int{"tenant/requests": 2}); diff != "" {
		t.Errorf("refusal metric (-got +want):\n%s", diff)
	}
}

func anthropicRequestID(body string) string {
	var v struct {
		RequestID string `json:"request_id"`
	}
	_ = json.Unmarshal([]byte(body), &v)
	return v.RequestID
}

func gemRequestID(body string) string {
	i := strings.Index(body, `"requestId":"`)
	if i < 0 {
		return "\x00"
	}
	rest := body[i+len(`"requestId":"`):]
	return rest[:strings.IndexByte(rest, '"')]
}

// TestLimitTokensDebited: the tokens the provider reports (4 for this
// prompt) are debited when
// the attempt ends; the next request waits until the balance is positive
// again.
func TestLimitTokensDebited(t *testing.T) {
	h, prov, fc, _, _ := limitedHandler(t, authsnap.Limits{TokensPerMinute: 3}, authsnap.Limits{})
	first := serve(h, "POST", "/v1/chat/completions", chatBody, openaiLimitHeaders)
	second := serve(h, "POST", "/v1/chat/completions", chatBody, openaiLimitHeaders)
	if first.Status != 200 || first.Headers["X-Ratelimit-Remaining-Tokens"] != "3" || first.Headers["X-Ratelimit-Limit-Requests"] != "" {
		t.Fatalf("first answer: %+v", first)
	}
	if second.Status != 429 || !strings.Contains(second.Body, "tokens per minute") {
		t.Fatalf("second answer: %+v, want a tokens refusal", second)
	}
	if n := prov.RequestCount(); n != 1 {
		t.Fatalf("the provider got %d requests, want 1", n)
	}
	// Retry-After is when the balance is positive again: then a request fits.
	wait, _ := time.ParseDuration(second.Headers["Retry-After"] + "s")
	fc.Advance(wait)
	if a := serve(h, "POST", "/v1/chat/completions", chatBody, nil); a.Status != 200 {
		t.Errorf("after Retry-After: status %d, want 200", a.Status)
	}
}

// TestLimitConcurrencyReleased: a concurrency slot comes back however the
// request ends: an answer, a provider error, a connection that fails after
// sending, a 503 with no target.
func TestLimitConcurrencyReleased(t *testing.T) {
	fail := map[string]*fakeprovider.Behaviour{"status": {Status: 500}, "reset": {Reset: true}}
	var mu sync.Mutex
	mode := ""
	fc := clock.NewFake(time.Time{})
	l := limits.New(limits.Options{Clock: fc.Now})
	b := l.Bind()
	p := &authz.Principal{KeyID: "k_1", TenantID: "t_1", Limits: authsnap.Limits{MaxConcurrent: 1}}
	p.Limit = b.Subject(p.KeyID, p.TenantID, p.Limits, authsnap.Limits{})
	b.Done()
	h, _ := newHandlerWith(t, Options{Auth: limitedAuth{p}, Now: fc.Now}, fakeprovider.Options{Script: func(fakeprovider.Request) *fakeprovider.Behaviour {
		mu.Lock()
		defer mu.Unlock()
		return fail[mode]
	}})
	for _, m := range []string{"", "status", "reset", "", ""} {
		mu.Lock()
		mode = m
		mu.Unlock()
		if a := serve(h, "POST", "/v1/chat/completions", chatBody, nil); a.Status == 429 {
			t.Fatalf("mode %q: refused: the previous request kept its slot", m)
		}
	}
	// A request refused as malformed never takes a slot either.
	serve(h, "POST", "/v1/chat/completions", `{"model":`, nil)
	if a := serve(h, "POST", "/v1/chat/completions", chatBody, nil); a.Status != 200 {
		t.Errorf("status %d after a malformed request, want 200", a.Status)
	}
}

// TestUnlimitedKeyKeepsProviderHeaders: a key without limits sees the
// provider's rate-limit headers as before.
func TestUnlimitedKeyKeepsProviderHeaders(t *testing.T) {
	h, _ := newHandler(t, Options{Auth: allowAll{}})
	a := serve(h, "POST", "/v1/chat/completions", chatBody, []string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Limit-Tokens"})
	if diff := cmp.Diff(a.Headers, map[string]string{"X-Ratelimit-Limit-Requests": "10000", "X-Ratelimit-Limit-Tokens": "200000"}); diff != "" {
		t.Errorf("headers (-got +want):\n%s", diff)
	}
}

// TestAttemptTokens: what an attempt is debited.
func TestAttemptTokens(t *testing.T) {
	tests := []struct {
		name string
		a    *attempt
		want int64
	}{
		{"reported usage", &attempt{hasUsage: true, state: provider.ResponseReceived, reqBytes: 4000, usage: usageevent.Usage{InputTokens: 30, OutputTokens: 12}}, 42},
		{"reported zero", &attempt{hasUsage: true, state: provider.ResponseReceived, reqBytes: 4000}, 0},
		{"answered without usage: estimated", &attempt{state: provider.ResponseReceived, reqBytes: 4000}, 1000},
		{"possibly sent: estimated, never zero", &attempt{state: provider.PossiblySent, reqBytes: 0}, 1},
		{"not sent: nothing", &attempt{state: provider.NotSent, reqBytes: 4000}, 0},
	}
	for _, tt := range tests {
		if got := tt.a.tokens(); got != tt.want {
			t.Errorf("%s: tokens() = %d, want %d", tt.name, got, tt.want)
		}
	}
}

var _ Observer = (*limitObserver)(nil)
