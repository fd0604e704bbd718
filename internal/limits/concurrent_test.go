package limits_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// admitAll admits on n until a request is refused and returns the
// tickets and the refusal.
func (n *node) admitAll(t *testing.T, now time.Time) ([]limits.Ticket, limits.Status) {
	t.Helper()
	var tks []limits.Ticket
	for range 1000 {
		tk, st, ok := n.sub.Admit(now)
		if !ok {
			return tks, st
		}
		tks = append(tks, tk)
	}
	t.Fatal("1000 requests admitted")
	return nil, limits.Status{}
}

func release(tks []limits.Ticket) {
	for _, tk := range tks {
		tk.Release()
	}
}

// TestFleetMaxConcurrent: two nodes share one Redis; together they never
// hold more requests in progress than max_concurrent, whether the key's
// or the tenant's. A slot a node released goes back to the fleet within
// two refreshes.
func TestFleetMaxConcurrent(t *testing.T) {
	rs := startRedis(t)
	for _, tt := range []struct {
		name   string
		kl, tl authsnap.Limits
		scope  limits.Scope
	}{
		{"key", authsnap.Limits{MaxConcurrent: 5}, authsnap.Limits{}, limits.ScopeKey},
		{"tenant", authsnap.Limits{RequestsPerMinute: 1 << 30}, authsnap.Limits{MaxConcurrent: 5}, limits.ScopeTenant},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs.do("FLUSHALL")
			fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			a := newNode(t, rs.addr(), fc, limits.FailLocal, tt.kl, tt.tl)
			b := newNode(t, rs.addr(), fc, limits.FailLocal, tt.kl, tt.tl)
			a.wait(t, true)
			b.wait(t, true)

			held, _ := a.admitAll(t, fc.Now())
			if len(held) != 5 {
				t.Fatalf("node a alone admitted %d, want 5", len(held))
			}
			got, st := b.admitAll(t, fc.Now())
			if len(got) != 0 {
				t.Fatalf("node b admitted %d while node a holds all 5", len(got))
			}
			if st.Scope != tt.scope || st.Kind != limits.KindConcurrency || st.RetryAfter != time.Second {
				t.Errorf("node b refused by %v %v after %v, want %v concurrency after 1s", st.Scope, st.Kind, st.RetryAfter, tt.scope)
			}
			// a ends two requests; it keeps the slots for its next ones
			// until its refreshes return them.
			release(held[:2])
			held = held[2:]
			for range 2 {
				if err := a.l.RefreshHolds(); err != nil {
					t.Fatal(err)
				}
			}
			fc.Advance(100 * time.Millisecond) // b asks the fleet again
			got, _ = b.admitAll(t, fc.Now())
			if len(got) != 2 {
				t.Errorf("node b admitted %d after a returned 2 slots, want 2", len(got))
			}
			release(got)
			release(held)
			for _, n := range []*node{a, b} {
				for range 2 {
					if err := n.l.RefreshHolds(); err != nil {
						t.Fatal(err)
					}
				}
			}
			fc.Advance(100 * time.Millisecond)

			// Goroutines on both nodes admit, hold and release; at no
			// moment do the requests in progress exceed the limit.
			var inProgress, most, admitted atomic.Int64
			var wg sync.WaitGroup
			for w := range 8 {
				n := [2]*node{a, b}[w%2]
				wg.Go(func() {
					var mine []limits.Ticket
					for i := range 300 {
						if w == 0 && i%10 == 0 {
							fc.Advance(10 * time.Millisecond) // refused nodes ask again
						}
						if w == 1 && i%50 == 0 {
							if err := n.l.RefreshHolds(); err != nil {
								t.Error(err)
							}
						}
						if tk, _, ok := n.sub.Admit(fc.Now()); ok {
							admitted.Add(1)
							c := inProgress.Add(1)
							for m := most.Load(); c > m && !most.CompareAndSwap(m, c); m = most.Load() {
							}
							mine = append(mine, tk)
						}
						// Each goroutine keeps up to 3 requests in
						// progress: 24 would be, without the limit.
						if len(mine) == 3 || len(mine) > 0 && i%2 == 0 {
							inProgress.Add(-1) // before the slot is free
							mine[0].Release()
							mine = mine[1:]
						}
					}
					for _, tk := range mine {
						inProgress.Add(-1)
						tk.Release()
					}
				})
			}
			wg.Wait()
			if most.Load() > 5 {
				t.Errorf("%d requests in progress at once over two nodes, limit 5", most.Load())
			}
			if admitted.Load() == 0 {
				t.Error("nothing admitted")
			}
		})
	}
}

// TestFleetBurstOnFreshHold: requests arriving together on a node that
// holds no slots yet are all admitted (one take asks for all of those
// waiting), not refused for want of rounds.
func TestFleetBurstOnFreshHold(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	const limit = 40
	n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{MaxConcurrent: limit}, authsnap.Limits{})
	n.wait(t, true)
	var mu sync.Mutex
	var tks []limits.Ticket
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range limit {
		wg.Go(func() {
			<-start
			if tk, _, ok := n.sub.Admit(fc.Now()); ok {
				mu.Lock()
				tks = append(tks, tk)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(tks) != limit {
		t.Errorf("%d of a burst of %d admitted, want all", len(tks), limit)
	}
	t.Logf("%d round trips for a burst of %d", n.store.Calls(), limit)
	release(tks)
}

// TestFleetCrashedNodeSlotsExpire: a node that stops without releasing
// (a crash) holds its slots until holdTTL after its last refresh, by the
// nodes' clocks; a live node's refreshed hold outlasts that.
func TestFleetCrashedNodeSlotsExpire(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	kl := authsnap.Limits{MaxConcurrent: 3}
	crashed := newNode(t, rs.addr(), fc, limits.FailLocal, kl, authsnap.Limits{})
	live := newNode(t, rs.addr(), fc, limits.FailLocal, kl, authsnap.Limits{})
	other := newNode(t, rs.addr(), fc, limits.FailLocal, kl, authsnap.Limits{})
	for _, n := range []*node{crashed, live, other} {
		n.wait(t, true)
	}
	for range 2 {
		if _, _, ok := crashed.sub.Admit(fc.Now()); !ok {
			t.Fatal("refused")
		}
	}
	tk, _, ok := live.sub.Admit(fc.Now())
	if !ok {
		t.Fatal("refused")
	}
	defer tk.Release()
	crashed.stop() // no release, no refresh from now on

	// A refused node asks the fleet again 100 ms on: at 100 ms before
	// the hold expires, then at the instant it does.
	fc.Advance(limits.HoldTTL - 100*time.Millisecond)
	if err := live.l.RefreshHolds(); err != nil {
		t.Fatal(err)
	}
	if got, _ := other.admitAll(t, fc.Now()); len(got) != 0 {
		t.Fatalf("admitted %d before the crashed node's hold expired", len(got))
	}
	fc.Advance(100 * time.Millisecond)
	got, st := other.admitAll(t, fc.Now())
	if len(got) != 2 || st.Kind != limits.KindConcurrency {
		t.Errorf("admitted %d (then refused by %v) once the crashed node's hold expired, want 2 (the live node's slot stays held)", len(got), st.Kind)
	}
	release(got)
}

// TestFleetConcurrencyOutage: slots taken by the node's share while Redis
// is down are counted in the fleet once it is back (a Redis that lost
// its data included), and each request's slot comes back exactly once,
// whichever way it was admitted.
func TestFleetConcurrencyOutage(t *testing.T) {
	for _, mode := range []limits.Failure{limits.FailLocal, limits.FailOpen} {
		rs := startRedis(t)
		fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		kl := authsnap.Limits{MaxConcurrent: 4}
		a := newNode(t, rs.addr(), fc, mode, kl, authsnap.Limits{})
		a.wait(t, true)
		var held []limits.Ticket
		for range 2 {
			tk, _, ok := a.sub.Admit(fc.Now())
			if !ok {
				t.Fatal("refused")
			}
			held = append(held, tk)
		}
		rs.stop()
		// The first take fails: from then on the node's share (4, with
		// the 2 in progress) admits.
		more, st := a.admitAll(t, fc.Now())
		if len(more) != 2 || st.Kind != limits.KindConcurrency || a.store.Up() {
			t.Fatalf("mode %d: %d admitted during the outage (refused by %v, store up %v), want 2", mode, len(more), st.Kind, a.store.Up())
		}
		held = append(held, more...)

		rs.start(t) // a fresh Redis: every hold was lost
		a.wait(t, true)
		b := newNode(t, rs.addr(), fc, mode, kl, authsnap.Limits{})
		b.wait(t, true)
		a.refreshAfterRestart(t) // the 4 in progress, the outage's included
		if got, _ := b.admitAll(t, fc.Now()); len(got) != 0 {
			t.Errorf("mode %d: node b admitted %d while a's 4 requests are in progress", mode, len(got))
			release(got)
		}

		release(held)
		for range 2 {
			a.refreshAfterRestart(t)
		}
		fc.Advance(100 * time.Millisecond)
		got, _ := b.admitAll(t, fc.Now())
		if len(got) != 4 {
			t.Errorf("mode %d: node b admitted %d once a's requests ended, want 4", mode, len(got))
		}
		release(got)
		for range 2 {
			if err := b.l.RefreshHolds(); err != nil {
				t.Fatal(err)
			}
		}
		// Every slot of a's came back once: a admits the limit again,
		// no more, no less.
		again, _ := a.admitAll(t, fc.Now())
		if len(again) != 4 {
			t.Errorf("mode %d: node a admitted %d after its requests ended, want 4", mode, len(again))
		}
		release(again)
		a.stop()
		b.stop()
		rs.stop()
	}
}

// refreshAfterRestart refreshes n's holds until a refresh reaches Redis.
// The client keeps several pipelined connections and picks one at random
// for each command with a key; after Redis restarted, each connection it
// had to the old server fails once (EOF), on its first use, while the
// store's probe, a PING, always goes over the same one. So a refresh
// right after the store is back up may meet a stale connection, fail
// (after its one retry) and mark the store down again; the next one after
// the store is up again gets further. How many of the connections are
// stale depends on how the scheduler ran the earlier commands, which is
// why this failed only at some GOMAXPROCS.
func (n *node) refreshAfterRestart(t *testing.T) {
	t.Helper()
	for i := 0; ; i++ {
		err := n.l.RefreshHolds()
		if err == nil {
			return
		}
		if i == 8 { // more than the client has connections
			t.Fatal(err)
		}
		n.wait(t, true)
	}
}

// TestFleetHoldStaleAfterOutage: slots a node kept for its next requests
// are not used after an outage (Redis may have lost them, or let them
// expire, and given them to others): the node asks the fleet again.
func TestFleetHoldStaleAfterOutage(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	kl := authsnap.Limits{MaxConcurrent: 4}
	a := newNode(t, rs.addr(), fc, limits.FailLocal, kl, authsnap.Limits{})
	a.wait(t, true)
	kept, _ := a.admitAll(t, fc.Now())
	release(kept) // a keeps the 4 slots until its next refresh

	rs.stop()
	// a's first refresh has nothing to send (the hold is as it was set);
	// its second gives the kept slots back and notices the outage.
	if err := a.l.RefreshHolds(); err != nil {
		t.Fatalf("a refresh with nothing to send: %v", err)
	}
	if err := a.l.RefreshHolds(); err == nil {
		t.Fatal("refresh succeeded with redis-server stopped")
	}
	rs.start(t) // a fresh Redis: a's hold is gone
	a.wait(t, true)
	b := newNode(t, rs.addr(), fc, limits.FailLocal, kl, authsnap.Limits{})
	b.wait(t, true)
	got, _ := b.admitAll(t, fc.Now())
	if len(got) != 4 {
		t.Fatalf("node b admitted %d of the fresh Redis's 4", len(got))
	}
	defer release(got)
	if more, _ := a.admitAll(t, fc.Now()); len(more) != 0 {
		t.Errorf("node a admitted %d from the slots it kept before the outage; b holds all 4", len(more))
		release(more)
	}
}

// BenchmarkAdmitRedisConcurrent: requests of one key with a fleet-wide
// max_concurrent, admitted and released from parallel goroutines on one
// node: the node keeps the slots it uses, so the hot path pays (almost)
// no round trips; roundtrips/op includes the background refreshes.
func BenchmarkAdmitRedisConcurrent(b *testing.B) {
	rs := startRedis(b)
	store := runStore(b, rs.addr())
	l := limits.New(limits.Options{Fleet: store})
	bd := l.Bind()
	sub := bd.Subject("k", "t", authsnap.Limits{MaxConcurrent: 64}, authsnap.Limits{MaxConcurrent: 256})
	bd.Done()
	calls := store.Calls()
	var refused atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, _, ok := sub.Admit(time.Now())
			if !ok {
				refused.Add(1)
				continue
			}
			tk.Release()
		}
	})
	b.ReportMetric(float64(store.Calls()-calls)/float64(b.N), "roundtrips/op")
	b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
}

// TestFleetConcurrencyRefreshKeepsWait: a node whose take found the
// fleet's max_concurrent full waits before it asks again, and its own
// refresh meanwhile does not end the wait (a refresh says nothing of the
// other nodes' slots): the refused request after it costs no round trip.
func TestFleetConcurrencyRefreshKeepsWait(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	kl := authsnap.Limits{MaxConcurrent: 3}
	a := newNode(t, rs.addr(), fc, limits.FailLocal, kl, authsnap.Limits{})
	b := newNode(t, rs.addr(), fc, limits.FailLocal, kl, authsnap.Limits{})
	a.wait(t, true)
	b.wait(t, true)
	// b runs one request (so that its refresh has a hold to renew), a
	// the two others the limit allows.
	if _, _, ok := b.sub.Admit(fc.Now()); !ok {
		t.Fatal("node b refused within the limit")
	}
	for range 2 {
		if _, _, ok := a.sub.Admit(fc.Now()); !ok { // held to the end of the test
			t.Fatal("node a refused within the limit")
		}
	}
	if b.admit(fc.Now()) {
		t.Fatal("node b admitted over the fleet's limit")
	}
	if err := b.l.RefreshHolds(); err != nil {
		t.Fatal(err)
	}
	calls := b.store.Calls()
	if b.admit(fc.Now()) {
		t.Fatal("node b admitted over the fleet's limit after its refresh")
	}
	if n := b.store.Calls() - calls; n != 0 {
		t.Errorf("the refused request after the refresh cost %d round trips, want 0 (the wait after the full take)", n)
	}
}

// TestFleetUnchangedHoldRenewed: a node whose hold does not change sends
// it again only when it is due (every 6 s, not every refresh), and the
// hold never lapses meanwhile: for a minute, another node refused at
// the limit never gets one of its slots.
func TestFleetUnchangedHoldRenewed(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	kl := authsnap.Limits{MaxConcurrent: 3}
	a := newNode(t, rs.addr(), fc, limits.FailLocal, kl, authsnap.Limits{})
	b := newNode(t, rs.addr(), fc, limits.FailLocal, kl, authsnap.Limits{})
	a.wait(t, true)
	b.wait(t, true)
	held, _ := a.admitAll(t, fc.Now())
	defer release(held)
	if len(held) != 3 {
		t.Fatalf("node a admitted %d, want 3", len(held))
	}
	calls := a.store.Calls()
	for range 60 {
		fc.Advance(time.Second)
		if err := a.l.RefreshHolds(); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.admitAll(t, fc.Now()); len(got) != 0 {
			release(got)
			t.Fatalf("node b admitted %d at %v while node a holds all 3", len(got), fc.Now())
		}
		if err := b.l.RefreshHolds(); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.store.Calls() - calls; n > 10 {
		t.Errorf("node a's refreshes of an unchanged hold cost %d round trips in 60 s, want one per 6 s", n)
	}
}
