package balance

import (
	"iter"
	"time"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// Bounds of RetryAfter. The upper bound is the longest wait any cooldown
// can cause (cooldown.quota and cooldown.disabled_probe go up to 168h), so
// a Retry-After is never shorter than the cooldown behind it: a client told
// 5 minutes about a 30-minute quota cooldown would come back six times for
// nothing.
const (
	minRetryAfter      = time.Second
	maxRetryAfter      = 7 * 24 * time.Hour
	noTargetRetryAfter = 5 * time.Minute // no target has the capability at all
)

// eligible reports whether t may take this attempt at now, ignoring the
// races that Acquire settles.
func eligible(t *routes.Target, need routes.Caps, tried []*routes.Target, now upstream.Instant) bool {
	if !t.Caps.Has(need) {
		return false
	}
	for _, x := range tried {
		if x == t {
			return false
		}
	}
	return t.Backend.State.Ready(now)
}

// tierEnd returns the end of the tier that starts at pool[start]. pool is
// sorted by tier, so a binary search keeps this O(log n), and the last
// tier (often the only one) takes one comparison.
func tierEnd(pool []*routes.Target, start int) int {
	tier := pool[start].Tier
	if pool[len(pool)-1].Tier == tier {
		return len(pool)
	}
	lo, hi := start+1, len(pool)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if pool[m].Tier > tier {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// tiers yields the tiers of pool, which is sorted by tier, in order.
func tiers(pool []*routes.Target) iter.Seq[[]*routes.Target] {
	return func(yield func([]*routes.Target) bool) {
		for start := 0; start < len(pool); {
			end := tierEnd(pool, start)
			if !yield(pool[start:end]) {
				return
			}
			start = end
		}
	}
}

// drawTries bounds the proposals of one weighted_random draw by rejection
// sampling before the picker falls back to scanning the tier (P2C:
// p2cTries).
const drawTries = 8

// filter is what a pick asks of a target besides its weight.
type filter struct {
	need  routes.Caps
	tried []*routes.Target
	now   upstream.Instant
}

// weight returns t's effective weight at f.now, 0 when t is not eligible.
func (f *filter) weight(t *routes.Target) float64 {
	if !eligible(t, f.need, f.tried, f.now) {
		return 0
	}
	return t.Backend.State.EffectiveWeight(t.Weight, f.now)
}

// maxListed bounds the eligible targets one scan lists (see listing). A
// scan runs when most of a tier's weight cannot be drawn, so few of its
// targets are eligible; a tier with more falls back to walking the tier
// once per draw.
const maxListed = 32

// listing is the eligible targets of one tier as one scan found them, in
// tier order, with their weights: the draws that follow a scan walk this
// instead of rechecking every target of the tier.
type listing struct {
	n     int
	total float64
	idx   [maxListed]int32
	w     [maxListed]float64
}

// list fills l with the eligible targets of tier and their effective
// weights at f.now (f.weight, checked inline), and reports false when more
// than maxListed of them are eligible, leaving l incomplete.
func (f *filter) list(tier []*routes.Target, l *listing) bool {
	l.n, l.total = 0, 0
	need, tried, now := f.need, f.tried, f.now
	if x := weightIndex(tier); x != nil {
		// The index keeps states, capabilities and weights contiguous:
		// no Target or Backend is read but to compare it with tried.
		states := x.States()
		caps, ws := x.Caps()[:len(states)], x.Weights()[:len(states)]
		for i, st := range states {
			// At its cap is the commonest reason a scan passes a target
			// over, and the cheapest to test: one atomic load beside an
			// immutable field.
			if st.InFlight() >= st.Cap() {
				continue
			}
			if ws[i] <= 0 || caps[i]&need != need || !st.Ready(now) || (len(tried) > 0 && contains(tried, tier[i])) {
				continue
			}
			// ws[i] is a whole number, so this is st.EffectiveWeight(int(ws[i]),
			// now) to the bit without the conversions.
			w := ws[i] * st.EffectiveWeight(1, now)
			if l.n == maxListed {
				if need&^x.Common() == 0 {
					x.SetScanFirst(false)
				}
				return false
			}
			l.idx[l.n], l.w[l.n] = int32(i), w
			l.n++
			l.total += w
		}
		// A pick that any target could take sees how much of the tier's
		// weight is available, and leaves the hint for the next.
		if need&^x.Common() == 0 {
			x.SetScanFirst(scanFirst(l.total, float64(x.Total()), len(states)))
		}
		return true
	}
	for i, t := range tier {
		if !t.Caps.Has(need) || (len(tried) > 0 && contains(tried, t)) {
			continue
		}
		st := t.Backend.State
		if !st.Ready(now) {
			continue
		}
		w := st.EffectiveWeight(t.Weight, now)
		if w <= 0 {
			continue
		}
		if l.n == maxListed {
			return false
		}
		l.idx[l.n], l.w[l.n] = int32(i), w
		l.n++
		l.total += w
	}
	return true
}

// scanFirstCost is the cost of one proposal (P2C.sample) in units of
// the cost a scan (filter.list) spends on one target, as measured when
// the scan was written (BenchmarkPickMostlyFull): about 20 ns against
// 1.3 ns.
const scanFirstCost = 15

// scanFirst reports whether a P2C pick on an indexed tier of n targets
// with static weight total, of which a scan found the weight avail
// available, should scan the tier straight away rather than propose
// targets first (the hint of routes.WeightIndex.ScanFirst). With a share
// p = avail/total available, a pair's proposals end in the scan anyway
// unless both draws succeed within their tries; for small p the pair then
// costs about 3 proposals plus (1 − 9p²) scans, so scanning first pays
// when 9p² scans cost less than 3 proposals: p²·n < scanFirstCost/3.
func scanFirst(avail, total float64, n int) bool {
	return 3*avail*avail*float64(n) < scanFirstCost*total*total
}

// draw returns the position in l of the listed target, other than the one
// at position skip (−1: none), on which x falls when the listed weights
// without skip's are laid end to end (0 ≤ x < that total), or the last
// one when rounding leaves the walk short.
func (l *listing) draw(x float64, skip int) int {
	last := -1
	for j := range l.n {
		if j == skip {
			continue
		}
		if w := l.w[j]; x < w {
			return j
		} else {
			x -= w
		}
		last = j
	}
	return last
}

// eligibleAt is eligible(tier[i], …) for the indexed tier of x, read
// from the index where it can be.
func (f *filter) eligibleAt(x *routes.WeightIndex, tier []*routes.Target, i int) bool {
	return x.Caps()[i]&f.need == f.need && ready(x.States()[i], f.now) && (len(f.tried) == 0 || !contains(f.tried, tier[i]))
}

// ready is st.Ready(now), with the test that rules out a backend at its
// cap (the commonest reason a scan passes one over) inlined ahead of the
// call.
func ready(st *upstream.State, now upstream.Instant) bool {
	return st.InFlight() < st.Cap() && st.Ready(now)
}

// weightAt is f.weight(tier[i]) for the indexed tier of x, read from the
// index where it can be.
func (f *filter) weightAt(x *routes.WeightIndex, tier []*routes.Target, i int) float64 {
	caps, ws := x.Caps(), x.Weights()
	if caps[i]&f.need != f.need || (len(f.tried) > 0 && contains(f.tried, tier[i])) {
		return 0
	}
	st := x.States()[i]
	if !ready(st, f.now) {
		return 0
	}
	return st.EffectiveWeight(int(ws[i]), f.now)
}

// weightIndex returns tier's routes.IndexWeights index, or nil when it has
// none (or one for another slicing of the pool).
func weightIndex(tier []*routes.Target) *routes.WeightIndex {
	x := tier[0].TierWeights
	if x == nil || x.Len() != len(tier) || x.Total() <= 0 {
		return nil
	}
	return x
}

// RetryAfter returns how long a client should wait before retrying when no
// target of pool could take a request needing need and expected to cost
// tokens (0: unknown): the time until the earliest capability-matching
// target becomes eligible (end of a cooldown, of a breaker's open period
// or of a used-up rate-limit budget, or the token reset of one without
// room for tokens; a target that is only at its cap counts as eligible
// now; a disabled one at its probe), rounded up to whole seconds and at
// least 1s, however long the cooldown. With no matching target it returns
// 5 minutes.
func RetryAfter(pool []*routes.Target, need routes.Caps, tokens int64, now time.Time) time.Duration {
	best := time.Duration(-1)
	for _, t := range pool {
		if !t.Caps.Has(need) {
			continue
		}
		var d time.Duration
		at := t.Backend.State.EligibleAt()
		if ft := t.Backend.State.FitsAt(tokens); ft.After(at) {
			at = ft
		}
		if !at.IsZero() {
			d = at.Sub(now)
		}
		if best < 0 || d < best {
			best = d
		}
	}
	if best < 0 {
		return noTargetRetryAfter
	}
	best = (best + time.Second - 1).Truncate(time.Second)
	return min(max(best, minRetryAfter), maxRetryAfter)
}

// Lease is a picked target together with the in-flight slot the pick took
// on it. The attempt sent to the target ends with one call of Done, which
// reports the outcome to the backend's state and gives the slot back; the
// request path never touches the backend's state itself (as a grpc-go
// picker's result carries its own done callback).
//
// A Lease is a small value, so a pick allocates nothing. Done has a
// pointer receiver and clears the lease, so a second Done on the same
// Lease is a no-op; copies of a held Lease each hold the slot, so pass
// the one variable around, not copies.
type Lease struct {
	*routes.Target // the picked target; nil for the zero Lease
	held           bool
	sent           uint64 // the backend's Acquired count after the slot was taken
	spent          uint64 // the backend's Spend mark, once Fit spent tokens
}

// lease returns a held Lease on t, whose slot the caller has taken.
func lease(t *routes.Target) Lease {
	return Lease{Target: t, held: true, sent: t.Backend.State.Acquired()}
}

// Held reports whether l still holds its slot: Done has not been called.
func (l *Lease) Held() bool { return l.held }

// Done reports r to the target's backend state and releases the slot
// (upstream.State.Finish). Only the first call on l does anything.
func (l *Lease) Done(r upstream.Result) {
	if !l.held {
		return
	}
	l.held = false
	r.Sent, r.SentTokens = l.sent, l.spent
	l.Backend.State.Finish(r)
}

// Vacate gives the slot back ahead of Done, once the provider's side of
// the attempt has ended while the client is still reading the answer
// (upstream.State.Vacate); Done, with Result.Vacated set, then reports
// the outcome alone. It reads only l's target, so it may run on another
// goroutine than Done's: the caller calls it at most once, before Done,
// and orders the two.
func (l *Lease) Vacate() { l.Backend.State.Vacate() }

// Fit reports whether the target's token budget has room for a request
// expected to cost tokens (0: unknown, always room), and counts them
// against it. When it has none the slot is released and the Lease is
// done: the caller picks again without this target (docs/routing.md
// "Headroom").
func (l *Lease) Fit(tokens int64) bool {
	st := l.Backend.State
	if !st.Fits(tokens) {
		l.held = false
		st.Release()
		return false
	}
	if tokens > 0 {
		l.spent = st.Spend(tokens)
	}
	return true
}
