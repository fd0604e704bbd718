package balance

import (
	"math/rand/v2"

	"github.com/scootgate/scootgate/internal/routes"
)

// WeightedRandom picks with probability proportional to Target.Weight
// (weighted_random, the degraded mode in docs/routing.md "Balancing"). It ignores latency, in-flight
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

// Pick returns a lease on a target, its in-flight slot taken, or false when
// no target of any tier can take the request now.
func (w *WeightedRandom) Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (Lease, bool) {
	if len(pool) == 0 {
		return Lease{}, false
	}
	f := filter{need: need, tried: tried, now: pool[0].Backend.State.Now()}
	for tier := range tiers(pool) {
		if t, ok := w.pickTier(tier, &f); ok {
			return lease(t), true
		}
	}
	return Lease{}, false
}

// pickTier draws by weight among one tier's eligible targets. A target whose
// Acquire fails is skipped and the draw repeats, at most once per target.
func (w *WeightedRandom) pickTier(tier []*routes.Target, f *filter) (*routes.Target, bool) {
	var lost []*routes.Target // allocated only when an Acquire fails
	for range len(tier) {
		pick := w.draw(tier, f, lost)
		if pick == nil {
			return nil, false
		}
		if pick.Backend.State.Acquire() {
			return pick, true
		}
		lost = append(lost, pick)
	}
	return nil, false
}

// draw returns an eligible target of tier not in lost, with probability
// proportional to Target.Weight, or nil when there is none. An indexed tier
// (routes.IndexWeights) is drawn by rejection sampling: propose by weight,
// keep an eligible proposal; after drawTries rejections, or without the
// index, it scans the tier.
func (w *WeightedRandom) draw(tier []*routes.Target, f *filter, lost []*routes.Target) *routes.Target {
	x := weightIndex(tier)
	ok := func(i int) bool {
		if x != nil {
			return f.eligibleAt(x, tier, i) && (len(lost) == 0 || !contains(lost, tier[i]))
		}
		t := tier[i]
		return eligible(t, f.need, f.tried, f.now) && !contains(lost, t)
	}
	if x != nil {
		for range drawTries {
			if i, _ := x.Locate(float64(w.intN(x.Total()))); ok(i) {
				return tier[i]
			}
		}
	}
	// A scan lists the eligible targets once and draws from the list; a
	// tier with more than maxListed of them is walked twice.
	var l [maxListed]int32
	n, total := 0, 0
	for i, t := range tier {
		if t.Weight <= 0 || !ok(i) {
			continue
		}
		total += t.Weight
		if n < maxListed {
			l[n] = int32(i)
		}
		n++
	}
	if total <= 0 {
		return nil
	}
	v := w.intN(total)
	if n <= maxListed {
		for _, i := range l[:n-1] {
			t := tier[i]
			if v < t.Weight {
				return t
			}
			v -= t.Weight
		}
		return tier[l[n-1]]
	}
	var last *routes.Target
	for i, t := range tier {
		if !ok(i) {
			continue
		}
		if v < t.Weight {
			return t
		}
		v -= t.Weight
		last = t
	}
	return last // the eligible set shrank between the two loops
}

func contains(ts []*routes.Target, t *routes.Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}
