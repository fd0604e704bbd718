package balance

import (
	"math/rand/v2"

	"github.com/scootgate/scootgate/internal/routes"
)

const (
	// p2cRounds bounds the draws per tier when Acquire keeps losing races.
	p2cRounds = 3
	// weightCache is how many targets of a tier keep the effective weight
	// computed by a scan's first pass, so its draws need not recheck them.
	// Larger tiers recheck the rest.
	weightCache = 16
)

// P2C is weighted power-of-two-choices over peak-EWMA cost (weighted_p2c,
// docs/routing.md "Balancing"; see the package doc).
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

// Pick returns a lease on a target, its in-flight slot taken, or false when
// no target of any tier can take the request now.
func (p *P2C) Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (Lease, bool) {
	if len(pool) == 0 {
		return Lease{}, false
	}
	f := filter{need: need, tried: tried, now: pool[0].Backend.State.Now()}
	for tier := range tiers(pool) {
		if t, ok := p.pickTier(tier, &f); ok {
			return lease(t), true
		}
	}
	return Lease{}, false
}

func (p *P2C) pickTier(tier []*routes.Target, f *filter) (*routes.Target, bool) {
	for range p2cRounds {
		a, b := p.pair(tier, f)
		if a == nil {
			return nil, false
		}
		// Ties keep the first draw, so equal costs split by weight.
		if b != nil && b.Backend.State.Cheaper(b.Weight, a.Backend.State, a.Weight, f.now) {
			a, b = b, a
		}
		if a.Backend.State.Acquire() {
			return a, true
		}
		if b != nil && b.Backend.State.Acquire() {
			return b, true
		}
	}
	return nil, false
}

// p2cTries bounds the proposals of one P2C draw before the draw falls
// back to a scan (drawTries for weighted_random). A pair costs two draws,
// and a proposal about ten times what the scan spends on one target, so
// on a tier whose weight is mostly unavailable a scan soon pays better
// than more proposals; a tier whose weight is mostly available accepts
// the first proposal nearly always.
const p2cTries = 3

// scanAfter is how many proposals the first draw of a pair may take for
// the second to be drawn by proposals too: a first draw that needed more
// says that most of the tier's weight is unavailable, and the second is
// drawn by a scan straight away (the number of proposals a draw takes
// tells nothing about which target it kept, so this changes no
// probability).
const scanAfter = 2

// pair draws two distinct eligible targets of tier: a with probability
// proportional to effective weight, then b from the weight that remains.
// b is nil when a is the only eligible target, a when none is.
//
// An indexed tier (routes.IndexWeights) is drawn by rejection sampling: a
// proposal lands on a target with probability proportional to its static
// weight and is kept when the target is eligible (and not a) and the
// proposal falls within the effective part of the target's weight, which
// keeps exactly the distribution above. A draw that keeps rejecting (most
// of the tier's weight ineligible or ramping) is finished by a scan, as is
// every draw of a tier without the index.
func (p *P2C) pair(tier []*routes.Target, f *filter) (a, b *routes.Target) {
	switch len(tier) {
	case 1:
		if f.weight(tier[0]) > 0 {
			return tier[0], nil
		}
		return nil, nil
	case 2:
		return p.pairOf2(tier[0], tier[1], f)
	}
	ia := -1
	// A tier whose last scan found most of its weight unavailable is
	// scanned straight away (see scanFirst): the proposals would most
	// likely be rejected, and the scan follows anyway.
	if x := weightIndex(tier); x != nil && !x.ScanFirst() {
		var tries int
		if ia, tries = p.sample(tier, x, f, -1); ia >= 0 && tries <= scanAfter {
			if ib, _ := p.sample(tier, x, f, ia); ib >= 0 {
				return tier[ia], tier[ib]
			}
		}
	}
	ia, ib := p.scanPair(tier, f, ia)
	switch {
	case ia < 0:
		return nil, nil
	case ib < 0:
		return tier[ia], nil
	}
	return tier[ia], tier[ib]
}

// pairOf2 is pair for a tier of two: the first draw is one roll, the
// second is the other target.
func (p *P2C) pairOf2(t0, t1 *routes.Target, f *filter) (a, b *routes.Target) {
	w0, w1 := f.weight(t0), f.weight(t1)
	switch {
	case w0 > 0 && w1 > 0:
		if p.float64()*(w0+w1) < w0 {
			return t0, t1
		}
		return t1, t0
	case w0 > 0:
		return t0, nil
	case w1 > 0:
		return t1, nil
	}
	return nil, nil
}

// sample draws the index of an eligible target of the indexed tier other
// than skip, with probability proportional to effective weight, by
// rejection sampling (see pair), and the proposals it took; -1 after
// p2cTries rejections. Proposals
// are spread over the tier's weight without skip's segment, so skipping
// costs no proposals.
func (p *P2C) sample(tier []*routes.Target, x *routes.WeightIndex, f *filter, skip int) (int, int) {
	total, skipLo, skipW := float64(x.Total()), 0.0, 0.0
	if skip >= 0 {
		lo, hi := x.Segment(skip)
		skipLo, skipW = float64(lo), float64(hi-lo)
		total -= skipW
		if total <= 0 {
			return -1, 0
		}
	}
	for try := range p2cTries {
		v := p.float64() * total
		if skip >= 0 && v >= skipLo {
			v += skipW
		}
		i, off := x.Locate(v)
		if i != skip && off < f.weightAt(x, tier, i) {
			return i, try + 1
		}
	}
	return -1, p2cTries
}

// scanPair is pair by a scan of the tier, returning indices (-1 = none).
// ia ≥ 0 is a first draw already made. The scan lists the eligible
// targets once and both draws walk the list (the same draws, roll for
// roll, as walking the tier); a tier with more than maxListed eligible
// targets is walked by scanPairWide.
func (p *P2C) scanPair(tier []*routes.Target, f *filter, ia int) (int, int) {
	var l listing
	if !f.list(tier, &l) {
		return p.scanPairWide(tier, f, ia)
	}
	switch l.n {
	case 0:
		return -1, -1
	case 1:
		return int(l.idx[0]), -1
	}
	ja := -1
	for j := range l.n {
		if int(l.idx[j]) == ia {
			ja = j
			break
		}
	}
	if ja < 0 { // no first draw yet, or it became ineligible meanwhile
		ja = l.draw(p.float64()*l.total, -1)
	}
	if l.n == 2 { // the second draw is the other one: no need to roll
		return int(l.idx[ja]), int(l.idx[1-ja])
	}
	jb := l.draw(p.float64()*(l.total-l.w[ja]), ja)
	return int(l.idx[ja]), int(l.idx[jb])
}

// scanPairWide is scanPair for a tier with many eligible targets: it
// walks the tier for each draw. A concurrent change of the tier may leave
// either draw short.
func (p *P2C) scanPairWide(tier []*routes.Target, f *filter, ia int) (int, int) {
	v := tierView{tier: tier, f: f}
	var (
		total float64
		n     int
		only  int
	)
	for i, t := range tier {
		w := f.weight(t)
		if w > 0 {
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
		return -1, -1
	case 1:
		return only, -1
	}
	var wa float64
	if ia >= 0 {
		wa = v.weight(ia)
	}
	if wa == 0 { // no first draw yet, or it became ineligible meanwhile
		ia, wa = p.draw(&v, total, -1)
	}
	if n == 2 { // the second draw is the other one: no need to roll
		return ia, v.other(ia)
	}
	ib, _ := p.draw(&v, total-wa, ia)
	return ia, ib
}

// tierView is one tier during one scan: its targets and the effective
// weights of the first weightCache of them (0 = not eligible).
type tierView struct {
	tier []*routes.Target
	f    *filter
	ws   [weightCache]float64
}

// weight returns the effective weight of tier[i], 0 when it is not eligible.
func (v *tierView) weight(i int) float64 {
	if i < weightCache {
		return v.ws[i]
	}
	return v.f.weight(v.tier[i])
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
