// Package app wires the node together and owns its lifecycle.
//
// # Basics
//
// Run builds every component from a validated config, opens the API and
// health listeners, and serves until its context is cancelled. Then it
// drains in the order docs/operations.md "Drain" describes:
//
//  1. fail /readyz (the load balancer stops sending new requests);
//  2. keep accepting for Drain.Delay (LB propagation), with
//     Connection: close on HTTP/1.1 answers;
//  3. stop accepting and let in-flight requests and streams finish within
//     Drain.Grace;
//  4. at the end of the grace, cut what is left: cancel their contexts
//     (they derive from the server's base context) with cause
//     gateway.ErrShutdown, so streams end with the in-band error and
//     attempts record failure stage shutdown; give them cutWait to do so,
//     then close their connections;
//  5. stop the publisher, close the outbox (every accepted event on disk).
//
// Options.Abort (a second signal) jumps from step 2 or 3 to step 4 at
// once; the outbox close is then bounded by abortFlush and Run returns
// ErrAborted.
//
// Every goroutine started here is owned by Run and has ended when Run
// returns.
package app

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/certreload"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/gateway"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/mqttpub"
	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/internal/tracing"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/snapsign"
)

// Options are process-level knobs that are not part of the node config.
type Options struct {
	Logger *slog.Logger
	// BaseDir resolves relative file: sources (the config file's directory).
	BaseDir string
	// Listening, if set, is called once both listeners are open, with their
	// actual addresses (tests listen on port 0).
	Listening func(api, health net.Addr)
	// Version is the build version scootgate_build_info reports; "" = "dev".
	Version string
	// LogDropped, if set, counts the log lines the log output dropped
	// because it was stuck (internal/logbuf), for
	// scootgate_log_lines_dropped_total.
	LogDropped func() uint64
	// Abort, when closed after ctx was cancelled (a second SIGTERM or
	// SIGINT), ends the drain at once: what still runs is cut as at the
	// end of the grace, the usage events of the cut attempts are written
	// in one bounded commit, and Run returns ErrAborted. nil: never.
	Abort <-chan struct{}
	// Hooks follow the node's lifecycle (tests wait on them).
	Hooks Hooks
	// Pprof, when set, is a host:port on which the node serves the
	// runtime's profiles (net/http/pprof) on a listener and mux of their
	// own (pprof.go). "" (the default): no profiling endpoint. Run refuses
	// an address that is not loopback unless PprofAllowRemote.
	Pprof            string
	PprofAllowRemote bool
	// PprofListening, if set, is called with the profiling listener's
	// address once it is open.
	PprofListening func(net.Addr)
	// CredentialTicks, if set, drives the checks of file credentials
	// instead of a ticker of credentialCheckEvery (tests send on it and
	// wait for Hooks.CredentialsChecked).
	CredentialTicks <-chan time.Time
	// OpenFileLimit, if set, reports the process's open-file limit (false:
	// unknown or unlimited) in place of /proc/self/limits (tests give
	// the node a low one). limits.max_concurrent_requests is checked
	// against it at start (openfiles.go).
	OpenFileLimit func() (uint64, bool)
	// TokenClock, if set, is the clock of minted-token credentials
	// (gcp_service_account) in place of time.Now: tests move it past a
	// token's expiry.
	TokenClock func() time.Time
}

// credentialCheckEvery is how often the files of file credentials are
// stat'ed for a rotation (docs/operations.md "Credentials").
const credentialCheckEvery = 5 * time.Second

// ErrAborted is Run's error when Options.Abort ended the drain: the node
// stopped cleanly but did not let its requests finish.
var ErrAborted = errors.New("app: drain cut short by a second signal")

// errShutdown is the cause the node cancels request contexts with when it
// cuts what is still running (end of the grace, second signal), so that
// those attempts are told apart from clients that went away.
var errShutdown = gateway.ErrShutdown

// Bounds of the cut at the end of a drain.
const (
	// cutWait is how long cut requests get to write their in-band error
	// and record their usage events before their connections are closed.
	cutWait = time.Second
	// abortFlush bounds the outbox's last commit after a second signal.
	abortFlush = 2 * time.Second
)

// Run serves until ctx is cancelled, then drains and returns. It returns
// an error when the node could not start, and ErrAborted when
// Options.Abort cut the drain short.
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	n, err := build(cfg, o)
	if err != nil {
		return err
	}
	aborted, err := n.run(ctx)
	if aborted {
		n.closeOutboxWithin(abortFlush)
		return ErrAborted
	}
	n.closeOutbox()
	return err
}

// closeOutbox runs after the API has drained: every accepted usage event
// reaches the disk before exit (docs/operations.md).
func (n *node) closeOutbox() {
	if n.outbox == nil {
		return
	}
	if err := n.outbox.Close(); err != nil {
		n.log.Error("usage outbox flush at shutdown failed", "error", err)
	}
}

// closeOutboxWithin is closeOutbox bounded by d: after a second signal the
// process exits even if the disk does not answer. The queued events are
// written by one commit (the outbox writer takes its whole queue).
func (n *node) closeOutboxWithin(d time.Duration) {
	if n.outbox == nil {
		return
	}
	done := make(chan struct{})
	go func() { // owned: ends with Close; abandoned only when the process exits
		defer close(done)
		n.closeOutbox()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		n.log.Error("usage outbox flush did not finish in time; exiting without it", "limit", d)
	}
}

type node struct {
	cfg     *config.Config
	o       Options
	log     *slog.Logger
	health  *Health
	authz   *authz.Store
	pollers []*snapshot.Poller // authz always; routes when routes.source is not static
	// restoring[i] is pollers[i]'s hooked decoder (nil without a
	// Snapshot hook), told when the poller restores from disk.
	restoring []*hookedDecoder
	outbox    *outbox.Store // nil when usage events are off or the outbox could not open
	metrics   *metrics.Metrics
	pub       *mqttpub.Publisher                // nil when there is no outbox or no [mqtt] broker
	tracer    *tracing.Tracer                   // nil when tracing is off
	creds     *secret.Watcher                   // the file credentials; nil when there are none
	tokens    []*credential.TokenSource         // the minted-token credentials, by name
	limStore  *limits.Redis                     // nil with the local store of limits
	limited   *gateway.ConcurrencyLimit         // the API handler; counts requests in flight
	conns     atomic.Pointer[gateway.ConnLimit] // the API listener's per-address bounds; nil while off
	load      *upstream.NodeLoad                // whether the node itself is saturated (docs/failures.md)
	gw        *gateway.Handler                  // inside limited; owns the WebSocket connections
	api       *http.Server
	hsrv      *http.Server
}

func build(cfg *config.Config, o Options) (*node, error) {
	if o.Logger == nil {
		o.Logger = slog.New(logline.NewHandler(os.Stderr, nil))
	}
	n := &node{cfg: cfg, o: o, log: o.Logger, health: newHealth(), authz: &authz.Store{KeyHeaders: catalog.KeyHeaders()}, metrics: metrics.New(metrics.Options{Version: o.Version}),
		load: upstream.NewNodeLoad(upstream.NodeLoadOptions{ShedWait: cfg.Limits.ShedWait, ShedAfter: cfg.Limits.ShedAfter})}
	dialer, err := newDialer(cfg, newEgressFailures(n.metrics.ObserveEgressError, o.Logger, time.Now).report)
	if err != nil {
		return nil, err
	}
	n.warnPlaintextProxies()
	concurrency, err := n.concurrencyLimit()
	if err != nil {
		return nil, err
	}
	reg := upstream.NewRegistry(upstreamOptions(cfg))
	var holder routes.Holder
	if err := n.mintCredentials(dialer.Transport()); err != nil {
		return nil, err
	}

	httpOpts, err := snapshot.ConfigHTTPOptions(cfg.ControlPlane, o.Logger)
	if err != nil {
		return nil, err
	}
	store, err := snapshot.OpenDiskStore(cfg.ControlPlane.StateDir)
	if err != nil {
		return nil, fmt.Errorf("control_plane.state_dir: %w", err)
	}
	newPoller := func(name, source string, decode snapshot.DecodeFunc) (*snapshot.Poller, error) {
		src, err := snapshot.ParseSource(source, o.BaseDir, httpOpts)
		if err != nil {
			return nil, fmt.Errorf("%s.source: %w", name, err)
		}
		if keys := verifyKeys(cfg, name); len(keys) > 0 {
			ids := make([]string, len(keys))
			for i, k := range keys {
				ids[i] = snapsign.KeyID(k)
			}
			o.Logger.Info("snapshots must be signed", "snapshot", name, "keyids", ids)
		}
		var hooked *hookedDecoder
		if o.Hooks.Snapshot != nil {
			hooked = &hookedDecoder{name: name, decode: decode, hook: o.Hooks.Snapshot}
			decode = hooked.Decode
		}
		p := snapshot.NewPoller(snapshot.PollerOptions{
			Name: name, Source: src, Decode: decode,
			Interval:   cfg.ControlPlane.PollInterval,
			Jitter:     cfg.ControlPlane.PollInterval / 10,
			StaleAfter: cfg.ControlPlane.StaleAfter,
			Store:      store,
			Logger:     o.Logger,
		})
		n.pollers = append(n.pollers, p)
		n.restoring = append(n.restoring, hooked)
		n.health.Add(name, p.Ready) // docs/operations.md: loaded and not stale
		n.metrics.RegisterSnapshot(name, p.Status)
		return p, nil
	}
	// Signed unwraps DSSE envelopes and, with verify_keys, requires them
	// (docs/snapshots.md "Signed snapshots").
	// Per-key and per-tenant limits: each compiled authorization snapshot
	// binds its limited keys to the node's limiter (docs/limits.md).
	lim := limits.New(n.limiterOptions())
	// docs/api.md "Realtime sessions": a swap that revokes a key ends its
	// open sessions. The handler is made below; a swap before that has no
	// session to judge.
	var sessions atomic.Pointer[gateway.Handler]
	recheck := func() {
		if gw := sessions.Load(); gw != nil {
			gw.RecheckSessions()
		}
	}
	authzDecode := snapshot.Signed(snapsign.AuthzPayloadType, cfg.Authz.VerifyKeys, authzDecoder(n.authz, lim, recheck))
	if _, err := newPoller("authz", cfg.Authz.Source, authzDecode); err != nil {
		return nil, err
	}
	if cfg.Routes.Source == config.RoutesStatic {
		table, err := staticRoutes(cfg, reg)
		if err != nil {
			return nil, err
		}
		holder.Store(table)
	} else if _, err := newPoller("routes", cfg.Routes.Source,
		snapshot.Signed(snapsign.RoutesPayloadType, cfg.Routes.VerifyKeys,
			n.pruneModelsAfter(routesDecoder(&holder, cfg.CredentialPolicy(), reg), &holder))); err != nil {
		return nil, err
	}

	popts := gateway.Options{
		Auth:      n.authz,
		Routes:    &holder,
		Picker:    newPicker(cfg.Balance),
		Transport: dialer.Transport(),
		BodyLimit: cfg.Limits.BodyBytes,
		// An idle WebSocket is closed like an idle keep-alive connection.
		SocketIdle:     cfg.Limits.IdleTimeout,
		SocketLifetime: cfg.Limits.SocketLifetime,
		Realtime: gateway.RealtimeOptions{FrameBytes: cfg.Realtime.FrameBytes,
			Idle: cfg.Realtime.IdleTimeout, Total: cfg.Realtime.MaxDuration},
		BodyReadTimeout: cfg.Limits.BodyReadTimeout,
		BodyDeadlineSet: true, // guardBody, below
		MaxAttempts:     cfg.Limits.MaxAttempts,
		FirstByte:       cfg.Timeouts.FirstByte,
		StreamIdle:      cfg.Timeouts.StreamIdle,
		StreamProgress:  cfg.Timeouts.StreamProgress,
		StreamTotal:     cfg.Timeouts.StreamTotal,
		NonStreamTotal:  cfg.Timeouts.NonStreamTotal,
		StreamKeepalive: cfg.Timeouts.StreamKeepalive,
		Logger:          o.Logger,
		Draining:        &n.health.draining,
		NodeID:          cfg.NodeID,
		Observer:        n.metrics,
		NodeLoad:        n.load,
		// One line per request refused before routing, rate-limited.
		Refused: newRefusalLog(o.Logger, time.Now).Refused,
	}
	if o.Hooks.Refused != nil {
		logRefusal := popts.Refused
		popts.Refused = func(r gateway.Refusal) {
			logRefusal(r)
			o.Hooks.Refused(r.Status, r.Reason)
		}
	}
	// Per-model metrics read the usage event of every attempt, with or
	// without usage delivery.
	popts.Recorders = []gateway.Recorder{n.metrics}
	if o.Hooks.Request != nil {
		popts.Observer = hookedObserver{Observer: n.metrics, request: o.Hooks.Request}
	}
	// The gauges follow the definition the table in use routes to, not
	// every state the registry still holds for an id.
	n.metrics.RegisterBackends(metrics.RegistryBackends(reg, func(id upstream.Identity) bool {
		t := holder.Load()
		return t != nil && t.Uses(id)
	}))
	n.metrics.RegisterHealth(func() bool { return n.health.Ready().Ready }, n.health.Draining)
	n.watchCredentials()
	for _, p := range cfg.Egress.Proxies {
		n.metrics.InitEgress(p.Name)
	}
	if !cfg.Usage.Enabled {
		n.health.SetDetail("usage_events", "off: usage.enabled = false; requests are served without usage events")
	}
	if cfg.Usage.Enabled {
		n.openOutbox()
		if n.outbox != nil {
			rec := usage.NewRecorder(n.outbox, cfg.MQTT.MaxPayload)
			popts.Recorders = append(popts.Recorders, rec)
			popts.InjectStreamUsage = cfg.Usage.OpenAIIncludeUsage
			n.metrics.RegisterOutbox(n.outbox.Stats)
			n.metrics.RegisterUsage(rec.Stats)
			if err := n.newPublisher(); err != nil {
				n.closeOutbox()
				return nil, err
			}
		}
	}
	usageOn := n.outbox != nil
	n.metrics.RegisterUsageEvents(func() bool { return usageOn })
	if o.LogDropped != nil {
		n.metrics.RegisterLogOutput(o.LogDropped)
	}
	// Traces (off by default): the gateway adds attempt spans under the
	// request span that traced starts.
	var gw *gateway.Handler
	var handler http.Handler
	if n.tracer = newTracer(cfg, o); n.tracer != nil {
		popts.Tracer = n.tracer
		n.metrics.RegisterTraces(func() metrics.TraceStats {
			st := n.tracer.Stats()
			return metrics.TraceStats{Exported: st.Exported, Dropped: st.Dropped, Failed: st.Failed}
		})
		gw = gateway.New(popts)
		handler = traced(gw, n.tracer)
	} else {
		gw = gateway.New(popts)
		handler = gw
	}
	// limits.max_concurrent_requests, or fewer when the open-file limit
	// would run out first (docs/operations.md "Open-file limit").
	limited := gateway.LimitConcurrency(handler, concurrency, o.Logger)
	limited.Queue(cfg.Limits.QueueWait) // while the node sheds: docs/failures.md "Shedding"
	gw.UseLimit(limited)                // a WebSocket holds a slot only while an answer runs
	n.gw = gw
	sessions.Store(gw)
	n.metrics.RegisterClient(func() metrics.ClientStats {
		inflight, limit, refused := limited.Stats()
		st := metrics.ClientStats{InFlight: inflight, Limit: limit, Refused: refused, Queued: limited.Queued()}
		if cl := n.conns.Load(); cl != nil {
			st.ConnsRefused, st.ConnsResetClosed, st.Penalties = cl.Refused(), cl.ResetClosed(), cl.Penalties()
		}
		return st
	})
	n.limited = limited
	n.api = &http.Server{
		// The request path's middlewares (internal/gateway middleware.go):
		// a connection whose address abandons too many requests is closed
		// (conns.go);
		// close after chunked bodies (smuggling guard); the whole body
		// within body_read_timeout, early answers at once and closed after
		// a lingering read; a fast 503 beyond
		// limits.max_concurrent_requests.
		Handler:           gateway.LimitResets(gateway.CloseAfterChunked(gateway.GuardBody(limited, cfg.Limits.BodyReadTimeout, cfg.Limits.LingerTimeout))),
		ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout, // slowloris guard
		IdleTimeout:       cfg.Limits.IdleTimeout,
		MaxHeaderBytes:    cfg.Limits.MaxHeaderBytes, // larger → 431
		// No WriteTimeout: it would cut long streams (docs/architecture.md "Go traps").
		ErrorLog: newServerLog(o.Logger, time.Now), // handshake failures rate-limited
		// docs/operations.md "HTTP/2 limits": written out, so that a Go
		// release cannot move it unnoticed.
		HTTP2:     &http.HTTP2Config{MaxConcurrentStreams: h2MaxConcurrentStreams},
		Protocols: apiProtocols(),
		// A connection's first authenticated request ends its
		// unauthenticated time (docs/operations.md "Connection floods").
		ConnContext: gateway.ConnContext,
	}
	n.hsrv = &http.Server{
		Handler:           n.health.Handler(n.metrics.Handler()),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
	return n, nil
}

// verifyKeys returns the trusted keys of the snapshot source name.
func verifyKeys(cfg *config.Config, name string) []ed25519.PublicKey {
	if name == "authz" {
		return cfg.Authz.VerifyKeys
	}
	return cfg.Routes.VerifyKeys
}

var _ gateway.Recorder = (*metrics.Metrics)(nil)

// pruneModelsAfter wraps the routes poller's decoder: after a table is
// swapped in, the per-model series of (model, backend) pairs it no longer
// routes are deleted, so that their places under the series bound free.
func (n *node) pruneModelsAfter(decode snapshot.DecodeFunc, h *routes.Holder) snapshot.DecodeFunc {
	return func(data []byte) (uint64, func() error, error) {
		v, apply, err := decode(data)
		if err != nil {
			return v, apply, err
		}
		return v, func() error {
			if err := apply(); err != nil {
				return err
			}
			t := h.Load()
			n.metrics.PruneModels(func(model, backend string) bool { return routesTo(t, model, backend) })
			return nil
		}, nil
	}
}

// routesTo reports whether t has a target of model on backend. model is
// a metrics label: an exact name or a pattern entry, never a name a
// pattern matched (those are counted under the pattern).
func routesTo(t *routes.Table, model, backend string) bool {
	m, ok := t.Entry(model)
	if !ok {
		return false
	}
	for _, pool := range m.Pools {
		for _, tg := range pool {
			if tg.Backend.ID == backend {
				return true
			}
		}
	}
	return false
}

// openOutbox opens the usage outbox. A failure does not stop the node,
// but it makes it unready, with the reason on /readyz, unless
// usage.serve_without_outbox lets it serve without usage events (shown
// as a detail); scootgate_usage_events_enabled says which
// (docs/usage-events.md "Outbox bounds"): a node must not serve unbilled
// without anyone seeing it.
func (n *node) openOutbox() {
	st, err := outbox.Open(outboxOptions(n.cfg, n.log))
	if err != nil {
		if n.cfg.Usage.ServeWithoutOutbox {
			n.log.Error("usage outbox unavailable; serving without usage events (usage.serve_without_outbox)", "error", err)
			n.health.SetDetail("usage_events", "off: the usage outbox could not open ("+err.Error()+"); serving without usage events (usage.serve_without_outbox = true)")
			return
		}
		n.log.Error("usage outbox unavailable; the node stays unready (usage.serve_without_outbox = true would serve without usage events)", "error", err)
		reason := fmt.Errorf("the usage outbox could not open (%w); no usage event could be recorded, so the node does not take requests: fix the outbox path and restart, or set usage.serve_without_outbox = true to serve without usage events", err)
		n.health.Add("usage_outbox", func() error { return reason })
		return
	}
	if q := st.Quarantined(); q != "" {
		n.log.Error("corrupt usage outbox moved aside; a fresh one is in use", "quarantined", q)
	}
	n.outbox = st
}

// outboxOptions are the outbox's options from cfg. A commit starts
// early when as many events wait as the publisher's framing delivers in
// one short burst (mqttpub.CommitBatch).
func outboxOptions(cfg *config.Config, log *slog.Logger) outbox.Options {
	u := cfg.Usage
	return outbox.Options{
		Path:           u.OutboxPath,
		MaxEvents:      u.MaxEvents,
		MaxBytes:       u.MaxBytes,
		CommitInterval: u.CommitInterval,
		MaxBatch:       mqttpub.CommitBatch(cfg.MQTT.BatchMax, u.CrashWindowEvents),
		MaxUnsynced:    u.CrashWindowEvents,
		MaxUnsyncedAge: u.CrashWindow,
		Logger:         log,
	}
}

// newPublisher builds the MQTT publisher that drains the outbox (docs/usage-events.md).
// With no broker configured, events stay in the outbox (bounded) and the
// node says so.
func (n *node) newPublisher() error {
	m := n.cfg.MQTT
	if m.Broker == "" {
		n.log.Warn("no [mqtt] broker configured: usage events stay in the outbox until it is full")
		return nil
	}
	var tlsCfg *tls.Config
	if strings.HasPrefix(m.Broker, "ssl://") {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		if m.CAFile != "" {
			pool, err := loadPool(m.CAFile)
			if err != nil {
				return fmt.Errorf("mqtt.ca_file: %w", err)
			}
			tlsCfg.RootCAs = pool
		}
	}
	pub, err := mqttpub.New(n.outbox, mqttpub.Options{
		Broker:         m.Broker,
		ClientID:       mqttpub.ClientID(n.cfg.NodeID), // two nodes with one id would kick each other off
		Topic:          m.Topic,
		Username:       m.Username,
		Password:       m.Password,
		TLS:            tlsCfg,
		Window:         m.Window,
		BatchMax:       m.BatchMax,
		MaxPayload:     m.MaxPayload,
		KeepAlive:      m.KeepAlive,
		ConnectTimeout: m.ConnectTimeout,
		Logger:         n.log,
	})
	if err != nil {
		return fmt.Errorf("mqtt: %w", err)
	}
	n.pub = pub
	n.metrics.RegisterMQTT(func() metrics.MQTTStats {
		st := pub.Stats()
		return metrics.MQTTStats{
			Connected: st.Connected, Published: st.Published, Acked: st.Acked, Reconnects: st.Reconnects,
			ConnectFailures: st.ConnectFailures, Oversize: st.Oversize, InFlight: st.InFlight,
		}
	})
	return nil
}

// newPicker returns the configured selection algorithm (docs/routing.md
// "Balancing"), behind prompt-cache affinity for requests that name a
// session (docs/routing.md "Affinity").
func newPicker(b config.Balance) *balance.Affinity {
	var fallback balance.Picker = &balance.P2C{}
	if b.Algorithm == config.AlgorithmWeightedRandom {
		fallback = &balance.WeightedRandom{}
	}
	return &balance.Affinity{Fallback: fallback, LoadFactor: b.AffinityLoadFactor}
}

// warnPlaintextProxies says, at every start, that the explicit opt-in to
// plaintext egress proxies off loopback (egress.insecure_plaintext_proxy)
// is on, and which proxies it lets the node use, in the log and on
// /readyz (docs/egress.md "Which legs are encrypted").
func (n *node) warnPlaintextProxies() {
	if !n.cfg.Egress.InsecurePlaintextProxy {
		return
	}
	names := []string{}
	for _, p := range n.cfg.Egress.Proxies {
		if p.PlaintextRemote() {
			names = append(names, p.Name)
		}
	}
	const why = "egress proxies reached in plaintext over the network by explicit opt-in (egress.insecure_plaintext_proxy): " +
		"the connection to them is unencrypted; provider requests inside it stay TLS, and plaintext backends are refused"
	n.log.Warn(why, "proxies", names)
	if len(names) > 0 {
		n.health.SetDetail("egress", why)
	}
}

func newDialer(cfg *config.Config, onFailure func(*egress.NotSentError)) (*egress.Dialer, error) {
	// As many idle tunnels as requests may run at once: after a burst, the
	// next one reuses them (docs/egress.md "Connection reuse").
	opts := egress.Options{ConnectTimeout: cfg.Timeouts.Connect, OnFailure: onFailure,
		IdleConns: cfg.Limits.MaxConcurrentRequests, DialsPerProxy: cfg.Egress.DialsPerProxy}
	for _, p := range cfg.Egress.Proxies {
		ep := egress.Proxy{Name: p.Name, URL: p.URL, Username: p.Username, Password: p.Password}
		if p.CAFile != "" {
			pool, err := loadPool(p.CAFile)
			if err != nil {
				return nil, fmt.Errorf("egress.proxies %q: %w", p.Name, err)
			}
			ep.RootCAs = pool
		}
		opts.Proxies = append(opts.Proxies, ep)
	}
	if cfg.Egress.ProviderCAFile != "" {
		// An extra CA, added to the system roots: verification stays on.
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if err := appendPEM(pool, cfg.Egress.ProviderCAFile); err != nil {
			return nil, fmt.Errorf("egress.provider_tls.ca_file: %w", err)
		}
		opts.ProviderCAs = pool
	}
	return egress.New(opts)
}

func loadPool(path string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	return pool, appendPEM(pool, path)
}

func appendPEM(pool *x509.CertPool, path string) error {
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read CA file: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("CA file %s holds no PEM certificate", path)
	}
	return nil
}

// run serves until ctx ends and drains; aborted reports that Options.Abort
// cut the drain short.
func (n *node) run(ctx context.Context) (aborted bool, err error) {
	apiLn, err := n.listenAPI()
	if err != nil {
		return false, err
	}
	healthLn, err := net.Listen("tcp", n.cfg.Listen.Health)
	if err != nil {
		apiLn.Close()
		return false, fmt.Errorf("listen.health: %w", err)
	}
	pprofLn, err := n.listenPprof()
	if err != nil {
		apiLn.Close()
		healthLn.Close()
		return false, err
	}
	// Last good documents from disk first (a restart during a control-plane
	// outage keeps serving), then the current ones. Failures are logged,
	// shown on /readyz, and retried by Run; until an authorization
	// snapshot loads, every key gets 401 (docs/authorization.md).
	for i, p := range n.pollers {
		if d := n.restoring[i]; d != nil {
			d.fromDisk.Store(true)
		}
		err := p.Restore()
		if d := n.restoring[i]; d != nil {
			d.fromDisk.Store(false)
		}
		if err != nil {
			n.log.Warn("no usable last good snapshot on disk", "error", err)
		}
		// A failed first poll after a restore from disk loses nothing: the
		// poller has said that the restored copy keeps serving.
		if err := p.Poll(ctx); err != nil && p.Status().Version == 0 {
			n.log.Error("snapshot not loaded at start", "error", err)
		}
	}

	// Handlers' contexts derive from baseCtx; cancelling it (with cause
	// errShutdown) at the end of the grace ends streams that Shutdown
	// alone would leave running.
	baseCtx, cancelBase := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelBase(errShutdown)
	n.api.BaseContext = func(net.Listener) context.Context { return baseCtx }

	var wg sync.WaitGroup
	serve := func(srv *http.Server, ln net.Listener, name string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if srv.TLSConfig != nil {
				err = srv.ServeTLS(ln, "", "") // certificates come from TLSConfig.GetCertificate
			} else {
				err = srv.Serve(ln)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("listener stopped", "listener", name, "error", err)
			}
		}()
	}
	serve(n.api, apiLn, "api")
	serve(n.hsrv, healthLn, "health")
	var psrv *http.Server
	if pprofLn != nil {
		psrv = pprofServer()
		serve(psrv, pprofLn, "pprof")
		if n.o.PprofListening != nil {
			n.o.PprofListening(pprofLn.Addr())
		}
	}
	// The publisher outlives the drain (events of the last requests still
	// go out) and stops before the outbox closes.
	pubCtx, stopPub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPub()
	if n.pub != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.pub.Run(pubCtx); err != nil {
				n.log.Error("usage publisher stopped", "error", err)
			}
		}()
	}
	// The trace exporter, like the publisher, outlives the drain: the
	// spans of the last requests are exported before exit.
	if n.tracer != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.tracer.Run(pubCtx)
		}()
	}
	// The limits store, too: requests of the drain still take leases.
	if n.limStore != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.limStore.Run(pubCtx)
		}()
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	for _, p := range n.pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Run(pollCtx)
		}()
	}
	if n.creds != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.runCredentialWatch(pollCtx)
		}()
	}
	// Minted tokens, like the publisher, stay fresh until the last
	// request of the drain has ended; then a grant in flight is stopped.
	for _, ts := range n.tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts.Run(pubCtx)
			ts.Close()
		}()
	}
	// Like the publisher, the node's load is read until the last request
	// of the drain has ended.
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.load.Run(pubCtx, func(saturated bool, wait time.Duration) {
			if saturated {
				n.log.Warn("node saturated: its own timeouts are not held against backends", "sched_wait", wait)
				return
			}
			n.log.Info("node no longer saturated")
		}, func(shedding bool, wait time.Duration) {
			if shedding {
				n.log.Warn("node shedding: new requests beyond what its CPU serves in time wait up to limits.queue_wait, then get 503", "sched_wait", wait)
				return
			}
			n.log.Info("node no longer shedding", "sched_wait", wait, "queued", n.limited.Queued())
		}, func(shedding bool, _ time.Duration) { n.limited.Adapt(shedding) })
	}()
	n.log.Info("node started", "node_id", n.cfg.NodeID, "api", apiLn.Addr().String(), "health", healthLn.Addr().String())
	if n.o.Listening != nil {
		n.o.Listening(apiLn.Addr(), healthLn.Addr())
	}

	<-ctx.Done()
	stopPoll()
	aborted = n.drain(cancelBase)
	if psrv != nil {
		_ = psrv.Close() // after the drain, which may be what is profiled
	}
	stopPub()
	wg.Wait()
	n.log.Info("node stopped", "aborted", aborted)
	return aborted, nil
}

// watchCredentials sets up the re-reading of file credentials
// (docs/operations.md "Credentials"): every routing table holds copies
// of the same Secrets, so a new value reaches every backend at once,
// while an attempt keeps the value it read for its whole exchange.
func (n *node) watchCredentials() {
	names := slices.Sorted(maps.Keys(n.cfg.Credentials))
	secrets := make([]secret.Secret, 0, len(names))
	for _, name := range names {
		secrets = append(secrets, n.cfg.Credentials[name].Secret)
	}
	w := secret.NewWatcher(secret.WatchOptions{
		OnError: func(path string, err error) {
			n.log.Error("credential file could not be re-read; the previous value stays in use", "file", path, "error", err)
		},
		OnReload: func(path string) {
			n.log.Info("credential reloaded from its file", "file", path)
		},
	}, secrets...)
	if w.Len() == 0 {
		return
	}
	n.creds = w
	n.metrics.RegisterCredentials(func() metrics.CredentialStats {
		changed, failed := w.Stats()
		return metrics.CredentialStats{Changed: changed, Failed: failed}
	})
}

// runCredentialWatch checks the credential files on every tick until ctx
// ends.
func (n *node) runCredentialWatch(ctx context.Context) {
	ticks := n.o.CredentialTicks
	if ticks == nil {
		t := time.NewTicker(credentialCheckEvery)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			n.creds.Check()
			if n.o.Hooks.CredentialsChecked != nil {
				n.o.Hooks.CredentialsChecked()
			}
		}
	}
}

// limiterOptions configures the per-key and per-tenant limiter from
// [limits]; with store = "redis" it creates the store (connected by run),
// whose state /readyz shows as a detail and scootgate_limits_store_up
// exports (docs/limits.md "Fleet-wide: the redis store").
func (n *node) limiterOptions() limits.Options {
	l := n.cfg.Limits
	o := limits.Options{Share: l.LocalShare}
	if l.Store != config.StoreRedis {
		return o
	}
	r := l.Redis
	var tlsCfg *tls.Config
	if r.TLS {
		// Through Sentinel the name is each address dialled (crypto/tls
		// takes it from the address when ServerName is empty).
		host, _, _ := net.SplitHostPort(r.Address)
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	}
	fallback := map[string]string{
		config.OnStoreFailureLocal:  "this node's share of every limit (limits.local_share)",
		config.OnStoreFailureOpen:   "no requests or tokens per minute (on_store_failure = open)",
		config.OnStoreFailureClosed: "limited requests refused with 503 (on_store_failure = closed)",
	}[r.OnStoreFailure]
	where := r.Address
	if len(r.SentinelAddrs) > 0 {
		where = r.MasterName + " (sentinels " + strings.Join(r.SentinelAddrs, ",") + ")"
	}
	detail := func(up bool) {
		if up {
			n.health.SetDetail("limits_store", "redis "+where+": up; requests and tokens per minute and max_concurrent are fleet-wide")
		} else {
			n.health.SetDetail("limits_store", "redis "+where+": unreachable; until it answers, "+fallback)
		}
	}
	detail(false)
	n.limStore = limits.NewRedis(limits.RedisOptions{
		Address: r.Address, SentinelAddrs: r.SentinelAddrs, MasterName: r.MasterName,
		Username: r.Username, Password: r.Password, TLS: tlsCfg,
		OnChange: detail, Logger: n.log,
	})
	n.metrics.RegisterLimitsStore(n.limStore.Up, n.limStore.Calls)
	o.Fleet = n.limStore
	switch r.OnStoreFailure {
	case config.OnStoreFailureOpen:
		o.OnFailure = limits.FailOpen
	case config.OnStoreFailureClosed:
		o.OnFailure = limits.FailClosed
	}
	return o
}

// apiProtocols are the protocols of the API listener: HTTP/1.1, HTTP/2
// over TLS (ALPN h2) and, on a plaintext listener, HTTP/2 with prior
// knowledge (h2c: the AWS SDK for JavaScript to an http:// endpoint, load
// balancers speaking h2c to their backends), with the same HTTP/2 limits
// (docs/operations.md "HTTP/2 limits"). h2c by Upgrade is not served.
func apiProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// h2MaxConcurrentStreams is the streams an HTTP/2 client connection may
// have open at once (Go's own default, 250).
const h2MaxConcurrentStreams = 250

// listenAPI opens the public listener, with TLS 1.2+ when a certificate is
// configured (docs/operations.md). Config validation already refused plaintext on a
// non-loopback address without the explicit opt-in; the opt-in is logged.
func (n *node) listenAPI() (net.Listener, error) {
	l := n.cfg.Listen
	ln, err := net.Listen("tcp", l.API)
	if err != nil {
		return nil, fmt.Errorf("listen.api: %w", err)
	}
	// docs/operations.md "Connection floods": a client address over its
	// bound is closed at accept, before TLS.
	ln = gateway.LimitConns(ln, gateway.ConnBounds{
		Open:            n.cfg.Limits.MaxConnsPerClient,
		Unauthenticated: n.cfg.Limits.MaxUnauthenticatedPerClient,
		Rate:            float64(n.cfg.Limits.ConnRatePerClient),
		Resets:          float64(n.cfg.Limits.ResetsPerClient),
		Penalty:         n.cfg.Limits.ClientPenalty,
	})
	if cl, ok := ln.(*gateway.ConnLimit); ok {
		n.conns.Store(cl)
	}
	if l.TLSCertFile == "" {
		if l.InsecurePlaintext {
			const why = "API listener serves plaintext HTTP by explicit opt-in (listen.insecure_plaintext); client keys cross the network unencrypted"
			n.log.Warn(why, "api", l.API)
			n.health.SetDetail("listen", why)
		}
		return ln, nil
	}
	reloader, err := certreload.New(certreload.Options{
		CertFile: l.TLSCertFile,
		KeyFile:  l.TLSKeyFile,
		OnError: func(err error) {
			n.log.Error("TLS certificate reload failed; the previous certificate keeps serving", "error", err)
		},
		OnReload: func(notAfter time.Time) {
			n.log.Info("TLS certificate reloaded", "not_after", notAfter)
		},
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen.tls_cert_file: %w", err)
	}
	// ServeTLS wraps the listener and enables HTTP/2 (h2 via ALPN).
	n.api.TLSConfig = &tls.Config{
		MinVersion:     tls.VersionTLS12, // docs/operations.md: TLS 1.2+
		CipherSuites:   tls12Suites,
		GetCertificate: reloader.GetCertificate,
	}
	return ln, nil
}

// tls12Suites are the TLS 1.2 cipher suites the API listener accepts:
// Mozilla's "intermediate" profile as Go implements it, ECDHE with an AEAD
// only (no CBC, no RSA key exchange; Go has no DHE). TLS 1.3 suites are
// not configurable and are all AEAD. HTTP/2 requires the first two
// (RFC 9113 §9.2.2).
var tls12Suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// drain implements the shutdown order in the package doc.
func (n *node) drain(cancelBase context.CancelCauseFunc) (aborted bool) {
	d := n.cfg.Drain
	n.health.StartDraining()
	start := time.Now()
	n.log.Info("draining", "delay", d.Delay, "grace", d.Grace)
	if n.o.Hooks.Draining != nil {
		n.o.Hooks.Draining()
	}
	abort := n.o.Abort // nil: never
	if d.Delay > 0 {
		t := time.NewTimer(d.Delay)
		select {
		case <-t.C:
		case <-abort:
			aborted = true
		}
		t.Stop()
	}
	err := context.Canceled
	if !aborted {
		graceCtx, cancel := context.WithTimeout(context.Background(), d.Grace)
		stop := make(chan struct{})
		go func() { // owned: ends when Shutdown has returned
			select {
			case <-abort:
				cancel()
			case <-stop:
			}
		}()
		// WebSocket connections are hijacked: Shutdown neither sees nor
		// waits for them. They are told to go away as it starts, and
		// waited for within the same grace.
		n.api.RegisterOnShutdown(n.gw.GoingAway)
		err = n.api.Shutdown(graceCtx)
		if err == nil {
			err = n.gw.WaitSockets(graceCtx)
		}
		close(stop)
		cancel()
		aborted = closed(abort)
	}
	if err != nil {
		if aborted {
			n.log.Warn("second signal: cutting the remaining requests now", "after", time.Since(start).Round(time.Millisecond))
		} else {
			n.log.Warn("grace period over; cancelling remaining requests", "error", err, "after", time.Since(start).Round(time.Millisecond))
			if n.o.Hooks.GraceOver != nil {
				n.o.Hooks.GraceOver()
			}
		}
		n.cut(cancelBase)
	} else {
		n.log.Info("drained: every request finished", "took", time.Since(start).Round(time.Millisecond))
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), time.Second)
	defer cancelClose()
	_ = n.hsrv.Shutdown(closeCtx)
	_ = n.hsrv.Close()
	return aborted
}

// cut ends the requests still running: their contexts are cancelled with
// errShutdown, so streams end with the in-band error and every attempt
// records its usage event with failure stage shutdown. They get cutWait to
// do that before their connections are closed.
func (n *node) cut(cancelBase context.CancelCauseFunc) {
	cancelBase(errShutdown)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(cutWait)
	for n.limited.InFlight() > 0 && time.Now().Before(deadline) {
		<-t.C
	}
	n.gw.GoingAway() // after a second signal Shutdown never ran
	wctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	_ = n.gw.WaitSockets(wctx)
	if left := n.limited.InFlight(); left > 0 {
		n.log.Warn("requests still running after the cut; closing their connections", "requests", left)
	}
	_ = n.api.Close()
}

// closed reports whether ch is closed (a nil ch never is).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
