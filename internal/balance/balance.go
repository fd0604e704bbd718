package balance

import (
	"iter"
	"time"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// Bounds of RetryAfter. The upper bound is the longest wait any cooldown
// can cause (cooldown.quota and cooldown.disabled_probe go up to 168h), so
// a Retry-After is never shorter than the cooldown behind it: a client told
// 5 minutes about a 30-minute quota cooldown would come back six times for
// nothing.
const (
	minRetryAfter      = time.Second
	maxRetryAfter      = 7 * 24 * time.Hour
	noTargetRetryAfter = 5 * time.Minute // no target has the capability at all
)

// eligible reports whether t may take this attempt at now, ignoring the
// races that Acquire settles.
func eligible(t *routes.Target, need routes.Caps, tried []*routes.Target, now upstream.Instant) bool {
	if !t.Caps.Has(need) {
		return false
	}
	for _, x := range tried {
		if x == t {
			return false
		}
	}
	return t.Backend.State.Ready(now)
}

// tierEnd returns the end of the tier that starts at pool[start]. pool is
// sorted by tier, so a binary search keeps this O(log n), and the last
// tier (often the only one) takes one comparison.
func tierEnd(pool []*routes.Target, start int) int {
	tier := pool[start].Tier
	if pool[len(pool)-1].Tier == tier {
		return len(pool)
	}
	lo, hi := start+1, len(pool)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if pool[m].Tier > tier {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// tiers yields the tiers of pool, which is sorted by tier, in order.
func tiers(pool []*routes.Target) iter.Seq[[]*routes.Target] {
	return func(yield func([]*routes.Target) bool) {
		for start := 0; start < len(pool); {
			end := tierEnd(pool, start)
			if !yield(pool[start:end]) {
				return
			}
			start = end
		}
	}
}

// drawTries bounds the proposals of one draw by rejection sampling before
// the picker falls back to scanning the tier.
const drawTries = 8

// filter is what a pick asks of a target besides its weight.
type filter struct {
	need  routes.Caps
	tried []*routes.Target
	now   upstream.Instant
}

// weight returns t's effective weight at f.now, 0 when t is not eligible.
func (f *filter) weight(t *routes.Target) float64 {
	if !eligible(t, f.need, f.tried, f.now) {
		return 0
	}
	return t.Backend.State.EffectiveWeight(t.Weight, f.now)
}

// weightIndex returns tier's routes.IndexWeights index, or nil when it has
// none (or one for another slicing of the pool).
func weightIndex(tier []*routes.Target) *routes.WeightIndex {
	x := tier[0].TierWeights
	if x == nil || x.Len() != len(tier) || x.Total() <= 0 {
		return nil
	}
	return x
}

// RetryAfter returns how long a client should wait before retrying when no
// target of pool could take a request needing need: the time until the
// earliest capability-matching target becomes eligible (end of a cooldown
// or of a breaker's open period; a target that is only at its cap counts
// as eligible now; a disabled one at its probe), rounded up to whole
// seconds and at least 1s, however long the cooldown. With no matching
// target it returns 5 minutes.
func RetryAfter(pool []*routes.Target, need routes.Caps, now time.Time) time.Duration {
	best := time.Duration(-1)
	for _, t := range pool {
		if !t.Caps.Has(need) {
			continue
		}
		var d time.Duration
		if at := t.Backend.State.EligibleAt(); !at.IsZero() {
			d = at.Sub(now)
		}
		if best < 0 || d < best {
			best = d
		}
	}
	if best < 0 {
		return noTargetRetryAfter
	}
	best = (best + time.Second - 1).Truncate(time.Second)
	return min(max(best, minRetryAfter), maxRetryAfter)
}
