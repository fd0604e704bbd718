package balance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

func target(reg *upstream.Registry, id string, weight, tier, capacity int, caps routes.Caps) *routes.Target {
	return &routes.Target{
		Backend: &routes.Backend{ID: id, State: reg.Get(upstream.Identity{ID: id, Cap: capacity})},
		Weight:  weight, Tier: tier, Caps: caps,
	}
}

func seeded() *WeightedRandom {
	r := rand.New(rand.NewPCG(1, 2))
	return &WeightedRandom{IntN: r.IntN}
}

func TestWeightedRandomFollowsWeights(t *testing.T) {
	reg := upstream.NewRegistry()
	pool := []*routes.Target{
		target(reg, "a", 1, 0, 1, 0),
		target(reg, "b", 3, 0, 1, 0),
		target(reg, "c", 6, 0, 1, 0),
	}
	w := seeded()
	const n = 100_000
	counts := map[string]int{}
	for range n {
		p, ok := w.Pick(pool, 0, nil)
		if !ok {
			t.Fatal("no pick with free capacity")
		}
		counts[p.Backend.ID]++
		p.Backend.State.Release()
	}
	// Binomial sd at n=100k is ≤ 0.16 %; 1 % absolute is > 6 sd.
	for id, want := range map[string]float64{"a": 0.1, "b": 0.3, "c": 0.6} {
		got := float64(counts[id]) / n
		if math.Abs(got-want) > 0.01 {
			t.Errorf("share of %s = %.4f, want %.2f ± 0.01", id, got, want)
		}
	}
}

func TestPickRules(t *testing.T) {
	tests := []struct {
		name  string
		setup func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) // pool, tried
		need  routes.Caps
		want  string // backend id, "" = none
	}{
		{
			name: "lower tier preferred",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				return []*routes.Target{target(reg, "t0", 1, 0, 1, 0), target(reg, "t1", 100, 1, 1, 0)}, nil
			},
			want: "t0",
		},
		{
			name: "higher tier when lower is at cap",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				t0 := target(reg, "t0", 1, 0, 1, 0)
				t0.Backend.State.TryAcquire()
				return []*routes.Target{t0, target(reg, "t1", 1, 1, 1, 0)}, nil
			},
			want: "t1",
		},
		{
			name: "capability filter",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				return []*routes.Target{target(reg, "plain", 100, 0, 1, 0), target(reg, "tools", 1, 0, 1, routes.CapTools|routes.CapStream)}, nil
			},
			need: routes.CapTools,
			want: "tools",
		},
		{
			name: "tried targets excluded",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				a, b := target(reg, "a", 100, 0, 1, 0), target(reg, "b", 1, 0, 1, 0)
				return []*routes.Target{a, b}, []*routes.Target{a}
			},
			want: "b",
		},
		{
			name: "all at cap",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				a := target(reg, "a", 1, 0, 1, 0)
				a.Backend.State.TryAcquire()
				return []*routes.Target{a}, nil
			},
			want: "",
		},
		{
			name: "empty pool",
			setup: func(*upstream.Registry) ([]*routes.Target, []*routes.Target) {
				return nil, nil
			},
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, tried := tt.setup(upstream.NewRegistry())
			p, ok := seeded().Pick(pool, tt.need, tried)
			got := ""
			if ok {
				got = p.Backend.ID
			}
			if got != tt.want {
				t.Fatalf("Pick = %q, want %q", got, tt.want)
			}
			if ok && p.Backend.State.InFlight() < 1 {
				t.Fatal("pick did not take an in-flight slot")
			}
		})
	}
}

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{2, 10, 100} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			reg := upstream.NewRegistry()
			pool := make([]*routes.Target, n)
			for i := range pool {
				pool[i] = target(reg, fmt.Sprint(i), i+1, 0, 1<<30, 0)
			}
			w := seeded()
			b.ReportAllocs()
			for b.Loop() {
				p, _ := w.Pick(pool, 0, nil)
				p.Backend.State.Release()
			}
		})
	}
}
