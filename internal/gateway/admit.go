package gateway

import (
	"context"
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
// So while the node sheds, a ConcurrencyLimit serves a bounded number of
// requests at once (the bound) and queues the rest before they are
// authenticated, routed or sent: a queued request costs a parked
// goroutine, and its time limits start when it is admitted. The queue is
// first come first served until its oldest request has waited
// lifoAfter; from then on the newest is admitted first (Facebook's
// "adaptive LIFO"): a queue that old is not draining, and serving it in
// order would make every request wait as long, the ones that arrive
// after the overload included, while the newest are those whose clients
// are still waiting. The oldest get the spare slots last, and their 503
// after queueWait. The bound follows the node's scheduling wait, one window at
// a time (Adapt): a window of shedWait or more cuts it to three quarters
// of what is being served, a window below half of that raises it by an
// eighth, and each slot given back admits the first queued request while
// the node serves fewer than the bound. A request that has waited
// queueWait is refused with the node's 503, as is one that arrives when
// queueWait is zero and no slot is free. Once the node no longer sheds,
// the bound keeps rising with each short window until the queue is empty;
// then the gate opens, and only the cap holds again: opening it with a
// queue would hand the whole queue to the scheduler at once.
//
// The bound starts at what the node serves when it begins to shed. Slots
// held by long streams count like the others: a node overloaded by the
// streams it holds admits nothing new until some end, and its queued
// requests get their 503 after queueWait.

// lifoAfter is how long the oldest queued request waits before the
// newest are admitted first.
const lifoAfter = time.Second

// gate is the queue and the bound; both guarded by mu.
type gate struct {
	mu      sync.Mutex
	bound   int64     // requests served at once while gated
	queue   []*waiter // in arrival order; none gone at either end
	waiting int64     // waiters in queue that are not gone
}

// waiter is one queued request. ready is closed when it is admitted;
// admitted and gone are guarded by gate.mu.
type waiter struct {
	ready    chan struct{}
	since    time.Time // queued at
	admitted bool      // given a slot (counted in inflight)
	gone     bool      // gave up: waited queueWait, or its client left
}

// admit takes a slot for a request that arrived while the node sheds,
// waiting for one up to queueWait. False: refused (counted by the caller's
// 503).
func (l *ConcurrencyLimit) admit(ctx context.Context) bool {
	g := &l.gate
	g.mu.Lock()
	if !l.gated.Load() {
		// Opened since the caller looked: the cap alone.
		g.mu.Unlock()
		if l.inflight.Add(1) > l.max {
			l.inflight.Add(-1)
			return false
		}
		return true
	}
	if g.waiting == 0 && l.inflight.Load() < g.bound {
		l.inflight.Add(1)
		g.mu.Unlock()
		return true
	}
	if l.queueWait <= 0 || l.inflight.Load()+g.waiting >= l.max {
		g.mu.Unlock()
		return false
	}
	w := &waiter{ready: make(chan struct{}), since: l.now()}
	g.queue = append(g.queue, w)
	g.waiting++
	g.mu.Unlock()

	t := time.NewTimer(l.queueWait)
	defer t.Stop()
	select {
	case <-w.ready:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.admitted {
		return true // admitted as it gave up: it has the slot
	}
	w.gone = true
	g.waiting--
	g.trim()
	return false
}

// admitQueued admits queued requests while the node serves fewer than the
// bound (all of them once the gate is open, the cap aside).
func (l *ConcurrencyLimit) admitQueued() {
	g := &l.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	l.admitLocked()
}

// admitLocked is admitQueued with gate.mu held.
func (l *ConcurrencyLimit) admitLocked() {
	g := &l.gate
	gated := l.gated.Load()
	var now time.Time
	for len(g.queue) > 0 {
		if gated && l.inflight.Load() >= g.bound {
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
// whether the node sheds after it and the window's scheduling wait. It is
// called from one goroutine; without Shed it does nothing.
func (l *ConcurrencyLimit) Adapt(shedding bool, wait time.Duration) {
	if l.shedWait <= 0 {
		return
	}
	g := &l.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	inflight := l.inflight.Load()
	if !l.gated.Load() {
		if !shedding {
			return
		}
		g.bound = inflight
		l.gated.Store(true)
	}
	switch {
	case wait >= l.shedWait:
		g.bound = max(1, min(g.bound, inflight)*3/4)
	case wait < l.shedWait/2:
		g.bound = min(l.max, g.bound+max(1, g.bound/8))
	}
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
