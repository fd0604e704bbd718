package limits_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usd"
)

// spendOn admits one request on n at the clock's time and charges it
// cost; it reports whether it was admitted.
func (n *node) spendOn(fc *clock.Fake, cost usd.Amount) (limits.Status, bool) {
	tk, st, ok := n.sub.Admit(fc.Now())
	if ok {
		tk.Charge(fc.Now(), cost)
		tk.Release()
	}
	return st, ok
}

// TestFleetBudget: two nodes share a key's day budget on a real Redis.
// Each charges the fleet's counter; a node refuses once the fleet's spend
// has reached the budget (at once when its own charge told it, within
// the refresh interval when another's did); a node that starts mid-window
// counts from the fleet's counter; spend made while Redis was down is
// charged back when it returns.
func TestFleetBudget(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 12, 6, 23, 0, 0, 0, time.UTC))
	key := authsnap.Limits{USDPerDay: "1"}
	a := newNode(t, rs.addr(), fc, limits.FailLocal, key, authsnap.Limits{})
	b := newNode(t, rs.addr(), fc, limits.FailLocal, key, authsnap.Limits{})
	a.l.ChargeInline()
	b.l.ChargeInline()
	a.wait(t, true)
	b.wait(t, true)
	const sixty = 600_000_000_000 // $0.60
	if st, ok := a.spendOn(fc, sixty); !ok || st.Budget.Remaining != usd.Dollar {
		t.Fatalf("a's first request: ok %v, budget %+v", ok, st.Budget)
	}
	// b learns a's spend from the store: $0.40 left, the whole budget's.
	if st, ok := b.spendOn(fc, sixty); !ok || st.Budget.Remaining != 400_000_000_000 || st.Budget.Limit != usd.Dollar {
		t.Fatalf("b's first request: ok %v, budget %+v; want $0.40 of the fleet's $1 left", ok, st.Budget)
	}
	// $1.20 spent: b knows from its own charge's answer.
	if st, ok := b.spendOn(fc, 1); ok || st.Kind != limits.KindBudget || st.RetryAfter != time.Hour {
		t.Fatalf("b after the budget: ok %v, %s retry %s; want a budget refusal for 1h", ok, st.Kind, st.RetryAfter)
	}
	// a admits on what it knew until its view is a refresh old.
	fc.Advance(time.Second)
	if _, ok := a.spendOn(fc, 1); ok {
		t.Fatal("a admitted a refresh after the fleet's budget ran out")
	}
	if got, _ := rs.do("GET scootgate:limits:k:k1:usd:d:" + strconv.FormatInt(fc.Now().Unix()/86400, 10)); got != "1200000000000" {
		t.Errorf("fleet counter = %s, want 1200000000000", got)
	}

	// A node that starts now counts from the fleet's counter.
	c := newNode(t, rs.addr(), fc, limits.FailLocal, key, authsnap.Limits{})
	c.wait(t, true)
	if _, ok := c.spendOn(fc, 1); ok {
		t.Fatal("a restarted node admitted: it must count from the fleet's counter")
	}

	// The next day: Redis goes down; a spends on its local share and
	// owes it; Redis comes back (empty: no persistence) and the next
	// admission after the refresh charges what a owes.
	fc.Advance(time.Hour)
	rs.stop()
	a.l.ChargeInline()
	tk, _, ok := a.sub.Admit(fc.Now()) // the store is still believed up: this admission finds it down
	if !ok {
		t.Fatal("a refused with FailLocal and a fresh day")
	}
	a.wait(t, false)
	tk.Charge(fc.Now(), 250_000_000_000)
	tk.Release()
	rs.start(t)
	a.wait(t, true)
	fc.Advance(time.Second)
	if st, ok := a.spendOn(fc, 0); !ok || st.Budget.Remaining != 750_000_000_000 {
		t.Fatalf("after the outage: ok %v, budget %+v; want $0.75 left", ok, st.Budget)
	}
	if got, _ := rs.do("GET scootgate:limits:k:k1:usd:d:" + strconv.FormatInt(fc.Now().Unix()/86400, 10)); got != "250000000000" {
		t.Errorf("fleet counter after the outage = %s, want the owed 250000000000", got)
	}
}

// BenchmarkAdmitRedisBudget is BenchmarkAdmitRedis with day and month
// budgets on the key and the tenant. "fresh": the node's view of every
// key's and tenant's fleet spend is younger than budgetRefresh (a busy
// key: no round trip); "stale": on the real clock, 10000 keys visited
// in turn, every view is older than that (each admission reads the key's
// and the tenant's counters); "+charge": the attempt's charge too, sent
// before Charge returns here (the node sends it in the background, off
// the request path).
func BenchmarkAdmitRedisBudget(b *testing.B) {
	rs := startRedis(b)
	const keys = 10000
	big := authsnap.Limits{RequestsPerMinute: authsnap.MaxLimit, TokensPerMinute: authsnap.MaxLimit, MaxConcurrent: 1 << 20,
		USDPerDay: "1000000", USDPerMonth: "1000000"}
	for _, bc := range []struct {
		name          string
		stale, charge bool
	}{{"fresh", false, false}, {"fresh+charge", false, true}, {"stale", true, false}} {
		b.Run(bc.name, func(b *testing.B) {
			store := runStore(b, rs.addr())
			l := limits.New(limits.Options{Fleet: store})
			l.ChargeInline()
			bd := l.Bind()
			subs := make([]*limits.Subject, keys)
			for i := range subs {
				subs[i] = bd.Subject("k_"+strconv.Itoa(i), "t_"+strconv.Itoa(i%100), big, big)
			}
			bd.Done()
			start := time.Now()
			for _, sub := range subs { // take every lease, read every counter
				tk, _, ok := sub.Admit(start)
				if !ok {
					b.Fatal("refused")
				}
				tk.Release()
			}
			calls := store.Calls()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now := start
				if bc.stale {
					now = time.Now().Add(time.Second)
				}
				tk, _, ok := subs[i].Admit(now)
				if !ok {
					b.Fatal("refused")
				}
				tk.Debit(now, 100)
				if bc.charge {
					tk.Charge(now, 1000)
				}
				tk.Release()
				if i++; i == keys {
					i = 0
				}
			}
			b.ReportMetric(float64(store.Calls()-calls)/float64(b.N), "roundtrips/op")
		})
	}
}
