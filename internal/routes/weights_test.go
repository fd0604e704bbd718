package routes

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/upstream"
)

func weightedPool(weights ...int) []*Target {
	pool := make([]*Target, len(weights))
	for i, w := range weights {
		pool[i] = &Target{Weight: w}
	}
	return pool
}

// TestWeightIndexLocate compares Locate with a linear walk over the
// segments for every integer below the total (and the midpoint after it),
// on weight lists that stress the guide table: a total smaller than the
// number of buckets, zero weights, one weight dwarfing the rest, and the
// largest weights config accepts. It also checks the guide table's claim:
// a lookup never starts past its answer.
func TestWeightIndexLocate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	big := make([]int, 300)
	for i := range big {
		big[i] = 1 + r.IntN(1_000_000)
	}
	tests := [][]int{
		{1}, {7}, {1, 1}, {1, 2, 3}, {3, 2, 1},
		{0, 3, 0, 2}, {1, 0, 0, 0, 0}, {0, 0, 0, 1},
		{1_000_000, 1, 1}, {1, 1, 1_000_000},
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
		big,
	}
	for _, weights := range tests {
		name := fmt.Sprint(weights)
		if len(name) > 40 {
			name = fmt.Sprintf("%d random weights", len(weights))
		}
		t.Run(name, func(t *testing.T) {
			pool := weightedPool(weights...)
			IndexWeights(pool)
			x := pool[0].TierWeights
			if x.Len() != len(weights) {
				t.Fatalf("Len = %d, want %d", x.Len(), len(weights))
			}
			step := max(1, x.Total()/100_000) // every value of the small totals, a sample of the big one
			i, lo := 0, 0
			for v := 0; v < x.Total(); v += step {
				for v >= lo+weights[i] {
					lo += weights[i]
					i++
				}
				// The guide never starts past the answer, so Locate's
				// fallback for extreme weights stays unused.
				if g := x.guide[min(int(float64(v)*x.scale), len(x.guide)-1)]; g > i {
					t.Fatalf("value %d: guide starts at target %d, past %d", v, g, i)
				}
				for _, f := range []float64{0, 0.5} {
					gotI, gotOff := x.Locate(float64(v) + f)
					if gotI != i || gotOff != float64(v-lo)+f {
						t.Fatalf("Locate(%v) = (%d, %v), want (%d, %v)", float64(v)+f, gotI, gotOff, i, float64(v-lo)+f)
					}
				}
			}
			last := len(weights) - 1
			if gotI, gotOff := x.Locate(float64(x.Total())); gotI != last || gotOff < float64(weights[last]) {
				t.Errorf("Locate(Total) = (%d, %v), want (%d, ≥ %d)", gotI, gotOff, last, weights[last])
			}
		})
	}
}

// TestIndexWeightsTiers: each tier of a pool gets its own index, shared by
// its targets, and Compile indexes every pool.
func TestIndexWeightsTiers(t *testing.T) {
	pool := weightedPool(1, 2, 5, 3, 3, 4)
	for i, tier := range []int{0, 0, 1, 3, 3, 3} {
		pool[i].Tier = tier
	}
	IndexWeights(pool)
	type view struct{ Len, Total, Lo, Hi int }
	var got []view
	for i, tg := range pool {
		lo, hi := tg.TierWeights.Segment(i - map[int]int{0: 0, 1: 2, 3: 3}[tg.Tier])
		got = append(got, view{tg.TierWeights.Len(), tg.TierWeights.Total(), lo, hi})
	}
	want := []view{{2, 3, 0, 1}, {2, 3, 1, 3}, {1, 5, 0, 5}, {3, 10, 0, 3}, {3, 10, 3, 6}, {3, 10, 6, 10}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	if pool[0].TierWeights != pool[1].TierWeights || pool[3].TierWeights != pool[5].TierWeights {
		t.Error("targets of one tier do not share its index")
	}

	m, _ := compile(t, staticDoc(), upstream.NewRegistry(upstream.Options{})).Model("mixed")
	for p, pool := range m.Pools {
		for _, tg := range pool {
			if x := tg.TierWeights; x == nil || x.Len() != 1 || x.Total() != tg.Weight {
				t.Errorf("%v pool, target %s: Compile did not index its tier of one", provider.Endpoint(p), tg.Backend.ID)
			}
		}
	}
}

// TestRendezvousLayout: the index lays a tier out for rendezvous hashing
// heaviest first, equal weights in tier order, with each target's index,
// seeds, capabilities, weights and fixed-point reciprocal, the
// capabilities they all share, and the targets of weight ≤ 0 last; and it
// keeps each target's backend state.
func TestRendezvousLayout(t *testing.T) {
	reg := upstream.NewRegistry(upstream.Options{})
	weights := []int{2, 5, 0, 2, 7, 1}
	caps := []Caps{CapTools | CapStream, CapTools, CapTools, CapTools | CapJSONSchema, CapTools, CapTools | CapStream}
	pool := make([]*Target, len(weights))
	for i, w := range weights {
		id := fmt.Sprintf("b%d", i)
		pool[i] = &Target{Weight: w, Caps: caps[i], HashID: TargetHash(id, "m"),
			Backend: &Backend{ID: id, State: reg.Get(upstream.Identity{ID: id, Cap: 1})}}
	}
	IndexWeights(pool)
	x := pool[0].TierWeights
	rv := x.Rendezvous()
	if want := []int32{4, 1, 0, 3, 5, 2}; !slices.Equal(rv.Index, want) {
		t.Fatalf("Index = %v, want %v", rv.Index, want)
	}
	if rv.Positive != 5 || rv.Common != CapTools {
		t.Errorf("Positive %d, Common %v; want 5, tools", rv.Positive, rv.Common)
	}
	for j, i := range rv.Index {
		tg, w := pool[i], uint64(weights[i])
		if rv.Keys[j] != (RendezvousKey{tg.HashID, SecondSeed(tg.HashID), w}) || rv.Hash[j] != tg.HashID || rv.Seed2[j] != SecondSeed(tg.HashID) || rv.Caps[j] != tg.Caps || rv.Weight[j] != float64(tg.Weight) {
			t.Errorf("position %d (target %d): hash, seed, caps or weight not the target's", j, i)
		}
		if w == 0 {
			if rv.Inv[j] != 0 {
				t.Errorf("target %d of weight 0: Inv %d, want 0", i, rv.Inv[j])
			}
			continue
		}
		// Inv = ⌊(2⁶⁴ − 1) ÷ w⌋: Inv·w ≤ 2⁶⁴ − 1 < (Inv + 1)·w.
		if hi, lo := bits.Mul64(rv.Inv[j], w); hi != 0 || math.MaxUint64-lo >= w {
			t.Errorf("target %d: Inv %d is not ⌊(2⁶⁴ − 1) ÷ %d⌋", i, rv.Inv[j], w)
		}
	}
	for i, st := range x.States() {
		if st != pool[i].Backend.State {
			t.Errorf("States()[%d] is not target %d's state", i, i)
		}
	}
}

// TestFirstChoices: the memo's 16-bit entries are independent of their
// neighbours in the same word, start at 0, and a set entry stays as it
// was set.
func TestFirstChoices(t *testing.T) {
	x := newWeightIndex([]*Target{{Weight: 1}, {Weight: 2}})
	f := x.FirstChoices()
	if x.FirstChoices() != f {
		t.Fatal("a second call returned another memo")
	}
	for _, k := range []uint32{0, 1, 2, FirstBuckets - 2, FirstBuckets - 1} {
		if f.Get(k) != 0 {
			t.Fatalf("entry %d: %d before it was set", k, f.Get(k))
		}
	}
	f.Set(1, FirstMax+1)
	f.Set(0, 7)
	f.Set(1, 3) // already set: kept
	f.Set(FirstBuckets-1, 2)
	for k, want := range map[uint32]uint32{0: 7, 1: FirstMax + 1, 2: 0, FirstBuckets - 2: 0, FirstBuckets - 1: 2} {
		if got := f.Get(k); got != want {
			t.Errorf("entry %d: %d, want %d", k, got, want)
		}
	}
}
