package routes

import (
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
	// Each target's Caps, Weight and backend state (nil for a target
	// without a backend), contiguous, for the pickers' scans, and the
	// capabilities every target offers.
	caps   []Caps
	w      []float64
	states []*upstream.State
	common Caps
	// Each target's HashID, contiguous, for affinity's scan of a tier.
	ids []uint64
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

// guidePerTarget is m/n, the buckets per target: more buckets mean fewer
// boundaries in each, so the walk after the guide usually takes no step.
const guidePerTarget = 4

// newWeightIndex indexes the weights of tier, in order.
func newWeightIndex(tier []*Target) *WeightIndex {
	n := len(tier)
	m := guidePerTarget * n
	x := &WeightIndex{cum: make([]int, n), guide: make([]int, m),
		caps: make([]Caps, n), w: make([]float64, n), states: make([]*upstream.State, n), common: ^Caps(0),
		ids: make([]uint64, n)}
	sum := 0
	for i, t := range tier {
		sum += max(t.Weight, 0)
		x.cum[i] = sum
		x.caps[i], x.w[i], x.ids[i] = t.Caps, float64(t.Weight), t.HashID
		x.common &= t.Caps
		if t.Backend != nil {
			x.states[i] = t.Backend.State
		}
	}
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

// Caps returns the targets' capabilities, in order. The slice must not
// be modified.
func (x *WeightIndex) Caps() []Caps { return x.caps }

// Weights returns the targets' weights, in order. The slice must not be
// modified.
func (x *WeightIndex) Weights() []float64 { return x.w }

// HashIDs returns the targets' HashID, in order, as they were when the
// tier was indexed. The slice must not be modified.
func (x *WeightIndex) HashIDs() []uint64 { return x.ids }

// Common returns the capabilities every target of the tier offers.
func (x *WeightIndex) Common() Caps { return x.common }

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
