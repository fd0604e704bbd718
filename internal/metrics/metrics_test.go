package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/upstream"
)

// newMetrics returns Metrics without the runtime collectors, so whole
// expositions can be compared.
func newMetrics(t *testing.T) *metrics.Metrics {
	t.Helper()
	return metrics.New(metrics.Options{NoRuntime: true})
}

// compare checks the exposition of the named families against want.
func compare(t *testing.T, m *metrics.Metrics, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// hist is a histogram series reduced to what tests check.
type hist struct {
	Count uint64
	Sum   float64
}

// histograms returns the series of the histogram family name, keyed by
// their labels ("k=v,k=v").
func histograms(t *testing.T, g prometheus.Gatherer, name string) map[string]hist {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]hist{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			out[labelKey(m)] = hist{h.GetSampleCount(), h.GetSampleSum()}
		}
	}
	return out
}

func labelKey(m *dto.Metric) string {
	var parts []string
	for _, lp := range m.GetLabel() {
		parts = append(parts, lp.GetName()+"="+lp.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func TestObserveRequest(t *testing.T) {
	const models = provider.Endpoint(255) // the call is ObserveModels
	type call struct {
		endpoint  provider.Endpoint
		status    int
		sendState provider.SendState
		d         time.Duration
		stream    bool
	}
	tests := []struct {
		name      string
		calls     []call
		want      string
		wantHists map[string]hist
	}{
		{
			name: "known values",
			calls: []call{
				{provider.Chat, 200, provider.ResponseReceived, 2 * time.Second, true},
				{provider.Chat, 200, provider.ResponseReceived, time.Second, true},
				{provider.Messages, 502, provider.PossiblySent, 500 * time.Millisecond, false},
				{provider.Messages, 503, provider.NotSent, 250 * time.Millisecond, false},
				{models, 200, provider.NoAttempt, 0, false},
				{provider.Chat, 401, provider.NoAttempt, time.Millisecond, false},
			},
			want: `
# HELP scootgate_requests_total Client requests by endpoint, HTTP status code returned and final send state.
# TYPE scootgate_requests_total counter
scootgate_requests_total{code="200",endpoint="chat_completions",send_state="response_received"} 2
scootgate_requests_total{code="401",endpoint="chat_completions",send_state="none"} 1
scootgate_requests_total{code="502",endpoint="messages",send_state="possibly_sent"} 1
scootgate_requests_total{code="503",endpoint="messages",send_state="definitely_not_sent"} 1
scootgate_requests_total{code="200",endpoint="models",send_state="none"} 1
`,
			wantHists: map[string]hist{
				"endpoint=chat_completions,stream=true":  {2, 3},
				"endpoint=chat_completions,stream=false": {1, 0.001},
				"endpoint=messages,stream=false":         {2, 0.75},
				"endpoint=models,stream=false":           {1, 0},
			},
		},
		{
			name: "values outside the sets are unknown, never the raw value",
			calls: []call{
				{provider.Endpoint(200), 200, provider.ResponseReceived, time.Second, false},
				{provider.Messages, 0, provider.SendState(200), time.Second, true},
				{provider.Messages, 600, provider.PossiblySent, time.Second, true},
				{provider.Messages, 99, provider.PossiblySent, time.Second, true},
				{provider.Chat, 502, provider.NumSendStates, time.Second, false},
			},
			want: `
# HELP scootgate_requests_total Client requests by endpoint, HTTP status code returned and final send state.
# TYPE scootgate_requests_total counter
scootgate_requests_total{code="502",endpoint="chat_completions",send_state="unknown"} 1
scootgate_requests_total{code="200",endpoint="unknown",send_state="response_received"} 1
scootgate_requests_total{code="unknown",endpoint="messages",send_state="unknown"} 1
scootgate_requests_total{code="unknown",endpoint="messages",send_state="possibly_sent"} 2
`,
			wantHists: map[string]hist{
				"endpoint=unknown,stream=false":          {1, 1},
				"endpoint=messages,stream=true":          {3, 3},
				"endpoint=chat_completions,stream=false": {1, 1},
			},
		},
		{
			name:  "every status code has its own three digits",
			calls: []call{{models, 100, provider.NoAttempt, 0, false}, {models, 599, provider.NoAttempt, 0, false}, {models, 429, provider.NoAttempt, 0, false}},
			want: `
# HELP scootgate_requests_total Client requests by endpoint, HTTP status code returned and final send state.
# TYPE scootgate_requests_total counter
scootgate_requests_total{code="100",endpoint="models",send_state="none"} 1
scootgate_requests_total{code="429",endpoint="models",send_state="none"} 1
scootgate_requests_total{code="599",endpoint="models",send_state="none"} 1
`,
			wantHists: map[string]hist{"endpoint=models,stream=false": {3, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMetrics(t)
			for _, c := range tt.calls {
				if c.endpoint == models {
					m.ObserveModels(c.status, c.d)
					continue
				}
				m.ObserveRequest(c.endpoint, c.status, c.sendState, c.d, c.stream)
			}
			compare(t, m, tt.want, "scootgate_requests_total")
			// Every endpoint × stream series exists from the start (pre-resolved);
			// only those observed have a count.
			got := map[string]hist{}
			for k, h := range histograms(t, m.Gatherer(), "scootgate_request_duration_seconds") {
				if h.Count > 0 {
					got[k] = h
				}
			}
			if diff := cmp.Diff(got, tt.wantHists); diff != "" {
				t.Errorf("request duration (-got +want):\n%s", diff)
			}
		})
	}
}

func TestRequestDurationSeriesPreResolved(t *testing.T) {
	m := newMetrics(t)
	n, err := testutil.GatherAndCount(m.Gatherer(), "scootgate_request_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	// every protocol endpoint + models + unknown, × stream true/false
	if want := (int(provider.NumEndpoints) + 2) * 2; n != want {
		t.Errorf("request duration series = %d, want %d", n, want)
	}
}

func TestObserveAttempt(t *testing.T) {
	m := newMetrics(t)
	m.ObserveAttempt("openai-a", "openai", upstream.Success, 300*time.Millisecond)
	m.ObserveAttempt("openai-a", "openai", upstream.Success, 700*time.Millisecond)
	m.ObserveAttempt("openai-a", "openai", upstream.Success, 0)                       // no first byte known: counted, not sampled
	m.ObserveAttempt("openai-a", "openai", upstream.RateLimited, 10*time.Millisecond) // an error reply is not a latency sample
	m.ObserveAttempt("anthropic-b", "bedrock", upstream.TransportFailure, 0)
	m.ObserveAttempt("anthropic-b", "bedrock", upstream.EgressFault, 0)
	m.ObserveAttempt("anthropic-b", "bedrock", upstream.Cancelled, 0)
	m.ObserveAttempt("anthropic-b", "bedrock", upstream.ProviderError, time.Second)
	m.ObserveAttempt("anthropic-b", "bedrock", upstream.QuotaExhausted, 0)
	m.ObserveAttempt("anthropic-b", "bedrock", upstream.AuthRejected, 0)
	m.ObserveAttempt("anthropic-b", "bedrock", upstream.NodeOverloaded, 0)
	m.ObserveAttempt("anthropic-b", "bedrock", upstream.Outcome(200), time.Second)                        // unknown outcome
	m.ObserveAttempt("https://api.example.com/v1?key=sk-canary", "vertex", upstream.Success, time.Second) // not an id
	m.ObserveAttempt("", "sk-canary", upstream.Success, 0)                                                // nor a platform

	compare(t, m, `
# HELP scootgate_upstream_attempts_total Provider attempts by backend, its platform and outcome.
# TYPE scootgate_upstream_attempts_total counter
scootgate_upstream_attempts_total{backend="anthropic-b",outcome="auth_rejected",platform="bedrock"} 1
scootgate_upstream_attempts_total{backend="anthropic-b",outcome="cancelled",platform="bedrock"} 1
scootgate_upstream_attempts_total{backend="anthropic-b",outcome="egress_fault",platform="bedrock"} 1
scootgate_upstream_attempts_total{backend="anthropic-b",outcome="node_overloaded",platform="bedrock"} 1
scootgate_upstream_attempts_total{backend="anthropic-b",outcome="provider_error",platform="bedrock"} 1
scootgate_upstream_attempts_total{backend="anthropic-b",outcome="quota_exhausted",platform="bedrock"} 1
scootgate_upstream_attempts_total{backend="anthropic-b",outcome="transport_failure",platform="bedrock"} 1
scootgate_upstream_attempts_total{backend="anthropic-b",outcome="unknown",platform="bedrock"} 1
scootgate_upstream_attempts_total{backend="invalid",outcome="success",platform="unknown"} 1
scootgate_upstream_attempts_total{backend="invalid",outcome="success",platform="vertex"} 1
scootgate_upstream_attempts_total{backend="openai-a",outcome="rate_limited",platform="openai"} 1
scootgate_upstream_attempts_total{backend="openai-a",outcome="success",platform="openai"} 3
`, "scootgate_upstream_attempts_total")

	got := histograms(t, m.Gatherer(), "scootgate_upstream_ttfb_seconds")
	want := map[string]hist{
		"backend=openai-a,platform=openai": {2, 1},
		"backend=invalid,platform=vertex":  {1, 1},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("ttfb (-got +want):\n%s", diff)
	}
}

func TestObserveEgressError(t *testing.T) {
	m := newMetrics(t)
	m.ObserveEgressError("socks-1", egress.StageProxyDial)
	m.ObserveEgressError("socks-1", egress.StageProxyDial)
	m.ObserveEgressError("socks-1", egress.StageProxyAuth)
	m.ObserveEgressError("socks-1", egress.StageProxyTLS)
	m.ObserveEgressError("http-2", egress.StageTarget)
	m.ObserveEgressError("http-2", egress.StageProviderTLS)
	m.ObserveEgressError("http-2", egress.Stage(9))                                 // a Stage outside the set (its String is "stage(9)")
	m.ObserveEgressError("http://user:sk-canary@proxy:3128", egress.StageProxyAuth) // never a URL
	compare(t, m, `
# HELP scootgate_egress_errors_total Egress dials that failed before any request byte, by proxy and stage.
# TYPE scootgate_egress_errors_total counter
scootgate_egress_errors_total{proxy="http-2",stage="provider_tls"} 1
scootgate_egress_errors_total{proxy="http-2",stage="target"} 1
scootgate_egress_errors_total{proxy="http-2",stage="unknown"} 1
scootgate_egress_errors_total{proxy="invalid",stage="proxy_auth"} 1
scootgate_egress_errors_total{proxy="socks-1",stage="proxy_auth"} 1
scootgate_egress_errors_total{proxy="socks-1",stage="proxy_dial"} 2
scootgate_egress_errors_total{proxy="socks-1",stage="proxy_tls"} 1
`, "scootgate_egress_errors_total")
}

func TestForgetBackend(t *testing.T) {
	m := newMetrics(t)
	m.ObserveAttempt("gone", "anthropic", upstream.Success, time.Second)
	m.ObserveAttempt("gone", "bedrock", upstream.Success, time.Second) // redefined on another platform
	m.ObserveAttempt("gone", "bedrock", upstream.RateLimited, 0)
	m.ObserveAttempt("kept", "vertex", upstream.Success, time.Second)
	m.ForgetBackend("gone")
	compare(t, m, `
# HELP scootgate_upstream_attempts_total Provider attempts by backend, its platform and outcome.
# TYPE scootgate_upstream_attempts_total counter
scootgate_upstream_attempts_total{backend="kept",outcome="success",platform="vertex"} 1
`, "scootgate_upstream_attempts_total")
	if diff := cmp.Diff(histograms(t, m.Gatherer(), "scootgate_upstream_ttfb_seconds"), map[string]hist{"backend=kept,platform=vertex": {1, 1}}); diff != "" {
		t.Errorf("ttfb (-got +want):\n%s", diff)
	}
}

// TestNil: a nil *Metrics is a valid no-op, so other packages' tests need
// no registry.
func TestNil(t *testing.T) {
	var m *metrics.Metrics
	m.ObserveModels(200, time.Second)
	m.ObserveAttempt("a", "openai", upstream.Success, time.Second)
	m.ObserveEgressError("p", egress.StageProxyDial)
	m.ForgetBackend("a")
	m.RegisterBackends(nil)
	m.RegisterSnapshot(metrics.SnapshotAuthz, nil)
	m.RegisterOutbox(nil)
	m.RegisterMQTT(nil)
	m.RegisterUsage(nil)
	if mfs, err := m.Gatherer().Gather(); err != nil || len(mfs) != 0 {
		t.Errorf("nil Gatherer: %d families, %v", len(mfs), err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("nil Handler status = %d, want 404", rec.Code)
	}
}

// TestHandler scrapes over a real loopback socket and finds our families
// and the runtime collectors.
func TestHandler(t *testing.T) {
	m := metrics.New(metrics.Options{})
	m.ObserveModels(200, time.Millisecond)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(`
# HELP scootgate_requests_total Client requests by endpoint, HTTP status code returned and final send state.
# TYPE scootgate_requests_total counter
scootgate_requests_total{code="200",endpoint="models",send_state="none"} 1
`), "scootgate_requests_total"); err != nil {
		t.Error(err)
	}
	body := scrape(t, srv.URL)
	for _, want := range []string{"go_goroutines ", "process_", "scootgate_request_duration_seconds_bucket"} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition has no %q", want)
		}
	}
}

// TestLint runs promlint over every family with every source registered:
// names, units, _total on counters, help text.
func TestLint(t *testing.T) {
	m, _ := fullMetrics(t)
	problems, err := testutil.GatherAndLint(m.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}
