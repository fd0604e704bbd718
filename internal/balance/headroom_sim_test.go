package balance

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// This file simulates rate-limited providers (docs/routing.md "Headroom"):
// each backend's credential allows so many requests and tokens per
// minute, the provider refuses with a 429 what would exceed either, and
// every answer carries the rate-limit headers. Time is a fake clock that
// jumps from event to event.

// headers is what a simulated provider tells about its budget.
type headers uint8

const (
	honest  headers = iota
	missing         // no rate-limit headers at all
	lying           // always claims the whole budget is left
)

var headerNames = [...]string{honest: "honest", missing: "missing", lying: "lying"}

// rateProvider enforces requests and tokens per fixed minute window for
// one credential, counting a request when it arrives, as OpenAI and
// Anthropic count their estimate of it (input plus max_tokens).
type rateProvider struct {
	rpm, tpm int64
	offset   time.Duration // where its windows start
	headers  headers

	window       int64 // index of the current window
	reqs, tokens int64 // used in it
}

// admit counts a request of cost tokens at offset at and reports whether
// the provider takes it, with the headers of its answer.
func (p *rateProvider) admit(at time.Duration, cost int64) (bool, upstream.Headroom) {
	w := int64((at + p.offset) / time.Minute)
	if w != p.window {
		p.window, p.reqs, p.tokens = w, 0, 0
	}
	ok := p.reqs < p.rpm && p.tokens+cost <= p.tpm
	if ok {
		p.reqs++
		p.tokens += cost
	}
	reset := time.Duration(w+1)*time.Minute - (at + p.offset)
	switch p.headers {
	case missing:
		return ok, upstream.Headroom{}
	case lying:
		return ok, upstream.Headroom{
			Requests: upstream.Budget{Stated: true, Limit: p.rpm, Remaining: p.rpm, Reset: time.Second},
			Tokens:   upstream.Budget{Stated: true, Limit: p.tpm, Remaining: p.tpm, Reset: time.Second},
		}
	}
	return ok, upstream.Headroom{
		Requests: upstream.Budget{Stated: true, Limit: p.rpm, Remaining: p.rpm - p.reqs, Reset: reset},
		Tokens:   upstream.Budget{Stated: true, Limit: p.tpm, Remaining: p.tpm - p.tokens, Reset: reset},
	}
}

type answer struct {
	at time.Duration
	l  Lease
	r  upstream.Result
}

type answers []answer

func (a answers) Len() int           { return len(a) }
func (a answers) Less(i, j int) bool { return a[i].at < a[j].at }
func (a answers) Swap(i, j int)      { a[i], a[j] = a[j], a[i] }
func (a *answers) Push(x any)        { *a = append(*a, x.(answer)) }
func (a *answers) Pop() any {
	old := *a
	x := old[len(old)-1]
	*a = old[:len(old)-1]
	return x
}

// rateResult is what one simulation counted.
type rateResult struct {
	ok, refused429, node503 int
	byBackend               map[string][3]int // ok, 429, sent
}

// runRateSim offers load× the two credentials' combined capacity for
// minutes, picking with P2C as the request path does (a target whose
// token budget has no room is passed over: Lease.Fit).
func runRateSim(mode upstream.HeadroomMode, bHeaders headers, load float64, minutes int, seed uint64) rateResult {
	clk := clock.NewFake(time.Time{})
	start := clk.Now()
	reg := upstream.NewRegistry(upstream.Options{Clock: clk.Now, SlowStart: -1, Headroom: mode, Rand: func() float64 { return 0.5 }})
	provs := map[string]*rateProvider{
		// a is bound by its requests (600/min at 800 tokens each is
		// 480k of its 600k tokens), b by its tokens (200k/800 = 250/min).
		"a": {rpm: 600, tpm: 600_000, window: -1},
		"b": {rpm: 300, tpm: 200_000, offset: 23 * time.Second, headers: bHeaders, window: -1},
	}
	const capacity = 600 + 250 // requests per minute, at the mean cost
	pool := []*routes.Target{target(reg, "a", 1, 0, 1000, 0), target(reg, "b", 1, 0, 1000, 0)}
	routes.IndexWeights(pool)
	// The requests and latencies are the same whatever the policy picks:
	// the picker draws from its own source.
	rng := rand.New(rand.NewPCG(seed, 4))
	p := &P2C{Float64: rand.New(rand.NewPCG(seed, 5)).Float64}
	interval := time.Duration(float64(time.Minute) / (load * capacity))
	res := rateResult{byBackend: map[string][3]int{}}
	var pending answers
	for at := time.Duration(0); at < time.Duration(minutes)*time.Minute; at += interval {
		for len(pending) > 0 && pending[0].at <= at {
			a := heap.Pop(&pending).(answer)
			clk.Set(start.Add(a.at))
			a.l.Done(a.r)
		}
		clk.Set(start.Add(at))
		// max_tokens 300 and 100..900 tokens of input: 800 on average.
		cost := 300 + 100 + rng.Int64N(801)
		var skip []*routes.Target
		var l Lease
		picked := false
		for {
			var ok bool
			if l, ok = p.Pick(pool, 0, skip); !ok {
				break
			}
			if l.Fit(cost) {
				picked = true
				break
			}
			skip = append(skip, l.Target)
		}
		if !picked {
			res.node503++
			continue
		}
		id := l.Backend.ID
		bb := res.byBackend[id]
		bb[2]++
		took, hr := provs[id].admit(at, cost)
		r := upstream.Result{Headroom: hr}
		lat := 50 * time.Millisecond
		if took {
			lat = 1500*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second)))
			r.Outcome, r.TTFB = upstream.Success, lat
			res.ok++
			bb[0]++
		} else {
			// OpenAI's 429 for a rate limit names its reset in the
			// headers, not in Retry-After: the cooldown is the default.
			r.Outcome = upstream.RateLimited
			res.refused429++
			bb[1]++
		}
		res.byBackend[id] = bb
		heap.Push(&pending, answer{at: at + lat, l: l, r: r})
	}
	return res
}

var modeNames = map[upstream.HeadroomMode]string{
	upstream.HeadroomOff:       "reactive (headers ignored)",
	upstream.HeadroomGate:      "eligibility only",
	upstream.HeadroomThreshold: "eligibility + threshold (default)",
	upstream.HeadroomCost:      "eligibility + cost",
}

// TestHeadroomSimulation: at 1.5× the combined capacity of two
// credentials with different limits, the headroom-aware policy sends at
// least 90% fewer requests into a provider 429 than the reactive one,
// with the same goodput (within 0.5%); when one backend's headers are
// missing or lie, that backend's 429s and the goodput are those of the
// reactive policy. Each row sums four runs of ten simulated minutes with
// the same requests for every policy. Run with -v for the table in
// docs/routing.md.
func TestHeadroomSimulation(t *testing.T) {
	const (
		minutes = 10
		seeds   = 4
	)
	modes := []upstream.HeadroomMode{upstream.HeadroomOff, upstream.HeadroomGate, upstream.HeadroomThreshold, upstream.HeadroomCost}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| load | b's headers | policy | provider 429s | of them b's | goodput (req/min) | node 503s (per min) |\n|---|---|---|---|---|---|---|\n")
	for _, load := range []float64{0.9, 1.5} {
		for _, h := range []headers{honest, missing, lying} {
			got := map[upstream.HeadroomMode]rateResult{}
			for _, m := range modes {
				sum := rateResult{byBackend: map[string][3]int{}}
				for seed := range uint64(seeds) {
					r := runRateSim(m, h, load, minutes, seed+1)
					sum.ok += r.ok
					sum.refused429 += r.refused429
					sum.node503 += r.node503
					for id, v := range r.byBackend {
						w := sum.byBackend[id]
						for i := range v {
							w[i] += v[i]
						}
						sum.byBackend[id] = w
					}
				}
				got[m] = sum
				perMin := func(n int) float64 { return float64(n) / (seeds * minutes) }
				fmt.Fprintf(&table, "| %.1f× | %s | %s | %d | %d | %.1f | %.1f |\n", load, headerNames[h], modeNames[m],
					sum.refused429, sum.byBackend["b"][1], perMin(sum.ok), perMin(sum.node503))
			}
			off, cost := got[upstream.HeadroomOff], got[upstream.HeadroomThreshold]
			if 1000*cost.ok < 995*off.ok {
				t.Errorf("%.1f×, %s: goodput %d with headroom, %d without", load, headerNames[h], cost.ok, off.ok)
			}
			switch h {
			case honest:
				if cost.refused429*10 > off.refused429 {
					t.Errorf("%.1f×, honest: %d provider 429s with headroom, %d without: want at least 90%% fewer", load, cost.refused429, off.refused429)
				}
			default:
				// b falls back to the reactive policy: its 429s are those
				// of the reactive run, give or take a third; a's are still
				// avoided.
				cb, ob := cost.byBackend["b"][1], off.byBackend["b"][1]
				if 3*cb < 2*ob || 2*cb > 3*ob {
					t.Errorf("%.1f×, %s: b got %d 429s with headroom, %d without: want about the same", load, headerNames[h], cb, ob)
				}
				if ca, oa := cost.byBackend["a"][1], off.byBackend["a"][1]; ca*10 > oa {
					t.Errorf("%.1f×, %s: a (honest) got %d 429s with headroom, %d without", load, headerNames[h], ca, oa)
				}
			}
		}
	}
	t.Log(table.String())
}
