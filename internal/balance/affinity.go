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
func next(tier []*routes.Target, need routes.Caps, key Key, prev float64, prevI int) (int, float64) {
	best, bestS := -1, 0.0
	for i, t := range tier {
		if t.Weight <= 0 || !t.Caps.Has(need) {
			continue
		}
		s := score(key, t)
		if s > prev || (s == prev && i <= prevI) {
			continue // at or before prev in the order
		}
		if best < 0 || s > bestS {
			best, bestS = i, s
		}
	}
	return best, bestS
}

// score is t's weighted rendezvous score for key (docs/routing.md
// "Affinity"): w ÷ −ln u, with u uniform in (0, 1) from
// routes.Mix64(key ⊕ t.HashID). −ln u is an exponential variate, so the
// highest score goes to target i with probability wᵢ ÷ Σw (the
// logarithmic method of Schindelhauer and Schomaker, 2005; Ceph's straw2
// is the same), and the order depends on nothing but the key and the
// targets' identities and weights: every node that holds the same table
// computes it, and a target that joins or leaves moves only the sessions
// whose first choice it becomes or was. math.Log may differ in the last
// bit between architectures (amd64 has its own); that can swap two
// targets only when their scores agree to about 16 digits, which a
// session's first two meet about once in 10¹⁵.
func score(key Key, t *routes.Target) float64 {
	h := routes.Mix64(uint64(key) ^ t.HashID)
	u := (float64(h>>11) + 0.5) * 0x1p-53 // 53 bits, exact, never 0 or 1
	return float64(t.Weight) / -math.Log(u)
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
