package balance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// idleShares is the exact share of each target when P2C picks with nothing
// in flight and equal latency, so cost = estimate ÷ weight and the heavier
// of a pair wins (the package doc's formula).
func idleShares(weights []float64) []float64 {
	costs := make([]float64, len(weights))
	for i, w := range weights {
		costs[i] = 1 / w
	}
	return pairShares(weights, costs)
}

// pairShares is the exact share of each target under P2C given effective
// weights (0 = not eligible) and costs that no pick changes: the first
// draw a has probability e_a/E, the second b has e_b/(E − e_a), the lower
// cost of the pair wins and a tie keeps the first draw.
func pairShares(eff, costs []float64) []float64 {
	var total float64
	for _, e := range eff {
		total += e
	}
	shares := make([]float64, len(eff))
	for a, ea := range eff {
		for b, eb := range eff {
			if a == b || ea == 0 || eb == 0 {
				continue
			}
			p := ea / total * eb / (total - ea)
			if costs[b] < costs[a] {
				shares[b] += p
			} else {
				shares[a] += p
			}
		}
	}
	return shares
}

// TestP2CIdleShares checks P2C against idleShares over 100k picks released
// at once, at one instant (equal estimates). The weights include a tie.
// Tolerance ±0.006 is about 4 binomial standard deviations at n = 100k
// (sd ≤ 0.0016), while splitting ties at random instead of keeping the
// first draw moves the tied pair by 0.03 and ignoring the weight in the
// cost moves every share by more than 0.05.
func TestP2CIdleShares(t *testing.T) {
	for _, index := range []bool{false, true} {
		t.Run(indexName(index), func(t *testing.T) {
			t.Parallel()
			testP2CIdleShares(t, index)
		})
	}
}

func testP2CIdleShares(t *testing.T, indexed bool) {
	weights := []float64{1, 2, 3, 3, 5}
	reg, _ := testRegistry()
	var pool []*routes.Target
	for i, w := range weights {
		pool = append(pool, target(reg, string(rune('a'+i)), int(w), 0, 1, 0))
	}
	indexIf(pool, indexed)
	p := &P2C{Float64: rand.New(rand.NewPCG(3, 4)).Float64}
	const n = 100_000
	counts := make([]int, len(pool))
	index := map[*routes.Target]int{}
	for i, x := range pool {
		index[x] = i
	}
	for range n {
		x, ok := p.Pick(pool, 0, nil)
		if !ok {
			t.Fatal("no pick")
		}
		counts[index[x.Target]]++
		x.Backend.State.Release()
	}
	want := idleShares(weights)
	for i := range pool {
		got := float64(counts[i]) / n
		if math.Abs(got-want[i]) > 0.006 {
			t.Errorf("share of weight %v = %.4f, want %.4f ± 0.006", weights[i], got, want[i])
		}
	}
	t.Logf("weights %v: shares want %.4f", weights, want)
}

// TestP2CLoadedShares: when requests stay in flight, P2C levels
// (in-flight + 1) ÷ weight, so each target's share of 100k held requests
// is its weight share. The "+ 1" bias is (1 − n·w/W)/K ≈ 1e-5 here; ±0.002
// leaves room for P2C's bounded imbalance, while the idle regime's shares
// (first test) differ by more than 0.1.
func TestP2CLoadedShares(t *testing.T) {
	for _, index := range []bool{false, true} {
		t.Run(indexName(index), func(t *testing.T) {
			t.Parallel()
			testP2CLoadedShares(t, index)
		})
	}
}

func testP2CLoadedShares(t *testing.T, index bool) {
	weights := []int{1, 3, 6}
	reg, _ := testRegistry()
	var pool []*routes.Target
	for i, w := range weights {
		pool = append(pool, target(reg, string(rune('a'+i)), w, 0, 1<<20, 0))
	}
	indexIf(pool, index)
	p := &P2C{Float64: rand.New(rand.NewPCG(5, 6)).Float64}
	const n = 100_000
	for range n {
		if _, ok := p.Pick(pool, 0, nil); !ok {
			t.Fatal("no pick")
		}
	}
	for i, x := range pool {
		got := float64(x.Backend.State.InFlight()) / n
		want := float64(weights[i]) / 10
		if math.Abs(got-want) > 0.002 {
			t.Errorf("share of weight %d = %.4f, want %.2f ± 0.002", weights[i], got, want)
		}
	}
}

// TestP2CSlowBackend simulates a backend that turns slow: two equal targets
// at 100ms, then b at 1s (10×) for 30s, then 100ms again, at 100, 20 and 5
// requests per second. While slow, b keeps less than 5% of the traffic;
// once fast again its estimate decays from the last 1s sample to 100ms in
// ln(10) ≈ 2.3 decay windows (package upstream), so from 2.5 windows on
// its share is back to an even split.
func TestP2CSlowBackend(t *testing.T) {
	const tau = 10 * time.Second
	for _, interval := range []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond} {
		t.Run(interval.String(), func(t *testing.T) {
			s := newSim([]string{"a", "b"}, []int{1, 1}, upstream.Options{})
			s.script = func(id string, at time.Duration) (time.Duration, upstream.Result) {
				if id == "b" && at >= 30*time.Second && at < 60*time.Second {
					return ok(time.Second)
				}
				return ok(100 * time.Millisecond)
			}
			before := share(s.run(t, 0, 30*time.Second, interval), "b")
			s.run(t, 30*time.Second, 35*time.Second, interval) // the first slow answers arrive
			slow := share(s.run(t, 35*time.Second, 60*time.Second, interval), "b")
			s.run(t, 60*time.Second, 60*time.Second+25*tau/10, interval)
			after := share(s.run(t, 60*time.Second+25*tau/10, 60*time.Second+4*tau, interval), "b")
			t.Logf("share of b: before %.3f, slow %.3f, recovered %.3f", before, slow, after)
			if math.Abs(before-0.5) > 0.06 {
				t.Errorf("share before = %.3f, want 0.5 ± 0.06", before)
			}
			if slow > 0.05 {
				t.Errorf("share while 10× slower = %.3f, want < 0.05", slow)
			}
			if math.Abs(after-0.5) > 0.06 {
				t.Errorf("share 2.5 decay windows after = %.3f, want 0.5 ± 0.06", after)
			}
		})
	}
}

// TestP2CFast429s simulates a backend that refuses fast: b answers 429 in
// 1ms for 30s. A 429 is not a latency sample and holds b's estimate
// (package upstream), and it cools b down (kept short here, 100ms, so the
// cooldown does not hide everything else): b's share must not rise above
// an even split. The second row shows what the test guards against: the
// same fast replies recorded as successes would drag b's estimate down and
// hand it the traffic.
func TestP2CFast429s(t *testing.T) {
	tests := []struct {
		name    string
		outcome upstream.Outcome
		check   func(share float64) bool
		want    string
	}{
		{"429 is RateLimited", upstream.RateLimited, func(s float64) bool { return s <= 0.5 }, "<= 0.5"},
		{"429 misread as success", upstream.Success, func(s float64) bool { return s > 0.75 }, "> 0.75"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim([]string{"a", "b"}, []int{1, 1}, upstream.Options{RateLimitDefault: 100 * time.Millisecond})
			s.script = func(id string, at time.Duration) (time.Duration, upstream.Result) {
				if id == "b" && at >= 30*time.Second && at < 60*time.Second {
					return time.Millisecond, upstream.Result{Outcome: tt.outcome, TTFB: time.Millisecond}
				}
				return ok(500 * time.Millisecond)
			}
			s.run(t, 0, 30*time.Second, 50*time.Millisecond)
			s.run(t, 30*time.Second, 40*time.Second, 50*time.Millisecond)
			got := share(s.run(t, 40*time.Second, 60*time.Second, 50*time.Millisecond), "b")
			t.Logf("share of b during the 429 burst: %.3f", got)
			if !tt.check(got) {
				t.Errorf("share of b = %.3f, want %s", got, tt.want)
			}
		})
	}
}

// TestP2CSlowStart: a backend added to a running node starts at 10% of its
// weight and ramps linearly over slow_start (30s here). Under load its
// share of in-flight tracks ramp ÷ (1 + ramp): low at first, rising, even
// once ramped. Latency is equal and the default TTFB matches it, so only
// the ramp moves the share.
func TestP2CSlowStart(t *testing.T) {
	s := newSim([]string{"a"}, []int{1}, upstream.Options{SlowStart: 30 * time.Second, DefaultTTFB: 200 * time.Millisecond})
	s.script = func(string, time.Duration) (time.Duration, upstream.Result) { return ok(200 * time.Millisecond) }
	const iv = 10 * time.Millisecond
	s.run(t, 0, 60*time.Second, iv) // a has ramped
	s.pool = append(s.pool, target(s.reg, "b", 1, 0, 1<<20, 0))
	var got []float64
	for from := 60 * time.Second; from < 110*time.Second; from += 10 * time.Second {
		got = append(got, share(s.run(t, from, from+10*time.Second, iv), "b"))
	}
	t.Logf("share of the new backend per 10s after it is added: %.3f", got)
	// Mean ramp over each 10s window of a 30s ramp from 10%: ~0.18, 0.5,
	// 0.83, then 1; share ≈ ramp/(1+ramp) under load.
	if !(got[0] < 0.25 && got[0] < got[1] && got[1] < got[2] && got[2] < got[3]) {
		t.Errorf("share does not ramp: %.3f", got)
	}
	for _, g := range got[3:] {
		if math.Abs(g-0.5) > 0.05 {
			t.Errorf("share after the ramp = %.3f, want 0.5 ± 0.05", g)
		}
	}
}

// TestP2CTieKeepsFirstDraw: with costs exactly equal but weights not
// (weight 1 at 1s, weight 2 at 2s: both cost 1), keeping the first draw
// splits by weight, 1/3 and 2/3. Keeping the second would invert that and
// a coin flip would give 1/2; ±0.01 is over 6 binomial sd at n = 100k.
func TestP2CTieKeepsFirstDraw(t *testing.T) {
	reg, _ := testRegistry()
	light, heavy := target(reg, "light", 1, 0, 1, 0), target(reg, "heavy", 2, 0, 1, 0)
	for x, lat := range map[*routes.Target]time.Duration{light: time.Second, heavy: 2 * time.Second} {
		x.Backend.State.Acquire()
		x.Backend.State.Finish(upstream.Result{Outcome: upstream.Success, TTFB: lat})
	}
	pool := []*routes.Target{light, heavy}
	p := &P2C{Float64: rand.New(rand.NewPCG(8, 9)).Float64}
	const n = 100_000
	heavyPicks := 0
	for range n {
		x, ok := p.Pick(pool, 0, nil)
		if !ok {
			t.Fatal("no pick")
		}
		if x.Target == heavy {
			heavyPicks++
		}
		x.Backend.State.Release()
	}
	if got := float64(heavyPicks) / n; math.Abs(got-2.0/3) > 0.01 {
		t.Fatalf("share of the heavy target = %.4f, want 0.667 ± 0.01", got)
	}
}

// TestP2CScanFirst: on a tier where most of the weight is at its cap, a
// scan leaves the hint (routes.WeightIndex.ScanFirst) that sends the next
// picks straight to the scan, and the shares stay pairShares' (the hint
// changes how a draw is made, not what it yields); slow start ramps the
// eligible targets differently, so the scan's effective weights are
// checked too (ignoring the ramp moves shares by more than 0.05). Once
// the targets are released, one pick clears the hint; a pick that only a
// few targets can take leaves it alone. ±0.01 is 4 binomial standard
// deviations at n = 40k.
func TestP2CScanFirst(t *testing.T) {
	c := clock.NewFake(time.Time{})
	reg := upstream.NewRegistry(upstream.Options{Clock: c.Now, SlowStart: 30 * time.Second})
	pool := make([]*routes.Target, 100)
	for i := range pool {
		capacity, caps := 1<<20, routes.Caps(0)
		if i%10 != 0 {
			capacity = 1
		}
		if i < 5 {
			caps = routes.CapTools
		}
		pool[i] = target(reg, fmt.Sprint(i), 1+(7*i)%13, 0, capacity, caps)
		if i%20 == 19 {
			c.Advance(3 * time.Second)
		}
	}
	c.Advance(12 * time.Second) // the ramps run from 27/30 down to 15/30
	for i, x := range pool {
		if i%10 != 0 {
			x.Backend.State.Acquire()
		}
	}
	routes.IndexWeights(pool)
	x := pool[0].TierWeights
	p := &P2C{Float64: rand.New(rand.NewPCG(3, 4)).Float64}
	pick := func(need routes.Caps) *routes.Target {
		t.Helper()
		l, ok := p.Pick(pool, need, nil)
		if !ok {
			t.Fatal("no pick")
		}
		l.Backend.State.Release()
		return l.Target
	}

	pick(0)
	if !x.ScanFirst() {
		t.Fatal("hint not set after a scan of a mostly full tier")
	}
	now := pool[0].Backend.State.Now()
	eff, costs := make([]float64, len(pool)), make([]float64, len(pool))
	for i, x := range pool {
		if i%10 == 0 {
			eff[i] = x.Backend.State.EffectiveWeight(x.Weight, now)
			costs[i] = x.Backend.State.Cost(x.Weight, now)
		}
	}
	want := pairShares(eff, costs)
	const n = 40_000
	counts := map[*routes.Target]int{}
	for range n {
		counts[pick(0)]++
	}
	if !x.ScanFirst() {
		t.Fatal("hint cleared while the tier stayed mostly full")
	}
	for i, x := range pool {
		if got := float64(counts[x]) / n; math.Abs(got-want[i]) > 0.01 {
			t.Errorf("%s (weight %d, effective %.2f): share %.4f, want %.4f ± 0.01", x.Backend.ID, x.Weight, eff[i], got, want[i])
		}
	}

	// Targets 0–23 released: 32 eligible, about a quarter of the weight.
	for i, x := range pool[:24] {
		if i%10 != 0 {
			x.Backend.State.Release()
		}
	}
	pick(0)
	if x.ScanFirst() {
		t.Fatal("hint still set after a scan found a quarter of the weight available")
	}
	// Only 5 targets, with 3% of the weight, have the capability: the
	// proposals fail and the scan follows, which says nothing of the tier.
	pick(routes.CapTools)
	if x.ScanFirst() {
		t.Fatal("a pick only a few targets could take set the hint")
	}
	// All released: too many eligible targets to list.
	for i, x := range pool[24:] {
		if (24+i)%10 != 0 {
			x.Backend.State.Release()
		}
	}
	x.SetScanFirst(true)
	pick(0)
	if x.ScanFirst() {
		t.Fatal("hint still set after a scan found the whole tier available")
	}
}
