package upstream

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// The breaker: a consecutive-failure circuit breaker with exactly one
// half-open probe and a growing, jittered, capped cooldown (docs/failures.md
// "Breaker").
//
// # Basics
//
// A [Breaker] is a small state machine driven by a [func() time.Time]:
//
//	closed ──(Failures consecutive failures)──▶ open
//	open ──(cooldown over; first Allow wins)──▶ half-open
//	half-open ──Success──▶ closed   (cooldown back to its base)
//	half-open ──Failure──▶ open     (cooldown doubled, capped at MaxCooldown)
//	half-open ──Abandon──▶ open     (cooldown already over: the next Allow probes)
//
// Closed allows everything. Open allows nothing until its cooldown has
// passed; then exactly one caller of Allow wins the half-open probe, under
// any concurrency (a compare-and-swap on one word that also carries a
// generation, so a caller that read an earlier open period cannot win a
// later one). Half-open allows nothing else until the probe reports.
//
// Each open period is the current cooldown shortened by a random fraction
// of up to Jitter, so breakers that opened together do not probe together;
// it never exceeds MaxCooldown. A Success closes the breaker and resets
// both the failure count and the cooldown.
//
// The closed path of Allow and Success is one atomic load; transitions take
// a small mutex. Nothing allocates.
//
// # Caveats
//
// The breaker does not hand out per-request tokens, so it cannot tell the
// probe's outcome from that of an older request admitted while it was
// still closed. Outcomes reported while open are ignored (they predate the
// open period). While half-open the first outcome reported is taken as the
// probe's: an older request's Success closes the breaker early (it is
// still evidence the backend works), and an older request ending without a
// verdict (Abandon) frees the probe slot, so a second probe may go out.
// Callers must report exactly one of Success, Failure or Abandon for every
// request Allow admitted; a probe that never reports keeps the breaker
// half-open.

// BreakerState is a breaker state.
type BreakerState uint8

const (
	BreakerClosed   BreakerState = iota // every request allowed
	BreakerOpen                         // nothing allowed until the cooldown is over
	BreakerHalfOpen                     // the single probe is out; nothing else allowed
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "unknown"
}

// Defaults for zero BreakerOptions fields.
const (
	DefaultBreakerFailures    = 5
	DefaultBreakerCooldown    = 5 * time.Second
	DefaultBreakerMaxCooldown = 5 * time.Minute
	DefaultBreakerJitter      = 0.2
)

// BreakerOptions configure a Breaker. A zero field takes its default.
type BreakerOptions struct {
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
func (o BreakerOptions) WithDefaults() BreakerOptions {
	if o.Failures <= 0 {
		o.Failures = DefaultBreakerFailures
	}
	if o.Cooldown <= 0 {
		o.Cooldown = DefaultBreakerCooldown
	}
	if o.MaxCooldown <= 0 {
		o.MaxCooldown = DefaultBreakerMaxCooldown
	}
	o.MaxCooldown = max(o.MaxCooldown, o.Cooldown)
	switch {
	case o.Jitter == 0:
		o.Jitter = DefaultBreakerJitter
	case o.Jitter < 0:
		o.Jitter = 0
	case o.Jitter >= 1:
		o.Jitter = 0.9
	}
	return o
}

// Breaker is one backend's circuit breaker. Safe for concurrent use.
type Breaker struct {
	// immutable after NewBreaker
	o     BreakerOptions
	clock func() time.Time
	real  bool // the real clock: time.Since(epoch) reads only the monotonic clock
	rand  func() float64
	epoch time.Time

	// atomic; written only under mu, except the open → half-open
	// compare-and-swap in Allow.
	word     atomic.Uint64 // generation<<2 | BreakerState; every locked transition bumps the generation
	until    atomic.Int64  // end of the open period, ns since epoch; stored before the word that publishes it
	failures atomic.Int64  // consecutive failures since the last Success

	mu     sync.Mutex
	period time.Duration // guarded by mu: un-jittered length of the current or next open period
}

// NewBreaker returns a closed breaker. c nil means the real clock; rnd (uniform in
// [0, 1), used for jitter) nil means math/rand/v2.Float64. rnd is called
// with the breaker's mutex held, so a func shared by several breakers must
// be safe for concurrent use.
func NewBreaker(o BreakerOptions, c func() time.Time, rnd func() float64) *Breaker {
	real := c == nil
	if real {
		c = time.Now
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	o = o.WithDefaults()
	return &Breaker{o: o, clock: c, real: real, rand: rnd, epoch: c(), period: o.Cooldown}
}

func (b *Breaker) now() int64 {
	if b.real {
		return int64(time.Since(b.epoch))
	}
	return int64(b.clock().Sub(b.epoch))
}

// BreakerState returns the current state.
func (b *Breaker) State() BreakerState { return BreakerState(b.word.Load() & 3) }

// ConsecutiveFailures returns the failures counted since the last Success.
func (b *Breaker) ConsecutiveFailures() int { return int(b.failures.Load()) }

// ReopenAt returns when an open breaker's cooldown ends (possibly already
// past), or the zero time when it is not open.
func (b *Breaker) ReopenAt() time.Time {
	w := b.word.Load()
	if BreakerState(w&3) != BreakerOpen {
		return time.Time{}
	}
	return b.epoch.Add(time.Duration(b.until.Load()))
}

// Ready reports whether Allow could admit a request now, without taking
// the probe: closed, or open with its cooldown over.
func (b *Breaker) Ready() bool {
	switch BreakerState(b.word.Load() & 3) {
	case BreakerClosed:
		return true
	case BreakerOpen:
		return b.now() >= b.until.Load()
	}
	return false
}

// Allow reports whether a request may go to the backend. When the cooldown
// of an open breaker is over, exactly one caller gets true (the half-open
// probe); every other caller gets false until the probe reports.
func (b *Breaker) Allow() bool {
	w := b.word.Load()
	switch BreakerState(w & 3) {
	case BreakerClosed:
		return true
	case BreakerHalfOpen:
		return false
	}
	// until is read after w: if it belongs to a later open period, the
	// generation in w is stale and the swap below fails.
	until := b.until.Load()
	if b.now() < until {
		return false
	}
	return b.word.CompareAndSwap(w, w&^3|uint64(BreakerHalfOpen))
}

// Success records a request that reached the backend and got an answer. It
// closes a half-open breaker and resets the failure count and cooldown.
func (b *Breaker) Success() {
	if b.word.Load()&3 == uint64(BreakerClosed) && b.failures.Load() == 0 {
		return // the common case: nothing to reset
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.word.Load()
	switch BreakerState(w & 3) {
	case BreakerClosed:
		b.failures.Store(0)
	case BreakerHalfOpen:
		b.failures.Store(0)
		b.period = b.o.Cooldown
		b.word.Store(breakerNext(w, BreakerClosed))
	case BreakerOpen:
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
	switch BreakerState(w & 3) {
	case BreakerClosed:
		if b.failures.Add(1) >= int64(b.o.Failures) {
			b.period = b.o.Cooldown
			b.openLocked(w)
		}
	case BreakerHalfOpen:
		b.failures.Add(1)
		b.period = min(2*b.period, b.o.MaxCooldown)
		b.openLocked(w)
	case BreakerOpen:
		// Stale, as in Success. The open period is not extended.
	}
}

// Abandon records that a request ended without a verdict on the backend
// (client gone, egress fault, never sent). A half-open breaker goes back to
// open with its cooldown already over, so the next Allow sends a new probe;
// in any other state it changes nothing.
func (b *Breaker) Abandon() {
	if b.word.Load()&3 != uint64(BreakerHalfOpen) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.word.Load()
	if BreakerState(w&3) == BreakerHalfOpen {
		// until is the end of the open period the probe was admitted
		// after, so it is already past.
		b.word.Store(breakerNext(w, BreakerOpen))
	}
}

// openLocked starts an open period of b.period shortened by up to Jitter.
// The caller holds mu and read w from b.word.
func (b *Breaker) openLocked(w uint64) {
	d := time.Duration(float64(b.period) * (1 - b.o.Jitter*b.rand()))
	b.until.Store(b.now() + int64(d))
	b.word.Store(breakerNext(w, BreakerOpen))
}

// breakerNext returns the word for state s one generation after w.
func breakerNext(w uint64, s BreakerState) uint64 { return (w>>2+1)<<2 | uint64(s) }
