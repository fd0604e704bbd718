package metrics

import (
	"iter"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Options configures New. The zero value is the production setting.
type Options struct {
	// Clock reads "now" for ages computed at scrape time (snapshot age).
	// Nil means time.Now; give it the clock the snapshot pollers use.
	Clock func() time.Time
	// Version is the build version exported by scootgate_build_info
	// (the binary's -X main.version); "" means "dev".
	Version string
	// MaxModelSeries bounds the (public model, backend) pairs that get
	// scootgate_model_* series of their own; later pairs are counted under
	// model="_other" per backend. 0 means DefaultMaxModelSeries.
	MaxModelSeries int
	// NoRuntime leaves out the Go runtime and process collectors (go_*,
	// process_*), for tests that compare whole expositions.
	NoRuntime bool
}

// maxScrapes bounds concurrent scrapes of Handler; more get 503 at once.
// A scrape walks every backend and calls each registered Stats func, so
// a flood of them must not take CPU from the request path.
const maxScrapes = 4

// Metrics is the node's set of Prometheus metrics, on its own registry
// (never prometheus.DefaultRegisterer: no package-global state). The app
// owns one value; the request path (internal/gateway) calls the Observe methods, and the app
// registers the state read at scrape time. All methods are safe for
// concurrent use, and every method of a nil *Metrics does nothing (Handler
// serves 404), so tests of other packages need no registry.
type Metrics struct {
	// immutable after New
	clock  func() time.Time
	reg    *prometheus.Registry
	codes  statusCodes
	stages map[egress.Stage]string // egress.Stage names

	requests     *prometheus.CounterVec // endpoint, code, send_state
	duration     [numEndpoints][2]prometheus.Observer
	attempts     *prometheus.CounterVec   // backend, platform, outcome
	ttfb         *prometheus.HistogramVec // backend, platform
	egressErrors *prometheus.CounterVec   // proxy, stage
	placements   *prometheus.CounterVec   // placement
	placementSet map[string]string
	limitRefused *prometheus.CounterVec // scope, kind: closed sets
	fallbacks    *prometheus.CounterVec // from, to: model entries of a chain the routes define; reason: a closed set
	models       *modelFamilies

	// requestCounters holds the requests child of each (endpoint, code,
	// send state) once resolved (requestCounter's key → prometheus.Counter):
	// the label sets are closed and no series of the family is ever
	// deleted, so a child is found again without hashing and validating
	// its label values on every request.
	requestCounters sync.Map

	state *stateCollector
}

// New returns a Metrics with every family registered on a new registry,
// plus the Go runtime and process collectors unless o.NoRuntime.
func New(o Options) *Metrics {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	m := &Metrics{
		clock:  o.Clock,
		reg:    prometheus.NewRegistry(),
		codes:  newStatusCodes(),
		stages: stageLabels(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scootgate_requests_total",
			Help: "Client requests by endpoint, HTTP status code returned and final send state.",
		}, []string{"endpoint", "code", "send_state"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scootgate_upstream_attempts_total",
			Help: "Provider attempts by backend, its platform and outcome.",
		}, []string{"backend", "platform", "outcome"}),
		ttfb: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "scootgate_upstream_ttfb_seconds",
			Help: "Time from sending a request to the provider's first response byte, successful attempts only, by backend and its platform.",
			// LLM first tokens: tens of ms (cached, small) to a minute
			// (long prompts, reasoning models queued at the provider).
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 45, 60},
		}, []string{"backend", "platform"}),
		egressErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scootgate_egress_errors_total",
			Help: "Egress dials that failed before any request byte, by proxy and stage.",
		}, []string{"proxy", "stage"}),
	}
	// Affinity hits, spills by reason and keyless requests: a closed set
	// of labels, created at 0 (docs/routing.md "Affinity").
	m.placements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scootgate_affinity_placements_total",
		Help: "Provider attempts by how their target was chosen: balanced (affinity off), keyless, affinity, prefix, spill_overloaded, spill_unavailable, spill_retry.",
	}, []string{"placement"})
	m.placementSet = map[string]string{}
	for _, p := range []string{usageevent.PlacementBalanced, usageevent.PlacementKeyless, usageevent.PlacementAffinity, usageevent.PlacementPrefix,
		usageevent.PlacementSpillOverloaded, usageevent.PlacementSpillUnavailable, usageevent.PlacementSpillRetry} {
		m.placementSet[p] = p
	}
	// Limit refusals by whose limit and which: never a key or tenant id
	// in a label (docs/limits.md "Refusals").
	m.limitRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scootgate_limits_refused_total",
		Help: "Requests refused with 429 by a per-key or per-tenant limit, by scope (key, tenant) and kind (requests, tokens, concurrency, budget, abandoned).",
	}, []string{"scope", "kind"})
	// Fallbacks taken (docs/routing.md "Fallbacks"): from and to are
	// model entries, never asked names, and only pairs a chain of the
	// routes defines, so the series are bounded by the routes.
	m.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scootgate_fallbacks_total",
		Help: "Requests served by a fallback model because no target of the model they named could take them before sending, by that model (from), the model that served (to) and why (endpoint, capability, context, not_sent, at_cap, headroom, unavailable).",
	}, []string{"from", "to", "reason"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "scootgate_request_duration_seconds",
		Help: "Client request duration, from arrival to the end of the response (the whole stream for streams).",
		// Streams run for minutes; rejections take microseconds.
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600},
	}, []string{"endpoint", "stream"})
	for e := range numEndpoints {
		for s := range 2 {
			m.duration[e][s] = duration.WithLabelValues(endpointNames[e], boolLabel(s == 1))
		}
	}
	if o.MaxModelSeries <= 0 {
		o.MaxModelSeries = DefaultMaxModelSeries
	}
	m.models = newModelFamilies(o.MaxModelSeries)
	m.state = newStateCollector(m.clock)
	m.reg.MustRegister(m.requests, duration, m.attempts, m.ttfb, m.egressErrors, m.placements, m.limitRefused, m.fallbacks, m.state, buildInfo(o.Version))
	m.reg.MustRegister(m.models.collectors()...)
	if !o.NoRuntime {
		m.reg.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
	}
	return m
}

// Handler serves the exposition of every registered metric. Mount it on
// the health listener only (docs/operations.md), never on the API listener. At most
// a few scrapes run at once; more are answered 503.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: maxScrapes,
	})
}

// Gatherer returns the registry, for tests that inspect the metrics; on
// a nil *Metrics it gathers nothing.
func (m *Metrics) Gatherer() prometheus.Gatherer {
	if m == nil {
		return prometheus.Gatherers(nil)
	}
	return m.reg
}

// ObserveRequest records one finished client request to endpoint: status
// the HTTP status sent to the client, sendState the final attempt's send
// state (provider.NoAttempt when none was made), d the time from arrival to
// the end of the response. Values outside those sets are counted as
// "unknown". It does not allocate.
func (m *Metrics) ObserveRequest(endpoint provider.Endpoint, status int, sendState provider.SendState, d time.Duration, stream bool) {
	if m == nil {
		return
	}
	m.observeRequest(endpointOf(endpoint), status, sendState, d, stream)
}

// ObserveModels records one finished GET /v1/models or /v1/models/{id}
// (endpoint "models", send state none). It does not allocate.
func (m *Metrics) ObserveModels(status int, d time.Duration) {
	if m == nil {
		return
	}
	m.observeRequest(epModels, status, provider.NoAttempt, d, false)
}

func (m *Metrics) observeRequest(e endpoint, status int, sendState provider.SendState, d time.Duration, stream bool) {
	m.requestCounter(e, status, sendState).Inc()
	s := 0
	if stream {
		s = 1
	}
	m.duration[e][s].Observe(d.Seconds())
}

// requestCounter returns the requests child of (e, status, sendState),
// resolving it the first time.
func (m *Metrics) requestCounter(e endpoint, status int, sendState provider.SendState) prometheus.Counter {
	code := uint64(0) // "unknown", as statusCodes.label
	if status >= 100 && status <= 599 {
		code = uint64(status)
	}
	state := uint64(provider.NumSendStates) // "unknown", as sendStateLabel
	if sendState < provider.NumSendStates {
		state = uint64(sendState)
	}
	key := (uint64(e)<<16|code)<<16 | state
	if c, ok := m.requestCounters.Load(key); ok {
		return c.(prometheus.Counter)
	}
	c := m.requests.WithLabelValues(endpointNames[e], m.codes.label(status), sendStateLabel(sendState))
	m.requestCounters.Store(key, c)
	return c
}

// ObserveAttempt records one provider attempt: backend is the backend id,
// platform its platform's name (docs/routing.md "Platforms": a backend has
// one, so the label adds no series), outcome how the attempt ended. ttfb
// is sampled only for a success and only when positive: an error reply is
// not a latency sample (docs/failures.md "Fast errors"). It does not
// allocate.
func (m *Metrics) ObserveAttempt(backend, platform string, outcome upstream.Outcome, ttfb time.Duration) {
	if m == nil {
		return
	}
	b, p := idLabel(backend), platformLabel(platform)
	m.attempts.WithLabelValues(b, p, outcomeLabel(outcome)).Inc()
	if ttfb > 0 && outcome == upstream.Success {
		m.ttfb.WithLabelValues(b, p).Observe(ttfb.Seconds())
	}
}

// ObserveLimitRefusal records one request refused by a per-key or
// per-tenant limit: scope "key" or "tenant", kind "requests", "tokens",
// "concurrency" or "budget"; anything else is not counted.
func (m *Metrics) ObserveLimitRefusal(scope, kind string) {
	if m == nil {
		return
	}
	switch {
	case scope != "key" && scope != "tenant":
	case kind != "requests" && kind != "tokens" && kind != "concurrency" && kind != "budget" && kind != "abandoned":
	default:
		m.limitRefused.WithLabelValues(scope, kind).Inc()
	}
}

// ObserveFallback records one request served by the fallback model to
// because no target of from, the model entry it named, could take it
// (docs/routing.md "Fallbacks").
//
// reason is one of endpoint, capability, context, not_sent, at_cap,
// headroom and unavailable; anything else is not counted.
func (m *Metrics) ObserveFallback(from, to, reason string) {
	if m == nil {
		return
	}
	switch reason {
	case "endpoint", "capability", "context", "not_sent", "at_cap", "headroom", "unavailable":
		m.fallbacks.WithLabelValues(from, to, reason).Inc()
	}
}

// ObserveEgressError records a dial that failed with an
// *egress.NotSentError: proxy is its Proxy (the configured proxy name),
// stage its Stage. Dials ended by the caller's own context are
// not egress errors; the caller leaves them out (see egress.NotSentError).
func (m *Metrics) ObserveEgressError(proxy string, stage egress.Stage) {
	if m == nil {
		return
	}
	m.egressErrors.WithLabelValues(idLabel(proxy), stageLabel(m.stages, stage)).Inc()
}

// Record takes a finished attempt's usage event (a gateway Recorder;
// the app hands each event to this and to the usage recorder) and counts
// it in the scootgate_model_* families under its public model and
// backend: the attempt by the class of the status sent to the client,
// its bytes, the provider's reported tokens, the TTFB of a 2xx answer and
// the duration of a relayed stream. It reads ev and keeps nothing of it.
// Once a pair's series exist it does not allocate.
func (m *Metrics) Record(ev *usageevent.Event) {
	if m == nil || ev == nil {
		return
	}
	m.models.observe(ev)
	if ev.Placement != "" {
		m.placements.WithLabelValues(closedLabel(m.placementSet, ev.Placement)).Inc()
	}
}

// PruneModels deletes the scootgate_model_* series of every (public
// model, backend) pair that keep rejects, freeing their places under
// Options.MaxModelSeries. Call it after a route swap with keep reporting
// whether the new table still routes the model to the backend; a pair
// that comes back starts afresh (a counter reset, which rate() handles).
func (m *Metrics) PruneModels(keep func(model, backend string) bool) {
	if m == nil {
		return
	}
	m.models.prune(keep)
}

// InitEgress creates the scootgate_egress_errors_total series of every
// stage of each named proxy at 0, so that an alert on their rate sees 0
// from the start, not "no data" until the first failure. Call it once
// with the configured proxy names.
func (m *Metrics) InitEgress(proxies ...string) {
	if m == nil {
		return
	}
	for _, p := range proxies {
		for _, st := range sortedValues(m.stages) {
			m.egressErrors.WithLabelValues(idLabel(p), st)
		}
	}
}

// buildInfo is scootgate_build_info: always 1, the build in its labels.
func buildInfo(version string) prometheus.Collector {
	if version == "" {
		version = "dev"
	}
	revision := labelUnknown
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "scootgate_build_info",
		Help: "Always 1; the labels name the running build: version, VCS revision, Go version.",
		ConstLabels: prometheus.Labels{
			"version": versionLabel(version), "revision": versionLabel(revision), "goversion": versionLabel(runtime.Version()),
		},
	})
	g.Set(1)
	return g
}

// RegisterHealth sets the source of scootgate_ready and
// scootgate_draining: ready reports what /readyz would answer, draining
// whether the drain has begun.
func (m *Metrics) RegisterHealth(ready, draining func() bool) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.health = &healthSource{ready, draining} })
}

// RegisterUsageEvents sets the source of scootgate_usage_events_enabled:
// 1 while usage events are recorded into the outbox, 0 while the node
// runs without them (usage.enabled = false, or an outbox that could not
// open, docs/usage-events.md "Outbox bounds"). Without it the gauge is
// not exported.
func (m *Metrics) RegisterUsageEvents(enabled func() bool) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.usageEvents = enabled })
}

// RegisterLogOutput sets the source of scootgate_log_lines_dropped_total:
// the log lines dropped because the log output was stuck (internal/logbuf).
// Without it the counter is not exported.
func (m *Metrics) RegisterLogOutput(dropped func() uint64) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.logDropped = dropped })
}

// RegisterLimitsStore sets the sources of scootgate_limits_store_up,
// whether the redis store of limits answers (docs/limits.md), and of
// scootgate_limits_store_round_trips_total, the round trips the node
// made to it. Without it (the local store) neither is exported.
func (m *Metrics) RegisterLimitsStore(up func() bool, roundTrips func() int64) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.store, s.storeRTs = up, roundTrips })
}

// ClientStats is the API listener's concurrency limit as
// scootgate_client_* exports it.
type ClientStats struct {
	InFlight int64  // client requests being served now
	Limit    int    // limits.max_concurrent_requests, or lower (the open-file limit)
	Refused  uint64 // requests answered 503 at once at the limit, or refused while shedding
	Queued   int64  // requests waiting for a slot while the node sheds

	// The API listener's per-address bounds (zero while they are off).
	ConnsRefused     uint64 // connections closed at accept: over a bound, or in a penalty
	ConnsResetClosed uint64 // connections closed for their address's resets
	Penalties        uint64 // penalties begun
}

// RegisterClient sets the source of the scootgate_client_* metrics.
func (m *Metrics) RegisterClient(stats func() ClientStats) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.client = stats })
}

// CredentialStats is what the file-credential watcher reports for
// scootgate_credential_reloads_total.
type CredentialStats struct {
	Changed, Failed uint64
}

// RegisterCredentials sets the source of scootgate_credential_reloads_total;
// without one (no file credentials) the family is absent.
func (m *Metrics) RegisterCredentials(stats func() CredentialStats) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.creds = stats })
}

// TokenCredential is one minted-token credential's state for
// scootgate_credential_token_state: its name and one of tokenStates.
type TokenCredential struct{ Name, State string }

// tokenStates are the states of a minted-token credential
// (credential.TokenState's names), each a series of
// scootgate_credential_token_state.
func tokenStates() [4]string { return [...]string{"ok", "pending", "refresh_failing", "expired"} }

// RegisterTokens sets the source of scootgate_credential_token_state;
// without one (no minted-token credentials) the family is absent.
func (m *Metrics) RegisterTokens(states func() []TokenCredential) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.tokens = states })
}

// TraceStats is what the trace exporter reports for
// scootgate_trace_spans_total (it mirrors tracing.Stats, so this package
// does not depend on the exporter; the app converts).
type TraceStats struct {
	Exported, Dropped, Failed uint64
}

// RegisterTraces sets the source of scootgate_trace_spans_total; without
// one (tracing off) the family is absent.
func (m *Metrics) RegisterTraces(stats func() TraceStats) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.traces = stats })
}

// ForgetBackend drops the request-path series of a backend id (attempts
// and TTFB), so ids that a route snapshot removed do not stay exported
// for the life of the process. Call it when no table routes to the id any
// more; a later attempt on it starts its series afresh (a counter reset,
// which Prometheus' rate() handles).
func (m *Metrics) ForgetBackend(id string) {
	if m == nil {
		return
	}
	b := idLabel(id)
	m.attempts.DeletePartialMatch(prometheus.Labels{"backend": b})
	m.ttfb.DeletePartialMatch(prometheus.Labels{"backend": b})
}

// Backend is one tracked backend state, as the scootgate_backend_*
// gauges read it.
type Backend struct {
	ID   string // the backend id from config or the route snapshot
	View upstream.View
	// Current is true when the routing table in use routes to this state.
	// A redefined backend (new base URL, credential or cap under the same
	// id) gets a new state; the old one is kept, not current, while
	// requests pinned to the previous table still hold slots in it.
	Current bool
}

// RegisterBackends sets the source of the scootgate_backend_* gauges: at
// each scrape, backends is ranged over and yields every tracked backend
// state. Use RegistryBackends for an *upstream.Registry.
//
// The gauges of an id describe its current state: capacity, TTFB
// estimate, breaker, flags and slow start are that state's, and in-flight
// adds the requests still running on retiring states of the id (they load
// the provider too, so in-flight can exceed capacity for a while after a
// redefinition). Idle states the table no longer uses are left out. An id
// with no current state but requests in flight (a removed backend) stays
// exported from its retiring states until they finish. Several states of
// one kind with one id are merged: in-flight adds up, capacity and the
// TTFB estimate are the largest, a flag is set when any state's is, the
// breaker state is the worst (open, then half-open, then closed).
func (m *Metrics) RegisterBackends(backends iter.Seq[Backend]) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.backends = backends })
}

// RegistryBackends adapts an upstream.Registry for RegisterBackends.
// current reports whether the routing table in use routes to an identity
// (routes.Table.Uses of the table loaded at scrape time); nil counts every
// state as current.
func RegistryBackends(r *upstream.Registry, current func(upstream.Identity) bool) iter.Seq[Backend] {
	return func(yield func(Backend) bool) {
		for id, st := range r.All() {
			if !yield(Backend{ID: id.ID, View: st.View(), Current: current == nil || current(id)}) {
				return
			}
		}
	}
}

// Snapshot kinds (the label of scootgate_snapshot_*).
const (
	SnapshotAuthz  = "authz"
	SnapshotRoutes = "routes"
)

// RegisterSnapshot sets the source of the scootgate_snapshot_* metrics for
// one kind (SnapshotAuthz or SnapshotRoutes; any id-shaped word works).
// Registering a kind again replaces its source. Only the counters and
// Version, LastSuccess and Stale of the Status are read; its error texts
// never are.
func (m *Metrics) RegisterSnapshot(kind string, status func() snapshot.Status) {
	if m == nil {
		return
	}
	k := idLabel(kind)
	m.state.set(func(s *sources) {
		for i := range s.snapshots {
			if s.snapshots[i].kind == k {
				s.snapshots[i].status = status
				return
			}
		}
		s.snapshots = append(s.snapshots, snapshotSource{k, status})
	})
}

// RegisterOutbox sets the source of the scootgate_outbox_* metrics,
// usually (*outbox.Store).Stats. Without one (usage events off, or the
// outbox could not open) they are absent.
func (m *Metrics) RegisterOutbox(stats func() outbox.Stats) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.outbox = stats })
}

// MQTTStats is what the MQTT publisher reports for scootgate_mqtt_*. It
// mirrors the publisher's own Stats (less its error text), so this
// package does not depend on the publisher; the app converts.
type MQTTStats struct {
	Connected       bool   // a broker connection is up now
	Published       uint64 // PUBLISH packets sent, replays included
	Acked           uint64 // events deleted from the outbox after their PUBACK
	Reconnects      uint64 // connections established after the first one
	ConnectFailures uint64 // connection attempts that failed
	Oversize        uint64 // events larger than the broker's limit, dropped unpublished
	InFlight        int    // publishes awaiting their PUBACK now
}

// RegisterMQTT sets the source of the scootgate_mqtt_* metrics.
func (m *Metrics) RegisterMQTT(stats func() MQTTStats) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.mqtt = stats })
}

// RegisterUsage sets the source of scootgate_usage_events_total, usually
// (*usage.Recorder).Stats.
func (m *Metrics) RegisterUsage(stats func() usage.RecorderStats) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.usage = stats })
}
