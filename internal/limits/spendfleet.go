package limits

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/scootgate/scootgate/pkg/usd"
)

// Budgets across the fleet (docs/limits.md "Budgets across the fleet"):
// with the redis store, each budgeted key's or tenant's spend in a window
// is one Redis integer of picodollars, keyed by the window
// ("scootgate:limits:k:<id>:usd:d:<day>"), which every node adds its
// attempts' costs to with INCRBY (exact: Redis integers are 64-bit, and
// no Lua number, a double, ever holds a sum). A node learns the fleet's
// total from each INCRBY's answer.
//
// Budgets cost no round trip per request: an attempt's charge is owed,
// and the store's refresh (flushBudgets, every budgetRefresh) sends what
// every bound key and tenant owes and reads again every window the node
// admitted by in the last minute, in pipelined round trips of flushBatch
// windows. An admission reads (INCRBY 0, the key's and the tenant's
// windows in one round trip) only when its view is older than
// budgetStale: a key's first request on the node, or one idle for a
// minute.
//
// Charges a node could not send (the store was down, or a send was in
// flight) stay owed: they are sent with the next INCRBY of the same
// window, so spend made during an outage is charged back on recovery.
// A node that restarts keeps counting from the fleet's counter: the
// counter is the window's, not the node's.

// budgetRefresh is how often the store's refresh settles what a node
// owes the budget counters and reads again the totals of the windows it
// admitted requests by in the last minute (flushBudgets): the refresh's
// period.
const budgetRefresh = holdRefresh

// budgetStale is how old the fleet's total a node admits by may be: a
// view older than this (a key idle on this node for a while) is read
// again before the admission.
const budgetStale = 2 * budgetRefresh

// fleetSpend is what a node knows of one window's fleet-wide spend, and
// owes it; guarded by the state's mu.
type fleetSpend struct {
	window  int64      // windowOf of total and owed
	total   usd.Amount // the fleet's spend as of the last answer
	seen    time.Time  // when the last answer came
	asked   time.Time  // when an admission last went by total
	owed    usd.Amount // charged here, not yet added to the fleet's counter
	sending usd.Amount // part of owed in an INCRBY in flight

	// Spend owed to the window before (it ended while the charge was
	// owed): still sent, so that the fleet's record of it is whole.
	late        usd.Amount
	lateWindow  int64
	lateSending bool

	// Reservation mode (reserve.go): what the fleet's counter granted
	// this node in window that no request holds; below zero, spend
	// beyond the reservations, owed to the counter.
	bal       usd.Amount
	used      time.Time  // when a reservation last held from bal
	returning usd.Amount // part of a return (or payment) of bal in flight
	// The counter refused a grant: until then, a request that needs more
	// than the budget less total is refused without asking again.
	refusedUntil time.Time
}

// roll moves f to window w, if later: the new window starts from what the
// store will say, and what the ended one is still owed becomes late.
func (f *fleetSpend) roll(w int64) {
	if w <= f.window {
		return
	}
	rest := f.owed - f.sending
	if f.bal < 0 {
		rest -= f.bal // spend beyond the reservations: the ended window's
	}
	if rest > 0 && !f.lateSending {
		f.late, f.lateWindow = rest, f.window
	}
	// A grant left unused in the ended window stays in its counter: that
	// window admits nothing more.
	f.window, f.total, f.seen, f.owed, f.sending = w, 0, time.Time{}, 0, 0
	f.bal, f.returning, f.refusedUntil = 0, 0, time.Time{}
}

// spendKey is the Redis key of s's spend in window w of kind sp.
func (s *state) spendKey(sp span, w int64) string {
	k := "d:"
	if sp == spanMonth {
		k = "m:"
	}
	return s.bkey + k + strconv.FormatInt(w, 10)
}

// addSpend adds amounts[i] to keys[i] (INCRBY, 0 to read) and sets each
// to expire a day after its window ends, in one pipelined round trip; it
// returns the totals. An error marks the store down.
func (r *Redis) addSpend(ctx context.Context, keys []string, amounts []usd.Amount, expires []time.Time) ([]int64, error) {
	c := r.connected()
	if c == nil {
		return nil, errStoreDown
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	cmds := make(rueidis.Commands, 0, 2*len(keys))
	for i, k := range keys {
		cmds = append(cmds,
			c.B().Incrby().Key(k).Increment(int64(amounts[i])).Build(),
			c.B().Pexpireat().Key(k).MillisecondsTimestamp(expires[i].Add(24*time.Hour).UnixMilli()).Build())
	}
	out := make([]int64, len(keys))
	var err error
	// Once more on a connection error, as takes do: the first command
	// after Redis came back may meet the connection Redis dropped. If the
	// first send did reach Redis the spend counts twice: the fleet admits
	// less, never more.
	for try := 0; try < 2; try++ {
		r.calls.Add(1)
		err = nil
		for i, res := range c.DoMulti(ctx, cmds...) {
			if e := res.Error(); e != nil {
				err = e
				break
			}
			if i%2 == 0 {
				out[i/2], _ = res.AsInt64()
			}
		}
		if _, redisErr := rueidis.IsRedisErr(err); err == nil || redisErr || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		r.markDown()
		return nil, err
	}
	return out, nil
}

// syncFleet sends what the states of ss owe and reads the fleet's
// totals of their budgeted windows at now, in one pipelined round trip,
// for each window whose view is older than budgetStale (or, force, for
// every window that owes), and records the answers. It reports false
// when the store failed. Reserving states have nothing to read (the
// grants decide) and are skipped.
func (l *Limiter) syncFleet(ss [2]*state, now time.Time, force bool) bool {
	var (
		keys    [2 * 2 * numSpans]string
		amounts [2 * 2 * numSpans]usd.Amount
		expires [2 * 2 * numSpans]time.Time
		owners  [2 * 2 * numSpans]*state
		spans   [2 * 2 * numSpans]span
		n       int
	)
	for _, s := range ss {
		if s == nil {
			continue
		}
		s.mu.Lock()
		if s.reserve {
			s.mu.Unlock()
			continue
		}
		for sp := range numSpans {
			if s.spend[sp].full == 0 {
				continue
			}
			f := &s.fleet[sp]
			w := windowOf(sp, now)
			f.roll(w)
			if f.late > 0 && !f.lateSending {
				f.lateSending = true
				keys[n], amounts[n], expires[n], owners[n], spans[n] = s.spendKey(sp, f.lateWindow), f.late, windowEnd(sp, f.lateWindow), s, sp+numSpans
				n++
			}
			if f.sending != 0 || (!force || f.owed == 0) && now.Sub(f.seen) < budgetStale {
				continue // fresh enough, or an INCRBY in flight whose answer will do
			}
			f.sending = f.owed
			keys[n], amounts[n], expires[n], owners[n], spans[n] = s.spendKey(sp, w), f.owed, windowEnd(sp, w), s, sp
			n++
		}
		s.mu.Unlock()
	}
	if n == 0 {
		return true
	}
	totals, err := l.fleet.addSpend(context.Background(), keys[:n], amounts[:n], expires[:n])
	for i := range n {
		s, sp := owners[i], spans[i]
		s.mu.Lock()
		if sp >= numSpans {
			f := &s.fleet[sp-numSpans]
			f.lateSending = false
			if err == nil {
				f.late = 0
			}
		} else if f := &s.fleet[sp]; f.window == windowOf(sp, now) {
			f.sending = 0
			if err == nil {
				f.owed -= amounts[i]
				f.total = usd.Amount(totals[i])
				f.seen = now
			}
		}
		s.mu.Unlock()
	}
	return err == nil
}

// checkBudgetFleet is checkBudget against the fleet's spend: the total
// the store last gave plus what this node owes it.
func (s *state) checkBudgetFleet(scope Scope, now time.Time, st *Status) {
	if s.reserve {
		return // the reservation decides (reserve.go)
	}
	for sp := range numSpans {
		b := &s.spend[sp]
		if b.full == 0 {
			continue
		}
		f := &s.fleet[sp]
		f.asked = now
		w := windowOf(sp, now)
		spent := usd.Amount(0)
		if f.window == w {
			spent = usd.Add(f.total, f.owed-f.sending)
		}
		rem := max(0, b.full-spent)
		if spent >= b.full {
			st.refuse(scope, KindBudget, windowEnd(sp, w).Sub(now))
		}
		if st.Budget.Limit == 0 || rem < st.Budget.Remaining {
			st.Budget = BudgetWindow{Limit: b.full, Remaining: rem, Reset: windowEnd(sp, w).Sub(now)}
		}
	}
}

// chargeFleet records cost as owed to the fleet's counters of s's
// windows at now; the caller sends it (syncFleet, force).
func (s *state) chargeFleet(cost usd.Amount, now time.Time) {
	for sp := range numSpans {
		if s.spend[sp].full == 0 {
			continue
		}
		f := &s.fleet[sp]
		f.roll(windowOf(sp, now))
		if s.reserve {
			f.bal -= cost // spent beyond any reservation: owed from the node's grant
			continue
		}
		f.owed = usd.Add(f.owed, cost)
	}
}

// flushBudgets settles, in one round trip, what the node owes the fleet's
// budget counters of every bound budgeted key and tenant at now: charges
// not sent yet, spend beyond reservations, and grants no reservation has
// used for budgetRefresh, given back so that other nodes may have them
// (docs/limits.md "Reservations"). The store's refresh runs it every
// holdRefresh.
func (l *Limiter) flushBudgets(ctx context.Context) error {
	states := l.budgetStates.Load()
	if states == nil || len(*states) == 0 {
		return nil
	}
	now := l.clock()
	var (
		items   []flushItem
		keys    []string
		amounts []usd.Amount
		expires []time.Time
	)
	add := func(it flushItem) {
		items = append(items, it)
		keys = append(keys, it.s.spendKey(it.sp, it.w))
		amounts = append(amounts, it.amount)
		expires = append(expires, windowEnd(it.sp, it.w))
	}
	// A round trip for at most flushBatch windows: one pipeline of
	// thousands of commands would outlast the store's timeout.
	for next := 0; next < len(*states); {
		items, keys, amounts, expires = items[:0], keys[:0], amounts[:0], expires[:0]
		for ; next < len(*states) && len(items) < flushBatch; next++ {
			(*states)[next].collectFlush(now, add)
		}
		if len(items) == 0 {
			continue
		}
		totals, err := l.fleet.addSpend(ctx, keys, amounts, expires)
		for i, it := range items {
			it.s.mu.Lock()
			it.s.settleFlushed(it, totals, i, err, now)
			it.s.mu.Unlock()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// contended reports whether a grant unused since f.used should go back
// to the counter now: when the counter, as last read, holds more than
// half the budget full (another node's request may need it), or it has
// not been used for a window of the per-minute limits. Below half, any
// request whose worst case is at most half the budget is granted
// elsewhere whatever this node keeps, so the node keeps its grant, and a
// key it sees every few seconds costs no round trip per request.
func (f *fleetSpend) contended(full usd.Amount, now time.Time) bool {
	return f.total > full/2 || now.Sub(f.used) >= window
}

// What a flushed window owed: charges not sent, charges owed to the
// ended window, or a reserving budget's unused grant (or its spend
// beyond the reservations).
const (
	flushOwed = iota
	flushLate
	flushGrant
)

// flushBatch is the most windows one round trip of flushBudgets sends.
const flushBatch = 256

// flushItem is one window flushBudgets sends.
type flushItem struct {
	s      *state
	sp     span
	w      int64
	amount usd.Amount
	kind   int
}

// collectFlush hands add what s's windows have to send at now, and
// marks it in flight.
func (s *state) collectFlush(now time.Time, add func(flushItem)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sp := range numSpans {
		if s.spend[sp].full == 0 {
			continue
		}
		f := &s.fleet[sp]
		w := windowOf(sp, now)
		f.roll(w)
		if f.late > 0 && !f.lateSending {
			f.lateSending = true
			add(flushItem{s: s, sp: sp, w: f.lateWindow, amount: f.late, kind: flushLate})
		}
		switch {
		case s.reserve:
			switch {
			case f.returning != 0:
			case f.bal < 0 || f.bal > 0 && now.Sub(f.used) >= budgetRefresh && f.contended(s.spend[sp].full, now):
				f.returning = -f.bal
				f.bal = 0
				add(flushItem{s: s, sp: sp, w: w, amount: f.returning, kind: flushGrant})
			case f.bal > 0 && now.Sub(f.used) >= budgetRefresh:
				// Kept: read the counter, to know when to give it back.
				f.returning = 0
				add(flushItem{s: s, sp: sp, w: w, kind: flushGrant})
			}
			if f.sending == 0 && f.owed != 0 {
				// Owed from before the budget reserved.
				f.sending = f.owed
				add(flushItem{s: s, sp: sp, w: w, amount: f.owed, kind: flushOwed})
			}
		case f.sending == 0 && (f.owed != 0 || !f.asked.IsZero() && now.Sub(f.asked) < window):
			// What the node owes, and a fresh view of a window it
			// admitted by in the last minute: its admissions then need
			// no read.
			f.sending = f.owed
			add(flushItem{s: s, sp: sp, w: w, amount: f.owed, kind: flushOwed})
		}
	}
}

// settleFlushed records the answer (totals[i], or err) to it, one of
// s's flushed windows. s.mu is held.
func (s *state) settleFlushed(it flushItem, totals []int64, i int, err error, now time.Time) {
	f := &s.fleet[it.sp]
	amount, kind := it.amount, it.kind
	switch {
	case kind == flushLate:
		f.lateSending = false
		if err == nil {
			f.late = 0
		}
	case f.window != it.w:
		// the window rolled meanwhile
	case kind == flushGrant:
		f.returning = 0
		if err != nil {
			f.bal -= amount // still the node's
		} else {
			f.total, f.seen = usd.Amount(totals[i]), now
		}
	default:
		f.sending = 0
		if err == nil {
			f.owed -= amount
			f.total, f.seen = usd.Amount(totals[i]), now
		}
	}
}
