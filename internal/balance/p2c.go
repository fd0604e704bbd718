package balance

import (
	"math/rand/v2"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

const (
	// p2cRounds bounds the draws per tier when Acquire keeps losing races.
	p2cRounds = 3
	// weightCache is how many targets of a tier keep the effective weight
	// computed by the eligibility pass, so the two draws need not recheck
	// them. Larger tiers recheck the rest.
	weightCache = 16
)

// P2C is weighted power-of-two-choices over peak-EWMA cost (weighted_p2c,
// SPEC §5; see the package doc).
type P2C struct {
	// Float64 returns a uniform float64 in [0, 1). Nil means
	// math/rand/v2.Float64.
	Float64 func() float64
}

func (p *P2C) float64() float64 {
	if p.Float64 != nil {
		return p.Float64()
	}
	return rand.Float64()
}

// Pick returns a target with an in-flight slot already taken, or false when
// no target of any tier can take the request now.
func (p *P2C) Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (*routes.Target, bool) {
	if len(pool) == 0 {
		return nil, false
	}
	now := pool[0].Backend.State.Now()
	return eachTier(pool, func(tier []*routes.Target) (*routes.Target, bool) {
		return p.pickTier(tier, need, tried, now)
	})
}

// tierView is one tier during one pick: its targets and the effective
// weights of the first weightCache of them (0 = not eligible).
type tierView struct {
	tier  []*routes.Target
	need  routes.Caps
	tried []*routes.Target
	now   upstream.Instant
	ws    [weightCache]float64
}

// weight returns the effective weight of tier[i], 0 when it is not eligible.
func (v *tierView) weight(i int) float64 {
	if i < weightCache {
		return v.ws[i]
	}
	t := v.tier[i]
	if !eligible(t, v.need, v.tried, v.now) {
		return 0
	}
	return t.Backend.State.EffectiveWeight(t.Weight, v.now)
}

// other returns the index of an eligible target other than i, or -1.
func (v *tierView) other(i int) int {
	for j := range v.tier {
		if j != i && v.weight(j) > 0 {
			return j
		}
	}
	return -1
}

func (p *P2C) pickTier(tier []*routes.Target, need routes.Caps, tried []*routes.Target, now upstream.Instant) (*routes.Target, bool) {
	v := tierView{tier: tier, need: need, tried: tried, now: now}
	for range p2cRounds {
		var (
			total float64
			n     int
			only  int
		)
		for i, t := range tier {
			var w float64
			if eligible(t, need, tried, now) {
				w = t.Backend.State.EffectiveWeight(t.Weight, now)
				n++
				only = i
			}
			if i < weightCache {
				v.ws[i] = w
			}
			total += w
		}
		switch n {
		case 0:
			return nil, false
		case 1:
			if t := tier[only]; t.Backend.State.Acquire() {
				return t, true
			}
			continue
		}
		ia, wa := p.draw(&v, total, -1)
		var ib int
		if n == 2 { // the second draw is the other one: no need to roll
			ib = v.other(ia)
		} else {
			ib, _ = p.draw(&v, total-wa, ia)
		}
		if ia < 0 || ib < 0 { // the eligible set shrank under us
			continue
		}
		a, b := tier[ia], tier[ib]
		// Ties keep the first draw, so equal costs split by weight.
		if b.Backend.State.Cost(b.Weight, now) < a.Backend.State.Cost(a.Weight, now) {
			a, b = b, a
		}
		if a.Backend.State.Acquire() {
			return a, true
		}
		if b.Backend.State.Acquire() {
			return b, true
		}
	}
	return nil, false
}

// draw returns the index of an eligible target other than skip, chosen with
// probability proportional to effective weight (total being the eligible
// weight without skip's), and its weight; -1 if there is none. If rounding
// or a concurrent change leaves the walk short, the last eligible target
// is returned.
func (p *P2C) draw(v *tierView, total float64, skip int) (int, float64) {
	x := p.float64() * total
	last, lastW := -1, 0.0
	for i := range v.tier {
		if i == skip {
			continue
		}
		w := v.weight(i)
		if w == 0 {
			continue
		}
		if x < w {
			return i, w
		}
		x -= w
		last, lastW = i, w
	}
	return last, lastW
}
