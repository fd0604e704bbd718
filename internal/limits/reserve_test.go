package limits_test

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usd"
)

const cent = usd.Dollar / 100

// TestReserveLocal: on the local store a reserving budget admits a
// request only if its worst case fits beside the spend and the
// reservations in flight, and settles to what the request cost.
func TestReserveLocal(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	sub := budgetSubject(t, clk, 1, authsnap.Limits{USDPerDay: "1", BudgetMode: authsnap.BudgetReserve}, authsnap.Limits{})
	if !sub.Reserves() {
		t.Fatal("Reserves() = false for a reserving budget")
	}
	a, st, ok := sub.AdmitReserve(clk.Now(), 60*cent)
	if !ok || st.Budget.Remaining != 40*cent {
		t.Fatalf("first: ok %v, budget %+v; want admitted with $0.40 left", ok, st.Budget)
	}
	// $0.60 held: a request whose worst case is $0.50 does not fit.
	if _, st, ok := sub.AdmitReserve(clk.Now(), 50*cent); ok || st.Kind != limits.KindBudget || st.RetryAfter != 14*time.Hour {
		t.Fatalf("beside the reservation: ok %v, %s retry %s; want a budget refusal for 14h", ok, st.Kind, st.RetryAfter)
	}
	b, _, ok := sub.AdmitReserve(clk.Now(), 40*cent)
	if !ok {
		t.Fatal("a request that fits exactly was refused")
	}
	// a costs $0.10: $0.50 of its reservation comes back.
	a.Charge(clk.Now(), 10*cent)
	a.Release()
	c, st, ok := sub.AdmitReserve(clk.Now(), 50*cent)
	if !ok || st.Budget.Remaining != 0 {
		t.Fatalf("after the settlement: ok %v, budget %+v; want admitted, nothing left", ok, st.Budget)
	}
	c.Release() // cost nothing
	b.Charge(clk.Now(), 40*cent)
	b.Release()
	// $0.50 spent: a plain Admit holds a picodollar, and fits.
	if _, st, ok := sub.Admit(clk.Now()); !ok || st.Budget.Remaining != 50*cent-1 {
		t.Fatalf("plain Admit: ok %v, budget %+v", ok, st.Budget)
	}
}

// TestReserveLocalWindowBoundary: a request reserved at 23:59:59 that
// ends after midnight is charged to the day it was reserved in; the new
// day starts from zero, with nothing held.
func TestReserveLocalWindowBoundary(t *testing.T) {
	clk := clock.NewFake(time.Date(2028, 2, 28, 23, 59, 59, 0, time.UTC)) // the eve of a leap day
	sub := budgetSubject(t, clk, 1, authsnap.Limits{USDPerDay: "1", USDPerMonth: "1.5", BudgetMode: authsnap.BudgetReserve}, authsnap.Limits{})
	tk, _, ok := sub.AdmitReserve(clk.Now(), 90*cent)
	if !ok {
		t.Fatal("refused")
	}
	if _, st, ok := sub.AdmitReserve(clk.Now(), 20*cent); ok || st.RetryAfter != time.Second {
		t.Fatalf("at 23:59:59: ok %v, retry %s; want refused until midnight", ok, st.RetryAfter)
	}
	clk.Advance(2 * time.Second) // 2028-02-29 00:00:01
	tk.Charge(clk.Now(), 80*cent)
	tk.Release()
	// The leap day is a new day ($1 left) in the same month ($0.70 left).
	_, st, ok := sub.AdmitReserve(clk.Now(), 70*cent)
	if !ok || st.Budget.Limit != 150*cent || st.Budget.Remaining != 0 || st.Budget.Reset != 24*time.Hour-time.Second {
		t.Fatalf("on the leap day: ok %v, budget %+v; want the month's $0.70, all held, until March 1st", ok, st.Budget)
	}
	if _, _, ok := sub.AdmitReserve(clk.Now(), 1); ok {
		t.Fatal("admitted beyond February's budget")
	}
	clk.Set(time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC))
	if _, st, ok := sub.AdmitReserve(clk.Now(), 1); !ok || st.Budget.Remaining != usd.Dollar-1 {
		t.Fatalf("March 1st: ok %v, budget %+v; want a new day and month", ok, st.Budget)
	}
}

// reserveNode is a node of TestFleetReserveNeverOver with a reserving
// day budget on the key and a reserving month budget on the tenant.
func reserveNodes(t *testing.T, n int, rs *redisServer, fc *clock.Fake, key, tenant authsnap.Limits) []*node {
	ns := make([]*node, n)
	for i := range ns {
		ns[i] = newNode(t, rs.addr(), fc, limits.FailLocal, key, tenant)
		ns[i].wait(t, true)
	}
	return ns
}

// TestFleetReserveNeverOver: two nodes on one Redis, 24 clients offering
// five times what the key's budget allows at once: the requests admitted
// never cost more than the budget, whatever they cost up to their worst
// case; the budget's last cents are still admitted, and once the nodes
// have given their unused grants back the fleet's counter is exactly what
// they spent.
func TestFleetReserveNeverOver(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	const budget = usd.Dollar
	key := authsnap.Limits{USDPerDay: "1", BudgetMode: authsnap.BudgetReserve}
	tenant := authsnap.Limits{USDPerMonth: "100", BudgetMode: authsnap.BudgetReserve}
	ns := reserveNodes(t, 2, rs, fc, key, tenant)
	const worst = cent
	const offered = 5 * budget / worst // requests, each up to a cent
	var (
		spent, admitted, next atomic.Int64
		wg                    sync.WaitGroup
	)
	for g := range 24 {
		n := ns[g%2]
		rng := rand.New(rand.NewPCG(uint64(g), 44))
		wg.Go(func() {
			for next.Add(1) <= int64(offered) {
				tk, st, ok := n.sub.AdmitReserve(fc.Now(), worst)
				if !ok {
					if st.Kind != limits.KindBudget {
						t.Errorf("refused by %s, want budget", st.Kind)
					}
					continue
				}
				admitted.Add(1)
				// Up to the worst case, in two attempts sometimes.
				cost := usd.Amount(rng.Int64N(int64(worst) + 1))
				part := cost / usd.Amount(1+rng.IntN(2))
				tk.Charge(fc.Now(), part)
				tk.Charge(fc.Now(), cost-part)
				spent.Add(int64(cost))
				tk.Release()
			}
		})
	}
	wg.Wait()
	if got := usd.Amount(spent.Load()); got > budget {
		t.Fatalf("the fleet admitted requests costing %s of a %s budget (%d admitted)", got, budget, admitted.Load())
	}
	t.Logf("burst: %d of %d offered admitted, %s spent", admitted.Load(), offered, usd.Amount(spent.Load()))
	// What is left is admitted to the cent, and no more: a node refused
	// while the other holds a grant gets it once that node has given it
	// back (idle for a refresh, the counter above half the budget).
	for range 2 {
		fc.Advance(time.Second)
		for _, n := range ns {
			if err := n.l.FlushBudgets(); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range ns {
			for {
				tk, _, ok := n.sub.AdmitReserve(fc.Now(), worst)
				if !ok {
					break
				}
				tk.Charge(fc.Now(), worst)
				spent.Add(int64(worst))
				tk.Release()
			}
		}
	}
	// Idle for a refresh: both nodes give back what they hold unused,
	// and the counter is what they spent.
	fc.Advance(time.Second)
	for _, n := range ns {
		if err := n.l.FlushBudgets(); err != nil {
			t.Fatal(err)
		}
	}
	day := "scootgate:limits:k:k1:usd:d:" + strconv.FormatInt(fc.Now().Unix()/86400, 10)
	if got, _ := rs.do("GET " + day); got != strconv.FormatInt(spent.Load(), 10) {
		t.Fatalf("day counter %s after the grants came back, want the spend %d", got, spent.Load())
	}
	if got := usd.Amount(spent.Load()); got > budget || budget-got >= worst {
		t.Fatalf("spent %s of %s after the last cents: want within a cent of the budget, never above", got, budget)
	}
}

// TestFleetReserveSettles: a request's reservation comes back to its
// node when it costs less; spend beyond the worst case (an attempt that
// cost more than it could be expected to) is owed and paid to the
// fleet's counter by the next refresh; a grant the node stops using goes
// back to the counter once the counter holds more than half the budget
// (below, it is kept, and only read); a request reserved before midnight
// is charged to the day it was reserved in.
func TestFleetReserveSettles(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 12, 31, 23, 59, 57, 0, time.UTC))
	key := authsnap.Limits{USDPerDay: "0.5", BudgetMode: authsnap.BudgetReserve} // grants of 2.5 cents
	a := reserveNodes(t, 1, rs, fc, key, authsnap.Limits{})[0]
	day := func() string {
		out, _ := rs.do("GET scootgate:limits:k:k1:usd:d:" + strconv.FormatInt(fc.Now().Unix()/86400, 10))
		return out
	}
	flush := func() {
		t.Helper()
		if err := a.l.FlushBudgets(); err != nil {
			t.Fatal(err)
		}
	}
	tk, st, ok := a.sub.AdmitReserve(fc.Now(), 10*cent)
	if !ok || st.Budget.Remaining != 40*cent {
		t.Fatalf("ok %v, budget %+v; want 40 cents left", ok, st.Budget)
	}
	if got := day(); got != strconv.FormatInt(int64(10*cent), 10) {
		t.Fatalf("counter %s after the first grant, want what the request needed, 10 cents", got)
	}
	tk.Charge(fc.Now(), 30*cent) // beyond the worst case
	tk.Release()
	flush()
	if got := day(); got != strconv.FormatInt(int64(30*cent), 10) {
		t.Fatalf("counter %s after the refresh, want the 30 cents spent", got)
	}
	// A grant of 2.5 cents, a cent of it reserved and given back.
	tk, _, ok = a.sub.AdmitReserve(fc.Now(), cent)
	if !ok {
		t.Fatal("refused")
	}
	tk.Release()
	if got := day(); got != strconv.FormatInt(int64(32*cent+cent/2), 10) {
		t.Fatalf("counter %s, want 32.5 cents", got)
	}
	fc.Advance(time.Second) // 23:59:58, the grant unused for a refresh, the counter above half the budget
	flush()
	if got := day(); got != strconv.FormatInt(int64(30*cent), 10) {
		t.Fatalf("counter %s after the unused grant went back, want 30 cents", got)
	}
	// A reservation at 23:59:59 that ends in the new year is charged to
	// the old day; the new day's counter starts with the next grant.
	fc.Advance(time.Second)
	tk, _, ok = a.sub.AdmitReserve(fc.Now(), 10*cent)
	if !ok {
		t.Fatal("refused")
	}
	old := day()
	fc.Advance(time.Second) // 2027-01-01 00:00:00
	tk.Charge(fc.Now(), 5*cent)
	tk.Release()
	if got := day(); got != "$-1" {
		t.Fatalf("the new day's counter is %q before any grant of it", got)
	}
	if _, st, ok := a.sub.AdmitReserve(fc.Now(), 10*cent); !ok || st.Budget.Remaining != 40*cent || st.Budget.Reset != 24*time.Hour {
		t.Fatalf("new day: ok %v, budget %+v; want 40 cents of a fresh day", ok, st.Budget)
	}
	if old != strconv.FormatInt(int64(40*cent), 10) {
		t.Errorf("old day's counter %s with the last grant, want 40 cents", old)
	}
}

// TestFleetReserveKeepsUncontendedGrant: a grant a node does not use is
// kept while the counter holds at most half the budget: a key seen every
// few seconds costs no round trip per request; the refresh reads the
// counter instead.
func TestFleetReserveKeepsUncontendedGrant(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	key := authsnap.Limits{USDPerDay: "20", BudgetMode: authsnap.BudgetReserve} // grants of $1
	a := reserveNodes(t, 1, rs, fc, key, authsnap.Limits{})[0]
	calls := a.store.Calls()
	for range 10 {
		tk, _, ok := a.sub.AdmitReserve(fc.Now(), 5*cent)
		if !ok {
			t.Fatal("refused")
		}
		tk.Charge(fc.Now(), cent)
		tk.Release()
		fc.Advance(5 * time.Second)
	}
	if got := a.store.Calls() - calls; got != 1 {
		t.Fatalf("%d round trips for 10 requests 5 s apart, want 1 (the grant)", got)
	}
	if err := a.l.FlushBudgets(); err != nil {
		t.Fatal(err)
	}
	if got, _ := rs.do("GET scootgate:limits:k:k1:usd:d:" + strconv.FormatInt(fc.Now().Unix()/86400, 10)); got != strconv.FormatInt(int64(usd.Dollar), 10) {
		t.Errorf("counter %s, want the $1 grant kept", got)
	}
}

// TestFleetReserveOutage: while Redis is down a reserving budget holds
// reservations against the node's share (on_store_failure local), and
// what those requests cost is charged to the fleet's counter once Redis
// answers again; with on_store_failure closed nothing is admitted.
func TestFleetReserveOutage(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	key := authsnap.Limits{USDPerDay: "1", BudgetMode: authsnap.BudgetReserve}
	a := reserveNodes(t, 1, rs, fc, key, authsnap.Limits{})[0]
	closed := newNode(t, rs.addr(), fc, limits.FailClosed, key, authsnap.Limits{})
	closed.wait(t, true)
	rs.stop()
	tk, _, ok := a.sub.AdmitReserve(fc.Now(), 10*cent) // finds the store down, falls back
	if !ok {
		t.Fatal("refused with on_store_failure local")
	}
	a.wait(t, false)
	if _, _, ok := a.sub.AdmitReserve(fc.Now(), 95*cent); ok {
		t.Fatal("the local share admitted a worst case beside the reservation beyond the budget")
	}
	tk.Charge(fc.Now(), 7*cent)
	tk.Release()
	if _, st, ok := closed.sub.AdmitReserve(fc.Now(), cent); ok || st.Kind != limits.KindStore {
		t.Fatalf("on_store_failure closed: ok %v, %s; want a store refusal", ok, st.Kind)
	}
	rs.start(t)
	a.wait(t, true)
	fc.Advance(time.Second)
	if err := a.l.FlushBudgets(); err != nil {
		t.Fatal(err)
	}
	if got, _ := rs.do("GET scootgate:limits:k:k1:usd:d:" + strconv.FormatInt(fc.Now().Unix()/86400, 10)); got != strconv.FormatInt(int64(7*cent), 10) {
		t.Fatalf("counter %s after the outage, want the 7 cents spent meanwhile", got)
	}
}

// TestFleetReserveRefusalsWait: once the counter refused a grant, the
// node refuses requests that need as much without asking again until the
// next refresh: a key offered far more than its budget costs a round
// trip a second, not one per request.
func TestFleetReserveRefusalsWait(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	key := authsnap.Limits{USDPerDay: "0.1", BudgetMode: authsnap.BudgetReserve}
	a := reserveNodes(t, 1, rs, fc, key, authsnap.Limits{})[0]
	tk, _, ok := a.sub.AdmitReserve(fc.Now(), 10*cent) // the whole budget
	if !ok {
		t.Fatal("refused")
	}
	defer tk.Release()
	calls := a.store.Calls()
	for range 100 {
		if _, st, ok := a.sub.AdmitReserve(fc.Now(), cent); ok || st.Kind != limits.KindBudget {
			t.Fatalf("ok %v, %s; want a budget refusal", ok, st.Kind)
		}
	}
	if got := a.store.Calls() - calls; got != 1 {
		t.Fatalf("%d round trips for 100 refusals, want 1", got)
	}
	fc.Advance(time.Second)
	if _, _, ok := a.sub.AdmitReserve(fc.Now(), cent); ok {
		t.Fatal("admitted beyond the budget")
	}
	if got := a.store.Calls() - calls; got != 2 {
		t.Fatalf("%d round trips a second later, want 2", got)
	}
}

// TestFleetReserveLowered: a snapshot that lowers a reserving budget
// applies to the grant the node holds at once: the grant goes back to
// the counter with the next refresh, and the node reserves from the new
// budget only.
func TestFleetReserveLowered(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	a := reserveNodes(t, 1, rs, fc, authsnap.Limits{USDPerDay: "20", BudgetMode: authsnap.BudgetReserve}, authsnap.Limits{})[0]
	tk, _, ok := a.sub.AdmitReserve(fc.Now(), 5*cent) // a grant of $1
	if !ok {
		t.Fatal("refused")
	}
	tk.Charge(fc.Now(), 5*cent)
	tk.Release()
	b := a.l.Bind()
	a.sub = b.Subject("k1", "t1", authsnap.Limits{USDPerDay: "0.1", BudgetMode: authsnap.BudgetReserve}, authsnap.Limits{})
	b.Done()
	// The $1 grant is still in the counter: the new budget has nothing
	// to grant until it goes back.
	if _, _, ok := a.sub.AdmitReserve(fc.Now(), 6*cent); ok {
		t.Fatal("reserved 6 cents from the old grant beyond a lowered budget of 10 cents, 5 spent")
	}
	fc.Advance(time.Second)
	if err := a.l.FlushBudgets(); err != nil {
		t.Fatal(err)
	}
	if _, st, ok := a.sub.AdmitReserve(fc.Now(), 5*cent); !ok || st.Budget.Remaining != 0 {
		t.Fatalf("after the refresh: ok %v, budget %+v; want the last 5 cents reserved", ok, st.Budget)
	}
}

// TestFleetReserveSwitchedOff: a request admitted through the Subject of
// a snapshot whose budget reserved, after a snapshot that made it charge,
// takes no grant: it is charged, and the counter holds its spend only.
func TestFleetReserveSwitchedOff(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	a := reserveNodes(t, 1, rs, fc, authsnap.Limits{USDPerDay: "20", BudgetMode: authsnap.BudgetReserve}, authsnap.Limits{})[0]
	old := a.sub
	b := a.l.Bind()
	a.sub = b.Subject("k1", "t1", authsnap.Limits{USDPerDay: "20"}, authsnap.Limits{})
	b.Done()
	tk, _, ok := old.AdmitReserve(fc.Now(), 5*cent)
	if !ok {
		t.Fatal("refused")
	}
	tk.Charge(fc.Now(), 3*cent)
	tk.Release()
	fc.Advance(time.Second)
	if err := a.l.FlushBudgets(); err != nil {
		t.Fatal(err)
	}
	if got, _ := rs.do("GET scootgate:limits:k:k1:usd:d:" + strconv.FormatInt(fc.Now().Unix()/86400, 10)); got != strconv.FormatInt(int64(3*cent), 10) {
		t.Fatalf("counter %s, want the 3 cents spent", got)
	}
}
