package balance

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// sim is a deterministic discrete-event simulation of one node: a request
// arrives every interval, is picked, holds its slot for the latency the
// script gives its backend, then finishes with the script's outcome. The
// fake clock jumps from event to event; nothing sleeps.
type sim struct {
	clk     *clock.Fake
	start   time.Time
	reg     *upstream.Registry
	pool    []*routes.Target
	picker  picker
	pending completions
	// script returns the latency and outcome of a request sent to backend
	// id at offset at from the start.
	script func(id string, at time.Duration) (time.Duration, upstream.Result)
}

type completion struct {
	at time.Time
	t  *routes.Target
	r  upstream.Result
}

type completions []completion

func (c completions) Len() int           { return len(c) }
func (c completions) Less(i, j int) bool { return c[i].at.Before(c[j].at) }
func (c completions) Swap(i, j int)      { c[i], c[j] = c[j], c[i] }
func (c *completions) Push(x any)        { *c = append(*c, x.(completion)) }
func (c *completions) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// newSim builds a pool of equal-tier targets, one per id with its weight,
// on a registry with a fake clock and a seeded P2C. o's clock is replaced;
// zero fields mean the defaults except SlowStart, which is off.
func newSim(ids []string, weights []int, o upstream.Options) *sim {
	c := clock.NewFake(time.Time{})
	o.Clock = c.Now
	if o.SlowStart == 0 {
		o.SlowStart = -1
	}
	reg := upstream.NewRegistry(o)
	s := &sim{clk: c, start: c.Now(), reg: reg}
	for i, id := range ids {
		s.pool = append(s.pool, target(reg, id, weights[i], 0, 1<<20, 0))
	}
	s.picker = &P2C{Float64: rand.New(rand.NewPCG(7, 11)).Float64}
	return s
}

// run simulates arrivals every interval from offset from to offset to and
// returns how many requests each backend got.
func (s *sim) run(t *testing.T, from, to, interval time.Duration) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for at := from; at < to; at += interval {
		now := s.start.Add(at)
		for len(s.pending) > 0 && !s.pending[0].at.After(now) {
			c := heap.Pop(&s.pending).(completion)
			s.clk.Set(c.at)
			c.t.Backend.State.Finish(c.r)
		}
		s.clk.Set(now)
		tg, ok := s.picker.Pick(s.pool, 0, nil)
		if !ok {
			continue
		}
		counts[tg.Backend.ID]++
		lat, r := s.script(tg.Backend.ID, at)
		heap.Push(&s.pending, completion{at: now.Add(lat), t: tg.Target, r: r})
	}
	return counts
}

func share(counts map[string]int, id string) float64 {
	total := 0
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		return 0
	}
	return float64(counts[id]) / float64(total)
}

func ok(lat time.Duration) (time.Duration, upstream.Result) {
	return lat, upstream.Result{Outcome: upstream.Success, TTFB: lat}
}
