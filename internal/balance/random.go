package balance

import (
	"math/rand/v2"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// WeightedRandom picks with probability proportional to Target.Weight
// (weighted_random, SPEC §5's degraded mode). It ignores latency, in-flight
// and slow start, but not eligibility.
type WeightedRandom struct {
	// IntN returns a uniform int in [0, n). Nil means math/rand/v2.IntN.
	IntN func(n int) int
}

func (w *WeightedRandom) intN(n int) int {
	if w.IntN != nil {
		return w.IntN(n)
	}
	return rand.IntN(n)
}

// Pick returns a target with an in-flight slot already taken, or false when
// no target of any tier can take the request now.
func (w *WeightedRandom) Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (*routes.Target, bool) {
	if len(pool) == 0 {
		return nil, false
	}
	now := pool[0].Backend.State.Now()
	return eachTier(pool, func(tier []*routes.Target) (*routes.Target, bool) {
		return w.pickTier(tier, need, tried, now)
	})
}

// pickTier draws by weight among one tier's eligible targets. A target whose
// Acquire fails is skipped and the draw repeats, at most once per target.
func (w *WeightedRandom) pickTier(tier []*routes.Target, need routes.Caps, tried []*routes.Target, now upstream.Instant) (*routes.Target, bool) {
	var lost []*routes.Target // allocated only when an Acquire fails
	for range len(tier) {
		total := 0
		for _, t := range tier {
			if eligible(t, need, tried, now) && !contains(lost, t) {
				total += t.Weight
			}
		}
		if total == 0 {
			return nil, false
		}
		x := w.intN(total)
		var pick *routes.Target
		for _, t := range tier {
			if !eligible(t, need, tried, now) || contains(lost, t) {
				continue
			}
			if x < t.Weight {
				pick = t
				break
			}
			x -= t.Weight
		}
		if pick == nil { // the eligible set shrank between the two loops
			continue
		}
		if pick.Backend.State.Acquire() {
			return pick, true
		}
		lost = append(lost, pick)
	}
	return nil, false
}

func contains(ts []*routes.Target, t *routes.Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}
