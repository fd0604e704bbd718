package metrics_test

import (
	"io"
	"iter"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
)

// identity returns a backend identity whose base URL and credential
// reference must never show in metrics.
func identity(id string, capacity int) upstream.Identity {
	return upstream.Identity{
		ID: id, Protocol: "openai", Cap: capacity,
		BaseURL:    "https://api.example.com/v1?token=sk-canary-" + id,
		Credential: "sk-canary-cred",
	}
}

// newRegistry returns an upstream registry whose breaker opens on the
// first transport failure, with slow start off unless slowStart.
func newRegistry(clk *clock.Fake, slowStart bool) *upstream.Registry {
	o := upstream.Options{
		Clock:       clk.Now,
		Rand:        func() float64 { return 0 },
		DefaultTTFB: 1500 * time.Millisecond,
		SlowStart:   -1,
		Breaker:     upstream.BreakerOptions{Failures: 1, Jitter: -1},
	}
	if slowStart {
		o.SlowStart = 0 // default 30s: a new backend starts at 10%
	}
	return upstream.NewRegistry(o)
}

func mustAcquire(t *testing.T, s *upstream.State) {
	t.Helper()
	if !s.Acquire() {
		t.Fatal("Acquire refused")
	}
}

func TestBackendsFromRegistry(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	reg := newRegistry(clk, false)

	busy := reg.Get(identity("busy", 4))
	mustAcquire(t, busy)
	mustAcquire(t, busy)

	open := reg.Get(identity("open", 2))
	mustAcquire(t, open)
	open.Finish(upstream.Result{Outcome: upstream.TransportFailure})

	disabled := reg.Get(identity("disabled", 2))
	mustAcquire(t, disabled)
	disabled.Finish(upstream.Result{Outcome: upstream.AuthRejected})

	cooling := reg.Get(identity("cooling", 2))
	mustAcquire(t, cooling)
	cooling.Finish(upstream.Result{Outcome: upstream.RateLimited, RetryAfter: 10 * time.Second})

	m := newMetrics(t)
	m.RegisterBackends(metrics.RegistryBackends(reg, nil))
	compare(t, m, `
# HELP scootgate_backend_breaker_state Circuit breaker state: 0 closed, 1 open, 2 half-open.
# TYPE scootgate_backend_breaker_state gauge
scootgate_backend_breaker_state{backend="busy"} 0
scootgate_backend_breaker_state{backend="cooling"} 0
scootgate_backend_breaker_state{backend="disabled"} 0
scootgate_backend_breaker_state{backend="open"} 1
# HELP scootgate_backend_capacity The backend's max_inflight_per_node (hard cap).
# TYPE scootgate_backend_capacity gauge
scootgate_backend_capacity{backend="busy"} 4
scootgate_backend_capacity{backend="cooling"} 2
scootgate_backend_capacity{backend="disabled"} 2
scootgate_backend_capacity{backend="open"} 2
# HELP scootgate_backend_cooling 1 when the backend is in a 429 or quota cooldown.
# TYPE scootgate_backend_cooling gauge
scootgate_backend_cooling{backend="busy"} 0
scootgate_backend_cooling{backend="cooling"} 1
scootgate_backend_cooling{backend="disabled"} 0
scootgate_backend_cooling{backend="open"} 0
# HELP scootgate_backend_disabled 1 when the backend is disabled after a provider 401/403.
# TYPE scootgate_backend_disabled gauge
scootgate_backend_disabled{backend="busy"} 0
scootgate_backend_disabled{backend="cooling"} 0
scootgate_backend_disabled{backend="disabled"} 1
scootgate_backend_disabled{backend="open"} 0
# HELP scootgate_backend_inflight Requests in flight to the backend from this node.
# TYPE scootgate_backend_inflight gauge
scootgate_backend_inflight{backend="busy"} 2
scootgate_backend_inflight{backend="cooling"} 0
scootgate_backend_inflight{backend="disabled"} 0
scootgate_backend_inflight{backend="open"} 0
# HELP scootgate_backend_slow_start_ratio Slow-start ramp applied to the backend's weight, 0.1 to 1.
# TYPE scootgate_backend_slow_start_ratio gauge
scootgate_backend_slow_start_ratio{backend="busy"} 1
scootgate_backend_slow_start_ratio{backend="cooling"} 1
scootgate_backend_slow_start_ratio{backend="disabled"} 1
scootgate_backend_slow_start_ratio{backend="open"} 1
# HELP scootgate_backend_ttfb_estimate_seconds The balancer's peak-EWMA time-to-first-byte estimate for the backend.
# TYPE scootgate_backend_ttfb_estimate_seconds gauge
scootgate_backend_ttfb_estimate_seconds{backend="busy"} 1.5
scootgate_backend_ttfb_estimate_seconds{backend="cooling"} 1.5
scootgate_backend_ttfb_estimate_seconds{backend="disabled"} 1.5
scootgate_backend_ttfb_estimate_seconds{backend="open"} 1.5
`, "scootgate_backend_breaker_state", "scootgate_backend_capacity", "scootgate_backend_cooling",
		"scootgate_backend_disabled", "scootgate_backend_inflight", "scootgate_backend_slow_start_ratio",
		"scootgate_backend_ttfb_estimate_seconds")

	// Read at scrape time: a change shows at the next scrape, and the
	// cooldown ends by the clock.
	busy.Finish(upstream.Result{Outcome: upstream.Success, TTFB: 3 * time.Second})
	clk.Advance(11 * time.Second)
	compare(t, m, `
# HELP scootgate_backend_cooling 1 when the backend is in a 429 or quota cooldown.
# TYPE scootgate_backend_cooling gauge
scootgate_backend_cooling{backend="busy"} 0
scootgate_backend_cooling{backend="cooling"} 0
scootgate_backend_cooling{backend="disabled"} 0
scootgate_backend_cooling{backend="open"} 0
# HELP scootgate_backend_inflight Requests in flight to the backend from this node.
# TYPE scootgate_backend_inflight gauge
scootgate_backend_inflight{backend="busy"} 1
scootgate_backend_inflight{backend="cooling"} 0
scootgate_backend_inflight{backend="disabled"} 0
scootgate_backend_inflight{backend="open"} 0
`, "scootgate_backend_cooling", "scootgate_backend_inflight")
}

func TestBackendSlowStart(t *testing.T) {
	reg := newRegistry(clock.NewFake(time.Time{}), true)
	reg.Get(identity("new", 1))
	m := newMetrics(t)
	m.RegisterBackends(metrics.RegistryBackends(reg, nil))
	compare(t, m, `
# HELP scootgate_backend_slow_start_ratio Slow-start ramp applied to the backend's weight, 0.1 to 1.
# TYPE scootgate_backend_slow_start_ratio gauge
scootgate_backend_slow_start_ratio{backend="new"} 0.1
`, "scootgate_backend_slow_start_ratio")
}

// views is a backend source from a fixed list, possibly with repeated ids.
type views []metrics.Backend

func (vs views) seq() iter.Seq[metrics.Backend] { return slices.Values(vs) }

// TestBackendsMerge: several states with one id become one series each,
// as RegisterBackends documents; a gather with duplicates would fail
// outright. A current state gives the values and retiring ones add their
// in-flight requests; an id with no current state is merged from its busy
// retiring states; idle retiring states are left out.
func TestBackendsMerge(t *testing.T) {
	until := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := newMetrics(t)
	m.RegisterBackends(views{
		// redefined: the retiring state's 3 requests still count
		{ID: "redef", View: upstream.View{InFlight: 3, Cap: 64, EWMA: 2 * time.Second, SlowStart: 1, BreakerState: upstream.BreakerOpen, Disabled: true}},
		{ID: "redef", View: upstream.View{InFlight: 1, Cap: 32, EWMA: time.Second, SlowStart: 0.5, BreakerState: upstream.BreakerClosed}, Current: true},
		{ID: "redef", View: upstream.View{Cap: 16, EWMA: 9 * time.Second, SlowStart: 1, BreakerState: upstream.BreakerOpen}},
		// removed from the table, two definitions still busy
		{ID: "gone", View: upstream.View{InFlight: 3, Cap: 4, EWMA: 2 * time.Second, SlowStart: 1, BreakerState: upstream.BreakerHalfOpen}},
		{ID: "gone", View: upstream.View{InFlight: 1, Cap: 8, EWMA: time.Second, SlowStart: 0.25, BreakerState: upstream.BreakerClosed, Disabled: true, CooldownUntil: until}},
		// removed and idle: not exported
		{ID: "idle", View: upstream.View{Cap: 4, SlowStart: 1}},
		{ID: "worst", View: upstream.View{Cap: 1, SlowStart: 1, BreakerState: upstream.BreakerHalfOpen}, Current: true},
		{ID: "worst", View: upstream.View{Cap: 1, SlowStart: 1, BreakerState: upstream.BreakerOpen}, Current: true},
		{ID: "https://x.example/sk-canary", View: upstream.View{Cap: 1, SlowStart: 1}, Current: true},
	}.seq())
	compare(t, m, `
# HELP scootgate_backend_breaker_state Circuit breaker state: 0 closed, 1 open, 2 half-open.
# TYPE scootgate_backend_breaker_state gauge
scootgate_backend_breaker_state{backend="gone"} 2
scootgate_backend_breaker_state{backend="invalid"} 0
scootgate_backend_breaker_state{backend="redef"} 0
scootgate_backend_breaker_state{backend="worst"} 1
# HELP scootgate_backend_capacity The backend's max_inflight_per_node (hard cap).
# TYPE scootgate_backend_capacity gauge
scootgate_backend_capacity{backend="gone"} 8
scootgate_backend_capacity{backend="invalid"} 1
scootgate_backend_capacity{backend="redef"} 32
scootgate_backend_capacity{backend="worst"} 1
# HELP scootgate_backend_cooling 1 when the backend is in a 429 or quota cooldown.
# TYPE scootgate_backend_cooling gauge
scootgate_backend_cooling{backend="gone"} 1
scootgate_backend_cooling{backend="invalid"} 0
scootgate_backend_cooling{backend="redef"} 0
scootgate_backend_cooling{backend="worst"} 0
# HELP scootgate_backend_disabled 1 when the backend is disabled after a provider 401/403.
# TYPE scootgate_backend_disabled gauge
scootgate_backend_disabled{backend="gone"} 1
scootgate_backend_disabled{backend="invalid"} 0
scootgate_backend_disabled{backend="redef"} 0
scootgate_backend_disabled{backend="worst"} 0
# HELP scootgate_backend_inflight Requests in flight to the backend from this node.
# TYPE scootgate_backend_inflight gauge
scootgate_backend_inflight{backend="gone"} 4
scootgate_backend_inflight{backend="invalid"} 0
scootgate_backend_inflight{backend="redef"} 4
scootgate_backend_inflight{backend="worst"} 0
# HELP scootgate_backend_slow_start_ratio Slow-start ramp applied to the backend's weight, 0.1 to 1.
# TYPE scootgate_backend_slow_start_ratio gauge
scootgate_backend_slow_start_ratio{backend="gone"} 0.25
scootgate_backend_slow_start_ratio{backend="invalid"} 1
scootgate_backend_slow_start_ratio{backend="redef"} 0.5
scootgate_backend_slow_start_ratio{backend="worst"} 1
# HELP scootgate_backend_ttfb_estimate_seconds The balancer's peak-EWMA time-to-first-byte estimate for the backend.
# TYPE scootgate_backend_ttfb_estimate_seconds gauge
scootgate_backend_ttfb_estimate_seconds{backend="gone"} 2
scootgate_backend_ttfb_estimate_seconds{backend="invalid"} 0
scootgate_backend_ttfb_estimate_seconds{backend="redef"} 1
scootgate_backend_ttfb_estimate_seconds{backend="worst"} 0
`, "scootgate_backend_breaker_state", "scootgate_backend_capacity", "scootgate_backend_cooling",
		"scootgate_backend_disabled", "scootgate_backend_inflight", "scootgate_backend_slow_start_ratio",
		"scootgate_backend_ttfb_estimate_seconds")
}

func TestSnapshots(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	m := metrics.New(metrics.Options{Clock: clk.Now, NoRuntime: true})
	contact := clk.Now().Add(-90 * time.Second)
	m.RegisterSnapshot(metrics.SnapshotAuthz, func() snapshot.Status {
		return snapshot.Status{
			Version:     42,
			LastSuccess: contact,
			LastError:   `fetch "https://cp.example/authz?token=sk-canary": 500`,
			Rejections:  3,
			FetchErrors: 7,

			SignatureRejections: 2,
			Stale:               true,
			StaleReason:         "no contact since ... sk-canary",
		}
	})
	// Never reached its source: no age sample.
	m.RegisterSnapshot(metrics.SnapshotRoutes, func() snapshot.Status { return snapshot.Status{FetchErrors: 1} })
	want := `
# HELP scootgate_snapshot_age_seconds Seconds since the last successful contact with the snapshot source; absent before the first.
# TYPE scootgate_snapshot_age_seconds gauge
scootgate_snapshot_age_seconds{kind="authz"} 90
# HELP scootgate_snapshot_fetch_errors_total Snapshot polls that could not fetch a document.
# TYPE scootgate_snapshot_fetch_errors_total counter
scootgate_snapshot_fetch_errors_total{kind="authz"} 7
scootgate_snapshot_fetch_errors_total{kind="routes"} 1
# HELP scootgate_snapshot_rejections_total Snapshot documents fetched but not applied (decode, validation, compile, rollback).
# TYPE scootgate_snapshot_rejections_total counter
scootgate_snapshot_rejections_total{kind="authz"} 3
scootgate_snapshot_rejections_total{kind="routes"} 0
# HELP scootgate_snapshot_signature_rejections_total Snapshot documents rejected because they were not signed by a trusted key (part of the rejections).
# TYPE scootgate_snapshot_signature_rejections_total counter
scootgate_snapshot_signature_rejections_total{kind="authz"} 2
scootgate_snapshot_signature_rejections_total{kind="routes"} 0
# HELP scootgate_snapshot_stale 1 when the snapshot source has not been reached for longer than the staleness limit.
# TYPE scootgate_snapshot_stale gauge
scootgate_snapshot_stale{kind="authz"} 1
scootgate_snapshot_stale{kind="routes"} 0
# HELP scootgate_snapshot_version Version of the applied snapshot; 0 when none is loaded.
# TYPE scootgate_snapshot_version gauge
scootgate_snapshot_version{kind="authz"} 42
scootgate_snapshot_version{kind="routes"} 0
`
	names := []string{
		"scootgate_snapshot_age_seconds", "scootgate_snapshot_fetch_errors_total",
		"scootgate_snapshot_rejections_total", "scootgate_snapshot_signature_rejections_total",
		"scootgate_snapshot_stale", "scootgate_snapshot_version",
	}
	compare(t, m, want, names...)

	// The age is computed at scrape time from the injected clock; a
	// second registration of a kind replaces the first.
	clk.Advance(10 * time.Second)
	routesContact := clk.Now()
	m.RegisterSnapshot(metrics.SnapshotRoutes, func() snapshot.Status {
		return snapshot.Status{Version: 5, LastSuccess: routesContact}
	})
	compare(t, m, `
# HELP scootgate_snapshot_age_seconds Seconds since the last successful contact with the snapshot source; absent before the first.
# TYPE scootgate_snapshot_age_seconds gauge
scootgate_snapshot_age_seconds{kind="authz"} 100
scootgate_snapshot_age_seconds{kind="routes"} 0
# HELP scootgate_snapshot_version Version of the applied snapshot; 0 when none is loaded.
# TYPE scootgate_snapshot_version gauge
scootgate_snapshot_version{kind="authz"} 42
scootgate_snapshot_version{kind="routes"} 5
`, "scootgate_snapshot_age_seconds", "scootgate_snapshot_version")
}

func TestOutbox(t *testing.T) {
	m := newMetrics(t)
	m.RegisterOutbox(func() outbox.Stats {
		return outbox.Stats{
			Depth: 12, Unsynced: 7, UnsyncedAge: 250 * time.Millisecond, Bytes: 3456, OldestAge: 1500 * time.Millisecond, Appended: 100,
			Dropped:   outbox.Dropped{Full: 1, Queue: 2, NotSent: 5, Failing: 3, Closed: 4},
			Committed: 90, Deleted: 78, Commits: 9,
			Quarantined: "/var/lib/scootgate/outbox.db.corrupt-sk-canary",
		}
	})
	compare(t, m, `
# HELP scootgate_outbox_appended_total Usage events accepted into the outbox.
# TYPE scootgate_outbox_appended_total counter
scootgate_outbox_appended_total 100
# HELP scootgate_outbox_bytes Payload bytes of the events in the outbox.
# TYPE scootgate_outbox_bytes gauge
scootgate_outbox_bytes 3456
# HELP scootgate_outbox_commits_total Outbox write transactions (one fsync each).
# TYPE scootgate_outbox_commits_total counter
scootgate_outbox_commits_total 9
# HELP scootgate_outbox_committed_total Usage events written to disk.
# TYPE scootgate_outbox_committed_total counter
scootgate_outbox_committed_total 90
# HELP scootgate_outbox_deleted_total Usage events removed from disk after delivery.
# TYPE scootgate_outbox_deleted_total counter
scootgate_outbox_deleted_total 78
# HELP scootgate_outbox_depth Usage events in the outbox, not yet acknowledged by the broker.
# TYPE scootgate_outbox_depth gauge
scootgate_outbox_depth 12
# HELP scootgate_outbox_dropped_total Usage events refused by the outbox (drop_newest), by reason.
# TYPE scootgate_outbox_dropped_total counter
scootgate_outbox_dropped_total{reason="closed"} 4
scootgate_outbox_dropped_total{reason="failing"} 3
scootgate_outbox_dropped_total{reason="full"} 1
scootgate_outbox_dropped_total{reason="not_sent"} 5
scootgate_outbox_dropped_total{reason="queue"} 2
# HELP scootgate_outbox_oldest_age_seconds Age of the oldest event in the outbox; 0 when empty.
# TYPE scootgate_outbox_oldest_age_seconds gauge
scootgate_outbox_oldest_age_seconds 1.5
# HELP scootgate_outbox_quarantined 1 when a corrupt outbox file was moved aside at start.
# TYPE scootgate_outbox_quarantined gauge
scootgate_outbox_quarantined 1
# HELP scootgate_outbox_unsynced Usage events accepted but not yet on disk: what a crash now would lose.
# TYPE scootgate_outbox_unsynced gauge
scootgate_outbox_unsynced 7
# HELP scootgate_outbox_unsynced_age_seconds How long ago the oldest usage event not yet on disk was accepted; 0 when none.
# TYPE scootgate_outbox_unsynced_age_seconds gauge
scootgate_outbox_unsynced_age_seconds 0.25
`, "scootgate_outbox_unsynced", "scootgate_outbox_unsynced_age_seconds", "scootgate_outbox_appended_total", "scootgate_outbox_bytes", "scootgate_outbox_commits_total",
		"scootgate_outbox_committed_total", "scootgate_outbox_deleted_total", "scootgate_outbox_depth",
		"scootgate_outbox_dropped_total", "scootgate_outbox_oldest_age_seconds", "scootgate_outbox_quarantined")
}

func TestMQTTAndUsage(t *testing.T) {
	m := newMetrics(t)
	m.RegisterMQTT(func() metrics.MQTTStats {
		return metrics.MQTTStats{Connected: true, Published: 10, Acked: 9, Reconnects: 2, ConnectFailures: 5, Oversize: 1, InFlight: 1}
	})
	m.RegisterUsage(func() usage.RecorderStats {
		return usage.RecorderStats{Recorded: 10, Dropped: 2, Oversize: 1, Invalid: 3, OverKeyBudget: 6}
	})
	compare(t, m, `
# HELP scootgate_mqtt_acked_total Usage events acknowledged by the broker (PUBACK) and deleted from the outbox.
# TYPE scootgate_mqtt_acked_total counter
scootgate_mqtt_acked_total 9
# HELP scootgate_mqtt_connect_failures_total Broker connection attempts that failed.
# TYPE scootgate_mqtt_connect_failures_total counter
scootgate_mqtt_connect_failures_total 5
# HELP scootgate_mqtt_connected 1 when a connection to the MQTT broker is up.
# TYPE scootgate_mqtt_connected gauge
scootgate_mqtt_connected 1
# HELP scootgate_mqtt_inflight Publishes awaiting their PUBACK.
# TYPE scootgate_mqtt_inflight gauge
scootgate_mqtt_inflight 1
# HELP scootgate_mqtt_oversize_total Usage events larger than the broker's payload limit, dropped unpublished.
# TYPE scootgate_mqtt_oversize_total counter
scootgate_mqtt_oversize_total 1
# HELP scootgate_mqtt_published_total Usage events published (QoS 1), replays included.
# TYPE scootgate_mqtt_published_total counter
scootgate_mqtt_published_total 10
# HELP scootgate_mqtt_reconnects_total Broker connections established after the first one.
# TYPE scootgate_mqtt_reconnects_total counter
scootgate_mqtt_reconnects_total 2
# HELP scootgate_usage_events_total Usage events by what the recorder did with them: recorded, dropped, oversize, invalid, over_key_budget.
# TYPE scootgate_usage_events_total counter
scootgate_usage_events_total{result="dropped"} 2
scootgate_usage_events_total{result="invalid"} 3
scootgate_usage_events_total{result="over_key_budget"} 6
scootgate_usage_events_total{result="oversize"} 1
scootgate_usage_events_total{result="recorded"} 10
`, "scootgate_mqtt_acked_total", "scootgate_mqtt_connect_failures_total", "scootgate_mqtt_connected",
		"scootgate_mqtt_inflight", "scootgate_mqtt_oversize_total", "scootgate_mqtt_published_total",
		"scootgate_mqtt_reconnects_total", "scootgate_usage_events_total")
}

// TestUnregisteredSourcesAbsent: a family whose source is not registered
// is not exported at all (not as zeros).
func TestUnregisteredSourcesAbsent(t *testing.T) {
	m := newMetrics(t)
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "scootgate_request_duration_seconds", "scootgate_build_info":
			continue // pre-resolved series; the build is always known
		}
		if len(mf.GetMetric()) > 0 {
			t.Errorf("family %s exported with no source or observation", mf.GetName())
		}
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape status %d", resp.StatusCode)
	}
	return string(body)
}

// TestBackendHeadroom: the headroom families after an answer that says
// the requests are used up for a minute and 40% of the tokens are left,
// with one unreadable header value, and after a 429 cooldown.
func TestBackendHeadroom(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	reg := newRegistry(clk, false)
	st := reg.Get(identity("limited", 4))
	mustAcquire(t, st)
	st.Finish(upstream.Result{Outcome: upstream.Success, Headroom: upstream.Headroom{
		Requests:  upstream.Budget{Stated: true, Limit: 100, Remaining: 0, Reset: time.Minute},
		Tokens:    upstream.Budget{Stated: true, Limit: 1000, Remaining: 400, Reset: time.Minute},
		Malformed: 1,
	}})
	other := reg.Get(identity("cooled", 4))
	mustAcquire(t, other)
	other.Finish(upstream.Result{Outcome: upstream.RateLimited, RetryAfter: 7 * time.Second})
	m := newMetrics(t)
	m.RegisterBackends(metrics.RegistryBackends(reg, nil))
	compare(t, m, `
# HELP scootgate_backend_headroom_exhausted 1 while the backend is held back because its rate-limit budget is used up.
# TYPE scootgate_backend_headroom_exhausted gauge
scootgate_backend_headroom_exhausted{backend="cooled"} 0
scootgate_backend_headroom_exhausted{backend="limited"} 1
# HELP scootgate_backend_headroom_ratio Share of the credential's rate-limit budget left, as the provider's headers last said less what was sent since; absent while unknown.
# TYPE scootgate_backend_headroom_ratio gauge
scootgate_backend_headroom_ratio{backend="limited",budget="requests"} 0
scootgate_backend_headroom_ratio{backend="limited",budget="tokens"} 0.4
# HELP scootgate_backend_ineligible_seconds_total Time the backend was held back, as scheduled when the hold began: cooldown (a provider 429 or quota answer) or headroom (a used-up rate-limit budget).
# TYPE scootgate_backend_ineligible_seconds_total counter
scootgate_backend_ineligible_seconds_total{backend="cooled",reason="cooldown"} 7
scootgate_backend_ineligible_seconds_total{backend="cooled",reason="headroom"} 0
scootgate_backend_ineligible_seconds_total{backend="limited",reason="cooldown"} 0
scootgate_backend_ineligible_seconds_total{backend="limited",reason="headroom"} 60
# HELP scootgate_backend_ratelimit_headers_malformed_total Rate-limit header values of the backend's answers that could not be read and were ignored.
# TYPE scootgate_backend_ratelimit_headers_malformed_total counter
scootgate_backend_ratelimit_headers_malformed_total{backend="cooled"} 0
scootgate_backend_ratelimit_headers_malformed_total{backend="limited"} 1
`, "scootgate_backend_headroom_exhausted", "scootgate_backend_headroom_ratio", "scootgate_backend_ineligible_seconds_total", "scootgate_backend_ratelimit_headers_malformed_total")
}
