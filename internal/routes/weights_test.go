package routes

import (
	"fmt"
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

// TestIndexLayout: the index keeps each target's capabilities, weight
// and backend state in tier order, and the capabilities they all share.
func TestIndexLayout(t *testing.T) {
	reg := upstream.NewRegistry(upstream.Options{})
	weights := []int{2, 5, 0, 2, 7, 1}
	caps := []Caps{CapTools | CapStream, CapTools, CapTools, CapTools | CapJSONSchema, CapTools, CapTools | CapStream}
	pool := make([]*Target, len(weights))
	for i, w := range weights {
		id := fmt.Sprintf("b%d", i)
		pool[i] = &Target{Weight: w, Caps: caps[i], Backend: &Backend{ID: id, State: reg.Get(upstream.Identity{ID: id, Cap: 1})}}
	}
	IndexWeights(pool)
	x := pool[0].TierWeights
	if !slices.Equal(x.Caps(), caps) || x.Common() != CapTools {
		t.Errorf("Caps %v, Common %v; want %v, tools", x.Caps(), x.Common(), caps)
	}
	for i, st := range x.States() {
		if st != pool[i].Backend.State || x.Weights()[i] != float64(weights[i]) {
			t.Errorf("target %d: state or weight not the target's", i)
		}
	}
}
