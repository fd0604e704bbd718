package limits

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/scootgate/scootgate/pkg/usd"
)

// Reservations (docs/limits.md "Reservations"): a budget with budget_mode
// "reserve" admits a request only if its worst-case cost fits in what is
// left of the window, holds that much until the request ends, and then
// settles to what its attempts cost. The budget is then never exceeded
// by requests that cost no more than their worst case.
//
// On the local store a reservation is held against the node's share of
// the budget (spend.held). With the redis store the fleet's counter of a
// window counts what it granted the nodes, not only what was spent: a
// node takes a grant (a twentieth of the budget, or more when one request
// needs it) with one atomic script that grants only what fits under the
// budget, and holds each request's reservation from its grant (fleetSpend.bal)
// without a round trip. A request's settlement gives the difference back to
// the node's grant. The store's refresh (flushBudgets) pays the counter
// what was spent beyond the reservations, and gives back a grant unused
// for a refresh interval once the counter holds more than half the budget
// (below, a request elsewhere is granted anyway; [fleetSpend.contended]).
// So the counter never passes the budget, whatever the nodes do at once,
// and a node that crashes strands at most its grant until the window ends
// (the fleet then admits less, never more).

// reservation is what an admitted request holds of its reserving budgets.
type reservation struct {
	worst  usd.Amount
	fleet  bool            // held from the nodes' grants (fleetSpend.bal); else from the local share (spend.held)
	owe    bool            // held locally while the fleet's store was down: the spend is owed to it
	window [numSpans]int64 // the windows it was taken in; its attempts are charged to them
	states [2]*state       // the key's and the tenant's, nil for a side that does not reserve
	spent  atomic.Int64    // what the request's attempts cost so far (usd.Amount)
	ended  atomic.Bool     // settled
}

// reserveSize is what one grant asks for at least: a twentieth of the
// budget, as a lease is of a limit.
func reserveSize(full usd.Amount) usd.Amount { return max(1, full/leaseFraction) }

// Reserves reports whether the key's or its tenant's budgets are held in
// reservation mode: the caller then admits with [Subject.AdmitReserve]
// and the request's worst-case cost. A nil Subject reserves nothing.
func (sub *Subject) Reserves() bool { return sub != nil && sub.reserves }

// reservingStates returns the states of sub whose budgets reserve, as
// of the snapshot sub was bound by.
func (sub *Subject) reservingStates() (rs [2]*state) {
	for i, s := range [2]*state{sub.key, sub.tenant} {
		if s != nil && sub.reserving[i] {
			rs[i] = s
		}
	}
	return rs
}

// reserveLocal holds worst against the node's share of the reserving
// budgets at now, or records in st the refusal.
func (sub *Subject) reserveLocal(now time.Time, worst usd.Amount, st *Status) *reservation {
	rs := sub.reservingStates()
	// Key before tenant, always: one lock order for every request.
	for i, s := range rs {
		if s == nil {
			continue
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for sp := range numSpans {
			b := &s.spend[sp]
			if b.budget == 0 {
				continue
			}
			b.roll(sp, now)
			if usd.Add(usd.Add(b.spent, b.held), worst) > b.budget {
				st.refuse(scopeOf(i), KindBudget, windowEnd(sp, b.window).Sub(now))
			}
		}
	}
	if st.Refused() {
		for _, s := range rs {
			if s != nil {
				s.reportBudget(now, st)
			}
		}
		return nil
	}
	r := &reservation{worst: worst, states: rs, owe: sub.l.fleet != nil}
	for _, s := range rs {
		if s == nil {
			continue
		}
		for sp := range numSpans {
			b := &s.spend[sp]
			if b.budget == 0 {
				continue
			}
			b.held = usd.Add(b.held, worst)
			r.window[sp] = b.window
		}
		s.reportBudget(now, st)
	}
	return r
}

func scopeOf(i int) Scope {
	if i == 0 {
		return ScopeKey
	}
	return ScopeTenant
}

// ask is one grant a reservation needs from the fleet: window w of kind
// sp of s, at least need, want if it fits.
type ask struct {
	s          *state
	sp         span
	w          int64
	need, want usd.Amount
}

// reserveFleet holds worst from the node's grants of the reserving
// budgets at now, taking grants from the fleet's counters (one round trip
// for all of them) when the node holds too little. err means the store
// failed (nothing is held): the caller falls back.
func (sub *Subject) reserveFleet(now time.Time, worst usd.Amount, st *Status) (*reservation, error) {
	rs := sub.reservingStates()
	lock := func() {
		for _, s := range rs {
			if s != nil {
				s.mu.Lock()
			}
		}
	}
	unlock := func() {
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i] != nil {
				rs[i].mu.Unlock()
			}
		}
	}
	for try := 0; ; try++ {
		var (
			asks [2 * numSpans]ask
			n    int
		)
		lock()
		// A state bound again without reservations since sub was bound
		// holds nothing (a request of the snapshot before, in flight).
		live := rs
		for i, s := range live {
			if s != nil && !s.reserve {
				live[i] = nil
			}
		}
		for _, s := range live {
			if s == nil {
				continue
			}
			for sp := range numSpans {
				full := s.spend[sp].full
				if full == 0 {
					continue
				}
				f := &s.fleet[sp]
				w := windowOf(sp, now)
				f.roll(w)
				if f.bal < worst {
					need := worst - f.bal
					if now.Before(f.refusedUntil) && need > full-f.total {
						// The counter refused a grant this size a moment
						// ago: refuse without asking again.
						st.refuse(scopeOf(sub.indexOf(s)), KindBudget, windowEnd(sp, w).Sub(now))
						continue
					}
					asks[n] = ask{s: s, sp: sp, w: w, need: need, want: max(need, reserveSize(full))}
					n++
				}
			}
		}
		if st.Refused() {
			sub.reportReserved(now, st)
			unlock()
			return nil, nil
		}
		if n == 0 {
			r := &reservation{worst: worst, fleet: true, states: live}
			for _, s := range live {
				if s == nil {
					continue
				}
				for sp := range numSpans {
					if s.spend[sp].full == 0 {
						continue
					}
					f := &s.fleet[sp]
					f.bal -= worst
					f.used = now
					r.window[sp] = f.window
				}
			}
			sub.reportReserved(now, st)
			unlock()
			return r, nil
		}
		unlock()
		if try == maxTakes {
			// Concurrent requests spent every grant taken meanwhile.
			a := asks[0]
			st.refuse(scopeOf(sub.indexOf(a.s)), KindBudget, windowEnd(a.sp, a.w).Sub(now))
			lock()
			sub.reportReserved(now, st)
			unlock()
			return nil, nil
		}
		res, err := sub.l.fleet.reserve(context.Background(), asks[:n])
		if err != nil {
			return nil, err
		}
		lock()
		for i, a := range asks[:n] {
			f := &a.s.fleet[a.sp]
			if f.window != a.w {
				continue // the window rolled meanwhile: the grant is the ended window's
			}
			switch {
			case res.refused < 0:
				f.bal += res.grants[i]
				f.total, f.seen = res.totals[i], now
			case res.refused == i:
				f.total, f.seen = res.totals[i], now
				f.refusedUntil = now.Add(budgetRefresh)
			}
		}
		if res.refused >= 0 {
			a := asks[res.refused]
			st.refuse(scopeOf(sub.indexOf(a.s)), KindBudget, windowEnd(a.sp, a.w).Sub(now))
			sub.reportReserved(now, st)
			unlock()
			return nil, nil
		}
		unlock()
	}
}

// indexOf is 0 for the key's state, 1 for the tenant's.
func (sub *Subject) indexOf(s *state) int {
	if s == sub.key {
		return 0
	}
	return 1
}

// reportReserved folds the reserving budgets into st's Budget, keeping
// the one with the least remaining: what the fleet's counter has not
// granted, plus what this node holds unreserved. The states' locks are
// held.
func (sub *Subject) reportReserved(now time.Time, st *Status) {
	for _, s := range sub.reservingStates() {
		if s == nil {
			continue
		}
		for sp := range numSpans {
			full := s.spend[sp].full
			if full == 0 {
				continue
			}
			f := &s.fleet[sp]
			w := windowOf(sp, now)
			var rem usd.Amount
			if f.window == w {
				rem = max(0, min(full, full-f.total+max(0, f.bal)))
			} else {
				rem = full
			}
			if st.Budget.Limit == 0 || rem < st.Budget.Remaining {
				st.Budget = BudgetWindow{Limit: full, Remaining: rem, Reset: windowEnd(sp, w).Sub(now)}
			}
		}
	}
}

// cancel gives back a reservation whose request was not admitted after
// all (a per-minute limit refused it).
func (r *reservation) cancel() { r.settle(0) }

// settle ends r: each reserving budget gets back what r held beyond what
// the request's attempts cost (spent); spent beyond the reservation is
// owed. A window that has ended meanwhile is left as it was.
func (r *reservation) settle(spent usd.Amount) {
	if r == nil || r.ended.Swap(true) {
		return
	}
	for _, s := range r.states {
		if s == nil {
			continue
		}
		s.mu.Lock()
		for sp := range numSpans {
			if r.fleet {
				f := &s.fleet[sp]
				if s.spend[sp].full == 0 || f.window != r.window[sp] {
					continue
				}
				if s.reserve {
					f.bal += r.worst - spent
				} else {
					// The budget stopped reserving meanwhile: the
					// counter holds the reservation; correct it.
					f.owed += spent - r.worst
				}
				continue
			}
			b := &s.spend[sp]
			if b.budget == 0 || b.window != r.window[sp] {
				continue
			}
			b.held = max(0, b.held-r.worst)
			if r.owe {
				// Held locally while the store was down: what it cost is
				// owed to the fleet's counter, paid by the refresh.
				f := &s.fleet[sp]
				f.roll(r.window[sp])
				if f.window == r.window[sp] {
					f.bal -= spent
				}
			}
		}
		s.mu.Unlock()
	}
}

// reserveScript takes grants from budget counters of one request's
// reservation, all or none, atomically: for each counter, it grants want
// if that much is left under the budget, else what is left if that is
// at least need; if one counter has less than its need left, it grants
// nothing at all and names it. Each counter expires a day after its
// window ends, as the charged ones do.
//
// Counters are integers of picodollars up to 10^18 and more; Lua numbers
// are doubles, exact only to 2^53. For a budget above 2^53 picodollars
// (about $9,007) the script leaves 4096 picodollars unused: the most the
// rounding of the budget, the counter and their difference can be off
// together, so that a counter never passes its budget. The totals are
// read back as strings, exact.
//
// KEYS the counters; ARGV per counter: budget, need, want, expiry (unix ms).
// Returns {"ok"} followed by grant and total per counter, or {"refused",
// index (1-based), total}.
const reserveScript = `
local grants = {}
for i = 1, #KEYS do
  local b = tonumber(ARGV[4*i-3])
  local need = tonumber(ARGV[4*i-2])
  local want = tonumber(ARGV[4*i-1])
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  local free = b - c
  if b > 9007199254740992 then free = free - 4096 end
  if free < need then
    return {'refused', tostring(i), redis.call('GET', KEYS[i]) or '0'}
  end
  if want > free then want = free end
  grants[i] = string.format('%.0f', want)
end
local out = {'ok'}
for i = 1, #KEYS do
  redis.call('INCRBY', KEYS[i], grants[i])
  redis.call('PEXPIREAT', KEYS[i], ARGV[4*i])
  out[#out+1] = grants[i]
  out[#out+1] = redis.call('GET', KEYS[i])
end
return out
`

var reserveLua = rueidis.NewLuaScript(reserveScript)

// reserved is reserveScript's answer: the grants and the counters after
// them, or (refused ≥ 0) the index of the counter that had too little
// left, and the totals as read (only the refused one's).
type reserved struct {
	refused        int
	grants, totals [2 * numSpans]usd.Amount
}

// reserve runs reserveScript for asks. An error marks the store down.
func (r *Redis) reserve(ctx context.Context, asks []ask) (res reserved, err error) {
	c := r.connected()
	if c == nil {
		return res, errStoreDown
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	keys := make([]string, len(asks))
	args := make([]string, 0, 4*len(asks))
	for i, a := range asks {
		keys[i] = a.s.spendKey(a.sp, a.w)
		args = append(args,
			strconv.FormatInt(int64(a.s.spend[a.sp].full), 10), strconv.FormatInt(int64(a.need), 10),
			strconv.FormatInt(int64(a.want), 10), strconv.FormatInt(windowEnd(a.sp, a.w).Add(24*time.Hour).UnixMilli(), 10))
	}
	var vs []string
	// Not sent again on a connection error: a grant that did reach
	// Redis would be taken twice, and held by no one until the window
	// ends. The store is marked down instead, as for a failed take.
	r.calls.Add(1)
	vs, err = reserveLua.Exec(ctx, c, keys, args).AsStrSlice()
	if err == nil {
		err = res.parse(vs, len(asks))
	}
	if err != nil {
		r.markDown()
		return res, err
	}
	return res, nil
}

var errReserveReply = errors.New("limits: unexpected reservation script reply")

func (res *reserved) parse(vs []string, n int) error {
	num := func(s string) (usd.Amount, error) {
		v, err := strconv.ParseInt(s, 10, 64)
		return usd.Amount(v), err
	}
	switch {
	case len(vs) == 3 && vs[0] == "refused":
		i, err := strconv.Atoi(vs[1])
		if err != nil || i < 1 || i > n {
			return errReserveReply
		}
		res.refused = i - 1
		res.totals[i-1], err = num(vs[2])
		return err
	case len(vs) == 1+2*n && vs[0] == "ok":
		res.refused = -1
		for i := range n {
			var err1, err2 error
			res.grants[i], err1 = num(vs[1+2*i])
			res.totals[i], err2 = num(vs[2+2*i])
			if err1 != nil || err2 != nil {
				return errReserveReply
			}
		}
		return nil
	}
	return errReserveReply
}
