package balance

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

type picker interface {
	Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (Lease, bool)
}

// BenchmarkPick measures one pick and release on a pool of n targets with
// distinct weights and room under every cap, with the real clock.
func BenchmarkPick(b *testing.B) {
	for _, alg := range []string{"weighted_p2c", "weighted_random"} {
		for _, n := range []int{2, 10, 100} {
			b.Run(fmt.Sprintf("%s/%d", alg, n), func(b *testing.B) {
				// Steady state: slow start over (off), real clock.
				reg := upstream.NewRegistry(upstream.Options{SlowStart: -1})
				pool := make([]*routes.Target, n)
				for i := range pool {
					pool[i] = target(reg, fmt.Sprint(i), i+1, 0, 1<<30, 0)
				}
				routes.IndexWeights(pool) // as routes.Compile does
				r := rand.New(rand.NewPCG(1, 2))
				var p picker = &P2C{Float64: r.Float64}
				if alg == "weighted_random" {
					p = &WeightedRandom{IntN: r.IntN}
				}
				b.ReportAllocs()
				for b.Loop() {
					t, ok := p.Pick(pool, 0, nil)
					if !ok {
						b.Fatal("no pick")
					}
					t.Backend.State.Release()
				}
			})
		}
	}
}

// BenchmarkPickAffinity is BenchmarkPick for requests with a session key
// (a different key each pick, as from many sessions): "equal" tiers have
// weight 1 each, "weighted" ones weights 1 … n, as in BenchmarkPick.
func BenchmarkPickAffinity(b *testing.B) {
	for _, weights := range []string{"equal", "weighted"} {
		for _, n := range []int{2, 10, 100} {
			b.Run(fmt.Sprintf("%s/%d", weights, n), func(b *testing.B) {
				reg := upstream.NewRegistry(upstream.Options{SlowStart: -1})
				pool := make([]*routes.Target, n)
				for i := range pool {
					w := 1
					if weights == "weighted" {
						w = i + 1
					}
					pool[i] = target(reg, fmt.Sprint(i), w, 0, 1<<30, 0)
				}
				routes.IndexWeights(pool)
				a := &Affinity{Fallback: &P2C{Float64: rand.New(rand.NewPCG(1, 2)).Float64}}
				ks := make([]Key, 1024)
				for i := range ks {
					ks[i] = SessionKey("key", fmt.Appendf(nil, "s%d", i))
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					t, _, ok := a.PickKey(pool, 0, nil, ks[i&1023])
					if !ok {
						b.Fatal("no pick")
					}
					t.Backend.State.Release()
					i++
				}
			})
		}
	}
}

// BenchmarkPickMostlyFull is BenchmarkPick's worst case for the weight
// index: 90 of 100 targets are at their cap, so most proposals are
// rejected and draws often end in a scan of the tier.
func BenchmarkPickMostlyFull(b *testing.B) {
	for _, alg := range []string{"weighted_p2c", "weighted_random"} {
		b.Run(alg, func(b *testing.B) {
			reg := upstream.NewRegistry(upstream.Options{SlowStart: -1})
			pool := make([]*routes.Target, 100)
			for i := range pool {
				capacity := 1 << 30
				if i%10 != 0 {
					capacity = 1
				}
				pool[i] = target(reg, fmt.Sprint(i), i+1, 0, capacity, 0)
				if capacity == 1 {
					pool[i].Backend.State.Acquire()
				}
			}
			routes.IndexWeights(pool)
			r := rand.New(rand.NewPCG(1, 2))
			var p picker = &P2C{Float64: r.Float64}
			if alg == "weighted_random" {
				p = &WeightedRandom{IntN: r.IntN}
			}
			b.ReportAllocs()
			for b.Loop() {
				t, ok := p.Pick(pool, 0, nil)
				if !ok {
					b.Fatal("no pick")
				}
				t.Backend.State.Release()
			}
		})
	}
}

// BenchmarkPickHeadroom is BenchmarkPick for weighted_p2c on backends
// whose providers state their rate-limit headroom (plenty left, so every
// pick reads it and none is held), the case the headroom rule adds work
// to.
func BenchmarkPickHeadroom(b *testing.B) {
	for _, n := range []int{2, 10, 100} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			reg := upstream.NewRegistry(upstream.Options{SlowStart: -1})
			pool := make([]*routes.Target, n)
			for i := range pool {
				pool[i] = target(reg, fmt.Sprint(i), i+1, 0, 1<<30, 0)
				st := pool[i].Backend.State
				st.Acquire()
				st.Finish(upstream.Result{Outcome: upstream.Success, Headroom: upstream.Headroom{
					Requests: upstream.Budget{Stated: true, Limit: 1 << 40, Remaining: 1 << 40, Reset: time.Hour},
					Tokens:   upstream.Budget{Stated: true, Limit: 1 << 40, Remaining: 1 << 40, Reset: time.Hour},
				}})
			}
			routes.IndexWeights(pool)
			p := &P2C{Float64: rand.New(rand.NewPCG(1, 2)).Float64}
			b.ReportAllocs()
			for b.Loop() {
				t, ok := p.Pick(pool, 0, nil)
				if !ok {
					b.Fatal("no pick")
				}
				t.Backend.State.Release()
			}
		})
	}
}
