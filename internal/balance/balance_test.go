package balance

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

func target(reg *upstream.Registry, id string, weight, tier, capacity int, caps routes.Caps) *routes.Target {
	return &routes.Target{
		Backend: &routes.Backend{ID: id, State: reg.Get(upstream.Identity{ID: id, Cap: capacity})},
		Weight:  weight, Tier: tier, Caps: caps,
		HashID: routes.TargetHash(id, ""),
	}
}

// indexIf sets the pool's weight index (routes.IndexWeights) when index
// is true; without it the pickers scan every tier.
func indexIf(pool []*routes.Target, index bool) []*routes.Target {
	if index {
		routes.IndexWeights(pool)
	}
	return pool
}

func indexName(index bool) string {
	if index {
		return "indexed"
	}
	return "scan"
}

// testRegistry has a fake clock, slow start off and breakers that open
// after one failure for 10s.
func testRegistry() (*upstream.Registry, *clock.Fake) {
	c := clock.NewFake(time.Time{})
	return upstream.NewRegistry(upstream.Options{
		Clock: c.Now, SlowStart: -1, Rand: func() float64 { return 0 },
		Breaker: upstream.BreakerOptions{Failures: 1, Cooldown: 10 * time.Second},
	}), c
}

// pickers returns both algorithms, seeded.
func pickers() map[string]picker {
	r := rand.New(rand.NewPCG(1, 2))
	return map[string]picker{
		"weighted_p2c":    &P2C{Float64: r.Float64},
		"weighted_random": &WeightedRandom{IntN: r.IntN},
	}
}

// finish ends one attempt on t with outcome o.
func finish(t *routes.Target, o upstream.Outcome) {
	if t.Backend.State.Acquire() {
		t.Backend.State.Finish(upstream.Result{Outcome: o, TTFB: time.Second})
	}
}

func TestPickRules(t *testing.T) {
	type setup func(reg *upstream.Registry) (pool, tried []*routes.Target)
	tests := []struct {
		name  string
		setup setup
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
				t0.Backend.State.Acquire()
				return []*routes.Target{t0, target(reg, "t1", 1, 1, 1, 0)}, nil
			},
			want: "t1",
		},
		{
			name: "higher tier when lower is cooling down",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				t0 := target(reg, "t0", 1, 0, 1, 0)
				finish(t0, upstream.RateLimited)
				return []*routes.Target{t0, target(reg, "t1", 1, 1, 1, 0)}, nil
			},
			want: "t1",
		},
		{
			name: "higher tier when lower breaker is open",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				t0 := target(reg, "t0", 1, 0, 1, 0)
				finish(t0, upstream.TransportFailure)
				return []*routes.Target{t0, target(reg, "t1", 1, 1, 1, 0)}, nil
			},
			want: "t1",
		},
		{
			name: "higher tier when lower is disabled",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				t0 := target(reg, "t0", 1, 0, 1, 0)
				finish(t0, upstream.AuthRejected)
				return []*routes.Target{t0, target(reg, "t1", 1, 1, 1, 0)}, nil
			},
			want: "t1",
		},
		{
			name: "the eligible one of a tier, not the next tier",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				a, b := target(reg, "a", 100, 0, 1, 0), target(reg, "b", 1, 0, 1, 0)
				finish(a, upstream.TransportFailure)
				return []*routes.Target{a, b, target(reg, "t1", 1000, 1, 1, 0)}, nil
			},
			want: "b",
		},
		{
			name: "the one healthy target of a tier among many unhealthy heavy ones",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				var pool []*routes.Target
				for i := range 10 {
					x := target(reg, "down"+string(rune('0'+i)), 1000, 0, 1, 0)
					finish(x, upstream.TransportFailure)
					pool = append(pool, x)
				}
				return append(pool, target(reg, "up", 1, 0, 1, 0), target(reg, "t1", 1000, 1, 1, 0)), nil
			},
			want: "up",
		},
		{
			name: "tiers that are not numbered consecutively",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				t3 := target(reg, "t3", 1, 3, 1, 0)
				finish(t3, upstream.AuthRejected)
				return []*routes.Target{t3, target(reg, "t7", 1, 7, 1, 0), target(reg, "t9", 1, 9, 1, 0)}, nil
			},
			want: "t7",
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
				a.Backend.State.Acquire()
				return []*routes.Target{a}, nil
			},
			want: "",
		},
		{
			name: "nothing healthy in any tier",
			setup: func(reg *upstream.Registry) ([]*routes.Target, []*routes.Target) {
				a, b := target(reg, "a", 1, 0, 1, 0), target(reg, "b", 1, 1, 1, 0)
				finish(a, upstream.TransportFailure)
				finish(b, upstream.QuotaExhausted)
				return []*routes.Target{a, b}, nil
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
		for alg, p := range pickers() {
			for _, index := range []bool{false, true} {
				t.Run(alg+"/"+indexName(index)+"/"+tt.name, func(t *testing.T) {
					reg, _ := testRegistry()
					pool, tried := tt.setup(reg)
					indexIf(pool, index)
					before := map[*routes.Target]int64{}
					for _, x := range pool {
						before[x] = x.Backend.State.InFlight()
					}
					got, ok := p.Pick(pool, tt.need, tried)
					gotID := ""
					if ok {
						gotID = got.Backend.ID
					}
					if gotID != tt.want {
						t.Fatalf("Pick = %q, want %q", gotID, tt.want)
					}
					for _, x := range pool { // exactly the pick took a slot
						want := before[x]
						if ok && x == got.Target {
							want++
						}
						if n := x.Backend.State.InFlight(); n != want {
							t.Errorf("%s in-flight %d, want %d", x.Backend.ID, n, want)
						}
					}
				})
			}
		}
	}
}

// TestHalfOpenProbeThroughPick: a breaker due for a probe is eligible, its
// probe is taken once, and the next pick goes elsewhere.
func TestHalfOpenProbeThroughPick(t *testing.T) {
	for alg, p := range pickers() {
		t.Run(alg, func(t *testing.T) {
			reg, c := testRegistry()
			a, b := target(reg, "a", 1, 0, 10, 0), target(reg, "b", 1, 1, 10, 0)
			finish(a, upstream.TransportFailure)
			pool := []*routes.Target{a, b}
			var got []string
			for _, advance := range []time.Duration{0, 10 * time.Second, 0} {
				c.Advance(advance)
				x, ok := p.Pick(pool, 0, nil)
				if !ok {
					t.Fatal("no pick")
				}
				got = append(got, x.Backend.ID)
			}
			if want := "b a b"; got[0]+" "+got[1]+" "+got[2] != want {
				t.Fatalf("picks %v, want %s (open, probe, probe out)", got, want)
			}
		})
	}
}

func TestWeightedRandomFollowsWeights(t *testing.T) {
	for _, index := range []bool{false, true} {
		t.Run(indexName(index), func(t *testing.T) {
			t.Parallel()
			testWeightedRandomFollowsWeights(t, index)
		})
	}
}

func testWeightedRandomFollowsWeights(t *testing.T, index bool) {
	reg, _ := testRegistry()
	pool := indexIf([]*routes.Target{
		target(reg, "a", 1, 0, 1, 0),
		target(reg, "b", 3, 0, 1, 0),
		target(reg, "c", 6, 0, 1, 0),
	}, index)
	w := pickers()["weighted_random"]
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

// TestCapUnderContention: 200 goroutines picking from a pool whose
// backends have caps 5, 3 and 2 never see more in flight than the cap, and
// every successful pick holds a slot (docs/failures.md).
func TestCapUnderContention(t *testing.T) {
	for alg := range pickers() {
		for _, index := range []bool{false, true} {
			t.Run(alg+"/"+indexName(index), func(t *testing.T) {
				testCapUnderContention(t, alg, index)
			})
		}
	}
}

func testCapUnderContention(t *testing.T, alg string, index bool) {
	reg := upstream.NewRegistry(upstream.Options{})
	pool := indexIf([]*routes.Target{target(reg, "five", 1, 0, 5, 0), target(reg, "three", 1, 0, 3, 0), target(reg, "two", 1, 0, 2, 0)}, index)
	caps := map[*routes.Target]int64{pool[0]: 5, pool[1]: 3, pool[2]: 2}

	// Each goroutine picks once and holds: exactly 5 + 3 + 2 succeed,
	// each backend exactly at its cap.
	var held sync.Mutex
	var got []*routes.Target
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 200 {
		wg.Go(func() {
			<-start
			if x, ok := map[string]picker{"weighted_p2c": &P2C{}, "weighted_random": &WeightedRandom{}}[alg].Pick(pool, 0, nil); ok {
				held.Lock()
				got = append(got, x.Target)
				held.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(got) != 10 || pool[0].Backend.State.InFlight() != 5 || pool[1].Backend.State.InFlight() != 3 || pool[2].Backend.State.InFlight() != 2 {
		t.Fatalf("%d picks held, in-flight %d, %d and %d; want 10, 5, 3 and 2",
			len(got), pool[0].Backend.State.InFlight(), pool[1].Backend.State.InFlight(), pool[2].Backend.State.InFlight())
	}
	for _, x := range got {
		x.Backend.State.Release()
	}

	// Then they hammer pick/finish.
	var over atomic.Int64
	var picks atomic.Int64
	for range 200 {
		wg.Go(func() {
			p := map[string]picker{"weighted_p2c": &P2C{}, "weighted_random": &WeightedRandom{}}[alg]
			for range 200 {
				x, ok := p.Pick(pool, 0, nil)
				if !ok {
					continue
				}
				picks.Add(1)
				if n := x.Backend.State.InFlight(); n > caps[x.Target] || n < 1 {
					over.Add(1)
				}
				x.Backend.State.Finish(upstream.Result{Outcome: upstream.Success, TTFB: time.Millisecond})
			}
		})
	}
	wg.Wait()
	if n := over.Load(); n != 0 {
		t.Fatalf("%d picks saw in-flight outside 1..cap", n)
	}
	if picks.Load() == 0 {
		t.Fatal("no pick succeeded")
	}
	for _, x := range pool {
		if n := x.Backend.State.InFlight(); n != 0 {
			t.Errorf("%s: in-flight %d after all finished", x.Backend.ID, n)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(reg *upstream.Registry) []*routes.Target
		need   routes.Caps
		tokens int64
		want   time.Duration
	}{
		{
			name: "eligible now (only at cap) gives the floor",
			setup: func(reg *upstream.Registry) []*routes.Target {
				a := target(reg, "a", 1, 0, 1, 0)
				a.Backend.State.Acquire()
				return []*routes.Target{a}
			},
			want: time.Second,
		},
		{
			name: "earliest of a cooldown and an open breaker, any tier",
			setup: func(reg *upstream.Registry) []*routes.Target {
				a, b := target(reg, "a", 1, 0, 1, 0), target(reg, "b", 1, 1, 1, 0)
				finish(a, upstream.RateLimited) // 5s default
				finish(b, upstream.TransportFailure)
				return []*routes.Target{a, b}
			},
			want: 5 * time.Second,
		},
		{
			name: "rounded up to whole seconds",
			setup: func(reg *upstream.Registry) []*routes.Target {
				a := target(reg, "a", 1, 0, 1, 0)
				a.Backend.State.Acquire()
				a.Backend.State.Finish(upstream.Result{Outcome: upstream.RateLimited, RetryAfter: 2500 * time.Millisecond})
				return []*routes.Target{a}
			},
			want: 3 * time.Second,
		},
		{
			name: "targets lacking the capability do not count",
			setup: func(reg *upstream.Registry) []*routes.Target {
				a, b := target(reg, "a", 1, 0, 1, 0), target(reg, "b", 1, 0, 1, routes.CapTools)
				finish(a, upstream.RateLimited)
				finish(b, upstream.QuotaExhausted)
				return []*routes.Target{a, b}
			},
			need: routes.CapTools,
			want: 30 * time.Minute, // the quota cooldown itself, never a cap below it
		},
		{
			name: "disabled everywhere: its probe",
			setup: func(reg *upstream.Registry) []*routes.Target {
				a := target(reg, "a", 1, 0, 1, 0)
				finish(a, upstream.AuthRejected)
				return []*routes.Target{a}
			},
			want: 10 * time.Minute, // upstream.DefaultAuthProbeAfter
		},
		{
			name: "a quota reset the provider named, beyond the cooldown",
			setup: func(reg *upstream.Registry) []*routes.Target {
				a := target(reg, "a", 1, 0, 1, 0)
				a.Backend.State.Acquire()
				a.Backend.State.Finish(upstream.Result{Outcome: upstream.QuotaExhausted, RetryAfter: 6 * time.Hour})
				return []*routes.Target{a}
			},
			want: 6 * time.Hour,
		},
		{
			name: "no requests left: the reset",
			setup: func(reg *upstream.Registry) []*routes.Target {
				a := target(reg, "a", 1, 0, 10, 0)
				a.Backend.State.Acquire()
				a.Backend.State.Finish(upstream.Result{Outcome: upstream.Success, Headroom: upstream.Headroom{
					Requests: upstream.Budget{Stated: true, Limit: 60, Remaining: 0, Reset: 29500 * time.Millisecond},
				}})
				return []*routes.Target{a}
			},
			want: 30 * time.Second,
		},
		{
			name: "too few tokens left for this request: the token reset",
			setup: func(reg *upstream.Registry) []*routes.Target {
				a := target(reg, "a", 1, 0, 10, 0)
				a.Backend.State.Acquire()
				a.Backend.State.Finish(upstream.Result{Outcome: upstream.Success, Headroom: upstream.Headroom{
					Tokens: upstream.Budget{Stated: true, Limit: 10000, Remaining: 900, Reset: 12 * time.Second},
				}})
				return []*routes.Target{a}
			},
			tokens: 1000,
			want:   12 * time.Second,
		},
		{
			name:  "no target at all: five minutes",
			setup: func(*upstream.Registry) []*routes.Target { return nil },
			want:  5 * time.Minute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, c := testRegistry()
			pool := tt.setup(reg)
			if got := RetryAfter(pool, tt.need, tt.tokens, c.Now()); got != tt.want {
				t.Fatalf("RetryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	for alg, p := range pickers() {
		for _, index := range []bool{false, true} {
			t.Run(alg+"/"+indexName(index), func(t *testing.T) { testPickDoesNotAllocate(t, p, index) })
		}
	}
}

func testPickDoesNotAllocate(t *testing.T, p picker, index bool) {
	reg, c := testRegistry()
	pool := make([]*routes.Target, 40) // past the scan's weight cache
	for i := range pool {
		pool[i] = target(reg, string(rune('a'+i)), i+1, i/20, 1<<20, 0)
	}
	indexIf(pool, index)
	tried := pool[:3]
	allocs := testing.AllocsPerRun(1000, func() {
		c.Advance(time.Millisecond)
		x, ok := p.Pick(pool, 0, tried)
		if !ok {
			t.Fatal("no pick")
		}
		x.Done(upstream.Result{Outcome: upstream.Success, TTFB: time.Millisecond})
	})
	if allocs != 0 {
		t.Fatalf("allocs per pick = %v, want 0", allocs)
	}
}

// stepClock reads t until stepped, then t − 1ns for every later read: a
// pick's first read (its instant) sees a cooldown as over, the Acquire
// that follows sees it still running. That is the race Acquire settles,
// made deterministic.
type stepClock struct {
	t     time.Time
	reads atomic.Int64 // reads since armed; -1 = not armed
}

func (c *stepClock) Now() time.Time {
	if c.reads.Load() >= 0 && c.reads.Add(1) > 1 {
		return c.t.Add(-1)
	}
	return c.t
}

// TestLostAcquireFallsBack: when the pick's favourite refuses its slot, the
// picker takes another eligible target and never returns one without a
// slot.
func TestLostAcquireFallsBack(t *testing.T) {
	for alg, p := range pickers() {
		for _, index := range []bool{false, true} {
			t.Run(alg+"/"+indexName(index), func(t *testing.T) { testLostAcquireFallsBack(t, p, index) })
		}
	}
}

func testLostAcquireFallsBack(t *testing.T, p picker, index bool) {
	c := &stepClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.reads.Store(-1)
	reg := upstream.NewRegistry(upstream.Options{Clock: c.Now, SlowStart: -1})
	fav, other := target(reg, "fav", 1000, 0, 10, 0), target(reg, "other", 1, 0, 10, 0)
	fav.Backend.State.Acquire()
	fav.Backend.State.Finish(upstream.Result{Outcome: upstream.RateLimited, RetryAfter: time.Nanosecond})
	c.t = c.t.Add(time.Nanosecond) // the cooldown ends exactly now
	c.reads.Store(0)
	got, ok := p.Pick(indexIf([]*routes.Target{fav, other}, index), 0, nil)
	if !ok || got.Target != other {
		t.Fatalf("Pick = %v, %v; want other", got, ok)
	}
	if fav.Backend.State.InFlight() != 0 || other.Backend.State.InFlight() != 1 {
		t.Fatalf("in-flight fav %d other %d, want 0 and 1", fav.Backend.State.InFlight(), other.Backend.State.InFlight())
	}
}

// TestLargeTierShares checks both pickers on a tier of 24 targets, most of
// whose weight is not fully usable: three slow-start stages (ramps 5/6,
// 1/2 and 1/6, each with its own decayed estimate, so costs differ), and
// targets at their cap, cooling down, already tried or lacking the
// capability. Over 40k picks released at once (nothing changes between
// picks), each share must match the exact one: for weighted_random the
// weight share among eligible targets, for weighted_p2c pairShares of the
// effective weights and costs. With the index the pickers draw by
// rejection; P2C rejects about half its proposals, so the scan runs too
// (after three rejections in a row, and for the second draw of a pair
// whose first took more than two proposals); weighted_random after eight.
// Without the index they scan. ±0.01 is 4
// binomial standard deviations at n = 40k (sd ≤ 0.0025); ignoring the ramp
// in P2C's draws moves shares by up to 0.13, and letting the tried target
// through weighted_random's gives it 0.09.
func TestLargeTierShares(t *testing.T) {
	for alg := range pickers() {
		for _, index := range []bool{false, true} {
			t.Run(alg+"/"+indexName(index), func(t *testing.T) {
				t.Parallel()
				testLargeTierShares(t, alg, pickers()[alg], index)
			})
		}
	}
}

func testLargeTierShares(t *testing.T, alg string, p picker, index bool) {
	c := clock.NewFake(time.Time{})
	reg := upstream.NewRegistry(upstream.Options{Clock: c.Now, SlowStart: 30 * time.Second})
	const full, cooling, tried, plain = 2, 5, 9, 20 // the ineligible ones
	var pool []*routes.Target
	for stage := range 3 {
		for j := range 8 {
			i := 8*stage + j
			capacity, caps := 1<<20, routes.CapTools
			if i == full {
				capacity = 1
			}
			if i == plain {
				caps = 0
			}
			pool = append(pool, target(reg, string(rune('a'+i)), 1+(5*j+3*stage)%9, 0, capacity, caps))
		}
		c.Advance(10 * time.Second)
	}
	c.Advance(-5 * time.Second) // 25s after the first stage: ramps 25/30, 15/30, 5/30
	pool[full].Backend.State.Acquire()
	finish(pool[cooling], upstream.RateLimited)
	indexIf(pool, index)

	now := pool[0].Backend.State.Now()
	eff, costs, weights := make([]float64, len(pool)), make([]float64, len(pool)), make([]float64, len(pool))
	var total float64
	for i, x := range pool {
		if i == full || i == cooling || i == tried || i == plain {
			continue
		}
		eff[i] = x.Backend.State.EffectiveWeight(x.Weight, now)
		costs[i] = x.Backend.State.Cost(x.Weight, now)
		weights[i] = float64(x.Weight)
		total += weights[i]
	}
	want := pairShares(eff, costs)
	if alg == "weighted_random" {
		for i := range want {
			want[i] = weights[i] / total
		}
	}

	const n = 40_000
	counts := map[*routes.Target]int{}
	for range n {
		x, ok := p.Pick(pool, routes.CapTools, pool[tried:tried+1])
		if !ok {
			t.Fatal("no pick")
		}
		counts[x.Target]++
		x.Backend.State.Release()
	}
	for i, x := range pool {
		if got := float64(counts[x]) / n; math.Abs(got-want[i]) > 0.01 {
			t.Errorf("%s (weight %d, effective %.2f): share %.4f, want %.4f ± 0.01", x.Backend.ID, x.Weight, eff[i], got, want[i])
		}
	}
}
