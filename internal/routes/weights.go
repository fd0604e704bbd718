package routes

import (
	"math"
	"sort"
	"sync/atomic"

	"github.com/scootgate/scootgate/internal/upstream"
)

// IndexWeights sets TierWeights on every target of pool, which must be
// sorted by tier. Compile calls it; a pool built by hand may call it
// before the pool is shared.
func IndexWeights(pool []*Target) {
	for start := 0; start < len(pool); {
		end := start + 1
		for end < len(pool) && pool[end].Tier == pool[start].Tier {
			end++
		}
		x := newWeightIndex(pool[start:end])
		for _, t := range pool[start:end] {
			t.TierWeights = x
		}
		start = end
	}
}

// WeightIndex lays the weights of one tier's targets end to end, so that
// a uniform number in [0, Total) falls on a target with probability
// proportional to its weight, and finds that target in O(1) expected time
// with a guide table (Chen and Asau, 1974; the guide table method of
// Devroye's "Non-Uniform Random Variate Generation"): the range is cut
// into 4n equal buckets for n targets, each remembering the target its
// first integer falls on, and a lookup walks on from there past the
// segment boundaries in its bucket, a quarter of one on average. Package
// balance draws with it. Immutable.
type WeightIndex struct {
	cum   []int   // cum[i]: sum of the weights of targets 0..i
	guide []int   // guide[k]: the target holding ⌈k·Total/m⌉ (at most Total − 1), the first integer of bucket k of m
	scale float64 // m / Total: bucket k holds [k·Total/m, (k+1)·Total/m)
	// uniform: every target of the tier has the same weight, so weighted
	// rendezvous hashing may compare raw hashes.
	uniform bool
	// The targets' HashID, Caps and Weight, contiguous: rendezvous hashing
	// scores every target of a tier, and this keeps the loop in a few
	// cache lines instead of one Target per step.
	hash []uint64
	caps []Caps
	w    []float64
	rv   Rendezvous
	// Each target's backend state (nil for a target without a backend),
	// contiguous, for the pickers' scans.
	states []*upstream.State
	// firsts is the memo of FirstChoices, allocated by its first call.
	firsts atomic.Pointer[FirstChoices]
	// scanFirst is the hint of ScanFirst, on a cache line of its own so
	// that setting it does not evict what every pick reads.
	_         [64]byte
	scanFirst atomic.Bool
	_         [64 - 4]byte
}

// ScanFirst reports the hint package balance keeps per tier: true when
// its last scan of the tier found so little of the tier's weight
// available that a pick does better to scan straight away than to
// propose targets by weight first. The hint decides only how a draw is
// made, never its outcome.
func (x *WeightIndex) ScanFirst() bool { return x.scanFirst.Load() }

// SetScanFirst sets the hint of ScanFirst. It writes only when the hint
// changes, so picks that agree share its cache line.
func (x *WeightIndex) SetScanFirst(v bool) {
	if x.scanFirst.Load() != v {
		x.scanFirst.Store(v)
	}
}

// FirstBuckets is the number of entries of a FirstChoices memo.
const FirstBuckets = 1 << 16

// FirstChoices is a memo package balance keeps per tier: entry k holds
// 1 + the index of the first choice of affinity bucket k when every
// target is eligible, or 0 until it has been computed; 16 bits each, two
// to a word, 128 KiB. Each entry is a pure function of the tier, so
// concurrent writers store the same value.
type FirstChoices [FirstBuckets / 2]atomic.Uint32

// FirstMax is the most targets a tier may have for a FirstChoices entry
// to name any of them.
const FirstMax = 1<<16 - 2

// Get returns entry k.
func (f *FirstChoices) Get(k uint32) uint32 {
	return f[k/2].Load() >> (k % 2 * 16) & 0xffff
}

// Set sets entry k, which must be 0, to v ≤ FirstMax + 1.
func (f *FirstChoices) Set(k, v uint32) {
	w, shift := &f[k/2], k%2*16
	for {
		old := w.Load()
		if old>>shift&0xffff != 0 || w.CompareAndSwap(old, old|v<<shift) {
			return
		}
	}
}

// FirstChoices returns the tier's memo, allocating it on the first call:
// tiers that never see a keyed pick never hold one.
func (x *WeightIndex) FirstChoices() *FirstChoices {
	if f := x.firsts.Load(); f != nil {
		return f
	}
	x.firsts.CompareAndSwap(nil, new(FirstChoices))
	return x.firsts.Load()
}

// Rendezvous is a tier's targets as weighted rendezvous hashing (package
// balance) reads them: heaviest first, equal weights in tier order (so a
// tier of equal weights is in tier order), contiguous. Immutable.
type Rendezvous struct {
	Index []int32         // the target's index in the tier
	Keys  []RendezvousKey // what the weighted screen reads, one struct per target
	// Each target's HashID and SecondSeed again, in two arrays: the loop
	// over a tier of equal weights runs faster over these than over Keys.
	Hash, Seed2 []uint64
	Inv         []uint64  // ⌊(2⁶⁴ − 1) ÷ weight⌋, the weight's reciprocal in 0.64 fixed point; 0 for a weight ≤ 0
	Caps        []Caps    // the target's capabilities
	Weight      []float64 // the target's weight
	Common      Caps      // the capabilities every target of the tier offers
	// Positive is how many targets have a weight > 0: the first Positive
	// (the others can never be chosen).
	Positive int
}

// RendezvousKey is one target's HashID, SecondSeed(HashID) and weight (0
// for a weight ≤ 0), side by side for the loop that scores every target.
type RendezvousKey struct {
	Hash, Seed2, W uint64
}

// SecondSeed derives a target's second 64-bit seed for rendezvous hashing
// from its HashID (package balance mixes a session key with both). Like
// HashID it depends on the target's identity alone.
func SecondSeed(hashID uint64) uint64 { return Mix64(hashID ^ 0x9e3779b97f4a7c15) }

// guidePerTarget is m/n, the buckets per target: more buckets mean fewer
// boundaries in each, so the walk after the guide usually takes no step.
const guidePerTarget = 4

// newWeightIndex indexes the weights of tier, in order.
func newWeightIndex(tier []*Target) *WeightIndex {
	n := len(tier)
	m := guidePerTarget * n
	x := &WeightIndex{cum: make([]int, n), guide: make([]int, m),
		hash: make([]uint64, n), caps: make([]Caps, n), w: make([]float64, n),
		states: make([]*upstream.State, n)}
	sum := 0
	x.uniform = true
	for i, t := range tier {
		sum += max(t.Weight, 0)
		x.cum[i] = sum
		if t.Weight != tier[0].Weight {
			x.uniform = false
		}
		x.hash[i], x.caps[i], x.w[i] = t.HashID, t.Caps, float64(t.Weight)
		if t.Backend != nil {
			x.states[i] = t.Backend.State
		}
	}
	x.rv = newRendezvous(tier)
	if sum == 0 {
		return x
	}
	x.scale = float64(m) / float64(sum)
	i := 0
	for k := range x.guide {
		first := min((k*sum+m-1)/m, sum-1)
		for x.cum[i] <= first {
			i++
		}
		x.guide[k] = i
	}
	return x
}

// Len returns the number of targets indexed.
func (x *WeightIndex) Len() int { return len(x.cum) }

// Uniform reports whether every indexed target has the same weight.
func (x *WeightIndex) Uniform() bool { return x.uniform }

// Hashes returns the targets' HashID, Caps and Weight, in order, for
// rendezvous hashing. The slices must not be modified.
func (x *WeightIndex) Hashes() (hash []uint64, caps []Caps, weight []float64) {
	return x.hash, x.caps, x.w
}

// newRendezvous lays out tier for rendezvous hashing.
func newRendezvous(tier []*Target) Rendezvous {
	n := len(tier)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return tier[order[a]].Weight > tier[order[b]].Weight })
	rv := Rendezvous{Index: make([]int32, n), Keys: make([]RendezvousKey, n), Hash: make([]uint64, n), Seed2: make([]uint64, n),
		Inv: make([]uint64, n), Caps: make([]Caps, n), Weight: make([]float64, n),
		Common: ^Caps(0)}
	for j, i := range order {
		t := tier[i]
		rv.Index[j], rv.Keys[j] = int32(i), RendezvousKey{Hash: t.HashID, Seed2: SecondSeed(t.HashID)}
		rv.Hash[j], rv.Seed2[j] = rv.Keys[j].Hash, rv.Keys[j].Seed2
		rv.Caps[j], rv.Weight[j] = t.Caps, float64(t.Weight)
		if t.Weight > 0 {
			rv.Positive++
			rv.Keys[j].W = uint64(t.Weight)
			rv.Inv[j] = math.MaxUint64 / uint64(t.Weight)
		}
		rv.Common &= t.Caps
	}
	return rv
}

// Rendezvous returns the tier laid out for rendezvous hashing. It must
// not be modified.
func (x *WeightIndex) Rendezvous() *Rendezvous { return &x.rv }

// States returns each target's backend state, in order (nil for a target
// without a backend). The slice must not be modified.
func (x *WeightIndex) States() []*upstream.State { return x.states }

// Total returns the sum of the weights.
func (x *WeightIndex) Total() int { return x.cum[len(x.cum)-1] }

// Segment returns target i's segment [lo, hi) of [0, Total); hi − lo is
// its weight.
func (x *WeightIndex) Segment(i int) (lo, hi int) {
	if i > 0 {
		lo = x.cum[i-1]
	}
	return lo, x.cum[i]
}

// Locate returns the index of the target whose segment holds v, and v's
// offset into that segment, for 0 ≤ v < Total. A v at or past Total maps
// to the last target with an offset of at least its weight.
func (x *WeightIndex) Locate(v float64) (int, float64) {
	n := len(x.cum)
	vi := int(v)
	if vi >= x.Total() {
		lo, _ := x.Segment(n - 1)
		return n - 1, v - float64(lo)
	}
	// The product is vi's bucket, or one below it when rounding lands on
	// a boundary, while m × Total < 2⁵² (true of any tier Compile builds
	// below some 30,000 targets), so the guide starts at or before the
	// answer. The check keeps the answer exact beyond that, by a scan.
	i := x.guide[min(int(float64(vi)*x.scale), len(x.guide)-1)]
	if i > 0 && x.cum[i-1] > vi {
		i = 0
	}
	for x.cum[i] <= vi {
		i++
	}
	lo, _ := x.Segment(i)
	return i, v - float64(lo)
}
