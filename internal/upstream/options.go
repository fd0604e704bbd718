package upstream

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Options configure a Registry. The zero value means every default below
// and the real clock.
type Options struct {
	// Clock drives EWMA decay, slow start, cooldowns and the breakers. Nil
	// means the real clock.
	Clock func() time.Time
	// Rand returns a uniform float64 in [0, 1) for breaker jitter. Nil
	// means math/rand/v2.Float64. It need not be safe for concurrent use:
	// the Registry serializes calls.
	Rand func() float64

	DefaultTTFB time.Duration // estimate for a backend new to this node; default 1s
	DecayWindow time.Duration // time constant of the latency estimate's decay; default 10s
	SlowStart   time.Duration // ramp of a new backend's weight; default 30s; negative = off

	Breaker BreakerOptions // zero fields take breaker's defaults (5 failures, 5s, 5m, jitter 0.2)

	RateLimitDefault time.Duration // cooldown after a 429 without Retry-After; default 5s
	RateLimitMax     time.Duration // cap on a 429's Retry-After and on a headroom hold's reset; default 60s; raised to RateLimitDefault if smaller
	QuotaCooldown    time.Duration // cooldown after quota exhaustion; default 30m
	// AuthProbeAfter is how long a backend disabled by a provider 401/403
	// waits before one request may probe it; default 10m.
	AuthProbeAfter time.Duration

	// Headroom says how selection uses the providers' rate-limit headers;
	// the zero value is HeadroomThreshold (docs/routing.md "Headroom").
	Headroom HeadroomMode
}

// Defaults for zero Options fields.
const (
	DefaultTTFB             = time.Second
	DefaultDecayWindow      = 10 * time.Second
	DefaultSlowStart        = 30 * time.Second
	DefaultRateLimitDefault = 5 * time.Second
	DefaultRateLimitMax     = 60 * time.Second
	DefaultQuotaCooldown    = 30 * time.Minute
	DefaultAuthProbeAfter   = 10 * time.Minute
)

// WithDefaults returns o with every zero field set to its default (the
// clock and rand included) and the clamps documented on the fields applied.
func (o Options) WithDefaults() Options {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	} else {
		var mu sync.Mutex
		r := o.Rand
		o.Rand = func() float64 {
			mu.Lock()
			defer mu.Unlock()
			return r()
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.DefaultTTFB, DefaultTTFB)
	def(&o.DecayWindow, DefaultDecayWindow)
	def(&o.SlowStart, DefaultSlowStart)
	def(&o.RateLimitDefault, DefaultRateLimitDefault)
	def(&o.RateLimitMax, DefaultRateLimitMax)
	def(&o.QuotaCooldown, DefaultQuotaCooldown)
	if o.AuthProbeAfter <= 0 {
		o.AuthProbeAfter = DefaultAuthProbeAfter // positive: State.probeAt 0 means enabled
	}
	if o.DefaultTTFB < 0 {
		o.DefaultTTFB = DefaultTTFB
	}
	if o.DecayWindow < 0 {
		o.DecayWindow = DefaultDecayWindow
	}
	o.RateLimitMax = max(o.RateLimitMax, o.RateLimitDefault)
	o.Breaker = o.Breaker.WithDefaults()
	return o
}
