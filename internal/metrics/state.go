package metrics

import (
	"iter"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
)

// Breaker state values of scootgate_backend_breaker_state.
const (
	breakerClosed   = 0
	breakerOpen     = 1
	breakerHalfOpen = 2
)

// sources are the functions the state collector calls at scrape time.
type sources struct {
	backends  iter.Seq[Backend]
	snapshots []snapshotSource
	outbox    func() outbox.Stats
	mqtt      func() MQTTStats
	usage     func() usage.RecorderStats
	health    *healthSource
	client    func() ClientStats
	traces    func() TraceStats
	creds     func() CredentialStats
	tokens    func() []TokenCredential
	store     func() bool  // the limits store answers; nil = the local store
	storeRTs  func() int64 // round trips to the limits store so far
	// usageEvents: usage events are recorded; nil = not exported
	usageEvents func() bool
	// logDropped: log lines dropped while the log output was stuck; nil
	// = not exported
	logDropped func() uint64
}

type healthSource struct{ ready, draining func() bool }

type snapshotSource struct {
	kind   string
	status func() snapshot.Status
}

// stateCollector exports state read at scrape time; it starts no
// goroutine and keeps no copy of the state.
type stateCollector struct {
	// immutable
	clock func() time.Time
	d     stateDescs

	mu  sync.Mutex
	src sources // guarded by mu; the snapshots slice is copied on write
}

func (c *stateCollector) set(f func(*sources)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.src.snapshots = append([]snapshotSource(nil), c.src.snapshots...)
	f(&c.src)
}

func (c *stateCollector) sources() sources {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.src
}

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// stateDescs describes the state families. Each collector builds its own
// set rather than sharing package variables (no package-global state).
type stateDescs struct {
	backendInFlight, backendCapacity, backendTTFB, backendBreaker,
	backendDisabled, backendCooling, backendSlowStart *prometheus.Desc

	backendHeadroom, backendHeld, backendIneligible, backendMalformed *prometheus.Desc

	credentialReloads *prometheus.Desc
	credentialToken   *prometheus.Desc

	snapshotVersion, snapshotAge, snapshotRejections, snapshotSigRejections,
	snapshotFetchErrors, snapshotStale *prometheus.Desc

	outboxDepth, outboxBytes, outboxOldestAge, outboxAppended, outboxDropped,
	outboxCommitted, outboxDeleted, outboxCommits, outboxQuarantined,
	outboxUnsynced, outboxUnsyncedAge *prometheus.Desc

	mqttConnected, mqttPublished, mqttAcked, mqttReconnects,
	mqttConnectFailures, mqttOversize, mqttInFlight *prometheus.Desc

	usageEvents *prometheus.Desc
	logDropped  *prometheus.Desc

	ready, draining *prometheus.Desc
	storeUp         *prometheus.Desc
	storeRoundTrips *prometheus.Desc
	usageEnabled    *prometheus.Desc

	clientInFlight, clientLimit, clientRefused *prometheus.Desc
	clientQueued                               *prometheus.Desc
	connsRefused, connsResetClosed, penalties  *prometheus.Desc

	traceSpans *prometheus.Desc
}

func newStateDescs() stateDescs {
	return stateDescs{
		backendInFlight:  newDesc("scootgate_backend_inflight", "Requests in flight to the backend from this node.", "backend"),
		backendCapacity:  newDesc("scootgate_backend_capacity", "The backend's max_inflight_per_node (hard cap).", "backend"),
		backendTTFB:      newDesc("scootgate_backend_ttfb_estimate_seconds", "The balancer's peak-EWMA time-to-first-byte estimate for the backend.", "backend"),
		backendBreaker:   newDesc("scootgate_backend_breaker_state", "Circuit breaker state: 0 closed, 1 open, 2 half-open.", "backend"),
		backendDisabled:  newDesc("scootgate_backend_disabled", "1 when the backend is disabled after a provider 401/403.", "backend"),
		backendCooling:   newDesc("scootgate_backend_cooling", "1 when the backend is in a 429 or quota cooldown.", "backend"),
		backendSlowStart: newDesc("scootgate_backend_slow_start_ratio", "Slow-start ramp applied to the backend's weight, 0.1 to 1.", "backend"),

		backendHeadroom:   newDesc("scootgate_backend_headroom_ratio", "Share of the credential's rate-limit budget left, as the provider's headers last said less what was sent since; absent while unknown.", "backend", "budget"),
		backendHeld:       newDesc("scootgate_backend_headroom_exhausted", "1 while the backend is held back because its rate-limit budget is used up.", "backend"),
		backendIneligible: newDesc("scootgate_backend_ineligible_seconds_total", "Time the backend was held back, as scheduled when the hold began: cooldown (a provider 429 or quota answer) or headroom (a used-up rate-limit budget).", "backend", "reason"),
		backendMalformed:  newDesc("scootgate_backend_ratelimit_headers_malformed_total", "Rate-limit header values of the backend's answers that could not be read and were ignored.", "backend"),

		credentialReloads: newDesc("scootgate_credential_reloads_total", "Re-reads of file credentials after their file changed: changed (the new value is in use) or failed (the previous value stays).", "result"),

		snapshotVersion:       newDesc("scootgate_snapshot_version", "Version of the applied snapshot; 0 when none is loaded.", "kind"),
		snapshotAge:           newDesc("scootgate_snapshot_age_seconds", "Seconds since the last successful contact with the snapshot source; absent before the first.", "kind"),
		snapshotRejections:    newDesc("scootgate_snapshot_rejections_total", "Snapshot documents fetched but not applied (decode, validation, compile, rollback).", "kind"),
		snapshotSigRejections: newDesc("scootgate_snapshot_signature_rejections_total", "Snapshot documents rejected because they were not signed by a trusted key (part of the rejections).", "kind"),
		snapshotFetchErrors:   newDesc("scootgate_snapshot_fetch_errors_total", "Snapshot polls that could not fetch a document.", "kind"),
		snapshotStale:         newDesc("scootgate_snapshot_stale", "1 when the snapshot source has not been reached for longer than the staleness limit.", "kind"),

		outboxDepth:       newDesc("scootgate_outbox_depth", "Usage events in the outbox, not yet acknowledged by the broker."),
		outboxBytes:       newDesc("scootgate_outbox_bytes", "Payload bytes of the events in the outbox."),
		outboxOldestAge:   newDesc("scootgate_outbox_oldest_age_seconds", "Age of the oldest event in the outbox; 0 when empty."),
		outboxAppended:    newDesc("scootgate_outbox_appended_total", "Usage events accepted into the outbox."),
		outboxDropped:     newDesc("scootgate_outbox_dropped_total", "Usage events refused by the outbox (drop_newest), by reason.", "reason"),
		outboxCommitted:   newDesc("scootgate_outbox_committed_total", "Usage events written to disk."),
		outboxDeleted:     newDesc("scootgate_outbox_deleted_total", "Usage events removed from disk after delivery."),
		outboxCommits:     newDesc("scootgate_outbox_commits_total", "Outbox write transactions (one fsync each)."),
		outboxQuarantined: newDesc("scootgate_outbox_quarantined", "1 when a corrupt outbox file was moved aside at start."),
		outboxUnsynced:    newDesc("scootgate_outbox_unsynced", "Usage events accepted but not yet on disk: what a crash now would lose."),
		outboxUnsyncedAge: newDesc("scootgate_outbox_unsynced_age_seconds", "How long ago the oldest usage event not yet on disk was accepted; 0 when none."),

		mqttConnected:       newDesc("scootgate_mqtt_connected", "1 when a connection to the MQTT broker is up."),
		mqttPublished:       newDesc("scootgate_mqtt_published_total", "Usage events published (QoS 1), replays included."),
		mqttAcked:           newDesc("scootgate_mqtt_acked_total", "Usage events acknowledged by the broker (PUBACK) and deleted from the outbox."),
		mqttReconnects:      newDesc("scootgate_mqtt_reconnects_total", "Broker connections established after the first one."),
		mqttConnectFailures: newDesc("scootgate_mqtt_connect_failures_total", "Broker connection attempts that failed."),
		mqttOversize:        newDesc("scootgate_mqtt_oversize_total", "Usage events larger than the broker's payload limit, dropped unpublished."),
		mqttInFlight:        newDesc("scootgate_mqtt_inflight", "Publishes awaiting their PUBACK."),

		usageEvents: newDesc("scootgate_usage_events_total", "Usage events by what the recorder did with them: recorded, dropped, oversize, invalid, over_key_budget.", "result"),

		logDropped: newDesc("scootgate_log_lines_dropped_total", "Log lines dropped because the log output (stderr) did not take them: a write was stuck while 4 MiB of lines waited."),

		ready:           newDesc("scootgate_ready", "1 when /readyz answers 200: snapshots loaded and fresh, not draining."),
		draining:        newDesc("scootgate_draining", "1 from the start of the drain (SIGTERM) to exit."),
		storeUp:         newDesc("scootgate_limits_store_up", "1 while the redis store of per-key and per-tenant limits answers; 0 while the node falls back."),
		storeRoundTrips: newDesc("scootgate_limits_store_round_trips_total", "Round trips this node made to the redis store of limits: lease and slot takes, hold refreshes, budget reads and charges (not health probes)."),
		usageEnabled:    newDesc("scootgate_usage_events_enabled", "1 while usage events are recorded into the outbox; 0 while the node runs without them (usage.enabled = false, or an outbox that could not open)."),

		clientInFlight: newDesc("scootgate_client_inflight", "Client requests in flight on the API listener, streams included."),
		clientLimit:    newDesc("scootgate_client_max_concurrent_requests", "limits.max_concurrent_requests, or the lower limit the open-file limit allows: the client requests in flight beyond which the node answers 503 at once."),
		clientRefused:  newDesc("scootgate_client_refused_total", "Client requests answered 503 at once because limits.max_concurrent_requests were in flight, or refused while the node was shedding."),
		clientQueued:   newDesc("scootgate_client_queued", "Client requests waiting for a slot while the node sheds (limits.queue_wait)."),

		connsRefused:     newDesc("scootgate_client_conns_refused_total", "API connections closed at accept because their client address was over a per-address bound or in its penalty (docs/operations.md \"Connection floods\")."),
		connsResetClosed: newDesc("scootgate_client_conns_reset_closed_total", "API connections closed because their client address abandoned requests or connections beyond limits.resets_per_client."),
		penalties:        newDesc("scootgate_client_penalties_total", "Penalties begun: a client address over limits.conn_rate_per_client or limits.resets_per_client, whose new connections are then closed at accept for limits.client_penalty."),

		credentialToken: newDesc("scootgate_credential_token_state", "A minted-token credential's state: 1 for the state it is in (ok, pending, refresh_failing, expired), 0 for the others.", "credential", "state"),
		traceSpans:      newDesc("scootgate_trace_spans_total", "Trace spans by what became of them: exported, dropped (queue full), failed (the collector refused or did not answer).", "result"),
	}
}

func (d *stateDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{
		d.backendInFlight, d.backendCapacity, d.backendTTFB, d.backendBreaker,
		d.backendDisabled, d.backendCooling, d.backendSlowStart,
		d.backendHeadroom, d.backendHeld, d.backendIneligible, d.backendMalformed,
		d.credentialReloads, d.credentialToken,
		d.snapshotVersion, d.snapshotAge, d.snapshotRejections, d.snapshotSigRejections, d.snapshotFetchErrors, d.snapshotStale,
		d.outboxDepth, d.outboxBytes, d.outboxOldestAge, d.outboxAppended, d.outboxDropped,
		d.outboxCommitted, d.outboxDeleted, d.outboxCommits, d.outboxQuarantined,
		d.outboxUnsynced, d.outboxUnsyncedAge,
		d.mqttConnected, d.mqttPublished, d.mqttAcked, d.mqttReconnects,
		d.mqttConnectFailures, d.mqttOversize, d.mqttInFlight,
		d.usageEvents, d.logDropped,
		d.ready, d.draining, d.storeUp, d.storeRoundTrips, d.usageEnabled,
		d.clientInFlight, d.clientLimit, d.clientRefused, d.clientQueued,
		d.connsRefused, d.connsResetClosed, d.penalties,
		d.traceSpans,
	}
}

func newStateCollector(c func() time.Time) *stateCollector {
	return &stateCollector{clock: c, d: newStateDescs()}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d.all() {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It calls the registered
// sources; they must be safe to call from the scrape goroutine.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.sources()
	e := emitter{ch}
	if src.backends != nil {
		c.collectBackends(e, src)
	}
	for _, s := range src.snapshots {
		c.collectSnapshot(e, s)
	}
	if src.outbox != nil {
		c.collectOutbox(e, src)
	}
	if src.mqtt != nil {
		c.collectMQTT(e, src)
	}
	if src.usage != nil {
		st := src.usage()
		d := c.d.usageEvents
		e.counter(d, st.Recorded, "recorded")
		e.counter(d, st.Dropped, "dropped")
		e.counter(d, st.Oversize, "oversize")
		e.counter(d, st.Invalid, "invalid")
		e.counter(d, st.OverKeyBudget, "over_key_budget")
	}
	if h := src.health; h != nil {
		e.gauge(c.d.ready, boolValue(h.ready()))
		e.gauge(c.d.draining, boolValue(h.draining()))
	}
	if src.usageEvents != nil {
		e.gauge(c.d.usageEnabled, boolValue(src.usageEvents()))
	}
	if src.logDropped != nil {
		e.counter(c.d.logDropped, src.logDropped())
	}
	if src.store != nil {
		e.gauge(c.d.storeUp, boolValue(src.store()))
	}
	if src.storeRTs != nil {
		e.counter(c.d.storeRoundTrips, uint64(max(src.storeRTs(), 0)))
	}
	if src.client != nil {
		st := src.client()
		e.gauge(c.d.clientInFlight, float64(st.InFlight))
		e.gauge(c.d.clientLimit, float64(st.Limit))
		e.counter(c.d.clientRefused, st.Refused)
		e.gauge(c.d.clientQueued, float64(st.Queued))
		e.counter(c.d.connsRefused, st.ConnsRefused)
		e.counter(c.d.connsResetClosed, st.ConnsResetClosed)
		e.counter(c.d.penalties, st.Penalties)
	}
	if src.creds != nil {
		st := src.creds()
		e.counter(c.d.credentialReloads, st.Changed, "changed")
		e.counter(c.d.credentialReloads, st.Failed, "failed")
	}
	if src.tokens != nil {
		for _, tc := range src.tokens() {
			for _, s := range tokenStates() {
				e.gauge(c.d.credentialToken, boolValue(tc.State == s), idLabel(tc.Name), s)
			}
		}
	}
	if src.traces != nil {
		st := src.traces()
		e.counter(c.d.traceSpans, st.Exported, "exported")
		e.counter(c.d.traceSpans, st.Dropped, "dropped")
		e.counter(c.d.traceSpans, st.Failed, "failed")
	}
}

// backendState is one backend id's exported values, merged from one or
// more tracked states.
type backendState struct {
	n                  int // states merged in
	inflight, capacity int64
	ttfb               float64
	breaker            upstream.BreakerState
	disabled, cooling  bool
	slowStart          float64
	held               bool
	headroom           [2]float64 // requests, tokens: the lowest known share, −1 unknown
	cooled, heldFor    float64    // seconds
	malformed          uint64
}

// add merges v: in-flight adds up, capacity and the TTFB estimate are the
// largest, a flag is set when any state's is, the breaker state is the
// worst (open, then half-open, then closed) and the slow-start ratio the
// lowest.
func (b *backendState) add(v upstream.View) {
	if b.n == 0 {
		b.breaker, b.slowStart = v.BreakerState, v.SlowStart
		b.headroom = [2]float64{-1, -1}
	}
	for i, h := range [2]float64{v.HeadroomRequests, v.HeadroomTokens} {
		if known := [2]bool{v.HeadroomRequestsKnown, v.HeadroomTokensKnown}[i]; known && (b.headroom[i] < 0 || h < b.headroom[i]) {
			b.headroom[i] = h
		}
	}
	b.held = b.held || !v.HeadroomUntil.IsZero()
	b.cooled += v.CooledFor.Seconds()
	b.heldFor += v.HeldFor.Seconds()
	b.malformed += v.MalformedHeaders
	b.n++
	b.inflight += v.InFlight
	b.capacity = max(b.capacity, v.Cap)
	b.ttfb = max(b.ttfb, v.EWMA.Seconds())
	if breakerRank(v.BreakerState) > breakerRank(b.breaker) {
		b.breaker = v.BreakerState
	}
	b.disabled = b.disabled || v.Disabled
	b.cooling = b.cooling || !v.CooldownUntil.IsZero()
	b.slowStart = min(b.slowStart, v.SlowStart)
}

// breakerRank orders breaker states from best to worst for merging.
func breakerRank(s upstream.BreakerState) int {
	switch s {
	case upstream.BreakerOpen:
		return 2
	case upstream.BreakerHalfOpen:
		return 1
	}
	return 0
}

func breakerValue(s upstream.BreakerState) float64 {
	switch s {
	case upstream.BreakerOpen:
		return breakerOpen
	case upstream.BreakerHalfOpen:
		return breakerHalfOpen
	}
	return breakerClosed
}

// mergeBackends folds the tracked states into one set of values per id,
// as RegisterBackends documents. Per id it keeps the current states and
// the retiring ones (not current, requests still in flight) apart: the
// values come from the current ones when there are any, and in-flight
// adds the retiring ones' requests. An idle state that the table does not
// use is left out; it only waits for the registry's next prune.
func mergeBackends(backends iter.Seq[Backend]) map[string]*backendState {
	type pair struct{ current, retiring backendState }
	byID := map[string]*pair{}
	for be := range backends {
		if !be.Current && be.View.InFlight == 0 {
			continue
		}
		id := idLabel(be.ID)
		p := byID[id]
		if p == nil {
			p = &pair{}
			byID[id] = p
		}
		if be.Current {
			p.current.add(be.View)
		} else {
			p.retiring.add(be.View)
		}
	}
	out := make(map[string]*backendState, len(byID))
	for id, p := range byID {
		b := &p.retiring
		if p.current.n > 0 {
			b = &p.current
			b.inflight += p.retiring.inflight
		}
		out[id] = b
	}
	return out
}

func (c *stateCollector) collectBackends(e emitter, src sources) {
	for id, b := range mergeBackends(src.backends) {
		e.gauge(c.d.backendInFlight, float64(b.inflight), id)
		e.gauge(c.d.backendCapacity, float64(b.capacity), id)
		e.gauge(c.d.backendTTFB, b.ttfb, id)
		e.gauge(c.d.backendBreaker, breakerValue(b.breaker), id)
		e.gauge(c.d.backendDisabled, boolValue(b.disabled), id)
		e.gauge(c.d.backendCooling, boolValue(b.cooling), id)
		e.gauge(c.d.backendSlowStart, b.slowStart, id)
		for i, budget := range [2]string{"requests", "tokens"} {
			if b.headroom[i] >= 0 {
				e.gauge(c.d.backendHeadroom, b.headroom[i], id, budget)
			}
		}
		e.gauge(c.d.backendHeld, boolValue(b.held), id)
		e.ch <- prometheus.MustNewConstMetric(c.d.backendIneligible, prometheus.CounterValue, b.cooled, id, "cooldown")
		e.ch <- prometheus.MustNewConstMetric(c.d.backendIneligible, prometheus.CounterValue, b.heldFor, id, "headroom")
		e.counter(c.d.backendMalformed, b.malformed, id)
	}
}

func (c *stateCollector) collectSnapshot(e emitter, s snapshotSource) {
	st := s.status()
	e.gauge(c.d.snapshotVersion, float64(st.Version), s.kind)
	if !st.LastSuccess.IsZero() {
		e.gauge(c.d.snapshotAge, max(0, c.clock().Sub(st.LastSuccess).Seconds()), s.kind)
	}
	e.counter(c.d.snapshotRejections, st.Rejections, s.kind)
	e.counter(c.d.snapshotSigRejections, st.SignatureRejections, s.kind)
	e.counter(c.d.snapshotFetchErrors, st.FetchErrors, s.kind)
	e.gauge(c.d.snapshotStale, boolValue(st.Stale), s.kind)
}

func (c *stateCollector) collectOutbox(e emitter, src sources) {
	st := src.outbox()
	e.gauge(c.d.outboxDepth, float64(st.Depth))
	e.gauge(c.d.outboxBytes, float64(st.Bytes))
	e.gauge(c.d.outboxOldestAge, st.OldestAge.Seconds())
	e.counter(c.d.outboxAppended, st.Appended)
	e.counter(c.d.outboxDropped, st.Dropped.Full, "full")
	e.counter(c.d.outboxDropped, st.Dropped.Queue, "queue")
	e.counter(c.d.outboxDropped, st.Dropped.NotSent, "not_sent")
	e.counter(c.d.outboxDropped, st.Dropped.Failing, "failing")
	e.counter(c.d.outboxDropped, st.Dropped.Closed, "closed")
	e.counter(c.d.outboxCommitted, st.Committed)
	e.counter(c.d.outboxDeleted, st.Deleted)
	e.counter(c.d.outboxCommits, st.Commits)
	e.gauge(c.d.outboxUnsynced, float64(st.Unsynced))
	e.gauge(c.d.outboxUnsyncedAge, st.UnsyncedAge.Seconds())
	// The quarantine path is never exported, only that there is one.
	e.gauge(c.d.outboxQuarantined, boolValue(st.Quarantined != ""))
}

func (c *stateCollector) collectMQTT(e emitter, src sources) {
	st := src.mqtt()
	e.gauge(c.d.mqttConnected, boolValue(st.Connected))
	e.counter(c.d.mqttPublished, st.Published)
	e.counter(c.d.mqttAcked, st.Acked)
	e.counter(c.d.mqttReconnects, st.Reconnects)
	e.counter(c.d.mqttConnectFailures, st.ConnectFailures)
	e.counter(c.d.mqttOversize, st.Oversize)
	e.gauge(c.d.mqttInFlight, float64(st.InFlight))
}

// emitter sends const metrics. Label values passed to it are already
// closed-set words or checked ids, and the descs are fixed, so
// MustNewConstMetric cannot fail.
type emitter struct{ ch chan<- prometheus.Metric }

func (e emitter) gauge(d *prometheus.Desc, v float64, lvs ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lvs...)
}

func (e emitter) counter(d *prometheus.Desc, v uint64, lvs ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lvs...)
}
