package balance

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// fleetSim is a deterministic discrete-event simulation of a fleet behind
// a load balancer: nodes independent selector instances, each with its
// own registry (hot state) over the same table of backends, sharing one
// virtual clock. Sessions arrive over the run; each turn goes to a random
// node, holds its slot for the turn's latency, and the next turn follows
// after a think time. Each backend has a provider prompt cache with a
// 5-minute TTL: a turn is warm when the backend it lands on served the
// session's previous turn within the TTL.
type fleetSim struct {
	affinity bool
	// sharedPrefixes, with affinity, keys each session by the digest of
	// its prompt's beginning (prefix affinity) instead of its own session
	// key: sessions draw their first turn from a Zipf over this many, so
	// popular first prompts (an agent's own start-up request, a common
	// task) share one key and lean on the load bound.
	sharedPrefixes int
	nodes          int
	backends       int
	sessions       int
	// outage, when set, makes backend 0 fail every attempt (a transport
	// failure, nothing sent: re-picked at once, as the request path does) from
	// outageFrom to outageTo.
	outage               bool
	outageFrom, outageTo time.Duration
}

type fleetResult struct {
	turns, warmable, warm int     // warmable: turns whose previous turn was within the TTL
	loadRatio             float64 // max ÷ mean turns served per backend
	spills                int
	// Of the warmable turns of sessions whose first choice is backend 0:
	// the share served by backend 0 before, during and after the outage.
	onHome [3]struct{ n, home int }
}

type simEvent struct {
	at      time.Duration
	session int
	done    bool // the turn ends (else: it starts)
	node    int
	target  *routes.Target
	fail    bool
}

type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].session < q[j].session
}
func (q simQueue) Swap(i, j int)   { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)     { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any       { o := *q; x := o[len(o)-1]; *q = o[:len(o)-1]; return x }
func (q *simQueue) add(e simEvent) { heap.Push(q, e) }

const cacheTTL = 5 * time.Minute

func (fs fleetSim) run(seed uint64) fleetResult {
	r := rand.New(rand.NewPCG(seed, 1))
	clk := clock.NewFake(time.Time{})
	start := clk.Now()
	pools := make([][]*routes.Target, fs.nodes)
	pickers := make([]*Affinity, fs.nodes)
	for n := range fs.nodes {
		reg := upstream.NewRegistry(upstream.Options{
			Clock: clk.Now, SlowStart: -1, Rand: rand.New(rand.NewPCG(seed, uint64(n))).Float64,
			Breaker: upstream.BreakerOptions{Failures: 3, Cooldown: 10 * time.Second, MaxCooldown: time.Minute},
		})
		pool := make([]*routes.Target, fs.backends)
		for i := range pool {
			pool[i] = target(reg, fmt.Sprintf("b%d", i), 1, 0, 1<<20, 0)
		}
		routes.IndexWeights(pool)
		pools[n] = pool
		pickers[n] = &Affinity{Fallback: &P2C{Float64: rand.New(rand.NewPCG(seed, 100+uint64(n))).Float64}}
	}

	// Zipf turn counts (1 to 200, most sessions short, a few long agent
	// runs) and think times (1 s to 20 min, most a few seconds, some past
	// the cache TTL).
	turnsZ := rand.NewZipf(r, 1.3, 1, 199)
	thinkZ := rand.NewZipf(r, 1.2, 1, 1199)
	prefixZ := rand.NewZipf(r, 1.1, 1, uint64(max(fs.sharedPrefixes, 2)-1))
	const span = 2 * time.Hour
	left := make([]int, fs.sessions)
	keys := make([]Key, fs.sessions)
	home := make([]string, fs.sessions) // first choice, all backends healthy
	last := make([]struct {
		backend string
		at      time.Duration
	}, fs.sessions)
	var q simQueue
	for s := range fs.sessions {
		left[s] = 1 + int(turnsZ.Uint64())
		keys[s] = SessionKey("tenant", fmt.Appendf(nil, "session-%d", s))
		if fs.sharedPrefixes > 0 {
			keys[s] = SessionKey("tenant", fmt.Appendf(nil, "prefix-%d", prefixZ.Uint64()))
		}
		home[s] = order1(pools[0], keys[s])
		q.add(simEvent{at: time.Duration(r.Int64N(int64(span))), session: s, node: -1})
	}
	served := make(map[string]int)
	var res fleetResult
	tried := make([]*routes.Target, 0, 4)
	for q.Len() > 0 {
		e := heap.Pop(&q).(simEvent)
		clk.Set(start.Add(e.at))
		if e.done {
			out := upstream.Result{Outcome: upstream.Success, TTFB: time.Second}
			if e.fail {
				out = upstream.Result{Outcome: upstream.TransportFailure}
			}
			e.target.Backend.State.Finish(out)
			if e.fail {
				continue // the re-pick was made when the failure was known
			}
			if left[e.session]--; left[e.session] > 0 {
				think := time.Duration(thinkZ.Uint64()+1) * time.Second
				q.add(simEvent{at: e.at + think, session: e.session, node: -1})
			}
			continue
		}
		s := e.session
		node := r.IntN(fs.nodes)
		tried = tried[:0]
		var tg *routes.Target
		for range 3 { // the request path's attempt limit, generously
			var (
				t  Lease
				pl Placement
				ok bool
			)
			if fs.affinity {
				t, pl, ok = pickers[node].PickKey(pools[node], 0, tried, keys[s])
			} else {
				t, ok = pickers[node].Pick(pools[node], 0, tried)
			}
			if !ok {
				break
			}
			if pl.Spilled() {
				res.spills++
			}
			down := fs.outage && t.Backend.ID == "b0" && e.at >= fs.outageFrom && e.at < fs.outageTo
			if !down {
				tg = t.Target
				break
			}
			// A connect failure: fails fast, nothing sent, re-picked.
			t.Done(upstream.Result{Outcome: upstream.TransportFailure})
			tried = append(tried, t.Target)
		}
		if tg == nil {
			// Nothing could take it: the client retries in a second.
			q.add(simEvent{at: e.at + time.Second, session: s, node: -1})
			continue
		}
		res.turns++
		served[tg.Backend.ID]++
		if p := last[s]; p.backend != "" && e.at-p.at <= cacheTTL {
			res.warmable++
			if p.backend == tg.Backend.ID {
				res.warm++
			}
			if home[s] == "b0" {
				phase := 0
				switch {
				case e.at >= fs.outageTo:
					phase = 2
				case e.at >= fs.outageFrom:
					phase = 1
				}
				res.onHome[phase].n++
				if tg.Backend.ID == "b0" {
					res.onHome[phase].home++
				}
			}
		}
		last[s].backend, last[s].at = tg.Backend.ID, e.at
		latency := time.Duration(2000+r.IntN(18000)) * time.Millisecond
		q.add(simEvent{at: e.at + latency, session: s, done: true, node: node, target: tg})
	}
	maxN, total := 0, 0
	for _, n := range served {
		maxN = max(maxN, n)
		total += n
	}
	res.loadRatio = float64(maxN) / (float64(total) / float64(fs.backends))
	return res
}

// order1 is the session's first choice with every target eligible and
// idle: the first in its hash order.
func order1(pool []*routes.Target, key Key) string {
	i, _ := next(pool, 0, key, math.Inf(1), -1)
	return pool[i].Backend.ID
}

func pct(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return 100 * float64(n) / float64(d)
}

// BenchmarkAffinitySim runs the fleet simulation (5 nodes, 6 backends,
// 3000 sessions over 2 hours) with weighted P2C and with affinity, healthy
// and with backend 0 failing from minute 40 to minute 60, and reports the
// share of warm turns (same backend as the session's previous turn within
// the cache TTL), the max/mean load across backends, and for the sessions
// whose first choice is backend 0 the share of their warm-able turns it
// served before, during and after the outage. One run per iteration; the
// metrics are the last run's (the simulation is deterministic).
func BenchmarkAffinitySim(b *testing.B) {
	for _, alg := range []string{"weighted_p2c", "affinity", "prefix"} {
		for _, outage := range []bool{false, true} {
			name := alg + "/healthy"
			if outage {
				name = alg + "/outage"
			}
			b.Run(name, func(b *testing.B) {
				fs := fleetSim{affinity: alg != "weighted_p2c", nodes: 5, backends: 6, sessions: 3000,
					outage: outage, outageFrom: 40 * time.Minute, outageTo: 60 * time.Minute}
				if alg == "prefix" {
					fs.sharedPrefixes = 3000
				}
				var res fleetResult
				for b.Loop() {
					res = fs.run(1)
				}
				b.ReportMetric(pct(res.warm, res.warmable), "same_backend_%")
				b.ReportMetric(res.loadRatio, "max/mean")
				b.ReportMetric(float64(res.turns), "turns")
				b.ReportMetric(pct(res.spills, res.turns), "spill_%")
				if outage {
					b.ReportMetric(pct(res.onHome[0].home, res.onHome[0].n), "b0_home_before_%")
					b.ReportMetric(pct(res.onHome[1].home, res.onHome[1].n), "b0_home_during_%")
					b.ReportMetric(pct(res.onHome[2].home, res.onHome[2].n), "b0_home_after_%")
				}
			})
		}
	}
}
