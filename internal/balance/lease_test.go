package balance

import (
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// TestLeaseDoneOnce: a lease from any pick holds one slot; its first Done
// reports the outcome and gives the slot back, a second Done does nothing
// (the slot is not given back twice, the later outcome is not applied).
func TestLeaseDoneOnce(t *testing.T) {
	picks := map[string]func(pool []*routes.Target) (Lease, bool){}
	for alg, p := range pickers() {
		picks[alg] = func(pool []*routes.Target) (Lease, bool) { return p.Pick(pool, 0, nil) }
	}
	picks["affinity"] = func(pool []*routes.Target) (Lease, bool) {
		l, _, ok := (&Affinity{Fallback: &P2C{}}).PickKey(pool, 0, nil, SessionKey("k", "s"))
		return l, ok
	}
	for name, pick := range picks {
		t.Run(name, func(t *testing.T) {
			reg, c := testRegistry()
			tg := target(reg, "a", 1, 0, 2, 0)
			pool := []*routes.Target{tg}
			st := tg.Backend.State
			// Another request's slot on the same backend, so that a second
			// release would show as 0 in flight rather than go unnoticed.
			if !st.Acquire() {
				t.Fatal("acquire")
			}

			l, ok := pick(pool)
			if !ok || l.Target != tg || !l.Held() {
				t.Fatalf("pick = %v, %v", l.Target, ok)
			}
			if n := st.InFlight(); n != 2 {
				t.Fatalf("in flight after pick = %d, want 2", n)
			}
			l.Done(upstream.Result{Outcome: upstream.Success, TTFB: time.Millisecond})
			l.Done(upstream.Result{Outcome: upstream.RateLimited, RetryAfter: time.Minute})
			if l.Held() {
				t.Error("lease still held after Done")
			}
			if n := st.InFlight(); n != 1 {
				t.Errorf("in flight after two Dones = %d, want 1 (released once)", n)
			}
			c.Advance(time.Second)
			if !st.Ready(st.Now()) {
				t.Error("the second Done's 429 was applied: backend cooling down")
			}
		})
	}
}

// TestZeroLeaseDone: Done on the zero Lease (no pick) does nothing.
func TestZeroLeaseDone(t *testing.T) {
	var l Lease
	l.Done(upstream.Result{Outcome: upstream.Success})
	if l.Held() {
		t.Fatal("zero lease held")
	}
}
