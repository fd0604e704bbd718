package balance

// The selector as it was before its round of performance work, kept as the
// baseline that BenchmarkSelectorBaseline measures in the same binary as
// the current code. Not used by the package.

import (
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

const (
	// oldP2cRounds bounds the draws per tier when Acquire keeps losing races.
	oldP2cRounds = 3
	// oldWeightCache is how many targets of a tier keep the effective weight
	// computed by a scan's first pass, so its draws need not recheck them.
	// Larger oldTiers recheck the rest.
	oldWeightCache = 16
)

// oldP2C is weighted power-of-two-choices over peak-EWMA cost (weighted_p2c,
// docs/routing.md "Balancing"; see the package doc).
type oldP2C struct {
	// Float64 returns a uniform float64 in [0, 1). Nil means
	// math/rand/v2.Float64.
	Float64 func() float64
}

func (p *oldP2C) float64() float64 {
	if p.Float64 != nil {
		return p.Float64()
	}
	return rand.Float64()
}

// Pick returns a lease on a target, its in-flight slot taken, or false when
// no target of any tier can take the request now.
func (p *oldP2C) Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (Lease, bool) {
	if len(pool) == 0 {
		return Lease{}, false
	}
	f := oldFilter{need: need, tried: tried, now: pool[0].Backend.State.Now()}
	for tier := range oldTiers(pool) {
		if t, ok := p.pickTier(tier, &f); ok {
			return lease(t), true
		}
	}
	return Lease{}, false
}

func (p *oldP2C) pickTier(tier []*routes.Target, f *oldFilter) (*routes.Target, bool) {
	for range oldP2cRounds {
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

// pair draws two distinct oldEligible targets of tier: a with probability
// proportional to effective weight, then b from the weight that remains.
// b is nil when a is the only oldEligible target, a when none is.
//
// An indexed tier (routes.IndexWeights) is drawn by rejection sampling: a
// proposal lands on a target with probability proportional to its static
// weight and is kept when the target is oldEligible (and not a) and the
// proposal falls within the effective part of the target's weight, which
// keeps exactly the distribution above. A draw that keeps rejecting (most
// of the tier's weight ineligible or ramping) is finished by a scan, as is
// every draw of a tier without the index.
func (p *oldP2C) pair(tier []*routes.Target, f *oldFilter) (a, b *routes.Target) {
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
	if x := oldWeightIndex(tier); x != nil {
		if ia = p.sample(tier, x, f, -1); ia >= 0 {
			if ib := p.sample(tier, x, f, ia); ib >= 0 {
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
func (p *oldP2C) pairOf2(t0, t1 *routes.Target, f *oldFilter) (a, b *routes.Target) {
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

// sample draws the index of an oldEligible target of the indexed tier other
// than skip, with probability proportional to effective weight, by
// rejection sampling (see pair); -1 after oldDrawTries rejections. Proposals
// are spread over the tier's weight without skip's segment, so skipping
// costs no proposals.
func (p *oldP2C) sample(tier []*routes.Target, x *routes.WeightIndex, f *oldFilter, skip int) int {
	total, skipLo, skipW := float64(x.Total()), 0.0, 0.0
	if skip >= 0 {
		lo, hi := x.Segment(skip)
		skipLo, skipW = float64(lo), float64(hi-lo)
		total -= skipW
		if total <= 0 {
			return -1
		}
	}
	for range oldDrawTries {
		v := p.float64() * total
		if skip >= 0 && v >= skipLo {
			v += skipW
		}
		i, off := x.Locate(v)
		if i != skip && off < f.weight(tier[i]) {
			return i
		}
	}
	return -1
}

// scanPair is pair by a scan of the tier, returning indices (-1 = none).
// ia ≥ 0 is a first draw already made. A concurrent change of the tier may
// leave either draw short.
func (p *oldP2C) scanPair(tier []*routes.Target, f *oldFilter, ia int) (int, int) {
	v := oldTierView{tier: tier, f: f}
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
		if i < oldWeightCache {
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

// oldTierView is one tier during one scan: its targets and the effective
// weights of the first oldWeightCache of them (0 = not oldEligible).
type oldTierView struct {
	tier []*routes.Target
	f    *oldFilter
	ws   [oldWeightCache]float64
}

// weight returns the effective weight of tier[i], 0 when it is not oldEligible.
func (v *oldTierView) weight(i int) float64 {
	if i < oldWeightCache {
		return v.ws[i]
	}
	return v.f.weight(v.tier[i])
}

// other returns the index of an oldEligible target other than i, or -1.
func (v *oldTierView) other(i int) int {
	for j := range v.tier {
		if j != i && v.weight(j) > 0 {
			return j
		}
	}
	return -1
}

// draw returns the index of an oldEligible target other than skip, chosen with
// probability proportional to effective weight (total being the oldEligible
// weight without skip's), and its weight; -1 if there is none. If rounding
// or a concurrent change leaves the walk short, the last oldEligible target
// is returned.
func (p *oldP2C) draw(v *oldTierView, total float64, skip int) (int, float64) {
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

// oldWeightedRandom picks with probability proportional to Target.Weight
// (weighted_random, the degraded mode in docs/routing.md "Balancing"). It ignores latency, in-flight
// and slow start, but not eligibility.
type oldWeightedRandom struct {
	// IntN returns a uniform int in [0, n). Nil means math/rand/v2.IntN.
	IntN func(n int) int
}

func (w *oldWeightedRandom) intN(n int) int {
	if w.IntN != nil {
		return w.IntN(n)
	}
	return rand.IntN(n)
}

// Pick returns a lease on a target, its in-flight slot taken, or false when
// no target of any tier can take the request now.
func (w *oldWeightedRandom) Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (Lease, bool) {
	if len(pool) == 0 {
		return Lease{}, false
	}
	f := oldFilter{need: need, tried: tried, now: pool[0].Backend.State.Now()}
	for tier := range oldTiers(pool) {
		if t, ok := w.pickTier(tier, &f); ok {
			return lease(t), true
		}
	}
	return Lease{}, false
}

// pickTier draws by weight among one tier's oldEligible targets. A target whose
// Acquire fails is skipped and the draw repeats, at most once per target.
func (w *oldWeightedRandom) pickTier(tier []*routes.Target, f *oldFilter) (*routes.Target, bool) {
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

// draw returns an oldEligible target of tier not in lost, with probability
// proportional to Target.Weight, or nil when there is none. An indexed tier
// (routes.IndexWeights) is drawn by rejection sampling: propose by weight,
// keep an oldEligible proposal; after oldDrawTries rejections, or without the
// index, it scans the tier.
func (w *oldWeightedRandom) draw(tier []*routes.Target, f *oldFilter, lost []*routes.Target) *routes.Target {
	ok := func(t *routes.Target) bool {
		return oldEligible(t, f.need, f.tried, f.now) && !oldContains(lost, t)
	}
	if x := oldWeightIndex(tier); x != nil {
		for range oldDrawTries {
			i, _ := x.Locate(float64(w.intN(x.Total())))
			if t := tier[i]; ok(t) {
				return t
			}
		}
	}
	total := 0
	for _, t := range tier {
		if ok(t) {
			total += t.Weight
		}
	}
	if total <= 0 {
		return nil
	}
	x := w.intN(total)
	var last *routes.Target
	for _, t := range tier {
		if !ok(t) {
			continue
		}
		if x < t.Weight {
			return t
		}
		x -= t.Weight
		last = t
	}
	return last // the oldEligible set shrank between the two loops
}

func oldContains(ts []*routes.Target, t *routes.Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// oldAffinity is prompt-cache affinity: weighted rendezvous hashing of a
// oldSession key over a tier's targets, with a bounded-load spill; see the
// package doc and docs/routing.md "Affinity". Requests without a key go to
// Fallback. Safe for concurrent use; holds no state of its own.
type oldAffinity struct {
	// Fallback picks keyless requests. Required.
	Fallback Picker
	// LoadFactor is c: a target with more than ⌈c × (its share of the
	// tier's in-flight + 1)⌉ requests in flight is passed over. Values
	// below 1 mean DefaultLoadFactor.
	LoadFactor float64
}

// Pick is Fallback.Pick: a request without a oldSession key.
func (a *oldAffinity) Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (Lease, bool) {
	return a.Fallback.Pick(pool, need, tried)
}

// PickKey returns a lease on a target for a request with oldSession key key
// and how it was placed; false when no target of any tier
// can take the request now. With key 0 it is Pick, placement Keyless.
func (a *oldAffinity) PickKey(pool []*routes.Target, need routes.Caps, tried []*routes.Target, key Key) (Lease, Placement, bool) {
	if key == 0 {
		l, ok := a.Fallback.Pick(pool, need, tried)
		return l, Keyless, ok
	}
	if len(pool) == 0 {
		return Lease{}, Balanced, false
	}
	c := a.LoadFactor
	if !(c >= 1) {
		c = DefaultLoadFactor
	}
	s := oldSession{
		oldFilter: oldFilter{need: need, tried: tried, now: pool[0].Backend.State.Now()},
		key:       uint64(key),
		c:         c,
		floor:     int64(math.Ceil(c)),
	}
	first := Balanced // the reason the oldSession's first choice was passed over; Balanced = none yet
	for tier := range oldTiers(pool) {
		t, reason, ok := s.pickTier(tier)
		if ok {
			if first == Balanced {
				first = reason
			}
			return lease(t), first, true
		}
		if first == Balanced && reason != Balanced {
			// The oldSession's place was in this tier, but nothing in it
			// could take the request.
			first = reason
		}
	}
	return Lease{}, first, false
}

// oldSession is one PickKey call.
type oldSession struct {
	oldFilter
	key   uint64
	c     float64
	floor int64 // ⌈c⌉: no target at or below it is overloaded, whatever the mean

	// The tier's load, summed over its oldEligible targets when first needed.
	loaded bool
	load   float64 // in-flight
	weight float64
}

// pickTier walks tier in the oldSession's hash order and takes the first
// target that is oldEligible, not overloaded and acquired. The placement is
// Preferred when that is the first in the order, otherwise the reason the
// first was passed over; Balanced with false when the tier has no target
// with the capability.
func (s *oldSession) pickTier(tier []*routes.Target) (*routes.Target, Placement, bool) {
	s.loaded = false
	x := oldWeightIndex(tier) // nil: scan the targets themselves, by the logarithm
	first := Balanced
	prevR, prevI := uint64(0), -1
	for {
		var i int
		var r uint64
		if prevI < 0 && x != nil {
			i, r = s.firstIndexed(x)
		} else {
			i, r = s.next(tier, x, prevR, prevI)
		}
		if i < 0 {
			return nil, first, false
		}
		prevR, prevI = r, i
		t := tier[i]
		reason := s.check(t, tier)
		if reason == Preferred && t.Backend.State.Acquire() {
			if first == Balanced {
				first = Preferred
			}
			return t, first, true
		}
		if reason == Preferred {
			reason = SpillUnavailable // lost the race for its last slot, or its probe
		}
		if first == Balanced {
			first = reason
		}
	}
}

// check returns Preferred when t may take the request, or why not.
func (s *oldSession) check(t *routes.Target, tier []*routes.Target) Placement {
	for _, x := range s.tried {
		if x == t {
			return SpillRetry
		}
	}
	st := t.Backend.State
	if !st.Ready(s.now) {
		return SpillUnavailable
	}
	n := st.InFlight()
	if n <= s.floor {
		return Preferred
	}
	if !s.loaded {
		s.load, s.weight = 0, 0
		for _, x := range tier {
			if x.Caps.Has(s.need) && x.Backend.State.Ready(s.now) {
				s.load += float64(x.Backend.State.InFlight())
				s.weight += float64(x.Weight)
			}
		}
		s.loaded = true
	}
	if s.weight <= 0 {
		return Preferred
	}
	// ⌈c × (mean + 1)⌉, the mean being t's weighted share of the load: with
	// equal weights, the tier's mean in-flight.
	bound := math.Ceil(s.c * (s.load*float64(t.Weight)/s.weight + 1))
	if float64(n) > bound {
		return SpillOverloaded
	}
	return Preferred
}

// firstIndexed is next for the first in the order of an indexed tier:
// the same result by the same arithmetic, in loops without the bookkeeping
// of later ranks, since nearly every pick stops there.
func (s *oldSession) firstIndexed(x *routes.WeightIndex) (int, uint64) {
	hashes, caps, weights := x.Hashes()
	caps = caps[:len(hashes)]
	best := -1
	if x.Uniform() {
		var bestH uint64
		for i, id := range hashes {
			if caps[i]&s.need != s.need {
				continue
			}
			if h := routes.Mix64(s.key ^ id); best < 0 || h > bestH {
				best, bestH = i, h
			}
		}
		return best, ^bestH
	}
	weights = weights[:len(hashes)]
	bestF := math.Inf(1)
	for i, id := range hashes {
		if caps[i]&s.need != s.need {
			continue
		}
		m := float64(routes.Mix64(s.key^id) >> 11)
		w := weights[i]
		if (1<<53-m-0.5)*0x1p-53 >= bestF*w {
			continue // see next: the bound cannot beat the best
		}
		if f := -math.Log((m+0.5)*0x1p-53) / w; f < bestF {
			best, bestF = i, f
		}
	}
	return best, math.Float64bits(bestF)
}

// next returns the index and rank of the capability-matching target of
// tier that comes right after (prevR, prevI) in the oldSession's hash order
// (prevI −1: the first), or −1. The order is by rank, then index; a lower
// rank comes first.
//
// The rank is weighted rendezvous hashing: with u ∈ (0, 1) from a hash of
// the oldSession key and the target's identity, the target with the highest
// score −w ÷ ln u, that is the lowest −ln(u) ÷ w, comes first, so target i
// is the first choice of a share wᵢ ÷ Σw of the keys, and a target that
// joins or leaves moves only the keys whose first choice it is or becomes.
// The rank is the float64 bits of −ln(u) ÷ w, which order like the
// (positive) values. When all weights are equal it is the complement of
// the hash itself: the same order, without a logarithm.
func (s *oldSession) next(tier []*routes.Target, x *routes.WeightIndex, prevR uint64, prevI int) (int, uint64) {
	var (
		hashes  []uint64
		caps    []routes.Caps
		weights []float64
	)
	if x != nil {
		hashes, caps, weights = x.Hashes()
	}
	uniform := x != nil && x.Uniform()
	bestI, bestR, bestF := -1, uint64(math.MaxUint64), math.Inf(1)
	for i := range tier {
		var (
			id uint64
			c  routes.Caps
			w  float64
		)
		if x != nil {
			id, c, w = hashes[i], caps[i], weights[i]
		} else {
			t := tier[i]
			id, c, w = t.HashID, t.Caps, float64(t.Weight)
		}
		if !c.Has(s.need) {
			continue
		}
		h := routes.Mix64(s.key ^ id)
		var r uint64
		if uniform {
			r = ^h
		} else {
			m := float64(h >> 11) // u = (m + ½) ÷ 2⁵³
			// −ln u ≥ 1 − u: a target whose lower bound (1 − u) ÷ w
			// cannot beat the best so far needs no logarithm.
			if oneMinusU := (1<<53 - m - 0.5) * 0x1p-53; oneMinusU >= bestF*w {
				continue
			}
			f := -math.Log((m+0.5)*0x1p-53) / w
			r = math.Float64bits(f)
			if (r > prevR || (r == prevR && i > prevI)) && r < bestR {
				bestF = f
			}
		}
		if (r > prevR || (r == prevR && i > prevI)) && r < bestR {
			bestI, bestR = i, r
		}
	}
	return bestI, bestR
}

// oldEligible reports whether t may take this attempt at now, ignoring the
// races that Acquire settles.
func oldEligible(t *routes.Target, need routes.Caps, tried []*routes.Target, now upstream.Instant) bool {
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

// oldTierEnd returns the end of the tier that starts at pool[start]. pool is
// sorted by tier, so a binary search keeps this O(log n), and the last
// tier (often the only one) takes one comparison.
func oldTierEnd(pool []*routes.Target, start int) int {
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

// oldTiers yields the oldTiers of pool, which is sorted by tier, in order.
func oldTiers(pool []*routes.Target) iter.Seq[[]*routes.Target] {
	return func(yield func([]*routes.Target) bool) {
		for start := 0; start < len(pool); {
			end := oldTierEnd(pool, start)
			if !yield(pool[start:end]) {
				return
			}
			start = end
		}
	}
}

// oldDrawTries bounds the proposals of one draw by rejection sampling before
// the picker falls back to scanning the tier.
const oldDrawTries = 8

// oldFilter is what a pick asks of a target besides its weight.
type oldFilter struct {
	need  routes.Caps
	tried []*routes.Target
	now   upstream.Instant
}

// weight returns t's effective weight at f.now, 0 when t is not oldEligible.
func (f *oldFilter) weight(t *routes.Target) float64 {
	if !oldEligible(t, f.need, f.tried, f.now) {
		return 0
	}
	return t.Backend.State.EffectiveWeight(t.Weight, f.now)
}

// oldWeightIndex returns tier's routes.IndexWeights index, or nil when it has
// none (or one for another slicing of the pool).
func oldWeightIndex(tier []*routes.Target) *routes.WeightIndex {
	x := tier[0].TierWeights
	if x == nil || x.Len() != len(tier) || x.Total() <= 0 {
		return nil
	}
	return x
}

// keyPicker is what BenchmarkSelectorBaseline asks of an affinity picker.
type keyPicker interface {
	PickKey(pool []*routes.Target, need routes.Caps, tried []*routes.Target, key Key) (Lease, Placement, bool)
}

// BenchmarkSelectorBaseline runs the cases of BenchmarkPick,
// BenchmarkPickAffinity and BenchmarkPickMostlyFull that the performance
// work targets, at 100 targets, with the baseline (this file) and the
// current code interleaved in one loop: each iteration times a chunk of
// 256 picks of each, in alternating order, in CPU time of the benchmark's
// thread (threadCPU), so that both see the same machine and neither is
// charged for the time it waited for a core: on a machine shared with
// other work, wall time per pick is mostly that waiting. It reports ns per
// pick of each (old_ns/pick, new_ns/pick) and new ÷ old; run it with
// -count 8 and take the medians.
func BenchmarkSelectorBaseline(b *testing.B) {
	const n, chunk = 100, 256
	pool := func(weight func(i int) int, capacity func(i int) int) []*routes.Target {
		reg := upstream.NewRegistry(upstream.Options{SlowStart: -1})
		p := make([]*routes.Target, n)
		for i := range p {
			p[i] = target(reg, fmt.Sprint(i), weight(i), 0, capacity(i), 0)
			if capacity(i) == 1 {
				p[i].Backend.State.Acquire()
			}
		}
		routes.IndexWeights(p)
		return p
	}
	distinct := func(i int) int { return i + 1 }
	equal := func(int) int { return 1 }
	roomy := func(int) int { return 1 << 30 }
	mostlyFull := func(i int) int {
		if i%10 != 0 {
			return 1
		}
		return 1 << 30
	}
	ks := make([]Key, 1024)
	for i := range ks {
		ks[i] = SessionKey("key", fmt.Appendf(nil, "s%d", i))
	}
	// run times chunk calls of pick, which picks and releases, in CPU
	// time of the thread.
	run := func(pick func(i int) bool) time.Duration {
		start := threadCPU()
		for i := range chunk {
			if !pick(i) {
				panic("no pick")
			}
		}
		return threadCPU() - start
	}
	bench := func(name string, old, cur func(i int) bool) {
		b.Run(name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var tOld, tNew time.Duration
			chunks := 0
			for b.Loop() {
				if chunks%2 == 0 {
					tOld += run(old)
					tNew += run(cur)
				} else {
					tNew += run(cur)
					tOld += run(old)
				}
				chunks++
			}
			picks := float64(chunks * chunk)
			b.ReportMetric(float64(tOld.Nanoseconds())/picks, "old_ns/pick")
			b.ReportMetric(float64(tNew.Nanoseconds())/picks, "new_ns/pick")
			b.ReportMetric(float64(tNew)/float64(tOld), "new/old")
			b.ReportMetric(0, "ns/op")
		})
	}
	plain := func(p picker, pl []*routes.Target) func(int) bool {
		return func(int) bool {
			t, ok := p.Pick(pl, 0, nil)
			if ok {
				t.Backend.State.Release()
			}
			return ok
		}
	}
	keyed := func(a keyPicker, pl []*routes.Target) func(int) bool {
		k := 0
		return func(int) bool {
			t, _, ok := a.PickKey(pl, 0, nil, ks[k&1023])
			k++
			if ok {
				t.Backend.State.Release()
			}
			return ok
		}
	}
	rnd := func() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
	for _, c := range []struct {
		name   string
		random bool
		pool   []*routes.Target
	}{
		{"weighted_p2c", false, pool(distinct, roomy)},
		{"weighted_random", true, pool(distinct, roomy)},
		{"mostly_full_p2c", false, pool(distinct, mostlyFull)},
		{"mostly_full_random", true, pool(distinct, mostlyFull)},
	} {
		if c.random {
			bench(c.name, plain(&oldWeightedRandom{IntN: rnd().IntN}, c.pool), plain(&WeightedRandom{IntN: rnd().IntN}, c.pool))
		} else {
			bench(c.name, plain(&oldP2C{Float64: rnd().Float64}, c.pool), plain(&P2C{Float64: rnd().Float64}, c.pool))
		}
	}
	for _, c := range []struct {
		name   string
		weight func(int) int
	}{{"affinity_equal", equal}, {"affinity_weighted", distinct}} {
		pl := pool(c.weight, roomy)
		bench(c.name, keyed(&oldAffinity{Fallback: &P2C{Float64: rnd().Float64}}, pl), keyed(&Affinity{Fallback: &P2C{Float64: rnd().Float64}}, pl))
	}
}
