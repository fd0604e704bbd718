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
// "balanced", "keyless", "affinity", "spill_overloaded",
// "spill_unavailable", "spill_retry".
func (p Placement) String() string {
	switch p {
	case Preferred:
		return usageevent.PlacementAffinity
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
	if len(pool) == 0 {
		return Lease{}, Balanced, false
	}
	c := a.LoadFactor
	if !(c >= 1) {
		c = DefaultLoadFactor
	}
	s := session{
		filter: filter{need: need, tried: tried, now: pool[0].Backend.State.Now()},
		key:    uint64(key),
		c:      c,
		floor:  int64(math.Ceil(c)),
	}
	first := Balanced // the reason the session's first choice was passed over; Balanced = none yet
	for tier := range tiers(pool) {
		t, reason, ok := s.pickTier(tier)
		if ok {
			if first == Balanced {
				first = reason
			}
			return lease(t), first, true
		}
		if first == Balanced && reason != Balanced {
			// The session's place was in this tier, but nothing in it
			// could take the request.
			first = reason
		}
	}
	return Lease{}, first, false
}

// session is one PickKey call.
type session struct {
	filter
	key   uint64
	c     float64
	floor int64 // ⌈c⌉: no target at or below it is overloaded, whatever the mean

	// The tier's load, summed over its eligible targets when first needed.
	loaded bool
	load   float64 // in-flight
	weight float64
}

// pickTier walks tier in the session's hash order and takes the first
// target that is eligible, not overloaded and acquired. The placement is
// Preferred when that is the first in the order, otherwise the reason the
// first was passed over; Balanced with false when the tier has no target
// with the capability.
func (s *session) pickTier(tier []*routes.Target) (*routes.Target, Placement, bool) {
	s.loaded = false
	x := weightIndex(tier) // nil: scan the targets themselves, by the logarithm
	first := Balanced
	prevR, prevI := uint64(0), -1
	for {
		var i int
		var r uint64
		if prevI < 0 && x != nil {
			i, r = s.firstIndexed(x)
		} else {
			i, r = s.next(tier, x, prevR, prevI)
		}
		if i < 0 {
			return nil, first, false
		}
		prevR, prevI = r, i
		t := tier[i]
		reason := s.check(t, tier)
		if reason == Preferred && t.Backend.State.Acquire() {
			if first == Balanced {
				first = Preferred
			}
			return t, first, true
		}
		if reason == Preferred {
			reason = SpillUnavailable // lost the race for its last slot, or its probe
		}
		if first == Balanced {
			first = reason
		}
	}
}

// check returns Preferred when t may take the request, or why not.
func (s *session) check(t *routes.Target, tier []*routes.Target) Placement {
	for _, x := range s.tried {
		if x == t {
			return SpillRetry
		}
	}
	st := t.Backend.State
	if !st.Ready(s.now) {
		return SpillUnavailable
	}
	n := st.InFlight()
	if n <= s.floor {
		return Preferred
	}
	if !s.loaded {
		s.load, s.weight = 0, 0
		for _, x := range tier {
			if x.Caps.Has(s.need) && x.Backend.State.Ready(s.now) {
				s.load += float64(x.Backend.State.InFlight())
				s.weight += float64(x.Weight)
			}
		}
		s.loaded = true
	}
	if s.weight <= 0 {
		return Preferred
	}
	// ⌈c × (mean + 1)⌉, the mean being t's weighted share of the load: with
	// equal weights, the tier's mean in-flight.
	bound := math.Ceil(s.c * (s.load*float64(t.Weight)/s.weight + 1))
	if float64(n) > bound {
		return SpillOverloaded
	}
	return Preferred
}

// firstIndexed is next for the first in the order of an indexed tier:
// the same result by the same arithmetic, in loops without the bookkeeping
// of later ranks, since nearly every pick stops there.
func (s *session) firstIndexed(x *routes.WeightIndex) (int, uint64) {
	hashes, caps, weights := x.Hashes()
	caps = caps[:len(hashes)]
	best := -1
	if x.Uniform() {
		var bestH uint64
		for i, id := range hashes {
			if caps[i]&s.need != s.need {
				continue
			}
			if h := routes.Mix64(s.key ^ id); best < 0 || h > bestH {
				best, bestH = i, h
			}
		}
		return best, ^bestH
	}
	weights = weights[:len(hashes)]
	bestF := math.Inf(1)
	for i, id := range hashes {
		if caps[i]&s.need != s.need {
			continue
		}
		m := float64(routes.Mix64(s.key^id) >> 11)
		w := weights[i]
		if (1<<53-m-0.5)*0x1p-53 >= bestF*w {
			continue // see next: the bound cannot beat the best
		}
		if f := -math.Log((m+0.5)*0x1p-53) / w; f < bestF {
			best, bestF = i, f
		}
	}
	return best, math.Float64bits(bestF)
}

// next returns the index and rank of the capability-matching target of
// tier that comes right after (prevR, prevI) in the session's hash order
// (prevI −1: the first), or −1. The order is by rank, then index; a lower
// rank comes first.
//
// The rank is weighted rendezvous hashing: with u ∈ (0, 1) from a hash of
// the session key and the target's identity, the target with the highest
// score −w ÷ ln u, that is the lowest −ln(u) ÷ w, comes first, so target i
// is the first choice of a share wᵢ ÷ Σw of the keys, and a target that
// joins or leaves moves only the keys whose first choice it is or becomes.
// The rank is the float64 bits of −ln(u) ÷ w, which order like the
// (positive) values. When all weights are equal it is the complement of
// the hash itself: the same order, without a logarithm.
func (s *session) next(tier []*routes.Target, x *routes.WeightIndex, prevR uint64, prevI int) (int, uint64) {
	var (
		hashes  []uint64
		caps    []routes.Caps
		weights []float64
	)
	if x != nil {
		hashes, caps, weights = x.Hashes()
	}
	uniform := x != nil && x.Uniform()
	bestI, bestR, bestF := -1, uint64(math.MaxUint64), math.Inf(1)
	for i := range tier {
		var (
			id uint64
			c  routes.Caps
			w  float64
		)
		if x != nil {
			id, c, w = hashes[i], caps[i], weights[i]
		} else {
			t := tier[i]
			id, c, w = t.HashID, t.Caps, float64(t.Weight)
		}
		if !c.Has(s.need) {
			continue
		}
		h := routes.Mix64(s.key ^ id)
		var r uint64
		if uniform {
			r = ^h
		} else {
			m := float64(h >> 11) // u = (m + ½) ÷ 2⁵³
			// −ln u ≥ 1 − u: a target whose lower bound (1 − u) ÷ w
			// cannot beat the best so far needs no logarithm.
			if oneMinusU := (1<<53 - m - 0.5) * 0x1p-53; oneMinusU >= bestF*w {
				continue
			}
			f := -math.Log((m+0.5)*0x1p-53) / w
			r = math.Float64bits(f)
			if (r > prevR || (r == prevR && i > prevI)) && r < bestR {
				bestF = f
			}
		}
		if (r > prevR || (r == prevR && i > prevI)) && r < bestR {
			bestI, bestR = i, r
		}
	}
	return bestI, bestR
}
