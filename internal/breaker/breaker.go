package breaker

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
)

// State is a breaker state.
type State uint8

const (
	Closed   State = iota // every request allowed
	Open                  // nothing allowed until the cooldown is over
	HalfOpen              // the single probe is out; nothing else allowed
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "unknown"
}

// Defaults for zero Options fields.
const (
	DefaultFailures    = 5
	DefaultCooldown    = 5 * time.Second
	DefaultMaxCooldown = 5 * time.Minute
	DefaultJitter      = 0.2
)

// Options configure a Breaker. A zero field takes its default.
type Options struct {
	// Failures is the number of consecutive failures that opens a closed
	// breaker. Default 5.
	Failures int
	// Cooldown is the first open period, and the one a Success resets to.
	// Default 5s.
	Cooldown time.Duration
	// MaxCooldown caps the doubling after failed probes. Default 5m; raised
	// to Cooldown if smaller.
	MaxCooldown time.Duration
	// Jitter is the largest fraction by which an open period is shortened,
	// in [0, 1). Default 0.2; negative means none; values >= 1 are clamped
	// to 0.9.
	Jitter float64
}

// WithDefaults returns o with every zero field set to its default and the
// clamps above applied.
func (o Options) WithDefaults() Options {
	if o.Failures <= 0 {
		o.Failures = DefaultFailures
	}
	if o.Cooldown <= 0 {
		o.Cooldown = DefaultCooldown
	}
	if o.MaxCooldown <= 0 {
		o.MaxCooldown = DefaultMaxCooldown
	}
	o.MaxCooldown = max(o.MaxCooldown, o.Cooldown)
	switch {
	case o.Jitter == 0:
		o.Jitter = DefaultJitter
	case o.Jitter < 0:
		o.Jitter = 0
	case o.Jitter >= 1:
		o.Jitter = 0.9
	}
	return o
}

// Breaker is one backend's circuit breaker. Safe for concurrent use.
type Breaker struct {
	// immutable after New
	o     Options
	clock clock.Clock
	real  bool // clock is clock.Real: time.Since(epoch) reads only the monotonic clock
	rand  func() float64
	epoch time.Time

	// atomic; written only under mu, except the open → half-open
	// compare-and-swap in Allow.
	word     atomic.Uint64 // generation<<2 | State; every locked transition bumps the generation
	until    atomic.Int64  // end of the open period, ns since epoch; stored before the word that publishes it
	failures atomic.Int64  // consecutive failures since the last Success

	mu     sync.Mutex
	period time.Duration // guarded by mu: un-jittered length of the current or next open period
}

// New returns a closed breaker. c nil means the real clock; rnd (uniform in
// [0, 1), used for jitter) nil means math/rand/v2.Float64. rnd is called
// with the breaker's mutex held, so a func shared by several breakers must
// be safe for concurrent use.
func New(o Options, c clock.Clock, rnd func() float64) *Breaker {
	if c == nil {
		c = clock.Real{}
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	o = o.WithDefaults()
	_, real := c.(clock.Real)
	return &Breaker{o: o, clock: c, real: real, rand: rnd, epoch: c.Now(), period: o.Cooldown}
}

func (b *Breaker) now() int64 {
	if b.real {
		return int64(time.Since(b.epoch))
	}
	return int64(b.clock.Now().Sub(b.epoch))
}

// State returns the current state.
func (b *Breaker) State() State { return State(b.word.Load() & 3) }

// ConsecutiveFailures returns the failures counted since the last Success.
func (b *Breaker) ConsecutiveFailures() int { return int(b.failures.Load()) }

// ReopenAt returns when an open breaker's cooldown ends (possibly already
// past), or the zero time when it is not open.
func (b *Breaker) ReopenAt() time.Time {
	w := b.word.Load()
	if State(w&3) != Open {
		return time.Time{}
	}
	return b.epoch.Add(time.Duration(b.until.Load()))
}

// Ready reports whether Allow could admit a request now, without taking
// the probe: closed, or open with its cooldown over.
func (b *Breaker) Ready() bool {
	switch State(b.word.Load() & 3) {
	case Closed:
		return true
	case Open:
		return b.now() >= b.until.Load()
	}
	return false
}

// Allow reports whether a request may go to the backend. When the cooldown
// of an open breaker is over, exactly one caller gets true (the half-open
// probe); every other caller gets false until the probe reports.
func (b *Breaker) Allow() bool {
	w := b.word.Load()
	switch State(w & 3) {
	case Closed:
		return true
	case HalfOpen:
		return false
	}
	// until is read after w: if it belongs to a later open period, the
	// generation in w is stale and the swap below fails.
	until := b.until.Load()
	if b.now() < until {
		return false
	}
	return b.word.CompareAndSwap(w, w&^3|uint64(HalfOpen))
}

// Success records a request that reached the backend and got an answer. It
// closes a half-open breaker and resets the failure count and cooldown.
func (b *Breaker) Success() {
	if b.word.Load()&3 == uint64(Closed) && b.failures.Load() == 0 {
		return // the common case: nothing to reset
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.word.Load()
	switch State(w & 3) {
	case Closed:
		b.failures.Store(0)
	case HalfOpen:
		b.failures.Store(0)
		b.period = b.o.Cooldown
		b.word.Store(next(w, Closed))
	case Open:
		// From a request admitted before the breaker opened: stale.
	}
}

// Failure records a transport failure. Failures consecutive ones open a
// closed breaker for Cooldown; a failed probe reopens it for twice the
// previous period, capped at MaxCooldown (both jittered).
func (b *Breaker) Failure() {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.word.Load()
	switch State(w & 3) {
	case Closed:
		if b.failures.Add(1) >= int64(b.o.Failures) {
			b.period = b.o.Cooldown
			b.openLocked(w)
		}
	case HalfOpen:
		b.failures.Add(1)
		b.period = min(2*b.period, b.o.MaxCooldown)
		b.openLocked(w)
	case Open:
		// Stale, as in Success. The open period is not extended.
	}
}

// Abandon records that a request ended without a verdict on the backend
// (client gone, egress fault, never sent). A half-open breaker goes back to
// open with its cooldown already over, so the next Allow sends a new probe;
// in any other state it changes nothing.
func (b *Breaker) Abandon() {
	if b.word.Load()&3 != uint64(HalfOpen) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.word.Load()
	if State(w&3) == HalfOpen {
		// until is the end of the open period the probe was admitted
		// after, so it is already past.
		b.word.Store(next(w, Open))
	}
}

// openLocked starts an open period of b.period shortened by up to Jitter.
// The caller holds mu and read w from b.word.
func (b *Breaker) openLocked(w uint64) {
	d := time.Duration(float64(b.period) * (1 - b.o.Jitter*b.rand()))
	b.until.Store(b.now() + int64(d))
	b.word.Store(next(w, Open))
}

// next returns the word for state s one generation after w.
func next(w uint64, s State) uint64 { return (w>>2+1)<<2 | uint64(s) }
