package upstream

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is one rate limit of a backend's credential as a provider answer
// states it (each provider API reads its headers into one with
// provider.ReadBudget). The zero value is a budget the answer did not
// state; Limit and Reset are 0 when not stated.
type Budget struct {
	Stated    bool // the answer stated Remaining
	Limit     int64
	Remaining int64
	Reset     time.Duration // from the answer until the budget is whole again
}

// Known reports whether the answer stated how much remains.
func (b Budget) Known() bool { return b.Stated }

// Headroom is what one answer's rate-limit headers said (docs/routing.md
// "Headroom").
type Headroom struct {
	Requests Budget
	Tokens   Budget
	// Malformed counts header values the provider API could not read;
	// they were ignored.
	Malformed int
}

// HeadroomMode says how selection uses the provider's rate-limit headers.
type HeadroomMode uint8

const (
	// HeadroomThreshold (the default): a backend whose budget is used up
	// is ineligible until its reset, and P2C's cost is multiplied by
	// thresholdPenalty while less than 1/thresholdPenalty of a budget is
	// left (docs/routing.md "Headroom" has the simulation that
	// chose it).
	HeadroomThreshold HeadroomMode = iota
	// HeadroomCost: the eligibility rule, and P2C's cost divided by the
	// share left (at least minShare). It pushes load onto a backend that
	// states no headroom at all, which then sees more 429s.
	HeadroomCost
	// HeadroomGate: only the eligibility rule; P2C ignores how much is
	// left.
	HeadroomGate
	// HeadroomOff: the headers are ignored; a backend is held back only
	// after the provider's 429 (the reactive policy).
	HeadroomOff
)

const (
	// unknown is a budget's remaining count before any answer stated it.
	unknown = math.MinInt64
	// maxCount bounds the counts an answer may state.
	maxCount = 1 << 53
	// minShare bounds the headroom factor of P2C's cost from below: a
	// backend with 1% left costs 20×, not 100×, so that a stale reading
	// cannot starve it for long (its reset lifts the factor anyway).
	minShare = 0.05
	// HeadroomThreshold's rule: the cost × thresholdPenalty while less
	// than 1/thresholdPenalty (10%) of a budget is left.
	thresholdPenalty = 10
)

// budget is the live estimate of one budget. Written under
// headroom.mu; read atomically.
type budget struct {
	left  atomic.Int64 // estimate of what remains; unknown when never stated
	limit atomic.Int64 // 0 when not stated
	reset atomic.Int64 // Instant the budget is whole again; 0 when not stated
}

// headroom is a State's view of its credential's rate limits.
type headroom struct {
	mu   sync.Mutex  // serializes observe; readers use the atomics
	seen atomic.Bool // any answer stated a budget: the cost reads it first

	seq       atomic.Uint64 // Result.Sent of the newest answer applied
	spent     atomic.Uint64 // tokens ever counted by Spend
	requests  budget
	tokens    budget
	until     atomic.Int64  // Instant; no traffic while now < until (0 = never set)
	held      atomic.Int64  // total ns of ineligibility scheduled by headroom
	malformed atomic.Uint64 // header values ignored
}

// share returns b's remaining fraction at now, 1 when unknown or past its
// reset.
func (b *budget) share(now Instant) float64 {
	left, limit := b.left.Load(), b.limit.Load()
	if left == unknown || limit <= 0 {
		return 1
	}
	if r := b.reset.Load(); r != 0 && int64(now) >= r {
		return 1
	}
	return min(1, max(0, float64(left)/float64(limit)))
}

// factor returns the headroom factor of P2C's cost at now, in
// [minShare, 1]: the remaining share of the tighter budget, shaped by the
// mode. 1 when no answer ever stated a budget.
func (h *headroom) factor(mode HeadroomMode, now Instant) float64 {
	if !h.seen.Load() {
		return 1
	}
	switch mode {
	case HeadroomThreshold:
		// Compared in whole numbers: P2C asks this twice per pick.
		if h.requests.low(now) || h.tokens.low(now) {
			return 1.0 / thresholdPenalty
		}
	case HeadroomCost:
		return max(min(h.requests.share(now), h.tokens.share(now)), minShare)
	}
	return 1
}

// low reports whether less than 1/thresholdPenalty of b is left at now,
// without a division (observe bounds the counts, so the product cannot
// overflow).
func (b *budget) low(now Instant) bool {
	left, limit := b.left.Load(), b.limit.Load()
	if left == unknown || limit <= 0 || left*thresholdPenalty >= limit {
		return false
	}
	r := b.reset.Load()
	return r == 0 || int64(now) < r
}

// holding reports whether a used-up budget holds the backend back at now.
func (h *headroom) holding(now Instant) bool {
	u := h.until.Load()
	return u != 0 && int64(now) < u
}

// hold makes the backend ineligible until at least until; it never
// shortens a hold already running.
func (h *headroom) hold(now, until int64) {
	for {
		u := h.until.Load()
		if u >= until {
			return
		}
		if h.until.CompareAndSwap(u, until) {
			h.held.Add(until - max(u, now))
			return
		}
	}
}

// take counts one request against the request budget when a slot is
// taken, so that requests sent after the last answer are not forgotten;
// the one that takes the last request holds the backend until the reset
// (or, when no reset was stated, for RateLimitDefault). Past the reset the
// count is stale and the hold it would set has already ended, so the
// clock is read only when the count runs out.
func (h *headroom) take(sh *shared) {
	b := &h.requests
	if b.left.Load() == unknown || b.left.Add(-1) > 0 {
		return
	}
	now := int64(sh.now())
	r := b.reset.Load()
	if r == 0 {
		r = now + int64(sh.o.RateLimitDefault)
		b.left.Store(unknown) // a guess: back to the 429s once it is over
	}
	h.hold(now, r)
}

// observe applies an answer's headers. sent is the Result.Sent of the
// attempt: an answer to a request older than the newest applied one is
// stale and ignored. after is how many requests took a slot after this
// one, spent the Result.SentTokens mark (the provider had not counted
// those when it answered). fallback is the hold of a used-up budget with
// no reset; longest caps a stated reset (docs/routing.md "Headroom": a
// provider's headers never rest a backend longer than a 429's
// Retry-After may, whatever reset they name).
func (h *headroom) observe(hr Headroom, now Instant, sent, after, spent uint64, fallback, longest time.Duration) {
	if hr.Malformed > 0 {
		h.malformed.Add(uint64(hr.Malformed))
	}
	if !hr.Requests.Known() && !hr.Tokens.Known() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if sent < h.seq.Load() {
		return
	}
	h.seq.Store(sent)
	h.seen.Store(true)
	apply := func(b *budget, in Budget, pending int64) {
		if !in.Known() {
			return
		}
		// Bounded far above any real budget, so that low's product fits.
		left := min(in.Remaining, maxCount) - pending
		b.left.Store(max(left, 0))
		b.limit.Store(min(max(in.Limit, 0), maxCount))
		var r int64
		if in.Reset > 0 {
			r = int64(now) + int64(min(in.Reset, longest))
		}
		b.reset.Store(r)
		if left > 0 {
			return
		}
		if r == 0 {
			r = int64(now) + int64(fallback)
		}
		h.hold(int64(now), r)
	}
	apply(&h.requests, hr.Requests, int64(after))
	var tokensAfter int64
	if spent > 0 {
		tokensAfter = int64(h.spent.Load() - spent)
	}
	apply(&h.tokens, hr.Tokens, tokensAfter)
}

// forget drops what answers' headers said: both budgets become unknown
// and a hold they set ends. The counters kept for metrics (held,
// malformed) and the accounting of slots (seq, spent) stay.
func (h *headroom) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range [...]*budget{&h.requests, &h.tokens} {
		b.left.Store(unknown)
		b.limit.Store(0)
		b.reset.Store(0)
	}
	h.until.Store(0)
}

// untake gives back the request that take counted for a slot that was
// released unused.
func (h *headroom) untake() {
	b := &h.requests
	if b.left.Load() == unknown {
		return
	}
	if b.left.Add(1) == 1 {
		if r := b.reset.Load(); r != 0 {
			// take held the backend for the request given back: lift it.
			h.until.CompareAndSwap(r, 0)
		}
	}
}

// Fits reports whether the token budget, as the last answer stated it
// less the tokens spent since, has room for tokens now. A budget no
// answer stated, or whose reset has passed, has room.
func (s *State) Fits(tokens int64) bool {
	b := &s.hr.tokens
	left := b.left.Load()
	if tokens <= 0 || left == unknown || left >= tokens || s.sh.o.Headroom == HeadroomOff {
		return true
	}
	r := b.reset.Load()
	return r == 0 || int64(s.sh.now()) >= r
}

// FitsAt returns the zero time when Fits(tokens), else when the token
// budget is whole again (now plus RateLimitDefault when no reset was
// stated).
func (s *State) FitsAt(tokens int64) time.Time {
	if s.Fits(tokens) {
		return time.Time{}
	}
	if r := s.hr.tokens.reset.Load(); r != 0 {
		return s.sh.time(Instant(r))
	}
	return s.sh.o.Clock().Add(s.sh.o.RateLimitDefault)
}

// Spend counts tokens against the token budget for a request about to be
// sent, and returns the mark its Result.SentTokens carries.
func (s *State) Spend(tokens int64) uint64 {
	if tokens <= 0 {
		return s.hr.spent.Load()
	}
	if s.hr.tokens.left.Load() != unknown {
		s.hr.tokens.left.Add(-tokens) // may go below 0: Fits then says no
	}
	return s.hr.spent.Add(uint64(tokens))
}

// view returns b's remaining share for View, and false when unknown or
// past its reset (with no stated limit, only a used-up budget is known:
// share 0).
func (b *budget) view(now Instant) (float64, bool) {
	left, limit := b.left.Load(), b.limit.Load()
	if left == unknown {
		return 0, false
	}
	if r := b.reset.Load(); r != 0 && int64(now) >= r {
		return 0, false
	}
	if limit <= 0 {
		return 0, left <= 0
	}
	return min(1, max(0, float64(left)/float64(limit))), true
}
