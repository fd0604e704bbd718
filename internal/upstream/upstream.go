package upstream

import (
	"iter"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Identity names a backend for state purposes: two definitions with the
// same identity share one State.
type Identity struct {
	Protocol   string
	BaseURL    string
	Credential string
	Cap        int
	ID         string
	// Platform is the backend's cloud platform and its coordinates
	// (docs/routing.md "Platforms"), "" on the protocol's own wire: a
	// backend moved to another platform or region starts fresh.
	Platform string
}

const (
	minRamp            = 0.1            // slow start begins at 10% of the weight (Envoy's min_weight_percent default)
	floorFraction      = 0.01           // reads of the estimate never go below 1% of DefaultTTFB
	maxQuotaRetryAfter = 24 * time.Hour // a quota 429's Retry-After counts up to this
)

// Instant is a reading of a Registry's clock in the form the hot-path
// State methods compare cheaply (nanoseconds since the Registry was
// created). A picker reads it once per pick with [State.Now]; Instants of
// different Registries do not mix.
type Instant int64

// shared is what every State of one Registry reads. Immutable.
type shared struct {
	o         Options // with defaults applied
	epoch     time.Time
	real      bool    // Options.Clock was nil, the real clock: time.Since(epoch) reads only the monotonic clock, half the cost of Now
	invTau    float64 // 1 / DecayWindow in ns
	floor     float64 // seconds
	lnFloor   float64 // ln(floor)
	slowStart int64   // ns; 0 = off
	invSlow   float64 // 1 / slowStart
}

func (sh *shared) instant(t time.Time) Instant { return Instant(t.Sub(sh.epoch)) }

func (sh *shared) now() Instant {
	if sh.real {
		return Instant(time.Since(sh.epoch))
	}
	return sh.instant(sh.o.Clock())
}

func (sh *shared) time(i Instant) time.Time { return sh.epoch.Add(time.Duration(i)) }

// State is one backend's hot state. Safe for concurrent use; the request
// path never takes a lock except on a breaker transition or an EWMA sample.
type State struct {
	// immutable
	sh      *shared
	cap     int64
	created Instant // slow start counts from here
	br      *Breaker

	// atomic
	inflight atomic.Int64
	// probeAt is 0 while the backend is enabled. After a provider 401/403
	// it is the Instant from which one probe may go out (the disable time
	// plus Options.AuthProbeAfter; never 0, as the probe delay is positive).
	probeAt  atomic.Int64
	probing  atomic.Bool   // the one probe of a disabled backend is out
	cooldown atomic.Int64  // Instant; no traffic while now < cooldown (0 = never set)
	cooled   atomic.Int64  // total ns of cooldown scheduled (metrics)
	acquired atomic.Uint64 // slots taken and not given back unused (Result.Sent)
	lat      peakEWMA
	hr       headroom
}

// Cap returns the backend's max_inflight_per_node.
func (s *State) Cap() int64 { return s.cap }

// InFlight returns the current number of requests holding a slot.
func (s *State) InFlight() int64 { return s.inflight.Load() }

// Now reads the clock of the Registry that owns s. Every State of a
// routing table comes from one Registry, so a picker reads it once per pick
// and compares the whole pool at that instant.
func (s *State) Now() Instant { return s.sh.now() }

// coolingAt reports whether a cooldown is running at now.
func (s *State) coolingAt(now Instant) bool {
	c := s.cooldown.Load()
	return c != 0 && int64(now) < c
}

// Ready reports whether s could take a request at now: not disabled (or
// disabled with its probe due and not out), not cooling down, its breaker
// closed or due for a probe, and below its cap. It takes nothing; Acquire
// settles the races.
func (s *State) Ready(now Instant) bool {
	if p := s.probeAt.Load(); p != 0 && (int64(now) < p || s.probing.Load()) {
		return false
	}
	return !s.coolingAt(now) && !s.hr.holding(now) && s.inflight.Load() < s.cap && s.br.Ready()
}

// ReadyNow is Ready at the Registry's clock, which it reads only when a
// disable or a cooldown needs the time (a breaker reads its own clock when
// open): a picker that checks one or two backends, as affinity does,
// usually reads no clock at all.
func (s *State) ReadyNow() bool {
	if s.probeAt.Load() == 0 && s.cooldown.Load() == 0 && s.hr.until.Load() == 0 {
		return s.inflight.Load() < s.cap && s.br.Ready()
	}
	return s.Ready(s.sh.now())
}

// Disabled reports whether a provider 401/403 has disabled s.
func (s *State) Disabled() bool { return s.probeAt.Load() != 0 }

// Enable ends a disable: a newer routing table that still lists the
// backend says its definition is wanted, perhaps with a credential fixed
// under the same name (docs/failures.md "Disabled backends").
func (s *State) Enable() {
	s.probeAt.Store(0)
	s.probing.Store(false)
}

// Acquire takes one in-flight slot. It refuses when s is disabled, cooling
// down, held back by its breaker (open, or half-open with the probe out),
// or at its cap. The cap is a compare-and-swap, so InFlight never exceeds
// Cap under any concurrency (docs/failures.md). When the breaker's cooldown is over,
// exactly one caller is admitted as its half-open probe.
func (s *State) Acquire() bool {
	probe := false
	if p := s.probeAt.Load(); p != 0 {
		// Disabled: exactly one caller, once the probe delay is over, is
		// admitted as the probe.
		if int64(s.sh.now()) < p || !s.probing.CompareAndSwap(false, true) {
			return false
		}
		probe = true
	}
	if !s.acquire() {
		if probe {
			s.probing.Store(false)
		}
		return false
	}
	return true
}

func (s *State) acquire() bool {
	if !s.br.Ready() {
		return false
	}
	if c := s.cooldown.Load(); c != 0 {
		if int64(s.sh.now()) < c {
			return false
		}
		s.cooldown.CompareAndSwap(c, 0) // over: later calls skip the clock
	}
	if u := s.hr.until.Load(); u != 0 {
		if int64(s.sh.now()) < u {
			return false
		}
		s.hr.until.CompareAndSwap(u, 0)
	}
	for {
		n := s.inflight.Load()
		if n >= s.cap {
			return false
		}
		if s.inflight.CompareAndSwap(n, n+1) {
			break
		}
	}
	// The slot is taken before asking the breaker, so the caller that wins
	// the probe always has a slot to send it with.
	if !s.br.Allow() {
		s.inflight.Add(-1)
		return false
	}
	// Counted only once a provider stated a budget: a backend without
	// rate-limit headers pays no more for them than one load.
	if s.hr.seen.Load() {
		s.acquired.Add(1)
		s.hr.take(s.sh)
	}
	return true
}

// Acquired returns how many slots s has handed out for requests that
// were sent or may be (Release takes one back); a lease keeps it as
// Result.Sent.
func (s *State) Acquired() uint64 { return s.acquired.Load() }

// Finish applies the attempt's result (see the package doc) and gives the
// slot back. The result is applied first, so no request slips in between
// a 429 and its cooldown.
func (s *State) Finish(r Result) {
	o := &s.sh.o
	if s.probing.Load() {
		s.finishProbe(r.Outcome)
	}
	if o.Headroom != HeadroomOff || r.Headroom.Malformed > 0 {
		s.observe(r)
	}
	switch r.Outcome {
	case Success:
		if r.TTFB > 0 {
			s.lat.observe(r.TTFB.Seconds(), int64(s.sh.now()), s.sh.invTau)
		}
		s.br.Success()
	case ProviderError:
		s.lat.hold(int64(s.sh.now()))
		s.br.Success()
	case RateLimited:
		d := r.RetryAfter
		if d <= 0 {
			d = o.RateLimitDefault
		}
		s.coolFor(min(d, o.RateLimitMax))
		s.br.Success()
	case QuotaExhausted:
		s.coolFor(max(o.QuotaCooldown, min(r.RetryAfter, maxQuotaRetryAfter)))
		s.br.Success()
	case AuthRejected:
		s.disable()
		s.br.Success()
	case TransportFailure:
		s.lat.hold(int64(s.sh.now()))
		s.br.Failure()
	default: // EgressFault, Cancelled, NodeOverloaded: nothing learned about the backend
		s.br.Abandon()
	}
	if !r.Vacated {
		s.inflight.Add(-1)
	}
}

// Vacate gives an attempt's slot back before its outcome is known: the
// provider has sent all of its answer (or its connection ended), and
// only the client has not read it all yet. The slot measures the
// provider's load, not the clients' (docs/failures.md "Slots"); the
// outcome follows with Finish and Result.Vacated set.
func (s *State) Vacate() { s.inflight.Add(-1) }

// Release gives the slot back without an outcome (the attempt was never
// made, or lost a race). A half-open probe slot is freed for the next
// caller.
func (s *State) Release() {
	if s.hr.seen.Load() {
		s.hr.untake()
		// Nothing was sent: the provider will not count it, so the
		// answers to requests sent before it must not discount it either.
		s.acquired.Add(^uint64(0))
	}
	s.probing.Store(false)
	s.br.Abandon()
	s.inflight.Add(-1)
}

// observe applies the answer's rate-limit headers (docs/routing.md
// "Headroom"), before the slot is given back.
func (s *State) observe(r Result) {
	if s.sh.o.Headroom == HeadroomOff {
		s.hr.observe(Headroom{Malformed: r.Headroom.Malformed}, 0, 0, 0, 0, 0, 0)
		return
	}
	// Counting starts with the first budget stated, and a slot taken
	// before it may be given back after: never discount below 0.
	var after uint64
	if a := s.acquired.Load(); r.Sent > 0 && a > r.Sent {
		after = a - r.Sent
	}
	s.hr.observe(r.Headroom, s.sh.now(), r.Sent, after, r.SentTokens, s.sh.o.RateLimitDefault, s.sh.o.RateLimitMax)
}

// disable starts (or, after a failed probe, restarts) the probe delay.
func (s *State) disable() {
	s.probeAt.Store(int64(s.sh.now()) + int64(s.sh.o.AuthProbeAfter))
	s.probing.Store(false)
}

// finishProbe applies the outcome of a disabled backend's probe: the first
// outcome reported while the probe is out (see Caveats in the package
// doc). Any provider answer but a 401/403 proves the credential is
// accepted again; an attempt that learned nothing frees the probe for the
// next request.
func (s *State) finishProbe(o Outcome) {
	switch o {
	case Success, ProviderError, RateLimited, QuotaExhausted:
		s.Enable()
	case AuthRejected:
		// disable() in Finish restarts the delay.
	default: // TransportFailure, EgressFault, Cancelled, NodeOverloaded
		s.probing.Store(false)
	}
}

// coolFor starts or lengthens a cooldown of d from now; it never shortens
// one already running. It holds the latency estimate too: a 429 is an error
// reply.
func (s *State) coolFor(d time.Duration) {
	now := int64(s.sh.now())
	s.lat.hold(now)
	until := now + int64(d)
	for {
		c := s.cooldown.Load()
		if c >= until {
			return
		}
		if s.cooldown.CompareAndSwap(c, until) {
			s.cooled.Add(until - max(c, now))
			return
		}
	}
}

// ramp returns the slow-start factor at now, in [minRamp, 1].
func (s *State) ramp(now Instant) float64 {
	age := int64(now - s.created)
	if s.sh.slowStart == 0 || age >= s.sh.slowStart {
		return 1
	}
	if r := float64(age) * s.sh.invSlow; r > minRamp {
		return r
	}
	return minRamp
}

// EffectiveWeight returns weight scaled by the slow-start ramp at now.
func (s *State) EffectiveWeight(weight int, now Instant) float64 {
	return float64(weight) * s.ramp(now)
}

// Cost returns the P2C cost at now of sending one more request to s as a
// target of the given weight: the latency estimate in seconds ×
// (in-flight + 1) ÷ effective weight. Lower is better.
func (s *State) Cost(weight int, now Instant) float64 {
	lat := s.lat.read(int64(now), s.sh.invTau, s.sh.floor)
	return lat * float64(s.inflight.Load()+1) / (float64(weight) * s.ramp(now) * s.hr.factor(s.sh.o.Headroom, now))
}

// Cheaper reports whether s, as a target of weight w, costs less than o as
// a target of weight ow at now: s.Cost(w, now) < o.Cost(ow, now), up to
// rounding, computed with one exponential instead of two and no division.
// s and o must belong to one Registry. P2C calls it for every pair it
// draws.
func (s *State) Cheaper(w int, o *State, ow int, now Instant) bool {
	// Cost = e^u × (in-flight + 1) ÷ effective weight, u the logarithm of
	// the estimate as read, so s is cheaper when
	// e^(u_s − u_o) × (n_s + 1) × eff_o < (n_o + 1) × eff_s.
	sh := s.sh
	r := math.Exp(s.lat.logRead(int64(now), sh.invTau, sh.lnFloor) - o.lat.logRead(int64(now), sh.invTau, sh.lnFloor))
	mode := sh.o.Headroom
	return r*float64(s.inflight.Load()+1)*o.EffectiveWeight(ow, now)*o.hr.factor(mode, now) <
		float64(o.inflight.Load()+1)*s.EffectiveWeight(w, now)*s.hr.factor(mode, now)
}

// EligibleAt returns the zero time when s could take traffic now (ignoring
// its cap), else the earliest time it could: the end of its cooldown or of
// its breaker's open period (with a half-open probe out, now plus the
// breaker's base cooldown, a guess). When disabled, the time its probe is
// due (with the probe out, the same guess).
func (s *State) EligibleAt() time.Time {
	now := s.sh.o.Clock()
	var at time.Time
	if p := s.probeAt.Load(); p != 0 {
		at = s.sh.time(Instant(p))
		if s.probing.Load() {
			at = now.Add(s.sh.o.Breaker.Cooldown)
		}
		if !at.After(now) {
			at = time.Time{}
		}
	}
	for _, c := range [...]int64{s.cooldown.Load(), s.hr.until.Load()} {
		if c == 0 {
			continue
		}
		if t := s.sh.time(Instant(c)); t.After(now) && t.After(at) {
			at = t
		}
	}
	switch s.br.State() {
	case BreakerOpen:
		if t := s.br.ReopenAt(); t.After(now) && t.After(at) {
			at = t
		}
	case BreakerHalfOpen:
		if t := now.Add(s.sh.o.Breaker.Cooldown); t.After(at) {
			at = t
		}
	}
	return at
}

// View is a snapshot of a State for metrics and /readyz.
type View struct {
	InFlight            int64
	Cap                 int64
	EWMA                time.Duration // the latency estimate as Cost sees it now
	SlowStart           float64       // ramp factor in [0.1, 1]; 1 once ramped
	BreakerState        BreakerState
	ConsecutiveFailures int
	Disabled            bool
	CooldownUntil       time.Time // zero when not cooling down
	// HeadroomUntil is the end of a hold for a used-up rate-limit budget;
	// zero when none is running.
	HeadroomUntil time.Time
	// HeadroomRequests and HeadroomTokens are the remaining shares of the
	// budgets, meaningful when the matching Known is set: an answer stated
	// the budget and its reset has not passed.
	HeadroomRequests, HeadroomTokens           float64
	HeadroomRequestsKnown, HeadroomTokensKnown bool
	// CooledFor and HeldFor are the total time cooldowns (429s) and
	// headroom holds have kept the backend ineligible, as scheduled.
	CooledFor, HeldFor time.Duration
	// MalformedHeaders counts rate-limit header values that were ignored.
	MalformedHeaders uint64
}

// View returns a snapshot of s. Fields are read one by one, not as a
// transaction.
func (s *State) View() View {
	now := s.sh.now()
	v := View{
		InFlight:            s.inflight.Load(),
		Cap:                 s.cap,
		EWMA:                time.Duration(s.lat.read(int64(now), s.sh.invTau, s.sh.floor) * float64(time.Second)),
		SlowStart:           s.ramp(now),
		BreakerState:        s.br.State(),
		ConsecutiveFailures: s.br.ConsecutiveFailures(),
		Disabled:            s.Disabled(),
	}
	if s.coolingAt(now) {
		v.CooldownUntil = s.sh.time(Instant(s.cooldown.Load()))
	}
	if s.hr.holding(now) {
		v.HeadroomUntil = s.sh.time(Instant(s.hr.until.Load()))
	}
	v.HeadroomRequests, v.HeadroomRequestsKnown = s.hr.requests.view(now)
	v.HeadroomTokens, v.HeadroomTokensKnown = s.hr.tokens.view(now)
	v.CooledFor, v.HeldFor = time.Duration(s.cooled.Load()), time.Duration(s.hr.held.Load())
	v.MalformedHeaders = s.hr.malformed.Load()
	return v
}

// Registry maps identities to states.
type Registry struct {
	sh     *shared // immutable
	mu     sync.Mutex
	states map[Identity]*State // guarded by mu
}

// NewRegistry returns an empty registry. Zero Options mean the defaults
// (see Options) and the real clock.
func NewRegistry(o Options) *Registry {
	real := o.Clock == nil
	o = o.WithDefaults()
	sh := &shared{
		o:      o,
		real:   real,
		epoch:  o.Clock(),
		invTau: 1 / float64(o.DecayWindow),
		floor:  floorFraction * o.DefaultTTFB.Seconds(),
	}
	sh.lnFloor = math.Log(sh.floor)
	if o.SlowStart > 0 {
		sh.slowStart, sh.invSlow = int64(o.SlowStart), 1/float64(o.SlowStart)
	}
	return &Registry{sh: sh, states: make(map[Identity]*State)}
}

// Get returns the state for id, creating it on first use: latency estimate
// DefaultTTFB, slow start beginning now, breaker closed.
func (r *Registry) Get(id Identity) *State {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.states[id]
	if !ok {
		now := r.sh.now()
		s = &State{
			sh:      r.sh,
			cap:     int64(id.Cap),
			created: now,
			br:      NewBreaker(r.sh.o.Breaker, r.sh.breakerClock(), r.sh.o.Rand),
		}
		s.lat.init(r.sh.o.DefaultTTFB.Seconds(), int64(now))
		s.hr.requests.left.Store(unknown)
		s.hr.tokens.left.Store(unknown)
		r.states[id] = s
	}
	return s
}

// Prune forgets every state whose identity keep rejects and that has
// nothing in flight. Call it after each table swap with keep reporting
// whether the new table uses the identity. A rejected state still in use
// (requests pinned to an old table) stays until a later Prune finds it
// idle; a Get for its identity meanwhile returns it, so the cap holds.
func (r *Registry) Prune(keep func(Identity) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, s := range r.states {
		if !keep(id) && s.InFlight() == 0 {
			delete(r.states, id)
		}
	}
}

// Enable re-enables every disabled backend whose identity keep reports.
// Call it after a swap to a newer routing table with keep =
// newTable.Uses: a document that still lists a backend after a provider
// 401/403 disabled it is the operator's word that it is wanted (perhaps
// with its credential fixed under the same name), and one tenant's request
// must not keep a backend from every tenant until a restart.
func (r *Registry) Enable(keep func(Identity) bool) {
	for id, s := range r.All() {
		if s.Disabled() && keep(id) {
			s.Enable()
		}
	}
}

// ForgetHeadroom drops what the providers' rate-limit headers said about
// every backend keep reports (budgets, and the holds they set), keeping
// the rest of its state: in flight, latency, breaker, cooldowns. Call it
// after a swap to a newer routing table with keep = newTable.Uses: a
// provider that named a far reset must not keep a backend out past the
// operator's next publish (docs/routing.md "Headroom"). The next answer
// states the budgets again.
func (r *Registry) ForgetHeadroom(keep func(Identity) bool) {
	for id, s := range r.All() {
		if keep(id) {
			s.hr.forget()
		}
	}
}

// Len returns the number of tracked backends.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.states)
}

// All yields every tracked backend, from a copy taken under the lock (so f
// may call back into the Registry). Order is unspecified.
func (r *Registry) All() iter.Seq2[Identity, *State] {
	return func(yield func(Identity, *State) bool) {
		r.mu.Lock()
		ids := make([]Identity, 0, len(r.states))
		sts := make([]*State, 0, len(r.states))
		for id, s := range r.states {
			ids = append(ids, id)
			sts = append(sts, s)
		}
		r.mu.Unlock()
		for i := range ids {
			if !yield(ids[i], sts[i]) {
				return
			}
		}
	}
}

// Outcome classifies how an attempt ended, from the backend's point of view.
// The request path decides it from the send state and the provider's status
// (never from error strings); Finish applies it (see the package doc).
type Outcome uint8

const (
	// Success: the provider answered 2xx. Result.TTFB is sampled into the
	// latency estimate.
	Success Outcome = iota
	// ProviderError: the provider answered non-2xx, other than the cases
	// below. No latency sample; not a breaker failure.
	ProviderError
	// RateLimited: provider 429 (rate limit). Cooldown for
	// Result.RetryAfter (a default when 0, capped). No latency sample
	// (docs/failures.md "Fast errors").
	RateLimited
	// QuotaExhausted: provider 429 saying the quota or balance is used up
	// (OpenAI insufficient_quota, billing errors). Long cooldown (docs/failures.md "Cooldowns");
	// not a transport failure.
	QuotaExhausted
	// AuthRejected: provider 401/403. The backend is disabled until a
	// newer routing table still lists it or its probe gets another answer
	// (see the package doc, Disabled backends).
	AuthRejected
	// TransportFailure: the backend could not be reached or failed
	// mid-exchange (target unreachable through the proxy, provider TLS,
	// reset, timeout). Counts toward the breaker.
	TransportFailure
	// EgressFault: the egress proxy itself failed (down, refused our
	// credentials). Not the backend's fault (docs/egress.md "Failures"): neutral.
	EgressFault
	// Cancelled: the client went away. Neutral.
	Cancelled
	// NodeOverloaded: one of the node's own timers (first byte, stream
	// idle, total, connect) ran out while the node itself was saturated
	// ([NodeLoad]): the node was too late to read the answer, so the
	// failure is the node's, not the backend's; or the node had no file
	// descriptor left to dial with. Neutral.
	NodeOverloaded
	// CredentialUnavailable: the backend's minted-token credential had no
	// token to send (its token endpoint failing): nothing was sent, and
	// nothing is learned about the backend. Neutral; the credential's own
	// state says why (docs/egress.md "Minted-token credentials").
	CredentialUnavailable
)

var outcomeNames = [...]string{
	Success:          "success",
	ProviderError:    "provider_error",
	RateLimited:      "rate_limited",
	QuotaExhausted:   "quota_exhausted",
	AuthRejected:     "auth_rejected",
	TransportFailure: "transport_failure",
	EgressFault:      "egress_fault",
	Cancelled:        "cancelled",
	NodeOverloaded:   "node_overloaded",

	CredentialUnavailable: "credential_unavailable",
}

// String returns a snake_case name, suitable as a metric label.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Result is what one attempt reports to Finish.
type Result struct {
	Outcome Outcome
	// TTFB is the time from sending the request to the first response
	// byte; used only with Success, and only when > 0.
	TTFB time.Duration
	// RetryAfter is the provider's Retry-After, 0 when absent; used with
	// RateLimited and QuotaExhausted.
	RetryAfter time.Duration
	// Headroom is what the answer's rate-limit headers said, whatever the
	// outcome; the zero value says nothing.
	Headroom Headroom
	// Sent is State.Acquired right after this attempt took its slot (the
	// lease sets it): answers to older requests than the newest applied
	// one are stale, and the requests sent since are not in the
	// provider's count. 0: unknown (then nothing is discounted).
	Sent uint64
	// SentTokens is State.Spend's mark for this attempt (the lease sets
	// it): the tokens spent since are not in the provider's count. 0:
	// none spent.
	SentTokens uint64
	// Vacated says the slot was already given back by Vacate, when the
	// provider's side of the attempt ended before the client's: Finish
	// then applies the outcome only.
	Vacated bool
}

// breakerClock is the clock a backend's breaker reads: nil for the real
// clock, which the breaker then reads through time.Since.
func (sh *shared) breakerClock() func() time.Time {
	if sh.real {
		return nil
	}
	return sh.o.Clock
}
