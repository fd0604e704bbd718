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
// has reached the budget (at once when its own charge told it, at the
// next refresh when another's did); a node that starts mid-window
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
	const sixty = 60 * cent
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
	// a admits on what it knew until the store's refresh (once a
	// second) reads the window again: a admitted by it since.
	fc.Advance(time.Second)
	if err := a.l.FlushBudgets(); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.spendOn(fc, 1); ok {
		t.Fatal("a admitted after a refresh told it the fleet's budget ran out")
	}
	// b, which no refresh told, reads the window again at admission once
	// its view is two refreshes old.
	b.l.ChargeInline()
	fc.Advance(time.Second)
	if _, ok := b.spendOn(fc, 1); ok {
		t.Fatal("b admitted with a view two refreshes old")
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

// TestFleetBudgetRoundTrips: budgets add no round trip per request: a
// busy key's charges wait, owed, for the store's refresh, which sends
// them and reads the windows again for the key and its tenant in one
// round trip; an admission reads (key and tenant in one round trip) only
// when its view is older than two refreshes.
func TestFleetBudgetRoundTrips(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	budgets := authsnap.Limits{USDPerDay: "100", USDPerMonth: "1000"}
	n := newNode(t, rs.addr(), fc, limits.FailLocal, budgets, budgets)
	n.wait(t, true)
	calls := n.store.Calls()
	for range 100 {
		if _, ok := n.spendOn(fc, cent); !ok {
			t.Fatal("refused")
		}
	}
	if got := n.store.Calls() - calls; got != 1 {
		t.Fatalf("%d round trips for 100 requests, want 1 (the first admission reads key and tenant)", got)
	}
	// The refresh a second on: one round trip sends the dollar and reads.
	fc.Advance(time.Second)
	if err := n.l.FlushBudgets(); err != nil {
		t.Fatal(err)
	}
	if got := n.store.Calls() - calls; got != 2 {
		t.Fatalf("%d round trips after the refresh, want 2", got)
	}
	for _, k := range []string{"k:k1:usd:d:", "t:t1:usd:d:"} {
		if got, _ := rs.do("GET scootgate:limits:" + k + strconv.FormatInt(fc.Now().Unix()/86400, 10)); got != strconv.FormatInt(int64(usd.Dollar), 10) {
			t.Errorf("%s counter %s, want the dollar spent", k, got)
		}
	}
	// Busy: admitted a second after the refresh, by its view.
	fc.Advance(time.Second)
	if _, ok := n.spendOn(fc, cent); !ok {
		t.Fatal("refused")
	}
	if got := n.store.Calls() - calls; got != 2 {
		t.Fatalf("%d round trips, want still 2", got)
	}
	// Idle for longer than two refreshes: one read for key and tenant.
	fc.Advance(3 * time.Second)
	if _, ok := n.spendOn(fc, cent); !ok {
		t.Fatal("refused")
	}
	if got := n.store.Calls() - calls; got != 3 {
		t.Fatalf("%d round trips, want 3", got)
	}
}

// BenchmarkAdmitRedisBudget is BenchmarkAdmitRedis with day and month
// budgets on the key and the tenant; round trips include the store's
// refresh (flushBudgets, once a second, in the background). "fresh":
// every admission at the bind's instant (no view ages); "fresh+charge":
// each attempt's charge too (owed, sent by the refresh); "stale": on the
// real clock plus a second, 10000 keys visited in turn (each seen about
// every half second: the refresh keeps their views fresh); "idle": plus
// three seconds, so that every view is older than two refreshes (each
// admission reads its key's and tenant's counters); "reserve": budgets
// in reservation mode (grants), with the charge.
func BenchmarkAdmitRedisBudget(b *testing.B) {
	rs := startRedis(b)
	const keys = 10000
	big := authsnap.Limits{RequestsPerMinute: authsnap.MaxLimit, TokensPerMinute: authsnap.MaxLimit, MaxConcurrent: 1 << 20,
		USDPerDay: "1000000", USDPerMonth: "1000000"}
	for _, bc := range []struct {
		name    string
		ahead   time.Duration // 0: the bind's instant; else the real clock plus this
		charge  bool
		reserve bool
	}{{"fresh", 0, false, false}, {"fresh+charge", 0, true, false}, {"stale", time.Second, false, false},
		{"idle", 3 * time.Second, false, false}, {"reserve", 0, true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			store := runStore(b, rs.addr())
			start := time.Now()
			clk := func() time.Time { return start } // the store's refresh reads the admissions' clock
			if bc.ahead != 0 {
				clk = func() time.Time { return time.Now().Add(bc.ahead) }
			}
			l := limits.New(limits.Options{Fleet: store, Clock: clk})
			lim := big
			if bc.reserve {
				lim.BudgetMode = authsnap.BudgetReserve
			}
			bd := l.Bind()
			subs := make([]*limits.Subject, keys)
			for i := range subs {
				subs[i] = bd.Subject("k_"+strconv.Itoa(i), "t_"+strconv.Itoa(i%100), lim, lim)
			}
			bd.Done()
			for _, sub := range subs { // take every lease, read every counter
				tk, _, ok := sub.AdmitReserve(clk(), 1000)
				if !ok {
					b.Fatal("refused")
				}
				tk.Release()
			}
			calls := store.Calls()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now := clk()
				tk, _, ok := subs[i].AdmitReserve(now, 1000)
				if !ok {
					b.Fatal("refused")
				}
				tk.Debit(now, 100)
				if bc.charge {
					tk.Charge(now, 700)
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

// TestFleetRoundTripsBudgets counts the round trips to Redis per request
// of 1000 keys over 10 tenants with every rate limit fleet-wide, with
// and without day and month budgets on keys and tenants, on the fake
// clock (the counts do not depend on the machine's speed), the store's
// refresh run by hand every simulated second: "busy", every key a
// request every 100 ms for 5 s; "sparse", every 5 s for 30 s (views of
// the budgets' spend go stale between requests). After each key's first
// request (the first takes of its leases and slots, and the first read
// of its budgets), budgets must add no round trip per request beyond
// the rate limits', beside the refresh's batches (a round trip for each
// 256 windows the node admitted by in the last minute, once a second).
func TestFleetRoundTripsBudgets(t *testing.T) {
	rs := startRedis(t)
	const keys, tenants = 1000, 10
	rate := authsnap.Limits{RequestsPerMinute: authsnap.MaxLimit, TokensPerMinute: authsnap.MaxLimit, MaxConcurrent: 1 << 20}
	budgets := rate
	budgets.USDPerDay, budgets.USDPerMonth = "1000000", "1000000"
	reserve := budgets
	reserve.BudgetMode = authsnap.BudgetReserve
	for _, regime := range []struct {
		name       string
		every, run time.Duration
	}{{"busy", 100 * time.Millisecond, 5 * time.Second}, {"sparse", 5 * time.Second, 30 * time.Second}} {
		perRequest := map[string]float64{}
		for _, cfg := range []struct {
			name string
			lim  authsnap.Limits
		}{{"rate limits", rate}, {"+ budgets", budgets}, {"+ budgets, reserve", reserve}} {
			fc := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
			n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{}, authsnap.Limits{})
			n.wait(t, true)
			bd := n.l.Bind()
			subs := make([]*limits.Subject, keys)
			for i := range subs {
				// Keys and tenants of their own per run: nothing carries over.
				subs[i] = bd.Subject(regime.name+cfg.name+"k"+strconv.Itoa(i), regime.name+cfg.name+"t"+strconv.Itoa(i%tenants), cfg.lim, cfg.lim)
			}
			bd.Done()
			before := n.store.Calls()
			var calls, requests, first, flushes int64
			end := fc.Now().Add(regime.run)
			nextRefresh := fc.Now().Add(time.Second)
			for pass := 0; fc.Now().Before(end); pass++ {
				if pass == 1 {
					// The first pass is each key's first request on
					// the node: its first takes, and the first read of
					// its budgets' windows.
					first, calls, requests, flushes = n.store.Calls(), n.store.Calls(), 0, 0
				}
				for _, sub := range subs {
					tk, _, ok := sub.AdmitReserve(fc.Now(), cent)
					if !ok {
						t.Fatal("refused")
					}
					requests++
					tk.Debit(fc.Now(), 100)
					tk.Charge(fc.Now(), cent/2)
					tk.Release()
				}
				next := fc.Now().Add(regime.every)
				for !next.Before(nextRefresh) {
					fc.Set(nextRefresh)
					if err := n.l.RefreshHolds(); err != nil {
						t.Fatal(err)
					}
					c := n.store.Calls()
					if err := n.l.FlushBudgets(); err != nil {
						t.Fatal(err)
					}
					flushes += n.store.Calls() - c
					nextRefresh = nextRefresh.Add(time.Second)
				}
				fc.Set(next)
			}
			perRequest[cfg.name] = float64(n.store.Calls()-calls-flushes) / float64(requests)
			t.Logf("%s, %s: first request of each key %.2f round trips; then %d requests, %.4f round trips per request, and the refresh's budget batches %.1f a second",
				regime.name, cfg.name, float64(first-before)/keys, requests, perRequest[cfg.name], float64(flushes)/(regime.run-regime.every).Seconds())
		}
		for _, c := range []string{"+ budgets", "+ budgets, reserve"} {
			if perRequest[c] > perRequest["rate limits"]+0.01 {
				t.Errorf("%s, %s: %.4f round trips per request, rate limits alone %.4f", regime.name, c, perRequest[c], perRequest["rate limits"])
			}
		}
	}
}

// TestFleetBudgetWindowBoundaries: on the fleet's counters a window ends
// on the instant, at the end of a leap day that is also the end of
// February: at 23:59:59 the spent day refuses for a second (and the
// spent month likewise); at 00:00:00 on March 1st both are new counters.
// A charge made at 23:59:59 and sent after midnight (the refresh) goes
// to February's counters, not March's.
func TestFleetBudgetWindowBoundaries(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2028, 2, 29, 23, 59, 58, 0, time.UTC))
	a := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{USDPerDay: "1"}, authsnap.Limits{USDPerMonth: "2"})
	a.wait(t, true)
	get := func(k string) string {
		out, _ := rs.do("GET scootgate:limits:" + k)
		return out
	}
	const feb29, march1 = "k:k1:usd:d:21243", "k:k1:usd:d:21244" // days since 1970-01-01
	const feb, march = "t:t1:usd:m:24337", "t:t1:usd:m:24338"    // months since January of year 0
	open, _, ok := a.sub.Admit(fc.Now())                         // its attempt ends at 23:59:59.5
	if !ok {
		t.Fatal("refused")
	}
	if st, ok := a.spendOn(fc, usd.Dollar); !ok || st.Budget.Reset != 2*time.Second {
		t.Fatalf("23:59:58: ok %v, budget %+v", ok, st.Budget)
	}
	fc.Advance(time.Second) // 23:59:59
	_, st, ok := a.sub.Admit(fc.Now())
	if ok || st.Scope != limits.ScopeKey || st.RetryAfter != time.Second {
		t.Fatalf("23:59:59: ok %v, %s retry %s; want the key's day refusing for 1s", ok, st.Scope, st.RetryAfter)
	}
	if err := a.l.FlushBudgets(); err != nil {
		t.Fatal(err)
	}
	if got := get(feb29); got != strconv.FormatInt(int64(usd.Dollar), 10) {
		t.Fatalf("February 29th's counter %s, want the dollar", got)
	}
	// Another node spent the rest of February's tenant budget.
	if _, err := rs.do("INCRBY scootgate:limits:" + feb + " " + strconv.FormatInt(int64(usd.Dollar), 10)); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Second / 2) // 23:59:59.5
	b := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{}, authsnap.Limits{USDPerMonth: "2"})
	b.wait(t, true)
	_, st, ok = b.sub.Admit(fc.Now())
	if ok || st.Scope != limits.ScopeTenant || st.RetryAfter != time.Second/2 {
		t.Fatalf("23:59:59.5 on another key: ok %v, %s retry %s; want the tenant's month refusing for 0.5s", ok, st.Scope, st.RetryAfter)
	}
	// The request a admitted at 23:59:58 ends now; its charge is sent
	// after midnight.
	open.Charge(fc.Now(), 10*cent)
	open.Release()
	fc.Set(time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC))
	st, ok = a.spendOn(fc, 30*cent)
	if !ok || st.Budget.Remaining != usd.Dollar || st.Budget.Reset != 24*time.Hour {
		t.Fatalf("March 1st 00:00:00: ok %v, budget %+v; want a whole new day", ok, st.Budget)
	}
	if _, ok := b.spendOn(fc, 0); !ok {
		t.Fatal("March 1st: the tenant's new month refused")
	}
	if err := a.l.FlushBudgets(); err != nil {
		t.Fatal(err)
	}
	if got, want := get(march1), strconv.FormatInt(int64(30*cent), 10); got != want {
		t.Errorf("March 1st's counter %s, want %s", got, want)
	}
	if got, want := get(march), strconv.FormatInt(int64(30*cent), 10); got != want {
		t.Errorf("March's tenant counter %s, want %s", got, want)
	}
	if got, want := get(feb), strconv.FormatInt(int64(2*usd.Dollar+10*cent), 10); got != want {
		t.Errorf("February's tenant counter %s, want %s (the late charge in it)", got, want)
	}
	if got, want := get(feb29), strconv.FormatInt(int64(usd.Dollar+10*cent), 10); got != want {
		t.Errorf("February 29th's counter %s, want %s (the late charge in it)", got, want)
	}
}
