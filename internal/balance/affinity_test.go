package balance

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

func newAffinity(seed uint64) *Affinity {
	return &Affinity{Fallback: &P2C{Float64: rand.New(rand.NewPCG(seed, seed+1)).Float64}}
}

// keys returns n distinct session keys of one tenant.
func keys(n int) []Key {
	ks := make([]Key, n)
	for i := range ks {
		ks[i] = SessionKey("key-1", fmt.Appendf(nil, "session-%d", i))
	}
	return ks
}

// pickID picks for key and gives the slot back at once.
func pickID(t *testing.T, a *Affinity, pool []*routes.Target, key Key) (string, Placement) {
	t.Helper()
	tg, pl, ok := a.PickKey(pool, 0, nil, key)
	if !ok {
		t.Fatalf("no pick for key %x", key)
	}
	tg.Backend.State.Release()
	return tg.Backend.ID, pl
}

func TestSessionKey(t *testing.T) {
	if SessionKey("k", []byte(nil)) != 0 || SessionKey("k", []byte{}) != 0 {
		t.Error("an empty key must mean no key")
	}
	a, b := SessionKey("tenant-a", []byte("s1")), SessionKey("tenant-b", []byte("s1"))
	if a == b {
		t.Error("the same session key of two tenants must hash apart")
	}
	if SessionKey("ab", []byte("c")) == SessionKey("a", []byte("bc")) {
		t.Error("namespace and key must not run together")
	}
	if a != SessionKey("tenant-a", []byte("s1")) {
		t.Error("not stable")
	}
	// Pinned: the value every node computes, in every process, also as
	// the standard library's FNV-1a computes it. A change here moves every
	// session of every fleet at the upgrade.
	h := fnv.New64a()
	h.Write([]byte("key-1\xffsession-0"))
	if got, want := uint64(SessionKey("key-1", []byte("session-0"))), routes.Mix64(h.Sum64()); got != want || got != 0x4a13bc7b7f70b303 {
		t.Errorf("SessionKey = %#x, want %#x and 0x4a13bc7b7f70b303", got, want)
	}
	h.Reset()
	h.Write([]byte("b00\xffm"))
	if got, want := routes.TargetHash("b00", "m"), routes.Mix64(h.Sum64()); got != want || got != 0x39b3dbef44b86847 {
		t.Errorf("TargetHash = %#x, want %#x and 0x39b3dbef44b86847", got, want)
	}
}

// fleetSnapshot is one routing table as a control plane would publish it.
func fleetSnapshot(n int) ([]routesnap.Backend, []routesnap.Model) {
	var bs []routesnap.Backend
	m := routesnap.Model{Name: "pool"}
	for i := range n {
		id := fmt.Sprintf("b%02d", i)
		bs = append(bs, routesnap.Backend{ID: id, Protocol: "openai", BaseURL: "http://127.0.0.1:1/v1", Credential: "c", MaxInflightPerNode: 100})
		m.Targets = append(m.Targets, routesnap.Target{Backend: id, Model: "m", Weight: 1 + i%3})
	}
	return bs, []routesnap.Model{m}
}

// TestAffinityFleetDeterminism: independent nodes, each compiling the same
// table into its own registry and holding different hot state (in-flight
// counts within the bound, latency estimates, breaker history, their own
// random streams), choose the same target for every session key.
func TestAffinityFleetDeterminism(t *testing.T) {
	bs, ms := fleetSnapshot(7)
	creds := map[string]credential.Credential{"c": {Secret: secret.New("x"), Hosts: []string{"127.0.0.1"}}}
	const nodes = 5
	pools := make([][]*routes.Target, nodes)
	pickers := make([]*Affinity, nodes)
	for n := range nodes {
		reg, _ := testRegistry()
		tab, err := routes.Compile(bs, ms, creds, reg)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := tab.Model("pool")
		pool := m.Pools[provider.Chat]
		r := rand.New(rand.NewPCG(uint64(n), 99))
		for _, tg := range pool {
			// Up to 2 in flight (the bound's floor at c = 1.25) and a
			// latency history of the node's own.
			for range r.IntN(3) {
				tg.Backend.State.Acquire()
			}
			if tg.Backend.State.Acquire() {
				tg.Backend.State.Finish(upstream.Result{Outcome: upstream.Success, TTFB: time.Duration(1+r.IntN(5000)) * time.Millisecond})
			}
		}
		pools[n], pickers[n] = pool, newAffinity(uint64(n))
	}
	for _, k := range keys(2000) {
		want, pl := pickID(t, pickers[0], pools[0], k)
		if pl != Preferred {
			t.Fatalf("key %x: placement %s, want affinity", k, pl)
		}
		for n := 1; n < nodes; n++ {
			if got, _ := pickID(t, pickers[n], pools[n], k); got != want {
				t.Fatalf("key %x: node %d picked %s, node 0 %s", k, n, got, want)
			}
		}
	}
}

func poolOf(reg *upstream.Registry, ids []string, weight func(i int) int) []*routes.Target {
	var pool []*routes.Target
	for i, id := range ids {
		pool = append(pool, target(reg, id, weight(i), 0, 1<<20, 0))
	}
	routes.IndexWeights(pool)
	return pool
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("b%02d", i)
	}
	return out
}

// TestAffinityMinimalMovement: removing a target moves exactly the keys
// that chose it; adding one moves keys only onto it. Both with equal
// weights (the integer order) and with unequal ones (the logarithm).
func TestAffinityMinimalMovement(t *testing.T) {
	for _, tc := range []struct {
		name   string
		weight func(int) int
	}{{"equal", func(int) int { return 1 }}, {"weighted", func(i int) int { return 1 + i%4 }}} {
		t.Run(tc.name, func(t *testing.T) {
			reg, _ := testRegistry()
			a := newAffinity(1)
			all := ids(11)
			full := poolOf(reg, all, tc.weight)
			without := poolOf(reg, all[:10], tc.weight) // b10 removed
			ks := keys(20000)
			moved, toNew := 0, 0
			for _, k := range ks {
				before, _ := pickID(t, a, without, k)
				after, _ := pickID(t, a, full, k)
				if before != after {
					moved++
					if after != "b10" {
						t.Fatalf("key %x moved %s → %s on adding b10", k, before, after)
					}
				}
				if after == "b10" {
					toNew++
				}
			}
			if moved != toNew {
				t.Fatalf("moved %d, chose the new target %d", moved, toNew)
			}
			// b10's share of the weight, within 3 standard deviations.
			total := 0
			for i := range all {
				total += tc.weight(i)
			}
			p := float64(tc.weight(10)) / float64(total)
			mean, sd := p*float64(len(ks)), math.Sqrt(p*(1-p)*float64(len(ks)))
			if d := math.Abs(float64(moved) - mean); d > 3*sd {
				t.Errorf("%d keys moved to b10, want %.0f ± %.0f", moved, mean, 3*sd)
			}
		})
	}
}

// TestAffinityWeights: the first choices follow the weights.
func TestAffinityWeights(t *testing.T) {
	reg, _ := testRegistry()
	a := newAffinity(1)
	pool := poolOf(reg, ids(4), func(i int) int { return 1 << i }) // 1, 2, 4, 8
	counts := map[string]int{}
	const n = 30000
	for _, k := range keys(n) {
		id, _ := pickID(t, a, pool, k)
		counts[id]++
	}
	for i, id := range ids(4) {
		p := float64(int(1)<<i) / 15
		mean, sd := p*n, math.Sqrt(p*(1-p)*n)
		if d := math.Abs(float64(counts[id]) - mean); d > 4*sd {
			t.Errorf("%s: %d first choices, want %.0f ± %.0f", id, counts[id], mean, 4*sd)
		}
	}
}

// order returns the hash order of the pool for key: the first choices
// of the pool with the earlier ones removed.
func order(t *testing.T, reg *upstream.Registry, a *Affinity, pool []*routes.Target, key Key) []string {
	t.Helper()
	var out []string
	rest := append([]*routes.Target(nil), pool...)
	for len(rest) > 0 {
		routes.IndexWeights(rest)
		id, _ := pickID(t, a, rest, key)
		out = append(out, id)
		for i, tg := range rest {
			if tg.Backend.ID == id {
				rest = append(rest[:i], rest[i+1:]...)
				break
			}
		}
	}
	routes.IndexWeights(pool)
	return out
}

func byID(pool []*routes.Target, id string) *routes.Target {
	for _, t := range pool {
		if t.Backend.ID == id {
			return t
		}
	}
	return nil
}

// TestAffinitySpill: a session whose first choice is overloaded, unable to
// take traffic or already tried goes to its second choice, the same one
// every time, which is the first choice of the pool without the first.
func TestAffinitySpill(t *testing.T) {
	for _, tc := range []struct {
		name   string
		weight func(int) int
	}{{"equal", func(int) int { return 1 }}, {"weighted", func(i int) int { return 1 + i%4 }}} {
		t.Run(tc.name, func(t *testing.T) {
			reg, clk := testRegistry()
			a := newAffinity(1)
			pool := poolOf(reg, ids(8), tc.weight)
			for _, k := range keys(50) {
				ord := order(t, reg, a, pool, k)
				first, second, third := byID(pool, ord[0]), byID(pool, ord[1]), byID(pool, ord[2])

				// Overloaded: the tier is idle but for the first choice,
				// so the bound is ⌈1.25 × (its share + 1)⌉, at most 3.
				for range 4 {
					first.Backend.State.Acquire()
				}
				for range 3 {
					got, pl := pickID(t, a, pool, k)
					if got != ord[1] || pl != SpillOverloaded {
						t.Fatalf("overloaded first choice: got %s (%s), want %s (spill_overloaded)", got, pl, ord[1])
					}
				}
				for range 4 {
					first.Backend.State.Release()
				}

				// Unavailable: the first choice's breaker opens (one
				// failure in testRegistry)...
				finish(first, upstream.TransportFailure)
				if got, pl := pickID(t, a, pool, k); got != ord[1] || pl != SpillUnavailable {
					t.Fatalf("open first choice: got %s (%s), want %s", got, pl, ord[1])
				}
				// ... and tried: a retry goes down the order.
				tg, pl, ok := a.PickKey(pool, 0, []*routes.Target{second}, k)
				if !ok || tg.Target != third || pl != SpillUnavailable {
					t.Fatalf("retry past an open first choice: got %v (%s), want %s", tg.Backend.ID, pl, ord[2])
				}
				tg.Backend.State.Release()

				// The breaker's cooldown ends: the probe goes to the first
				// choice and, on success, the session is back.
				clk.Advance(11 * time.Second)
				tg, pl, ok = a.PickKey(pool, 0, nil, k)
				if !ok || tg.Target != first || pl != Preferred {
					t.Fatalf("after the cooldown: got %v (%s), want %s", tg.Backend.ID, pl, ord[0])
				}
				tg.Backend.State.Finish(upstream.Result{Outcome: upstream.Success, TTFB: time.Second})

				tg, pl, ok = a.PickKey(pool, 0, []*routes.Target{first}, k)
				if !ok || tg.Target != second || pl != SpillRetry {
					t.Fatalf("retry: got %v (%s), want %s (spill_retry)", tg.Backend.ID, pl, ord[1])
				}
				tg.Backend.State.Release()
			}
		})
	}
}

// TestAffinityBound: the bound is ⌈c × (m + 1)⌉, m being the first
// choice's weight's share of the in-flight requests of the tier's
// eligible targets (with equal weights, their mean), for every target as
// the first choice, the others idle or loaded.
func TestAffinityBound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		weight func(int) int
	}{{"equal", func(int) int { return 1 }}, {"weighted", func(i int) int { return 1 + 9*min(i, 1) }}} {
		for _, others := range []int{0, 4} {
			t.Run(fmt.Sprintf("%s/others %d", tc.name, others), func(t *testing.T) {
				reg, _ := testRegistry()
				a := &Affinity{Fallback: &P2C{}, LoadFactor: 1.5}
				pool := poolOf(reg, ids(4), tc.weight)
				W := 0
				for _, tg := range pool {
					W += tg.Weight
				}
				seen := map[string]bool{}
				for _, k := range keys(1000) {
					ord := order(t, reg, a, pool, k)
					if seen[ord[0]] {
						continue
					}
					seen[ord[0]] = true
					for _, id := range ord[1:] {
						for range others {
							byID(pool, id).Backend.State.Acquire()
						}
					}
					first := byID(pool, ord[0])
					share := float64(first.Weight) / float64(W)
					for n := 0; n < 30; n++ {
						bound := math.Ceil(1.5 * (float64(3*others+n)*share + 1))
						_, pl := pickID(t, a, pool, k)
						want := Preferred
						if float64(n) > bound {
							want = SpillOverloaded
						}
						if pl != want {
							t.Fatalf("%s (weight %d) first with %d in flight (bound %.0f): %s, want %s", ord[0], first.Weight, n, bound, pl, want)
						}
						first.Backend.State.Acquire()
					}
					for _, tg := range pool {
						for tg.Backend.State.InFlight() > 0 {
							tg.Backend.State.Release()
						}
					}
				}
				if len(seen) != len(pool) {
					t.Fatalf("only %d targets were a first choice", len(seen))
				}
			})
		}
	}
}

// TestAffinityTiers: the hash runs over the lowest tier with an eligible
// target; a session whose tier cannot take traffic spills to the next.
func TestAffinityTiers(t *testing.T) {
	reg, _ := testRegistry()
	a := newAffinity(1)
	pool := []*routes.Target{
		target(reg, "t0a", 1, 0, 1, 0), target(reg, "t0b", 1, 0, 1, 0),
		target(reg, "t1a", 1, 1, 10, routes.CapTools), target(reg, "t1b", 1, 1, 10, routes.CapTools),
	}
	routes.IndexWeights(pool)
	for _, k := range keys(20) {
		if id, pl := pickID(t, a, pool, k); id[:2] != "t0" || pl != Preferred {
			t.Fatalf("got %s (%s), want tier 0 by affinity", id, pl)
		}
	}
	pool[0].Backend.State.Acquire() // both at their cap of 1
	pool[1].Backend.State.Acquire()
	for _, k := range keys(20) {
		if id, pl := pickID(t, a, pool, k); id[:2] != "t1" || pl != SpillUnavailable {
			t.Fatalf("got %s (%s), want tier 1, spill_unavailable", id, pl)
		}
	}
	// A capability only tier 1 offers: its first choices are by affinity.
	tg, pl, ok := a.PickKey(pool, routes.CapTools, nil, keys(1)[0])
	if !ok || tg.Tier != 1 || pl != Preferred {
		t.Fatalf("tools: %v %s", ok, pl)
	}
	tg.Backend.State.Release()
	if _, _, ok := a.PickKey(pool, routes.CapJSONSchema, nil, keys(1)[0]); ok {
		t.Fatal("picked a target without the capability")
	}
}

// TestAffinityKeyless: key 0 is the fallback picker, draw for draw.
func TestAffinityKeyless(t *testing.T) {
	reg, _ := testRegistry()
	pool := poolOf(reg, ids(10), func(i int) int { return i + 1 })
	a := newAffinity(5)
	p := &P2C{Float64: rand.New(rand.NewPCG(5, 6)).Float64}
	for i := range 1000 {
		ta, pl, ok := a.PickKey(pool, 0, nil, 0)
		if ok {
			ta.Backend.State.Release()
		}
		tp, okp := p.Pick(pool, 0, nil)
		if okp {
			tp.Backend.State.Release()
		}
		if !ok || !okp || ta.Target != tp.Target || pl != Keyless {
			t.Fatalf("pick %d: affinity %v (%s), p2c %v", i, ta.Backend.ID, pl, tp.Backend.ID)
		}
	}
}

func TestAffinityDoesNotAllocate(t *testing.T) {
	for _, uniform := range []bool{true, false} {
		reg, _ := testRegistry()
		pool := poolOf(reg, ids(50), func(i int) int {
			if uniform {
				return 1
			}
			return i + 1
		})
		a := newAffinity(1)
		ks := keys(64)
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			tg, _, ok := a.PickKey(pool, 0, nil, ks[i%len(ks)])
			i++
			if ok {
				tg.Backend.State.Release()
			}
		})
		if allocs != 0 {
			t.Errorf("uniform=%v: %v allocations per pick", uniform, allocs)
		}
	}
}

// TestAffinitySecondChoice: the order beyond the first choice is as
// random as the first. With the first choice removed, the second choices
// follow the remaining weights, and whichever target is first, the
// second is spread over the others by their weights (chi-square over
// every (first, second) pair, equal and unequal weights).
func TestAffinitySecondChoice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		weight func(int) int
	}{{"equal", func(int) int { return 1 }}, {"weighted", func(i int) int { return 1 + i }}} {
		t.Run(tc.name, func(t *testing.T) {
			reg, _ := testRegistry()
			const n = 6
			pool := poolOf(reg, ids(n), tc.weight)
			W := 0
			for i := range n {
				W += tc.weight(i)
			}
			var pairs [n][n]int
			const keysN = 1 << 16
			for _, k := range keys(keysN) {
				i, s := next(pool, 0, k, math.Inf(1), -1)
				j, _ := next(pool, 0, k, s, i)
				pairs[i][j]++
			}
			// Expected: P(i first) P(j second | i first) = wᵢ/W · wⱼ/(W − wᵢ).
			chi2, dof := 0.0, 0
			for i := range n {
				for j := range n {
					if i == j {
						if pairs[i][j] != 0 {
							t.Fatalf("%d is its own second choice", i)
						}
						continue
					}
					wi, wj := float64(tc.weight(i)), float64(tc.weight(j))
					e := keysN * wi / float64(W) * wj / (float64(W) - wi)
					d := float64(pairs[i][j]) - e
					chi2 += d * d / e
					dof++
				}
			}
			dof-- // the counts sum to keysN
			// 29 degrees of freedom: P(χ² > 60) < 0.001.
			if chi2 > 60 {
				t.Errorf("χ² = %.1f over %d degrees of freedom: the second choices do not follow the weights\n%v", chi2, dof, pairs)
			}
		})
	}
}

// TestAffinityShares: at 100 targets, equal and of weights 1 … 100 (the
// benchmark's tiers), the first choices of 2¹⁶ sessions follow the
// weights (chi-square), and no target's share is off its weight's share
// by more than 5 standard deviations of a binomial.
func TestAffinityShares(t *testing.T) {
	ks := keys(1 << 16)
	for _, tc := range []struct {
		name   string
		weight func(int) int
	}{{"equal", func(int) int { return 1 }}, {"weighted", func(i int) int { return 1 + i }}} {
		t.Run(tc.name, func(t *testing.T) {
			reg, _ := testRegistry()
			const n = 100
			pool := poolOf(reg, ids(n), tc.weight)
			W := 0
			for i := range n {
				W += tc.weight(i)
			}
			a := newAffinity(1)
			index := map[*routes.Target]int{}
			for i, tg := range pool {
				index[tg] = i
			}
			var counts [n]int
			for _, k := range ks {
				tg, pl, ok := a.PickKey(pool, 0, nil, k)
				if !ok || pl != Preferred {
					t.Fatalf("key %x: %v %v", k, ok, pl)
				}
				tg.Backend.State.Release()
				counts[index[tg.Target]]++
			}
			K := float64(len(ks))
			chi2 := 0.0
			for i, c := range counts {
				p := float64(tc.weight(i)) / float64(W)
				e := K * p
				chi2 += (float64(c) - e) * (float64(c) - e) / e
				if d := math.Abs(float64(c) - e); d > 5*math.Sqrt(K*p*(1-p)) {
					t.Errorf("%s: %d first choices, want %.0f ± %.0f", pool[i].Backend.ID, c, e, 5*math.Sqrt(K*p*(1-p)))
				}
			}
			// 99 degrees of freedom: P(χ² > 148.2) < 0.001.
			if chi2 > 148.2 {
				t.Errorf("χ² = %.1f over 99 degrees of freedom: the first choices do not follow the weights", chi2)
			}
		})
	}
}

// TestAffinityEqualScores: targets whose scores are equal (the same
// identity and weight, which only a hand-built pool has) come in index
// order, and a walk by retries visits each of them once.
func TestAffinityEqualScores(t *testing.T) {
	reg, _ := testRegistry()
	pool := poolOf(reg, ids(4), func(int) int { return 2 })
	for _, tg := range pool[1:] {
		tg.HashID = pool[0].HashID
	}
	routes.IndexWeights(pool) // the index holds the identities too
	a := newAffinity(1)
	for _, k := range keys(20) {
		var tried []*routes.Target
		for want := range pool {
			l, _, ok := a.PickKey(pool, 0, tried, k)
			if !ok || l.Target != pool[want] {
				t.Fatalf("key %x, pick %d: got %v, want %s", k, want, ok, pool[want].Backend.ID)
			}
			l.Backend.State.Release()
			tried = append(tried, l.Target)
		}
		if _, _, ok := a.PickKey(pool, 0, tried, k); ok {
			t.Fatalf("key %x: a pick after every target was tried", k)
		}
	}
}

// walk returns the order of pool for key as retries walk it: each pick
// with the earlier ones tried.
func walk(t *testing.T, a *Affinity, pool []*routes.Target, key Key) []string {
	t.Helper()
	var tried []*routes.Target
	var out []string
	for range pool {
		l, _, ok := a.PickKey(pool, 0, tried, key)
		if !ok {
			t.Fatalf("key %x: no pick after %v", key, out)
		}
		l.Backend.State.Release()
		tried = append(tried, l.Target)
		out = append(out, l.Backend.ID)
	}
	return out
}

// TestAffinityWalk: the order a retry walks is rendezvous hashing's at
// every step: the k-th target is the first choice of the pool without the
// k − 1 before it (order), with equal and with unequal weights.
func TestAffinityWalk(t *testing.T) {
	for _, weight := range []func(int) int{func(int) int { return 1 }, func(i int) int { return 1 + i%4 }} {
		reg, _ := testRegistry()
		a := newAffinity(1)
		pool := poolOf(reg, ids(8), weight)
		for _, k := range keys(300) {
			if got, want := walk(t, a, pool, k), order(t, reg, a, pool, k); !slices.Equal(got, want) {
				t.Fatalf("key %x: walked %v, want %v", k, got, want)
			}
		}
	}
}

// TestAffinityPinned: the order of a few sessions over a fixed table, as
// every node computes it. A change here moves sessions at the upgrade, so
// it must be deliberate (docs/routing.md "Affinity").
func TestAffinityPinned(t *testing.T) {
	reg, _ := testRegistry()
	pool := poolOf(reg, ids(5), func(i int) int { return i + 1 })
	a := newAffinity(1)
	var got []string
	for _, k := range keys(6) {
		got = append(got, strings.Join(walk(t, a, pool, k), " "))
	}
	want := []string{"b03 b02 b00 b04 b01", "b04 b02 b01 b03 b00", "b04 b03 b01 b02 b00", "b02 b03 b04 b00 b01", "b03 b04 b01 b00 b02", "b03 b01 b04 b02 b00"}
	if !slices.Equal(got, want) {
		t.Errorf("orders changed:\n got %q\nwant %q", got, want)
	}
}

// nextByScore is next as its doc defines it, scoring every target: the
// reference TestAffinityPruning holds next to.
func nextByScore(tier []*routes.Target, need routes.Caps, key Key, prev float64, prevI int) (int, float64) {
	best, bestS := -1, 0.0
	for i, t := range tier {
		if t.Weight <= 0 || !t.Caps.Has(need) {
			continue
		}
		h := routes.Mix64(uint64(key) ^ t.HashID)
		u := (float64(h>>11) + 0.5) * 0x1p-53
		s := float64(t.Weight) / -math.Log(u)
		if s > prev || (s == prev && i <= prevI) {
			continue
		}
		if best < 0 || s > bestS {
			best, bestS = i, s
		}
	}
	return best, bestS
}

// TestAffinityPruning: next, which passes over the targets that cannot
// beat the best score so far without their logarithm, walks every key's
// whole order exactly as scoring every target does, on indexed and
// unindexed tiers, with equal, unequal, zero and very unequal weights
// and a capability only some targets have.
func TestAffinityPruning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		weight func(int) int
	}{
		{"equal", 100, func(int) int { return 1 }},
		{"1…n", 100, func(i int) int { return i + 1 }},
		{"zeros", 20, func(i int) int { return i % 3 }},
		{"skewed", 12, func(i int) int { return 1 << (2 * (i % 6)) }},
	} {
		reg, _ := testRegistry()
		pool := poolOf(reg, ids(tc.n), tc.weight)
		for i, tg := range pool {
			if i%4 == 0 {
				tg.Caps |= routes.CapTools
			}
		}
		routes.IndexWeights(pool)
		bare := make([]*routes.Target, len(pool))
		for i, tg := range pool {
			c := *tg
			c.TierWeights = nil
			bare[i] = &c
		}
		for _, need := range []routes.Caps{0, routes.CapTools} {
			for _, k := range keys(3000) {
				prev, prevI := math.Inf(1), -1
				for step := 0; ; step++ {
					wi, ws := nextByScore(pool, need, k, prev, prevI)
					gi, gs := next(pool, need, k, prev, prevI)
					bi, bs := next(bare, need, k, prev, prevI)
					if gi != wi || gs != ws || bi != wi || bs != ws {
						t.Fatalf("%s, need %v, key %x, step %d: next = %d (%v), unindexed %d (%v), want %d (%v)", tc.name, need, k, step, gi, gs, bi, bs, wi, ws)
					}
					if wi < 0 {
						break
					}
					prev, prevI = ws, wi
				}
			}
		}
	}
}
