package balance

import (
	"math"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// DefaultLoadFactor is the bounded-load factor c of [Affinity] when none is
// configured ([balance] affinity_load_factor).
const DefaultLoadFactor = 1.25

// Key is a hashed, namespaced session key ([SessionKey]); 0 means the
// request has none.
type Key uint64

// SessionKey hashes a request's session key within namespace (the client
// key's id, so that two tenants never share a slot): FNV-1a over both,
// then a finaliser. It is stable across nodes and processes. It returns 0
// when key is empty. The key itself is never kept.
func SessionKey[K string | []byte](namespace string, key K) Key {
	if len(key) == 0 {
		return 0
	}
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(namespace); i++ {
		h = (h ^ uint64(namespace[i])) * prime
	}
	h = (h ^ 0xff) * prime // separator: no UTF-8 text holds 0xff
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime
	}
	if k := Key(routes.Mix64(h)); k != 0 {
		return k
	}
	return 1
}

// Placement says how a target was chosen (docs/routing.md "Affinity").
type Placement uint8

const (
	// Balanced: affinity off for the model; the balancing algorithm chose.
	Balanced Placement = iota
	// Keyless: affinity on, but the request names no session; the
	// balancing algorithm chose.
	Keyless
	// Preferred: the session's first choice in the hash order.
	Preferred
	// PrefixPreferred: Preferred, for a request whose session key is the
	// digest of its prompt's beginning (prefix affinity). The picker never
	// returns it; the request path names it so.
	PrefixPreferred
	// SpillOverloaded: the first choice had more in flight than the bound.
	SpillOverloaded
	// SpillUnavailable: the first choice could not take traffic (breaker,
	// cooldown, disabled, at its cap), or its whole tier could not.
	SpillUnavailable
	// SpillRetry: the first choice was already tried by this request (a
	// retry after an attempt that provably sent nothing).
	SpillRetry
)

// String returns the placement's name in logs, usage events and metrics:
// "balanced", "keyless", "affinity", "prefix", "spill_overloaded",
// "spill_unavailable", "spill_retry".
func (p Placement) String() string {
	switch p {
	case Preferred:
		return usageevent.PlacementAffinity
	case PrefixPreferred:
		return usageevent.PlacementPrefix
	case SpillOverloaded:
		return usageevent.PlacementSpillOverloaded
	case SpillUnavailable:
		return usageevent.PlacementSpillUnavailable
	case SpillRetry:
		return usageevent.PlacementSpillRetry
	case Keyless:
		return usageevent.PlacementKeyless
	}
	return usageevent.PlacementBalanced
}

// Spilled reports whether p is a spill.
func (p Placement) Spilled() bool { return p >= SpillOverloaded }

// Picker is a keyless selection algorithm ([P2C], [WeightedRandom]).
type Picker interface {
	Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (Lease, bool)
}

// Affinity is prompt-cache affinity: weighted rendezvous hashing of a
// session key over a tier's targets, with a bounded-load spill; see the
// package doc and docs/routing.md "Affinity". Requests without a key go to
// Fallback. Safe for concurrent use; holds no state of its own.
type Affinity struct {
	// Fallback picks keyless requests. Required.
	Fallback Picker
	// LoadFactor is c: a target with more than ⌈c × (its share of the
	// tier's in-flight + 1)⌉ requests in flight is passed over. Values
	// below 1 mean DefaultLoadFactor.
	LoadFactor float64
}

// Pick is Fallback.Pick: a request without a session key.
func (a *Affinity) Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (Lease, bool) {
	return a.Fallback.Pick(pool, need, tried)
}

// PickKey returns a lease on a target for a request with session key key
// and how it was placed; false when no target of any tier
// can take the request now. With key 0 it is Pick, placement Keyless.
func (a *Affinity) PickKey(pool []*routes.Target, need routes.Caps, tried []*routes.Target, key Key) (Lease, Placement, bool) {
	if key == 0 {
		l, ok := a.Fallback.Pick(pool, need, tried)
		return l, Keyless, ok
	}
	c := a.LoadFactor
	if !(c >= 1) {
		c = DefaultLoadFactor
	}
	first := Balanced // why the session's first choice was passed over; Balanced: not met yet
	for tier := range tiers(pool) {
		t, reason, ok := pickTier(tier, need, tried, key, c)
		if first == Balanced {
			// Preferred, a spill, or Balanced when the tier has no
			// target with the capabilities (the session's place is in a
			// later tier).
			first = reason
		}
		if ok {
			return lease(t), first, true
		}
	}
	return Lease{}, first, false
}

// pickTier walks tier in key's order and takes the first target that is
// eligible, not overloaded and acquired. The placement is Preferred when
// that is the first in the order, otherwise the reason the first was
// passed over; Balanced with false when no target has the capabilities.
// A walk past the first choice scores the tier again for each step, which
// only a spill pays.
func pickTier(tier []*routes.Target, need routes.Caps, tried []*routes.Target, key Key, c float64) (*routes.Target, Placement, bool) {
	first := Balanced
	prev, prevI := math.Inf(1), -1
	for {
		i, s := next(tier, need, key, prev, prevI)
		if i < 0 {
			return nil, first, false
		}
		prev, prevI = s, i
		t := tier[i]
		reason := check(t, tier, need, tried, c)
		if reason == Preferred && !t.Backend.State.Acquire() {
			reason = SpillUnavailable // lost the race for its last slot, or its probe
		}
		if first == Balanced {
			first = reason
		}
		if reason == Preferred {
			return t, first, true
		}
	}
}

// next returns the index and score of the target of tier, among those
// with the capabilities need, that comes right after (prev, prevI) in
// key's order: by score, highest first, equal scores by index. It returns
// −1 past the last. Start with (+Inf, −1).
//
// A target's score for key is its weighted rendezvous score
// (docs/routing.md "Affinity"): w ÷ −ln u, with u uniform in (0, 1) from
// routes.Mix64(key ⊕ t.HashID) (unit). −ln u is an exponential variate,
// so the highest score goes to target i with probability wᵢ ÷ Σw (the
// logarithmic method of Schindelhauer and Schomaker, 2005; Ceph's straw2
// is the same), and the order depends on nothing but the key and the
// targets' identities and weights: every node that holds the same table
// computes it, and a target that joins or leaves moves only the sessions
// whose first choice it becomes or was. math.Log may differ in the last
// bit between architectures (amd64 has its own); that can swap two
// targets only when their scores agree to about 16 digits, which a
// session's first two meet about once in 10¹⁵.
//
// next does not compute every score: a target's score is first bounded
// without a logarithm (rank), which settles nearly every comparison, and
// only a comparison the bounds leave open (two scores within about t²/3
// of each other, see rank.offer) and the score returned take math.Log.
// A first choice at 100 targets takes one or two logarithms rather than
// 100, and next returns exactly what scoring every target would
// (TestAffinityPruning).
func next(tier []*routes.Target, need routes.Caps, key Key, prev float64, prevI int) (int, float64) {
	r := rank{prev: prev, prevI: prevI, best: -1}
	if x := weightIndex(tier); x != nil {
		// The index keeps capabilities, weights and identities
		// contiguous: no Target is read.
		ids := x.HashIDs()
		caps, ws := x.Caps()[:len(ids)], x.Weights()[:len(ids)]
		all := need&^x.Common() == 0 // every target has the capabilities
		for i, id := range ids {
			if !all && caps[i]&need != need {
				continue
			}
			w := ws[i]
			u := unit(uint64(key) ^ id)
			t := 1 - u
			lo := t + 0.5*t*t // −ln u ≥ lo: w ÷ lo bounds the score from above
			if w <= r.bar*lo {
				// Below the best so far, certainly (rank.bar), or of
				// weight 0 (bar ≥ 0).
				continue
			}
			r.offer(i, w, u, t, lo)
		}
	} else {
		for i, tg := range tier {
			if tg.Weight <= 0 || !tg.Caps.Has(need) {
				continue
			}
			w, u := float64(tg.Weight), unit(uint64(key)^tg.HashID)
			t := 1 - u
			lo := t + 0.5*t*t
			if w <= r.bar*lo {
				continue
			}
			r.offer(i, w, u, t, lo)
		}
	}
	if r.best < 0 {
		return -1, 0
	}
	return r.best, r.score()
}

// unit returns u in (0, 1) for rendezvous hashing: the top 53 bits of
// routes.Mix64(x), plus one half, × 2⁻⁵³, never 0 or 1.
func unit(x uint64) float64 {
	return (float64(routes.Mix64(x)>>11) + 0.5) * 0x1p-53
}

// Bounds are widened by these factors, 1 ∓ 2⁻⁴⁰, before they decide a
// comparison: far more than the few roundings between a bound and the
// score as next computes it (products, sums, math.Log within an ulp or
// two), so a comparison the bounds decide comes out as the scores' would.
const (
	lower = 1 - 0x1p-40
	upper = 1 + 0x1p-40
)

// rank is one scan of next: the best target so far after (prev, prevI)
// in the order, and bounds of its score.
//
// A score is w ÷ −ln u. With t = 1 − u, −ln u = t + t²/2 + t³/3 + …, so
// −ln u ≥ t + t²/2, and for t ≤ ½ the tail is at most (t³/3) ÷ (1 − t) ≤
// 2t³/3: the score lies in [w ÷ (t + t²/2 + 2t³/3), w ÷ (t + t²/2)], an
// interval of relative width about t²/3. (For t > ½, −ln u ≤ 1/u − 1 =
// t ÷ u gives a looser one, enough for the low scores those are.) High
// scores have small t (at 100 equal targets the best has t ≈ 1/100, a
// width of about 3·10⁻⁵), so the bounds of two scores rarely overlap;
// when they do, math.Log decides.
type rank struct {
	prev  float64 // the scan looks for the best score after (prev, prevI)
	prevI int
	best  int // −1: none yet
	// The best's weight and u, and bounds of −ln u: lo ≤ −ln u ≤ hi, so
	// its score lies in [w ÷ hi, w ÷ lo]. Once exact, lo = hi = −ln u
	// and s is the score.
	w, u, lo, hi float64
	exact        bool
	s            float64
	// bar is w ÷ hi × lower, 0 with no best: a target whose upper bound
	// w ÷ (t + t²/2) is at most bar scores below the best, certainly.
	bar float64
}

// offer ranks target i of weight w whose hash gave u (t = 1 − u, lo =
// t + t²/2) against prev and the best so far, all of which it follows in
// the tier's order. Bounds are compared cross-multiplied: w ÷ hi > w′ ÷
// lo′ is w × lo′ > w′ × hi.
func (r *rank) offer(i int, w, u, t, lo float64) {
	hi := t / u // −ln u ≤ 1/u − 1
	if t <= 0.5 {
		hi = lo + (2.0/3)*t*t*t
	}
	exact, s := false, 0.0
	if r.prev <= math.MaxFloat64 {
		// A walk past an earlier choice: skip what is at or before prev
		// in the order.
		if w*lower > r.prev*hi {
			return
		}
		if !(w*upper < r.prev*lo) {
			lo = -math.Log(u)
			hi, s, exact = lo, w/lo, true
			if s > r.prev || (s == r.prev && i <= r.prevI) {
				return
			}
		}
	}
	switch {
	case r.best < 0 || w*r.lo*lower > r.w*hi:
		// First, or certainly above the best.
	case w*r.hi*upper < r.w*lo:
		return // certainly below the best
	default:
		// The bounds overlap: the scores decide, equal ones by index
		// (the best's is lower).
		if !exact {
			lo = -math.Log(u)
			hi, s, exact = lo, w/lo, true
		}
		if !(s > r.score()) {
			return
		}
	}
	r.best, r.w, r.u, r.lo, r.hi, r.exact, r.s = i, w, u, lo, hi, exact, s
	r.bar = w / hi * lower
}

// score returns the best target's score, computing it once.
func (r *rank) score() float64 {
	if !r.exact {
		l := -math.Log(r.u)
		r.lo, r.hi, r.s, r.exact = l, l, r.w/l, true
		r.bar = r.s * lower
	}
	return r.s
}

// check returns Preferred when t may take the request, or why not. The
// load bound is ⌈c × (m + 1)⌉, m being t's weight's share of the
// in-flight requests of the tier's targets that have the capabilities
// and can take traffic: with equal weights, their mean (consistent
// hashing with bounded loads, Mirrokni, Thorup and Zadimoghaddam 2018).
func check(t *routes.Target, tier []*routes.Target, need routes.Caps, tried []*routes.Target, c float64) Placement {
	if contains(tried, t) {
		return SpillRetry
	}
	st := t.Backend.State
	if !st.ReadyNow() {
		return SpillUnavailable
	}
	n := float64(st.InFlight())
	if n <= math.Ceil(c) {
		return Preferred // at or below every bound: the tier need not be summed
	}
	var load, weight float64
	for _, x := range tier {
		if x.Caps.Has(need) && x.Backend.State.ReadyNow() {
			load += float64(x.Backend.State.InFlight())
			weight += float64(x.Weight)
		}
	}
	if weight > 0 && n > math.Ceil(c*(load*float64(t.Weight)/weight+1)) {
		return SpillOverloaded
	}
	return Preferred
}
