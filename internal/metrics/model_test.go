package metrics_test

import (
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// attemptEvent is a usage event as the request path records it for an attempt.
func attemptEvent(model, backend string, status int, stream bool) *usageevent.Event {
	ev := &usageevent.Event{
		PublicModel: model, Backend: backend, HTTPStatus: status, Stream: stream,
		SendState: usageevent.SendResponseReceived, RequestBytes: 100, ResponseBytes: 2000,
		TTFBMs: 400, DurationMs: 15000,
	}
	if status == 0 {
		ev.SendState, ev.ResponseBytes, ev.TTFBMs = usageevent.SendDefinitelyNotSent, 0, 0
	}
	return ev
}

func TestRecordModelFamilies(t *testing.T) {
	m := newMetrics(t)
	ok := attemptEvent("gpt-4o", "oa", 200, true)
	ok.Usage = &usageevent.Usage{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 1000, ReasoningTokens: 50}
	m.Record(ok)
	m.Record(attemptEvent("gpt-4o", "oa", 0, false))   // re-picked: nothing sent to the client
	m.Record(attemptEvent("gpt-4o", "oa", 429, false)) // no TTFB sample, no stream
	nonStream := attemptEvent("claude", "an", 200, false)
	nonStream.Usage = &usageevent.Usage{InputTokens: 10, OutputTokens: 5, CacheWriteTokens: 7}
	m.Record(nonStream)
	compare(t, m, `
# HELP scootgate_model_requests_total Provider attempts by public model, backend and class of the status sent to the client (none: the attempt sent the client nothing).
# TYPE scootgate_model_requests_total counter
scootgate_model_requests_total{backend="an",class="2xx",model="claude"} 1
scootgate_model_requests_total{backend="an",class="3xx",model="claude"} 0
scootgate_model_requests_total{backend="an",class="4xx",model="claude"} 0
scootgate_model_requests_total{backend="an",class="5xx",model="claude"} 0
scootgate_model_requests_total{backend="an",class="none",model="claude"} 0
scootgate_model_requests_total{backend="oa",class="2xx",model="gpt-4o"} 1
scootgate_model_requests_total{backend="oa",class="3xx",model="gpt-4o"} 0
scootgate_model_requests_total{backend="oa",class="4xx",model="gpt-4o"} 1
scootgate_model_requests_total{backend="oa",class="5xx",model="gpt-4o"} 0
scootgate_model_requests_total{backend="oa",class="none",model="gpt-4o"} 1
# HELP scootgate_model_tokens_total Tokens the provider reported, by public model, backend and type (input, output, cache_read, cache_write, reasoning).
# TYPE scootgate_model_tokens_total counter
scootgate_model_tokens_total{backend="an",model="claude",type="cache_read"} 0
scootgate_model_tokens_total{backend="an",model="claude",type="cache_write"} 7
scootgate_model_tokens_total{backend="an",model="claude",type="input"} 10
scootgate_model_tokens_total{backend="an",model="claude",type="output"} 5
scootgate_model_tokens_total{backend="an",model="claude",type="reasoning"} 0
scootgate_model_tokens_total{backend="oa",model="gpt-4o",type="cache_read"} 1000
scootgate_model_tokens_total{backend="oa",model="gpt-4o",type="cache_write"} 0
scootgate_model_tokens_total{backend="oa",model="gpt-4o",type="input"} 1200
scootgate_model_tokens_total{backend="oa",model="gpt-4o",type="output"} 300
scootgate_model_tokens_total{backend="oa",model="gpt-4o",type="reasoning"} 50
# HELP scootgate_model_request_bytes_total Request body bytes sent to the provider, by public model and backend.
# TYPE scootgate_model_request_bytes_total counter
scootgate_model_request_bytes_total{backend="an",model="claude"} 100
scootgate_model_request_bytes_total{backend="oa",model="gpt-4o"} 300
# HELP scootgate_model_response_bytes_total Response body bytes read from the provider, by public model and backend.
# TYPE scootgate_model_response_bytes_total counter
scootgate_model_response_bytes_total{backend="an",model="claude"} 2000
scootgate_model_response_bytes_total{backend="oa",model="gpt-4o"} 4000
`, "scootgate_model_requests_total", "scootgate_model_tokens_total",
		"scootgate_model_request_bytes_total", "scootgate_model_response_bytes_total")

	ttfb := histograms(t, m.Gatherer(), "scootgate_model_ttfb_seconds")
	if got, want := ttfb["backend=oa,model=gpt-4o"], (hist{1, 0.4}); got != want {
		t.Errorf("gpt-4o ttfb = %+v, want %+v (the 2xx attempt only)", got, want)
	}
	if got, want := ttfb["backend=an,model=claude"], (hist{1, 0.4}); got != want {
		t.Errorf("claude ttfb = %+v, want %+v", got, want)
	}
	streams := histograms(t, m.Gatherer(), "scootgate_model_stream_duration_seconds")
	if got, want := streams["backend=oa,model=gpt-4o"], (hist{1, 15}); got != want {
		t.Errorf("gpt-4o stream duration = %+v, want %+v", got, want)
	}
	if got := streams["backend=an,model=claude"]; got.Count != 0 {
		t.Errorf("non-stream answer counted as a stream: %+v", got)
	}
}

// TestModelSeriesBound: beyond MaxModelSeries pairs, new pairs count
// under model="_other" of their backend; pruning frees places, and the
// _other series go with the last pair that shares them.
func TestModelSeriesBound(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true, MaxModelSeries: 2})
	for _, model := range []string{"a", "b", "c", "d"} {
		m.Record(attemptEvent(model, "oa", 200, false))
	}
	m.Record(attemptEvent("c", "oa", 500, false))
	want := func(lines ...string) string {
		return "# HELP scootgate_model_request_bytes_total Request body bytes sent to the provider, by public model and backend.\n" +
			"# TYPE scootgate_model_request_bytes_total counter\n" + strings.Join(lines, "\n") + "\n"
	}
	compare(t, m, want(
		`scootgate_model_request_bytes_total{backend="oa",model="_other"} 300`,
		`scootgate_model_request_bytes_total{backend="oa",model="a"} 100`,
		`scootgate_model_request_bytes_total{backend="oa",model="b"} 100`,
	), "scootgate_model_request_bytes_total")

	// "a" leaves the table: its place goes to the next new pair.
	m.PruneModels(func(model, _ string) bool { return model != "a" })
	m.Record(attemptEvent("e", "oa", 200, false))
	compare(t, m, want(
		`scootgate_model_request_bytes_total{backend="oa",model="_other"} 300`,
		`scootgate_model_request_bytes_total{backend="oa",model="b"} 100`,
		`scootgate_model_request_bytes_total{backend="oa",model="e"} 100`,
	), "scootgate_model_request_bytes_total")

	// _other stays while "d" is routed; it goes with c and d.
	m.PruneModels(func(model, _ string) bool { return model != "c" })
	compare(t, m, want(
		`scootgate_model_request_bytes_total{backend="oa",model="_other"} 300`,
		`scootgate_model_request_bytes_total{backend="oa",model="b"} 100`,
		`scootgate_model_request_bytes_total{backend="oa",model="e"} 100`,
	), "scootgate_model_request_bytes_total")
	m.PruneModels(func(model, _ string) bool { return model == "b" || model == "e" })
	compare(t, m, want(
		`scootgate_model_request_bytes_total{backend="oa",model="b"} 100`,
		`scootgate_model_request_bytes_total{backend="oa",model="e"} 100`,
	), "scootgate_model_request_bytes_total")
}

func TestModelLabel(t *testing.T) {
	m := newMetrics(t)
	for _, model := range []string{"vendor/model:2024-05", "模型", "_other", "a\nb", strings.Repeat("x", 257), "\xff"} {
		m.Record(attemptEvent(model, "oa", 200, false))
	}
	compare(t, m, `
# HELP scootgate_model_request_bytes_total Request body bytes sent to the provider, by public model and backend.
# TYPE scootgate_model_request_bytes_total counter
scootgate_model_request_bytes_total{backend="oa",model="invalid"} 400
scootgate_model_request_bytes_total{backend="oa",model="vendor/model:2024-05"} 100
scootgate_model_request_bytes_total{backend="oa",model="模型"} 100
`, "scootgate_model_request_bytes_total")
}

// TestModelPatternLabel: the attempts of names a pattern matched are
// counted under the pattern, so that the names clients invent add no
// series.
func TestModelPatternLabel(t *testing.T) {
	m := newMetrics(t)
	for _, asked := range []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5-20251001"} {
		ev := attemptEvent(asked, "an", 200, false)
		ev.ModelPattern = "claude-*"
		m.Record(ev)
	}
	compare(t, m, `
# HELP scootgate_model_requests_total Provider attempts by public model, backend and class of the status sent to the client (none: the attempt sent the client nothing).
# TYPE scootgate_model_requests_total counter
scootgate_model_requests_total{backend="an",class="2xx",model="claude-*"} 3
scootgate_model_requests_total{backend="an",class="3xx",model="claude-*"} 0
scootgate_model_requests_total{backend="an",class="4xx",model="claude-*"} 0
scootgate_model_requests_total{backend="an",class="5xx",model="claude-*"} 0
scootgate_model_requests_total{backend="an",class="none",model="claude-*"} 0
`, "scootgate_model_requests_total")
}

// TestRecordModelCost: the cost counter adds the events' exact costs
// (0.1 + 0.2 is 0.3 here, as a float sum would not make it) per pair, and
// has no series for a pair that never cost anything.
func TestRecordModelCost(t *testing.T) {
	m := newMetrics(t)
	for _, c := range []string{"0.1", "0.2", "0.000000000001"} {
		ev := attemptEvent("gpt-4o", "oa", 200, false)
		ev.Cost = &usageevent.Cost{USD: c, PriceVersion: 3}
		m.Record(ev)
	}
	m.Record(attemptEvent("claude", "an", 200, false)) // unpriced
	compare(t, m, `
# HELP scootgate_model_cost_usd_total What the attempts cost at their targets' prices, in US dollars, by public model and backend (priced targets only; docs/usage-events.md "Cost").
# TYPE scootgate_model_cost_usd_total counter
scootgate_model_cost_usd_total{backend="oa",model="gpt-4o"} 0.300000000001
`, "scootgate_model_cost_usd_total")
}

// TestLimitRefusalBudget: a budget refusal is counted under its own kind.
func TestLimitRefusalBudget(t *testing.T) {
	m := newMetrics(t)
	m.ObserveLimitRefusal("tenant", "budget")
	compare(t, m, `
# HELP scootgate_limits_refused_total Requests refused with 429 by a per-key or per-tenant limit, by scope (key, tenant) and kind (requests, tokens, concurrency, budget, abandoned).
# TYPE scootgate_limits_refused_total counter
scootgate_limits_refused_total{kind="budget",scope="tenant"} 1
`, "scootgate_limits_refused_total")
}
