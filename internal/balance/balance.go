package balance

import (
	"time"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// Bounds of RetryAfter.
const (
	minRetryAfter = time.Second
	maxRetryAfter = 5 * time.Minute
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
// sorted by tier, so a binary search keeps this O(log n).
func tierEnd(pool []*routes.Target, start int) int {
	tier := pool[start].Tier
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

// eachTier calls pick on each tier of pool in order until one returns a
// target.
func eachTier(pool []*routes.Target, pick func(tier []*routes.Target) (*routes.Target, bool)) (*routes.Target, bool) {
	for start := 0; start < len(pool); {
		end := tierEnd(pool, start)
		if t, ok := pick(pool[start:end]); ok {
			return t, true
		}
		start = end
	}
	return nil, false
}

// RetryAfter returns how long a client should wait before retrying when no
// target of pool could take a request needing need: the time until the
// earliest capability-matching target becomes eligible (end of a cooldown
// or of a breaker's open period; a target that is only at its cap counts
// as eligible now), rounded up to whole seconds and bounded to [1s, 5m].
// With no matching target it returns the upper bound.
func RetryAfter(pool []*routes.Target, need routes.Caps, now time.Time) time.Duration {
	best := maxRetryAfter
	for _, t := range pool {
		if !t.Caps.Has(need) {
			continue
		}
		var d time.Duration
		if at := t.Backend.State.EligibleAt(); !at.IsZero() {
			d = at.Sub(now)
		}
		best = min(best, d)
	}
	best = (best + time.Second - 1).Truncate(time.Second)
	return min(max(best, minRetryAfter), maxRetryAfter)
}
