package gateway

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// fallbackRoutes are the models of the fallback tests (docs/routing.md
// "Fallbacks"), all on the fake provider at BASE but "dead", whose
// backend is a closed port (DEAD). Each model's provider model is
// "provider-" and its name, so the provider's log says which served.
const fallbackRoutes = `
[backends.oa-a]
protocol = "openai"
base_url = "BASE"
credential = "c"
max_inflight_per_node = 1
[backends.oa-b]
protocol = "openai"
base_url = "BASE"
credential = "c"
max_inflight_per_node = 100
endpoints = ["chat_completions", "responses"]
[backends.oa-c]
protocol = "openai"
base_url = "BASE"
credential = "c"
max_inflight_per_node = 100
[backends.oa-dead]
protocol = "openai"
base_url = "DEAD"
credential = "c"
max_inflight_per_node = 100
[backends.an]
protocol = "anthropic"
base_url = "BASE"
credential = "c"
max_inflight_per_node = 100
[backends.gm]
protocol = "gemini"
base_url = "GEMINI"
credential = "c"
max_inflight_per_node = 100

[models.a]
fallbacks = ["b"]
[[models.a.targets]]
backend = "oa-a"
model = "provider-a"
weight = 1
stream = true
[models.b]
[[models.b.targets]]
backend = "oa-b"
model = "provider-b"
weight = 1
stream = true
tools = true
context_window = 131072
max_output_tokens = 16384
[models.c]
[[models.c.targets]]
backend = "oa-c"
model = "provider-c"
weight = 1
[models.keyed]
fallbacks = ["b", "c"]
[[models.keyed.targets]]
backend = "oa-a"
model = "provider-keyed"
weight = 1
[models.dead]
fallbacks = ["b"]
[[models.dead.targets]]
backend = "oa-dead"
model = "provider-dead"
weight = 1
[models.small]
fallbacks = ["b"]
[[models.small.targets]]
backend = "oa-c"
model = "provider-small"
weight = 1
context_window = 100
[models.short]
fallbacks = ["b"]
[[models.short.targets]]
backend = "oa-c"
model = "provider-short"
weight = 1
max_output_tokens = 100
[models.tiny]
fallbacks = ["tiny2"]
[[models.tiny.targets]]
backend = "oa-c"
model = "provider-tiny"
weight = 1
context_window = 40
[models.tiny2]
[[models.tiny2.targets]]
backend = "oa-b"
model = "provider-tiny2"
weight = 1
context_window = 60
[models."p-*"]
fallbacks = ["b"]
[[models."p-*".targets]]
backend = "oa-a"
model = "p-*"
weight = 1
[models.claude-small]
fallbacks = ["claude-big"]
[[models.claude-small.targets]]
backend = "an"
model = "provider-claude-small"
weight = 1
context_window = 50
[models.claude-big]
[[models.claude-big.targets]]
backend = "an"
model = "provider-claude-big"
weight = 1
context_window = 2000
max_output_tokens = 1000
[models.gem-small]
fallbacks = ["gem-big"]
[[models.gem-small.targets]]
backend = "gm"
model = "provider-gem-small"
weight = 1
max_output_tokens = 100
[models.gem-big]
[[models.gem-big.targets]]
backend = "gm"
model = "provider-gem-big"
weight = 1
max_output_tokens = 1000
`

// fallbackObserver records the fallbacks counted, as "from>to:reason".
type fallbackObserver struct {
	nopObserver
	mu  sync.Mutex
	got []string
}

func (o *fallbackObserver) ObserveFallback(from, to, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, from+">"+to+":"+reason)
}

// fallbackEvents keeps every usage event.
type fallbackEvents struct {
	mu  sync.Mutex
	evs []*usageevent.Event
}

func (l *fallbackEvents) Record(ev *usageevent.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
}

// served is what one event says of where its attempt went.
type served struct {
	Public, Served, Provider, State string
	Status                          int
}

func (l *fallbackEvents) served() []served {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []served
	for _, e := range l.evs {
		out = append(out, served{e.PublicModel, e.ServedModel, e.ProviderModel, e.SendState, e.HTTPStatus})
	}
	return out
}

// fallbackNode is a handler over fallbackRoutes in front of a fake
// provider, with its observer and usage events.
type fallbackNode struct {
	h      *Handler
	prov   *fakeprovider.Provider
	obs    *fallbackObserver
	events *fallbackEvents
}

func newFallbackNode(t testing.TB, o Options) *fallbackNode {
	t.Helper()
	prov := fakeprovider.New(fakeprovider.Options{})
	base, err := prov.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prov.Close() })
	// A port nothing listens on: a connection there is refused, so an
	// attempt to it is definitely not sent.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	doc := `node_id = "n"
[[egress.proxies]]
name = "p"
url = "socks5://127.0.0.1:1080"
[credentials.c]
env = "K"
hosts = ["127.0.0.1"]
[authz]
source = "file:/dev/null"
` + strings.NewReplacer("BASE", base, "DEAD", dead, "GEMINI", strings.TrimSuffix(base, "/v1")+"/v1beta").Replace(fallbackRoutes)
	cfg, err := config.Parse([]byte(doc), func(string) (string, bool) { return "provider-key", true }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := routes.Compile(cfg.Backends, cfg.Models, cfg.Credentials, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	var holder routes.Holder
	holder.Store(tab)
	n := &fallbackNode{prov: prov, obs: &fallbackObserver{}, events: &fallbackEvents{}}
	if o.Auth == nil {
		o.Auth = allowAll{}
	}
	o.Routes, o.Picker = &holder, &balance.Affinity{Fallback: &balance.WeightedRandom{}}
	o.Transport = &http.Transport{}
	o.BodyLimit, o.FirstByte, o.StreamIdle, o.NonStreamTotal = 1<<20, 5*time.Second, 5*time.Second, 10*time.Second
	o.Logger = slog.New(slog.DiscardHandler)
	o.MaxAttempts = 3
	o.Observer, o.Recorders = n.obs, []Recorder{n.events}
	n.h = New(o)
	return n
}

// target returns the first target of model's chat pool.
func (n *fallbackNode) target(t testing.TB, model string) *routes.Target {
	t.Helper()
	m, ok := n.h.o.Routes.Load().Model(model)
	if !ok {
		t.Fatalf("no model %q", model)
	}
	return m.Pools[0][0]
}

// hold takes t's in-flight slot and, unless r is nil, ends it with r:
// the backend's state as the answer r stands for leaves it.
func hold(t testing.TB, tg *routes.Target, r *upstream.Result) {
	t.Helper()
	l, ok := (&balance.WeightedRandom{}).Pick([]*routes.Target{tg}, 0, nil)
	if !ok {
		t.Fatal("the target cannot take the slot")
	}
	if r != nil {
		l.Done(*r)
	}
}

func chatWith(model, prompt, extra string) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]%s}`, model, prompt, extra)
}

// TestFallbackReasons: each reason a model cannot take a request before
// sending falls through to its chain: the answer comes from the next
// model's target and says so, the usage event names both models, and the
// fallback is counted with its reason.
func TestFallbackReasons(t *testing.T) {
	for _, tc := range []struct {
		name   string
		model  string
		setup  func(*testing.T, *fallbackNode)
		path   string
		body   string
		reason string
		events []served // what the events say; nil: one attempt on b
	}{
		{name: "at its cap", model: "a", reason: "at_cap",
			setup: func(t *testing.T, n *fallbackNode) { hold(t, n.target(t, "a"), nil) }},
		{name: "cooling down", model: "a", reason: "unavailable",
			setup: func(t *testing.T, n *fallbackNode) {
				hold(t, n.target(t, "a"), &upstream.Result{Outcome: upstream.RateLimited, RetryAfter: time.Minute})
			}},
		{name: "disabled", model: "a", reason: "unavailable",
			setup: func(t *testing.T, n *fallbackNode) {
				hold(t, n.target(t, "a"), &upstream.Result{Outcome: upstream.AuthRejected})
			}},
		{name: "breaker open", model: "a", reason: "unavailable",
			setup: func(t *testing.T, n *fallbackNode) {
				for range upstream.DefaultBreakerFailures {
					hold(t, n.target(t, "a"), &upstream.Result{Outcome: upstream.TransportFailure})
				}
			}},
		{name: "out of headroom", model: "a", reason: "headroom",
			setup: func(t *testing.T, n *fallbackNode) {
				hold(t, n.target(t, "a"), &upstream.Result{Outcome: upstream.Success,
					Headroom: upstream.Headroom{Requests: upstream.Budget{Stated: true, Limit: 10, Remaining: 0, Reset: time.Minute}}})
			}},
		{name: "lacking a capability", model: "a", reason: "capability",
			body: chatWith("a", "hi", `,"tools":[{"type":"function","function":{"name":"f"}}]`)},
		{name: "no backend for the endpoint", model: "a", reason: "endpoint",
			path: "/v1/responses", body: `{"model":"a","input":"hi"}`},
		{name: "context window", model: "small", reason: "context",
			body: chatWith("small", strings.Repeat("long prompt ", 40), "")},
		{name: "output cap", model: "short", reason: "context",
			body: chatWith("short", "hi", `,"max_completion_tokens":500`)},
		{name: "a pattern's target at its cap", model: "p-x", reason: "at_cap",
			setup:  func(t *testing.T, n *fallbackNode) { hold(t, n.target(t, "p-x"), nil) },
			events: []served{{"p-x", "b", "provider-b", "response_received", 200}}},
		{name: "not sent", model: "dead", reason: "not_sent", events: []served{
			{"dead", "dead", "provider-dead", "definitely_not_sent", 0},
			{"dead", "b", "provider-b", "response_received", 200},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFallbackNode(t, Options{})
			if tc.setup != nil {
				tc.setup(t, n)
			}
			path, body := tc.path, tc.body
			if path == "" {
				path = "/v1/chat/completions"
			}
			if body == "" {
				body = chatWith(tc.model, "hi", "")
			}
			got := serve(n.h, "POST", path, body, []string{ServedModelHeader})
			want := answer{Status: 200, Headers: map[string]string{ServedModelHeader: "b"}}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Fatalf("answer (-got +want):\n%s", diff)
			}
			reqs := n.prov.Requests()
			if len(reqs) != 1 || reqs[0].Model != "provider-b" {
				t.Errorf("the provider got %d requests, the last for %q; want 1, for provider-b", len(reqs), reqs[len(reqs)-1].Model)
			}
			wantEvents := tc.events
			if wantEvents == nil {
				wantEvents = []served{{tc.model, "b", "provider-b", "response_received", 200}}
			}
			if diff := cmp.Diff(n.events.served(), wantEvents); diff != "" {
				t.Errorf("usage events (-got +want):\n%s", diff)
			}
			from := tc.model
			if m, _ := n.h.o.Routes.Load().Model(tc.model); m.Pattern {
				from = m.Name
			}
			if diff := cmp.Diff(n.obs.got, []string{from + ">b:" + tc.reason}); diff != "" {
				t.Errorf("fallbacks counted (-got +want):\n%s", diff)
			}
		})
	}
}

// TestFallbackNeverAfterSending: an attempt that may have reached the
// provider, or that it answered, is the request's last, whatever it
// answered: nothing goes to the chain, so nothing can be sent twice. The
// failure still rests the backend, and the next request falls back.
func TestFallbackNeverAfterSending(t *testing.T) {
	for _, tc := range []struct {
		name      string
		directive string
		status    int
		state     string
	}{
		{"connection reset after the body", "[[reset=after_body]]", 502, "possibly_sent"},
		{"a 500", "[[status=500]]", 500, "response_received"},
		{"a 429", "[[status=429]] [[retry_after=60]]", 429, "response_received"},
		{"the provider's own overflow answer", "[[status=400]]", 400, "response_received"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFallbackNode(t, Options{})
			got := serve(n.h, "POST", "/v1/chat/completions", chatWith("a", tc.directive, ""), []string{ServedModelHeader})
			if got.Status != tc.status || got.Headers[ServedModelHeader] != "" {
				t.Fatalf("answer %d, served by %q; want %d from a itself", got.Status, got.Headers[ServedModelHeader], tc.status)
			}
			want := []served{{"a", "a", "provider-a", tc.state, tc.status}}
			if diff := cmp.Diff(n.events.served(), want); diff != "" {
				t.Errorf("usage events (-got +want):\n%s", diff)
			}
			if c := n.prov.RequestCount(); c != 1 || len(n.obs.got) != 0 {
				t.Errorf("the provider got %d requests and %d fallbacks were counted; want 1 and none", c, len(n.obs.got))
			}
		})
	}
	// A 429 cools a's backend down: the next request is served by b
	// before anything is sent to a.
	n := newFallbackNode(t, Options{})
	serve(n.h, "POST", "/v1/chat/completions", chatWith("a", "[[status=429]] [[retry_after=60]]", ""), nil)
	got := serve(n.h, "POST", "/v1/chat/completions", chatWith("a", "hi", ""), []string{ServedModelHeader})
	if got.Status != 200 || got.Headers[ServedModelHeader] != "b" {
		t.Errorf("after a 429: %d served by %q; want 200 by b", got.Status, got.Headers[ServedModelHeader])
	}
}

// TestFallbackAllowlist: a model of the chain the key may not use is
// passed over, to the next; a chain the key may use no model of answers
// as the model alone would (503). The model asked for must be allowed.
func TestFallbackAllowlist(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed []string
		status  int
		served  string
	}{
		{"every model", nil, 200, "b"},
		{"not b", []string{"keyed", "c"}, 200, "c"},
		{"the model by pattern", []string{"k*", "c"}, 200, "c"},
		{"none of the chain", []string{"keyed"}, 503, ""},
		{"not the model asked", []string{"b", "c"}, 403, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &authz.Principal{KeyID: "k", TenantID: "t", Models: tc.allowed}
			n := newFallbackNode(t, Options{Auth: limitedAuth{p}})
			hold(t, n.target(t, "keyed"), nil) // keyed's only backend at its cap
			got := serve(n.h, "POST", "/v1/chat/completions", chatWith("keyed", "hi", ""), []string{ServedModelHeader})
			if got.Status != tc.status || got.Headers[ServedModelHeader] != tc.served {
				t.Errorf("answer %d served by %q; want %d by %q (%s)", got.Status, got.Headers[ServedModelHeader], tc.status, tc.served, got.Body)
			}
		})
	}
}

// TestFallbackLimits: a limited key is admitted once per request, whichever
// model serves it: fallbacks cost no extra admission, and a request over
// the limit is refused before the chain is walked.
func TestFallbackLimits(t *testing.T) {
	h, _, _, _, _ := limitedHandler(t, authsnap.Limits{RequestsPerMinute: 2}, authsnap.Limits{})
	n := newFallbackNode(t, Options{Auth: h.o.Auth, Now: h.o.Now})
	hold(t, n.target(t, "a"), nil)
	var got []int
	for range 3 {
		got = append(got, serve(n.h, "POST", "/v1/chat/completions", chatWith("a", "hi", ""), nil).Status)
	}
	if diff := cmp.Diff(got, []int{200, 200, 429}); diff != "" {
		t.Errorf("statuses (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(n.obs.got, []string{"a>b:at_cap", "a>b:at_cap"}); diff != "" {
		t.Errorf("fallbacks counted (-got +want):\n%s", diff)
	}
}

// TestContextWindowRefusal: a request no target of the chain can hold is
// refused with a 400 in the shape of its protocol, and nothing is sent;
// one that a fallback holds is served there. The estimate is a quarter of
// the body's bytes plus the output the body asks for, read from each
// protocol's own member.
func TestContextWindowRefusal(t *testing.T) {
	long := strings.Repeat("word ", 60) // 300 bytes: about 75 tokens and more
	for _, tc := range []struct {
		name, path, body string
		status           int
		served           string
		error            []string // what the body's error object says, compacted, besides its message
	}{
		{name: "openai: neither model's window", path: "/v1/chat/completions", body: chatWith("tiny", long, ""), status: 400,
			error: []string{`"code":"context_length_exceeded"`, `"type":"invalid_request_error"`}},
		{name: "openai: the fallback's window", path: "/v1/chat/completions", body: chatWith("tiny", "hi", `,"max_tokens":30`), status: 200, served: "tiny2"},
		{name: "openai responses: the output cap", path: "/v1/responses", body: `{"model":"b","input":"hi","max_output_tokens":20000}`, status: 400,
			error: []string{`"code":"context_length_exceeded"`, `"type":"invalid_request_error"`}},
		{name: "openai responses: within the output cap", path: "/v1/responses", body: `{"model":"b","input":"hi","max_output_tokens":16384}`, status: 200},
		{name: "anthropic: the fallback holds it", path: "/v1/messages",
			body: `{"model":"claude-small","max_tokens":100,"messages":[{"role":"user","content":"` + long + `"}]}`, status: 200, served: "claude-big"},
		{name: "anthropic: more output than any target writes", path: "/v1/messages",
			body: `{"model":"claude-small","max_tokens":1001,"messages":[{"role":"user","content":"hi"}]}`, status: 400,
			error: []string{`"type":"invalid_request_error"`}},
		{name: "gemini: the fallback's output cap", path: "/v1beta/models/gem-small:generateContent",
			body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":500}}`, status: 200, served: "gem-big"},
		{name: "gemini: more output than any target writes", path: "/v1beta/models/gem-small:generateContent",
			body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generation_config":{"max_output_tokens":5000}}`, status: 400,
			error: []string{`"code":400`, `"status":"INVALID_ARGUMENT"`, `"reason":"CONTEXT_LENGTH_EXCEEDED"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFallbackNode(t, Options{})
			got := serve(n.h, "POST", tc.path, tc.body, []string{ServedModelHeader})
			if got.Status != tc.status || got.Headers[ServedModelHeader] != tc.served {
				t.Fatalf("answer %d served by %q; want %d by %q (%s)", got.Status, got.Headers[ServedModelHeader], tc.status, tc.served, got.Body)
			}
			if tc.status != 400 {
				return
			}
			for _, want := range append(tc.error, "context window or output limit") {
				if !strings.Contains(got.Body, want) {
					t.Errorf("error body %s; want %s", got.Body, want)
				}
			}
			if c := n.prov.RequestCount(); c != 0 || len(n.events.served()) != 0 {
				t.Errorf("%d requests sent, %d attempts recorded; want none", c, len(n.events.served()))
			}
		})
	}
}

// TestFallbackAffinity: a request that names a session is placed by the
// hash order of the model that serves it, so a fallback keeps a session
// on one of its targets as the model asked for would.
func TestFallbackAffinity(t *testing.T) {
	n := newFallbackNode(t, Options{})
	hold(t, n.target(t, "a"), nil)
	got := serve(n.h, "POST", "/v1/chat/completions", chatWith("a", "hi", `,"prompt_cache_key":"conversation-1"`), []string{ServedModelHeader})
	if got.Status != 200 || got.Headers[ServedModelHeader] != "b" {
		t.Fatalf("answer %d served by %q; want 200 by b", got.Status, got.Headers[ServedModelHeader])
	}
	n.events.mu.Lock()
	defer n.events.mu.Unlock()
	if len(n.events.evs) != 1 || n.events.evs[0].Placement != usageevent.PlacementAffinity {
		t.Errorf("events %+v; want one, placed by affinity", n.events.evs)
	}
}

// BenchmarkFallback measures what a fall-through costs: a request for
// "a", whose only target is at its cap, served by "b", beside the same
// request sent to "b" itself (a model with a context window, so its
// targets are checked against the request) and to "c" (no chain, no
// window: the path every model without them takes). The provider is a
// canned answer, as in BenchmarkNonStreamHandler.
func BenchmarkFallback(b *testing.B) {
	answer := []byte(`{"id":"c1","object":"chat.completion","created":1,"model":"provider-b","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	for _, bc := range []struct{ name, model string }{
		{"plain", "c"},
		{"windowed", "b"},
		{"fall-through", "a"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n := newFallbackNode(b, Options{})
			n.h.o.Transport = &cannedTransport{header: http.Header{"Content-Type": {"application/json"}}, body: answer}
			n.h.o.Observer, n.h.o.Recorders = nopObserver{}, nil // keep nothing per request
			if bc.model == "a" {
				hold(b, n.target(b, "a"), nil)
			}
			body := chatWith(bc.model, "hello there", "")
			b.ReportAllocs()
			w := &benchWriter{}
			cpu := cpuTime(b)
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w.reset()
				n.h.ServeHTTP(w, r)
				if w.status != 200 {
					b.Fatalf("status %d", w.status)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkFallThroughSelect is the selection work of one request alone,
// without the exchange: a pick from "b" (a model with a context window)
// against a fall-through from "a", whose only target is at its cap: the
// failed pick, the reason, the Retry-After of the pool passed over, then
// the same pick from "b". The difference is what a fall-through adds.
func BenchmarkFallThroughSelect(b *testing.B) {
	n := newFallbackNode(b, Options{})
	hold(b, n.target(b, "a"), nil)
	tab := n.h.o.Routes.Load()
	ma, _ := tab.Model("a")
	mb, _ := tab.Model("b")
	body := []byte(chatWith("a", "hello there", ""))
	c := &call{h: n.h, spec: catalog.Spec(provider.Chat), body: body}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			pool, _ := c.usable(mb)
			l, _, ok := c.pick(pool, nil, mb.Affinity)
			if !ok {
				b.Fatal("no pick")
			}
			l.Done(upstream.Result{Outcome: upstream.Cancelled})
		}
	})
	b.Run("fall-through", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			pool, _ := c.usable(ma)
			if _, _, ok := c.pick(pool, nil, ma.Affinity); ok {
				b.Fatal("a took the request")
			}
			_ = c.unavailable(pool, nil)
			_ = balance.RetryAfter(pool, 0, 0, n.h.o.Now())
			pool, _ = c.usable(mb)
			l, _, ok := c.pick(pool, nil, mb.Affinity)
			if !ok {
				b.Fatal("no pick")
			}
			l.Done(upstream.Result{Outcome: upstream.Cancelled})
		}
	})
}
