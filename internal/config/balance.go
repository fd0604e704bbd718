package config

import "time"

// Breaker tunes the per-backend circuit breaker (docs/failures.md "Breaker").
type Breaker struct {
	Failures    int           // consecutive transport failures that open it
	Cooldown    time.Duration // first open period; a successful probe resets to it
	MaxCooldown time.Duration // cap on the doubling after failed probes
}

// Cooldown sets how long a target rests after a provider 429 (docs/failures.md "Cooldowns").
type Cooldown struct {
	RateLimitDefault time.Duration // 429 without Retry-After
	RateLimitMax     time.Duration // cap on a 429's Retry-After and on a headroom reset
	Quota            time.Duration // quota or balance exhausted (429, 400, 402); longer if the provider names a later reset
	// DisabledProbe is how long a backend disabled by a provider 401/403
	// waits before one request probes it again.
	DisabledProbe time.Duration
}

// Ranges of the [balance], [breaker] and [cooldown] keys (documented in the
// package doc).
const (
	minDisabledProbe = time.Second
	maxDisabledProbe = 7 * 24 * time.Hour
	maxSlowStart     = time.Hour
	minDefaultTTFB   = time.Millisecond
	maxDefaultTTFB   = 10 * time.Minute
	minDecayWindow   = 100 * time.Millisecond
	maxDecayWindow   = time.Hour
	maxFailures      = 1000
	minCooldown      = 100 * time.Millisecond
	maxCooldown      = time.Hour
	maxMaxCooldown   = 24 * time.Hour
	maxRateLimit     = time.Hour
	minQuotaCooldown = time.Second
	maxQuotaCooldown = 7 * 24 * time.Hour
	minLoadFactor    = 1.0
	maxLoadFactor    = 10.0
)

// balanceSections reads [balance], [breaker] and [cooldown].
func (v *validator) balanceSections(root *table, c *Config) {
	if t, ok := section(root, "balance"); ok {
		v.balance(t, &c.Balance)
	}
	if t, ok := section(root, "breaker"); ok {
		v.breaker(t, &c.Breaker)
	}
	if t, ok := section(root, "cooldown"); ok {
		v.cooldown(t, &c.Cooldown)
	}
}

func (v *validator) balance(t *table, b *Balance) {
	defer t.done()
	s, ok := t.str("algorithm", "")
	switch {
	case !ok:
	case s == AlgorithmWeightedRandom || s == AlgorithmWeightedP2C:
		b.Algorithm = s
	default:
		v.ps.add(t.at("algorithm"), "unknown algorithm %q; expected %q or %q", s, AlgorithmWeightedRandom, AlgorithmWeightedP2C)
	}
	durationIn(t, "slow_start", 0, maxSlowStart, &b.SlowStart)
	durationIn(t, "default_ttfb", minDefaultTTFB, maxDefaultTTFB, &b.DefaultTTFB)
	durationIn(t, "decay_window", minDecayWindow, maxDecayWindow, &b.DecayWindow)
	if raw, ok := t.get("affinity_load_factor", ""); ok {
		var f float64
		switch n := raw.(type) {
		case float64:
			f = n
		case int64:
			f = float64(n)
		default:
			t.mismatch("affinity_load_factor", "a number like 1.25", raw)
			return
		}
		if !(f >= minLoadFactor && f <= maxLoadFactor) {
			v.ps.add(t.at("affinity_load_factor"), "%g is out of range; expected %g..%g", f, minLoadFactor, maxLoadFactor)
			return
		}
		b.AffinityLoadFactor = f
	}
}

func (v *validator) breaker(t *table, b *Breaker) {
	defer t.done()
	if n, ok := t.integer("failures", "", 1, maxFailures); ok {
		b.Failures = int(n)
	}
	okBase := durationIn(t, "cooldown", minCooldown, maxCooldown, &b.Cooldown)
	okMax := durationIn(t, "max_cooldown", minCooldown, maxMaxCooldown, &b.MaxCooldown)
	if okBase && okMax && b.MaxCooldown < b.Cooldown {
		v.ps.add(t.at("max_cooldown"), "%s must be at least breaker.cooldown (%s)", b.MaxCooldown, b.Cooldown)
	}
}

func (v *validator) cooldown(t *table, c *Cooldown) {
	defer t.done()
	okDef := durationIn(t, "rate_limit_default", minCooldown, maxRateLimit, &c.RateLimitDefault)
	okMax := durationIn(t, "rate_limit_max", minCooldown, maxRateLimit, &c.RateLimitMax)
	if okDef && okMax && c.RateLimitMax < c.RateLimitDefault {
		v.ps.add(t.at("rate_limit_max"), "%s must be at least cooldown.rate_limit_default (%s)", c.RateLimitMax, c.RateLimitDefault)
	}
	durationIn(t, "quota", minQuotaCooldown, maxQuotaCooldown, &c.Quota)
	durationIn(t, "disabled_probe", minDisabledProbe, maxDisabledProbe, &c.DisabledProbe)
}

// durationIn reads the optional duration at key into *dst when it lies in
// [lo, hi]. It reports false only when the key is present and invalid
// (already reported), so cross-key checks run on values that stand.
func durationIn(t *table, key string, lo, hi time.Duration, dst *time.Duration) bool {
	if !t.has(key) {
		return true
	}
	d, ok := t.duration(key, lo)
	if !ok {
		return false
	}
	if d > hi {
		t.ps.add(t.at(key), "%s is too large; expected at most %s", d, hi)
		return false
	}
	*dst = d
	return true
}
