// Package balance picks a provider target for one attempt.
//
// # Basics
//
// The selector sees a read-only pool (one public model's targets of one
// protocol, sorted by tier) and picks among the eligible ones: those that
// offer the request's capabilities, were not already tried by this request,
// and are below their hard in-flight cap. Only the lowest tier with an
// eligible target is considered (SPEC §4 tiers: failover by selection, not
// a retry). The pick takes an in-flight slot; the caller releases it.
//
// WeightedRandom is SPEC §5's degraded mode: probability proportional to
// weight. Weighted P2C replaces it as the default in its own change.
//
// # Caveats
//
// Randomness is injected so tests are deterministic. The hot path does not
// allocate (BenchmarkPick).
package balance

import (
	"math/rand/v2"

	"github.com/scootgate/scootgate/internal/routes"
)

// WeightedRandom picks with probability proportional to Target.Weight.
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

// eligible reports whether t may take this attempt, ignoring the cap race
// that TryAcquire settles.
func eligible(t *routes.Target, need routes.Caps, tried []*routes.Target) bool {
	if !t.Caps.Has(need) {
		return false
	}
	for _, x := range tried {
		if x == t {
			return false
		}
	}
	st := t.Backend.State
	return st.InFlight() < st.Cap()
}

// Pick returns a target with an in-flight slot already taken, or false when
// no target of any tier is eligible now.
func (w *WeightedRandom) Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (*routes.Target, bool) {
	for start := 0; start < len(pool); {
		tier := pool[start].Tier
		end := start
		for end < len(pool) && pool[end].Tier == tier {
			end++
		}
		if t, ok := w.pickTier(pool[start:end], need, tried); ok {
			return t, true
		}
		start = end
	}
	return nil, false
}

// pickTier draws by weight among one tier's eligible targets. A target that
// loses the race for its last slot is skipped and the draw repeats, at most
// once per target.
func (w *WeightedRandom) pickTier(tier []*routes.Target, need routes.Caps, tried []*routes.Target) (*routes.Target, bool) {
	var lost []*routes.Target // allocated only on a lost cap race
	for range len(tier) {
		total := 0
		for _, t := range tier {
			if eligible(t, need, tried) && !contains(lost, t) {
				total += t.Weight
			}
		}
		if total == 0 {
			return nil, false
		}
		x := w.intN(total)
		var pick *routes.Target
		for _, t := range tier {
			if !eligible(t, need, tried) || contains(lost, t) {
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
		if pick.Backend.State.TryAcquire() {
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
