package limits

import (
	"math/big"
	"time"

	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usd"
)

// Budgets (docs/limits.md "Budgets") are cumulative spend in UTC calendar
// windows: what the attempts of a key, or of a tenant's keys, cost since
// the start of the current UTC day and month. Unlike the per-minute
// limits they do not refill: the spend starts again from zero at the
// window's end, and a refusal's Retry-After is the time until then.

// span is a budget's calendar window: the UTC day or the UTC month.
type span uint8

const (
	spanDay span = iota
	spanMonth
	numSpans
)

// windowOf returns the number of the window of kind sp that holds t: days
// since 1970-01-01 UTC, or months since January of year 0.
func windowOf(sp span, t time.Time) int64 {
	if sp == spanDay {
		s := t.Unix()
		d := s / 86400
		if s < 0 && s%86400 != 0 {
			d--
		}
		return d
	}
	t = t.UTC()
	return int64(t.Year())*12 + int64(t.Month()) - 1
}

// windowEnd returns when window w of kind sp ends (the next one starts).
func windowEnd(sp span, w int64) time.Time {
	if sp == spanDay {
		return time.Unix((w+1)*86400, 0).UTC()
	}
	y, m := (w+1)/12, (w+1)%12
	return time.Date(int(y), time.Month(m+1), 1, 0, 0, 0, 0, time.UTC)
}

// spend is what one key or tenant spent in its current window of one
// kind.
type spend struct {
	budget usd.Amount // this node's share of the budget; 0 = none
	full   usd.Amount // the budget before the share (the fleet's)
	window int64      // windowOf of the last roll
	spent  usd.Amount // in window, by this node (local store)
	held   usd.Amount // reserved by this node's requests in flight, reservation mode (reserve.go)
}

// roll starts a new window when t is in a later one than s holds. A t in
// an earlier one (clocks of concurrent callers) keeps the current window.
func (s *spend) roll(sp span, t time.Time) {
	if w := windowOf(sp, t); w > s.window {
		s.window, s.spent, s.held = w, 0, 0
	}
}

// budgets reads a Limits' budgets; validation made them valid decimals.
func budgets(lim authsnap.Limits) [numSpans]usd.Amount {
	var b [numSpans]usd.Amount
	if lim.USDPerDay != "" {
		b[spanDay], _ = usd.ParseBudget(lim.USDPerDay)
	}
	if lim.USDPerMonth != "" {
		b[spanMonth], _ = usd.ParseBudget(lim.USDPerMonth)
	}
	return b
}

// shareOf is floor(a × share), at least one picodollar when a > 0, in
// exact rational arithmetic (share is the float the configuration gave;
// the product of two floats would round the budget).
func shareOf(a usd.Amount, share float64) usd.Amount {
	if a <= 0 || share >= 1 {
		return a
	}
	r := new(big.Rat).SetFloat64(share)
	if r == nil {
		return a
	}
	r.Mul(r, new(big.Rat).SetInt64(int64(a)))
	q := new(big.Int).Quo(r.Num(), r.Denom())
	return max(1, usd.Amount(q.Int64()))
}

// updateBudgets applies a snapshot's budgets: a changed budget keeps the
// window's spend (a raised budget lets the key go on at once; a lowered
// one may refuse it at once).
//
// A budget that stops reserving, or is lowered, gives back to the fleet's
// counters what the node held of its grants.
func (s *state) updateBudgets(full [numSpans]usd.Amount, reserve bool, share float64, now time.Time) {
	for sp := range numSpans {
		b := &s.spend[sp]
		b.roll(sp, now)
		if s.reserve && (!reserve || full[sp] < b.full) {
			// What the node holds of the counter goes back to it (the
			// refresh sends it): a lowered budget applies to the grants
			// at once, and a charging one counts spend only.
			f := &s.fleet[sp]
			f.owed -= f.bal
			f.bal = 0
		}
		b.full, b.budget = full[sp], shareOf(full[sp], share)
	}
	s.reserve = reserve && s.hasBudget()
}

// hasBudget reports whether s has a budget of either kind.
func (s *state) hasBudget() bool {
	return s.spend[spanDay].budget > 0 || s.spend[spanMonth].budget > 0
}

// checkBudget records in st the refusal s's budgets cause at now: a
// window whose spend has reached its budget refuses until it ends.
func (s *state) checkBudget(scope Scope, now time.Time, st *Status) {
	for sp := range numSpans {
		b := &s.spend[sp]
		if b.budget == 0 {
			continue
		}
		b.roll(sp, now)
		if usd.Add(b.spent, b.held) >= b.budget {
			st.refuse(scope, KindBudget, windowEnd(sp, b.window).Sub(now))
		}
	}
}

// reportBudget folds s's budgets into st, keeping the one with the least
// remaining.
func (s *state) reportBudget(now time.Time, st *Status) {
	for sp := range numSpans {
		b := &s.spend[sp]
		if b.budget == 0 {
			continue
		}
		rem := max(0, b.budget-usd.Add(b.spent, b.held))
		if st.Budget.Limit != 0 && rem >= st.Budget.Remaining {
			continue
		}
		st.Budget = BudgetWindow{Limit: b.budget, Remaining: rem, Reset: windowEnd(sp, b.window).Sub(now)}
	}
}

// charge adds cost to s's windows at now (the end of the attempt that
// spent it).
func (s *state) charge(cost usd.Amount, now time.Time) {
	for sp := range numSpans {
		b := &s.spend[sp]
		if b.budget == 0 {
			continue
		}
		b.roll(sp, now)
		b.spent = usd.Add(b.spent, cost)
	}
}

// BudgetWindow is a budget as a client is shown it: the binding one of
// the key's and its tenant's, day and month (the least remaining).
type BudgetWindow struct {
	Limit     usd.Amount    // the node's share of the budget; 0 = no budget
	Remaining usd.Amount    // what is left in the window, ≥ 0
	Reset     time.Duration // until the window ends
}

// Charge adds the cost of one attempt to the key's and the tenant's
// budgets; now is when the attempt ended, and picks the windows. Call it
// when the attempt ends, with its cost (docs/usage-events.md "Cost"); the
// spend may pass the budget (requests in flight when it ran out), and the
// next request is refused until the window ends.
func (t Ticket) Charge(now time.Time, cost usd.Amount) {
	if t.l == nil || cost <= 0 {
		return
	}
	if t.r != nil {
		t.r.spent.Add(int64(cost))
	}
	for _, s := range [2]*state{t.key, t.tenant} {
		if s == nil {
			continue
		}
		s.mu.Lock()
		budgeted := s.hasBudget()
		reserved := t.r != nil && (t.r.states[0] == s || t.r.states[1] == s)
		send := budgeted && !s.reserve
		switch {
		case !budgeted:
		case reserved:
			// docs/limits.md "Reservations": charged to the windows the
			// reservation was taken in; the fleet's counters hold the
			// reservation, settled when the request ends.
			s.chargeReserved(cost, t.r)
		default:
			s.charge(cost, now) // the local count: the fallback while the store is down
			if t.l.fleet != nil {
				s.chargeFleet(cost, now)
			}
		}
		s.mu.Unlock()
		if send && t.l.chargeInline && t.l.fleet != nil && t.l.fleet.Up() {
			t.l.syncFleet([2]*state{s}, now, true)
		}
	}
	// Otherwise the charge waits, owed, for the next admission that reads
	// the window, or the store's refresh within budgetRefresh: it costs
	// no round trip of its own (docs/limits.md "Budgets across the
	// fleet").
}

// chargeReserved adds cost to the local count of the windows r was
// taken in (the fallback while the store is down), if they have not
// ended.
func (s *state) chargeReserved(cost usd.Amount, r *reservation) {
	for sp := range numSpans {
		b := &s.spend[sp]
		if b.budget != 0 && b.window == r.window[sp] {
			b.spent = usd.Add(b.spent, cost)
		}
	}
}

// syncBudgets brings what the node knows of the fleet's spend of the
// key's and tenant's windows up to date, in one round trip, when it is
// older than budgetStale; false when the store failed.
func (sub *Subject) syncBudgets(now time.Time) bool {
	return sub.l.syncFleet([2]*state{sub.key, sub.tenant}, now, false)
}

// checkBudgetsFleet is checkBudgets against the fleet's spend.
func (sub *Subject) checkBudgetsFleet(now time.Time) (st Status) {
	ks, ts := sub.key, sub.tenant
	if ks != nil {
		ks.mu.Lock()
		defer ks.mu.Unlock()
		ks.checkBudgetFleet(ScopeKey, now, &st)
	}
	if ts != nil {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.checkBudgetFleet(ScopeTenant, now, &st)
	}
	return st
}

// checkBudgets checks the key's and its tenant's budgets at now: a
// refusal (KindBudget, Retry-After the end of the spent window) or, in
// Budget, the binding budget.
func (sub *Subject) checkBudgets(now time.Time) (st Status) {
	ks, ts := sub.key, sub.tenant
	// Key before tenant, always: one lock order for every request.
	if ks != nil {
		ks.mu.Lock()
		defer ks.mu.Unlock()
		ks.checkBudget(ScopeKey, now, &st)
	}
	if ts != nil {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.checkBudget(ScopeTenant, now, &st)
	}
	for _, s := range [2]*state{ks, ts} {
		if s != nil {
			s.reportBudget(now, &st)
		}
	}
	return st
}
