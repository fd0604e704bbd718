package gateway

import (
	"context"
	"math"
	"sync"
	"time"
)

// Admission while the node sheds (docs/failures.md "Shedding").
//
// An overloaded node that runs every request it has shares its CPU among
// all of them: Go's scheduler takes turns, so each request gets slower as
// more arrive, and past some number all of them run out their time limits
// together. The node then works for answers that come too late while new
// requests keep arriving. Refusing every new request instead, as long as
// the node sheds, throws away requests its CPU could have served in time.
//
// So while the node sheds, a ConcurrencyLimit admits a bounded number of
// new requests at once (the bound) and queues the rest before they are
// authenticated, routed or sent: a queued request costs a parked
// goroutine, and its time limits start when it is admitted. The bound is
// Little's law: the rate at which the node has been finishing requests
// (an average over about admitRateTau) times admitTarget, so that the
// admitted requests, sharing the CPU, each take about admitTarget
// whatever the node's capacity is. It does not follow the scheduling
// wait that makes the node shed: under a CPU quota, or with the CPU taken
// by accepting and reading the requests that then queue, that wait stays
// long however few are admitted, and a bound cut by it falls to one. A
// bound too low for the requests' own waits (dials, the provider) does
// not hold the node back either: they then finish in far less than
// admitTarget, and the rate times admitTarget is well above the bound.
//
// Each slot given back admits the next queued request while fewer than
// the bound are admitted. The queue is first come first served until its
// oldest request has waited lifoAfter; from then on the newest is
// admitted first (Facebook's "adaptive LIFO"): a queue that old is not
// draining, and serving it in order would make every request wait as
// long, the ones that arrive after the overload included, while the
// newest are those whose clients are still waiting. The oldest get the
// spare slots last, and their 503 after queueWait. A request that has
// waited queueWait is refused with the node's 503, as is one that arrives
// when queueWait is zero and no slot is free. Once the node no longer
// sheds, the gate stays until the queue is empty, its bound growing by a
// quarter each window (what then holds the admitted requests may not be
// the CPU: a slow provider would otherwise keep the finishing rate, and
// the bound, low); then it opens, and only the cap holds again: opening
// it with a queue would hand the whole queue to the scheduler at once.
//
// The requests the node held when it began to shed are not counted
// against the bound (they hold slots under the cap only), so long streams
// do not keep new requests out; their CPU is in the rate all the same.

const (
	// admitTarget is how long a request admitted while the node sheds
	// should take, at the rate the node finishes requests.
	admitTarget = 250 * time.Millisecond
	// lifoAfter is how long the oldest queued request waits before the
	// newest are admitted first: as long as an admitted one should take.
	lifoAfter = admitTarget
	// admitRateTau is the time constant of the finishing rate's average.
	admitRateTau = 200 * time.Millisecond
	// admitMin is the least bound: a node that finishes next to nothing
	// (its slots held by long streams) still admits a few.
	admitMin = 8
	// admitGrowth: once the node no longer sheds, the bound grows by
	// 1/admitGrowth of itself each window while requests wait.
	admitGrowth = 4
)

// gate is the queue, the bound and the finishing rate; all guarded by mu
// but done.
type gate struct {
	mu      sync.Mutex
	bound   int64     // requests admitted at once while gated
	active  int64     // requests admitted by the gate, not ended
	queue   []*waiter // in arrival order; none gone at either end
	waiting int64     // waiters in queue that are not gone

	rate     float64   // requests finished a second, averaged
	at       time.Time // the last Adapt; zero before the first
	doneThen uint64    // done at the last Adapt
}

// waiter is one queued request. ready is closed when it is admitted;
// admitted and gone are guarded by gate.mu.
type waiter struct {
	ready    chan struct{}
	since    time.Time // queued at
	admitted bool      // given a slot (counted in inflight and active)
	gone     bool      // gave up: waited queueWait, or its client left
}

// admit takes a slot for a request that arrived while the node sheds,
// waiting for one up to queueWait. It reports whether the request has a
// slot, and whether the gate gave it (then leave gives it back, else
// end).
func (l *ConcurrencyLimit) admit(ctx context.Context) (ok, gated bool) {
	g := &l.gate
	g.mu.Lock()
	if !l.gated.Load() {
		// Opened since the caller looked: the cap alone.
		g.mu.Unlock()
		if l.inflight.Add(1) > l.max {
			l.inflight.Add(-1)
			return false, false
		}
		return true, false
	}
	if g.waiting == 0 && g.active < g.bound && l.inflight.Load() < l.max {
		g.active++
		l.inflight.Add(1)
		g.mu.Unlock()
		return true, true
	}
	if l.queueWait <= 0 || l.inflight.Load()+g.waiting >= l.max {
		g.mu.Unlock()
		return false, false
	}
	w := &waiter{ready: make(chan struct{}), since: l.now()}
	g.queue = append(g.queue, w)
	g.waiting++
	g.mu.Unlock()

	t := time.NewTimer(l.queueWait)
	defer t.Stop()
	select {
	case <-w.ready:
		return true, true
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.admitted {
		return true, true // admitted as it gave up: it has the slot
	}
	w.gone = true
	g.waiting--
	g.trim()
	return false, false
}

// leave gives back a slot the gate gave, to the next queued request.
func (l *ConcurrencyLimit) leave() {
	l.inflight.Add(-1)
	l.done.Add(1)
	g := &l.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	l.admitLocked()
}

// admitLocked admits queued requests while fewer than the bound are
// admitted (all of them once the gate is open, the cap aside). gate.mu
// must be held.
func (l *ConcurrencyLimit) admitLocked() {
	g := &l.gate
	gated := l.gated.Load()
	var now time.Time
	for len(g.queue) > 0 {
		if gated && g.active >= g.bound || l.inflight.Load() >= l.max {
			return
		}
		if now.IsZero() {
			now = l.now()
		}
		var w *waiter
		if last := len(g.queue) - 1; now.Sub(g.queue[0].since) >= lifoAfter {
			w, g.queue[last], g.queue = g.queue[last], nil, g.queue[:last]
		} else {
			w, g.queue[0], g.queue = g.queue[0], nil, g.queue[1:]
		}
		g.trim()
		g.waiting--
		g.active++
		w.admitted = true
		l.inflight.Add(1)
		close(w.ready)
	}
}

// trim drops the waiters that gave up from both ends of the queue, so
// that its first and last are waiting; an emptied queue lets its array go.
func (g *gate) trim() {
	for len(g.queue) > 0 && g.queue[0].gone {
		g.queue[0], g.queue = nil, g.queue[1:]
	}
	for n := len(g.queue); n > 0 && g.queue[n-1].gone; n-- {
		g.queue[n-1], g.queue = nil, g.queue[:n-1]
	}
	if len(g.queue) == 0 {
		g.queue = nil
	}
}

// Adapt applies one window of the node's load (upstream.NodeLoad.Run):
// whether the node sheds after it. Every window updates the finishing
// rate; while the gate is closed, the bound follows it. It is called
// from one goroutine.
func (l *ConcurrencyLimit) Adapt(shedding bool) {
	g := &l.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	now, done := l.now(), l.done.Load()
	if dt := now.Sub(g.at); !g.at.IsZero() && dt > 0 {
		inst := float64(done-g.doneThen) / dt.Seconds()
		w := 1 - math.Exp(-float64(dt)/float64(admitRateTau))
		g.rate += w * (inst - g.rate)
	}
	g.at, g.doneThen = now, done
	if !l.gated.Load() {
		if !shedding {
			return
		}
		l.gated.Store(true)
	}
	bound := max(admitMin, int64(g.rate*admitTarget.Seconds()))
	if !shedding {
		// The CPU is no longer the bottleneck, yet requests wait: what
		// holds the admitted ones may be elsewhere (a slow provider or
		// proxy), and the finishing rate says nothing about the CPU.
		// Grow by a quarter a window until the queue is gone or the node
		// sheds again: its wait is short while the bound holds, so growth
		// that outran the CPU (doubling did: a backlog handed over in
		// 300 ms ran past its first-byte limits) would start it over.
		bound = min(l.max, max(bound, g.bound+g.bound/admitGrowth))
	}
	g.bound = bound
	l.admitLocked()
	if !shedding && g.waiting == 0 {
		l.gated.Store(false)
	}
}

// Queued reports the requests waiting for a slot now.
func (l *ConcurrencyLimit) Queued() int64 {
	g := &l.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}
