package metrics_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/provider"
)

// TestInitEgress: every stage of every configured proxy is exported at 0
// before any failure, so an alert on rate(...) sees 0, not "no data"; a
// later failure counts on the same series.
func TestInitEgress(t *testing.T) {
	m := newMetrics(t)
	m.InitEgress("socks-1", "http-2")
	m.ObserveEgressError("socks-1", egress.StageProxyDial)
	compare(t, m, `
# HELP scootgate_egress_errors_total Egress dials that failed before any request byte, by proxy and stage.
# TYPE scootgate_egress_errors_total counter
scootgate_egress_errors_total{proxy="http-2",stage="provider_tls"} 0
scootgate_egress_errors_total{proxy="http-2",stage="proxy_auth"} 0
scootgate_egress_errors_total{proxy="http-2",stage="proxy_dial"} 0
scootgate_egress_errors_total{proxy="http-2",stage="proxy_policy"} 0
scootgate_egress_errors_total{proxy="http-2",stage="proxy_tls"} 0
scootgate_egress_errors_total{proxy="http-2",stage="target"} 0
scootgate_egress_errors_total{proxy="socks-1",stage="provider_tls"} 0
scootgate_egress_errors_total{proxy="socks-1",stage="proxy_auth"} 0
scootgate_egress_errors_total{proxy="socks-1",stage="proxy_dial"} 1
scootgate_egress_errors_total{proxy="socks-1",stage="proxy_policy"} 0
scootgate_egress_errors_total{proxy="socks-1",stage="proxy_tls"} 0
scootgate_egress_errors_total{proxy="socks-1",stage="target"} 0
`, "scootgate_egress_errors_total")
}

func TestBuildInfo(t *testing.T) {
	for _, tt := range []struct{ version, want string }{
		{"1.4.0-rc.1+abc", "1.4.0-rc.1+abc"},
		{"", "dev"},
		{"v1 sk-canary", "invalid"},
	} {
		m := metrics.New(metrics.Options{NoRuntime: true, Version: tt.version})
		mfs, err := m.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		labels := ""
		for _, mf := range mfs {
			if mf.GetName() == "scootgate_build_info" {
				if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 1 {
					t.Errorf("build_info = %v, want 1", v)
				}
				labels = labelKey(mf.GetMetric()[0])
			}
		}
		if !strings.Contains(labels, "version="+tt.want) || !strings.Contains(labels, "goversion="+runtime.Version()) ||
			!strings.Contains(labels, "revision=") {
			t.Errorf("version %q: build_info labels %q, want version=%s and goversion, revision", tt.version, labels, tt.want)
		}
	}
}

// TestHealthAndClient: scootgate_ready/draining follow the registered
// functions at each scrape; scootgate_client_* report the API limit.
func TestHealthAndClient(t *testing.T) {
	m := newMetrics(t)
	ready, draining := true, false
	m.RegisterHealth(func() bool { return ready }, func() bool { return draining })
	m.RegisterClient(func() metrics.ClientStats {
		return metrics.ClientStats{InFlight: 7, Limit: 1000, Refused: 2, Queued: 3}
	})
	compare(t, m, `
# HELP scootgate_client_inflight Client requests in flight on the API listener, streams included.
# TYPE scootgate_client_inflight gauge
scootgate_client_inflight 7
# HELP scootgate_client_max_concurrent_requests limits.max_concurrent_requests, or the lower limit the open-file limit allows: the client requests in flight beyond which the node answers 503 at once.
# TYPE scootgate_client_max_concurrent_requests gauge
scootgate_client_max_concurrent_requests 1000
# HELP scootgate_client_queued Client requests waiting for a slot while the node sheds (limits.queue_wait).
# TYPE scootgate_client_queued gauge
scootgate_client_queued 3
# HELP scootgate_client_refused_total Client requests answered 503 at once because limits.max_concurrent_requests were in flight, or refused while the node was shedding.
# TYPE scootgate_client_refused_total counter
scootgate_client_refused_total 2
# HELP scootgate_draining 1 from the start of the drain (SIGTERM) to exit.
# TYPE scootgate_draining gauge
scootgate_draining 0
# HELP scootgate_ready 1 when /readyz answers 200: snapshots loaded and fresh, not draining.
# TYPE scootgate_ready gauge
scootgate_ready 1
`, "scootgate_ready", "scootgate_draining", "scootgate_client_inflight", "scootgate_client_max_concurrent_requests", "scootgate_client_refused_total", "scootgate_client_queued")
	ready, draining = false, true
	compare(t, m, `
# HELP scootgate_draining 1 from the start of the drain (SIGTERM) to exit.
# TYPE scootgate_draining gauge
scootgate_draining 1
# HELP scootgate_ready 1 when /readyz answers 200: snapshots loaded and fresh, not draining.
# TYPE scootgate_ready gauge
scootgate_ready 0
`, "scootgate_ready", "scootgate_draining")
}

// TestLimitsStoreUp: scootgate_limits_store_up follows the redis store
// of limits at each scrape, and is absent with the local store.
func TestLimitsStoreUp(t *testing.T) {
	m := newMetrics(t)
	compare(t, m, ``, "scootgate_limits_store_up")
	up := true
	var rts int64 = 7
	m.RegisterLimitsStore(func() bool { return up }, func() int64 { return rts })
	const help = `# HELP scootgate_limits_store_up 1 while the redis store of per-key and per-tenant limits answers; 0 while the node falls back.
# TYPE scootgate_limits_store_up gauge
`
	compare(t, m, help+"scootgate_limits_store_up 1\n", "scootgate_limits_store_up")
	up = false
	compare(t, m, help+"scootgate_limits_store_up 0\n", "scootgate_limits_store_up")
	rts = 12
	compare(t, m, `# HELP scootgate_limits_store_round_trips_total Round trips this node made to the redis store of limits: lease and slot takes, hold refreshes, budget reads and charges (not health probes).
# TYPE scootgate_limits_store_round_trips_total counter
scootgate_limits_store_round_trips_total 12
`, "scootgate_limits_store_round_trips_total")
}

// TestUsageEventsEnabled: scootgate_usage_events_enabled follows its
// source at each scrape, and is absent without one.
func TestUsageEventsEnabled(t *testing.T) {
	m := newMetrics(t)
	compare(t, m, ``, "scootgate_usage_events_enabled")
	on := true
	m.RegisterUsageEvents(func() bool { return on })
	const help = `# HELP scootgate_usage_events_enabled 1 while usage events are recorded into the outbox; 0 while the node runs without them (usage.enabled = false, or an outbox that could not open).
# TYPE scootgate_usage_events_enabled gauge
`
	compare(t, m, help+"scootgate_usage_events_enabled 1\n", "scootgate_usage_events_enabled")
	on = false
	compare(t, m, help+"scootgate_usage_events_enabled 0\n", "scootgate_usage_events_enabled")
}

// TestEveryEndpointNamed: every client endpoint the request path serves has its
// own endpoint label; before, responses, embeddings and count_tokens
// requests were all counted as "unknown".
func TestEveryEndpointNamed(t *testing.T) {
	m := newMetrics(t)
	for e := range provider.NumEndpoints {
		m.ObserveRequest(e, 200, provider.ResponseReceived, time.Second, false)
	}
	compare(t, m, `
# HELP scootgate_requests_total Client requests by endpoint, HTTP status code returned and final send state.
# TYPE scootgate_requests_total counter
scootgate_requests_total{code="200",endpoint="audio_speech",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="audio_transcriptions",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="audio_translations",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="batch_embed_contents",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="bidi_generate_content",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="chat_completions",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="completions",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="converse",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="converse_stream",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="count_tokens",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="embed_content",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="embeddings",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="gemini_count_tokens",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="generate_content",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="image_edits",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="image_generations",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="messages",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="realtime",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="rerank",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="responses",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="responses_compact",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="responses_input_tokens",send_state="response_received"} 1
scootgate_requests_total{code="200",endpoint="stream_generate_content",send_state="response_received"} 1
`, "scootgate_requests_total")
}

// TestLogLinesDropped: scootgate_log_lines_dropped_total reads its source
// at each scrape, and is absent without one.
func TestLogLinesDropped(t *testing.T) {
	m := newMetrics(t)
	compare(t, m, ``, "scootgate_log_lines_dropped_total")
	var n uint64
	m.RegisterLogOutput(func() uint64 { return n })
	const help = `# HELP scootgate_log_lines_dropped_total Log lines dropped because the log output (stderr) did not take them: a write was stuck while 4 MiB of lines waited.
# TYPE scootgate_log_lines_dropped_total counter
`
	compare(t, m, help+"scootgate_log_lines_dropped_total 0\n", "scootgate_log_lines_dropped_total")
	n = 7
	compare(t, m, help+"scootgate_log_lines_dropped_total 7\n", "scootgate_log_lines_dropped_total")
}
