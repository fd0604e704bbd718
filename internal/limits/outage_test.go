package limits_test

import (
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// TestFleetConcurrentAfterOpenOutage: four nodes, a key with a
// fleet-wide max_concurrent of 10, on_store_failure "open", local_share
// 1. While Redis is unreachable each node admits up to its share, the
// whole 10, so the fleet may run more than 10 (here 11, as reported from
// the field). Documented behaviour: once Redis answers those requests
// are recorded, run to completion, and no node admits another until the
// fleet is below its limit again.
func TestFleetConcurrentAfterOpenOutage(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	kl := authsnap.Limits{MaxConcurrent: 10}
	nodes := make([]*node, 4)
	for i := range nodes {
		nodes[i] = newNode(t, rs.addr(), fc, limits.FailOpen, kl, authsnap.Limits{})
		nodes[i].wait(t, true)
	}
	rs.stop()
	// The outage (each node's first take finds it): 3 + 3 + 3 + 2
	// streams start, 11 in all.
	var streams [][]limits.Ticket
	for i, n := range nodes {
		var got []limits.Ticket
		for range 3 - i/3 {
			tk, _, ok := n.sub.Admit(fc.Now())
			if !ok {
				t.Fatalf("node %d refused during the outage with open", i)
			}
			got = append(got, tk)
		}
		streams = append(streams, got)
		if n.store.Up() {
			t.Fatalf("node %d: store up with redis-server stopped", i)
		}
	}
	rs.start(t) // a fresh Redis: it knows of no holds
	for _, n := range nodes {
		n.wait(t, true)
		if err := n.l.RefreshHolds(); err != nil {
			t.Fatal(err)
		}
	}
	admitAny := func() (limits.Ticket, bool) {
		for _, n := range nodes {
			if tk, _, ok := n.sub.Admit(fc.Now()); ok {
				return tk, true
			}
		}
		return limits.Ticket{}, false
	}
	fc.Advance(2 * time.Second) // past any back-off after a full take
	if tk, ok := admitAny(); ok {
		tk.Release()
		t.Fatal("a new stream admitted with the outage's 11 of 10 still running")
	}
	// Two outage streams end: 9 run, room for exactly one more.
	streams[0][0].Release()
	streams[1][0].Release()
	for _, n := range nodes {
		if err := n.l.RefreshHolds(); err != nil {
			t.Fatal(err)
		}
	}
	fc.Advance(2 * time.Second)
	tk, ok := admitAny()
	if !ok {
		t.Fatal("refused with 9 of 10 running")
	}
	defer tk.Release()
	if tk2, ok := admitAny(); ok {
		tk2.Release()
		t.Fatal("admitted an eleventh stream after the outage's ended")
	}
	for _, s := range streams {
		for _, tk := range s {
			tk.Release()
		}
	}
}
