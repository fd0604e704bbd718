package metrics

import (
	"iter"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
)

// Options configures New. The zero value is the production setting.
type Options struct {
	// Clock reads "now" for ages computed at scrape time (snapshot age).
	// Nil means clock.Real; give it the clock the snapshot pollers use.
	Clock clock.Clock
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
// owns one value; the proxy calls the Observe methods, and the app
// registers the state read at scrape time. All methods are safe for
// concurrent use, and every method of a nil *Metrics does nothing (Handler
// serves 404), so tests of other packages need no registry.
type Metrics struct {
	// immutable after New
	clock    clock.Clock
	reg      *prometheus.Registry
	codes    statusCodes
	outcomes map[string]string // upstream.Outcome names
	stages   map[string]string // egress.Stage names

	requests     *prometheus.CounterVec // endpoint, code, send_state
	duration     [numEndpoints][2]prometheus.Observer
	attempts     *prometheus.CounterVec   // backend, outcome
	ttfb         *prometheus.HistogramVec // backend
	egressErrors *prometheus.CounterVec   // proxy, stage

	state *stateCollector
}

// New returns a Metrics with every family registered on a new registry,
// plus the Go runtime and process collectors unless o.NoRuntime.
func New(o Options) *Metrics {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	m := &Metrics{
		clock:    o.Clock,
		reg:      prometheus.NewRegistry(),
		codes:    newStatusCodes(),
		outcomes: outcomeLabels(),
		stages:   stageLabels(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scootgate_requests_total",
			Help: "Client requests by endpoint, HTTP status code returned and final send state.",
		}, []string{"endpoint", "code", "send_state"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scootgate_upstream_attempts_total",
			Help: "Provider attempts by backend and outcome.",
		}, []string{"backend", "outcome"}),
		ttfb: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "scootgate_upstream_ttfb_seconds",
			Help: "Time from sending a request to the provider's first response byte, successful attempts only.",
			// LLM first tokens: tens of ms (cached, small) to a minute
			// (long prompts, reasoning models queued at the provider).
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 45, 60},
		}, []string{"backend"}),
		egressErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scootgate_egress_errors_total",
			Help: "Egress dials that failed before any request byte, by proxy and stage.",
		}, []string{"proxy", "stage"}),
	}
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
	m.state = newStateCollector(m.clock)
	m.reg.MustRegister(m.requests, duration, m.attempts, m.ttfb, m.egressErrors, m.state)
	if !o.NoRuntime {
		m.reg.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
	}
	return m
}

// Handler serves the exposition of every registered metric. Mount it on
// the health listener only (SPEC §9), never on the API listener. At most
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

// ObserveRequest records one finished client request: endpoint is one of
// the Endpoint* constants, status the HTTP status sent to the client,
// sendState the final attempt's send state (usageevent.Send*) or
// SendStateNone, d the time from arrival to the end of the response.
// Values outside those sets are counted as "unknown". It does not allocate.
func (m *Metrics) ObserveRequest(endpoint string, status int, sendState string, d time.Duration, stream bool) {
	if m == nil {
		return
	}
	e := parseEndpoint(endpoint)
	m.requests.WithLabelValues(endpointNames[e], m.codes.label(status), sendStateLabel(sendState)).Inc()
	s := 0
	if stream {
		s = 1
	}
	m.duration[e][s].Observe(d.Seconds())
}

// ObserveAttempt records one provider attempt: backend is the backend id,
// outcome an upstream.Outcome's String(). ttfb is sampled only for a
// success and only when positive: an error reply is not a latency sample
// (SPEC §11 "Fast 429s are not fast answers"). It does not allocate.
func (m *Metrics) ObserveAttempt(backend, outcome string, ttfb time.Duration) {
	if m == nil {
		return
	}
	b, o := idLabel(backend), closedLabel(m.outcomes, outcome)
	m.attempts.WithLabelValues(b, o).Inc()
	if ttfb > 0 && o == upstream.Success.String() {
		m.ttfb.WithLabelValues(b).Observe(ttfb.Seconds())
	}
}

// ObserveEgressError records a dial that failed with an
// *egress.NotSentError: proxy is its Proxy (the configured proxy name),
// stage its Stage.String(). Dials ended by the caller's own context are
// not egress errors; the caller leaves them out (see egress.NotSentError).
func (m *Metrics) ObserveEgressError(proxy, stage string) {
	if m == nil {
		return
	}
	m.egressErrors.WithLabelValues(idLabel(proxy), closedLabel(m.stages, stage)).Inc()
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
	m.ttfb.DeleteLabelValues(b)
}

// RegisterBackends sets the source of the scootgate_backend_* gauges: at
// each scrape, backends is ranged over and yields every tracked backend's
// id and View. Use RegistryBackends for an *upstream.Registry. Several
// entries with one id (a redefined backend whose old state still has
// requests in flight) are merged: in-flight and capacity add up, the TTFB
// estimate is the largest, the flags are set when any entry's is, and the
// breaker state is the worst (open, then half-open, then closed).
func (m *Metrics) RegisterBackends(backends iter.Seq2[string, upstream.View]) {
	if m == nil {
		return
	}
	m.state.set(func(s *sources) { s.backends = backends })
}

// RegistryBackends adapts an upstream.Registry for RegisterBackends.
func RegistryBackends(r *upstream.Registry) iter.Seq2[string, upstream.View] {
	return func(yield func(string, upstream.View) bool) {
		for id, st := range r.All() {
			if !yield(id.ID, st.View()) {
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
