package balance

import (
	"math"
	"math/bits"

	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
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
	// The clock is read only if the walk needs it (see check).
	s := newSession(key, filter{need: need, tried: tried}, c)
	s.clock = pool[0].Backend.State
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
	bucket uint32 // the session key's bucket (bucketOf)
	key    uint64 // the bucket's seed (bucketSeed): the order is the bucket's
	key2   uint64 // a second seed derived from it (keySeed)
	c      float64
	floor  int64 // ⌈c⌉: no target at or below it is overloaded, whatever the mean
	// clock, when set, is a state whose Now the session reads the first
	// time it needs filter.now; nil: filter.now is set.
	clock *upstream.State

	// unranked: firstIndexed returned the first target without its rank,
	// which rank computes from its h̄ and weight (memoX nil), or from
	// target memoI of index memoX, which the tier's memo named.
	unranked bool
	hbar     uint64
	w        float64
	memoX    *routes.WeightIndex
	memoI    int

	// The tier's load, summed over its eligible targets when first needed.
	loaded bool
	load   float64 // in-flight
	weight float64
}

// newSession returns the session of key under f with load factor c.
func newSession(key Key, f filter, c float64) session {
	b := bucketOf(key)
	k := bucketSeed(b)
	return session{filter: f, bucket: b, key: k, key2: keySeed(k), c: c, floor: int64(math.Ceil(c))}
}

// bucketBits is log₂ routes.FirstBuckets: a session key's bucket is its
// top bucketBits bits.
const bucketBits = 16

// bucketOf returns key's bucket: its top bits, uniform since the key is
// a finalised hash (SessionKey).
func bucketOf(key Key) uint32 { return uint32(uint64(key) >> (64 - bucketBits)) }

// bucketSeed returns the seed of bucket b, which hashing orders the
// tier by for every key of the bucket (another constant than keySeed's).
func bucketSeed(b uint32) uint64 { return routes.Mix64(uint64(b) ^ 0xbb67ae8584caa73b) }

// keySeed derives a session key's second seed, as routes.SecondSeed does
// a target's (with another constant).
func keySeed(key uint64) uint64 { return routes.Mix64(key ^ 0x6a09e667f3bcc909) }

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
			i, r = s.next(tier, x, s.rank(prevR), prevI)
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
	if !st.ReadyNow() {
		return SpillUnavailable
	}
	n := st.InFlight()
	if n <= s.floor {
		return Preferred
	}
	if !s.loaded {
		if s.clock != nil {
			s.now, s.clock = s.clock.Now(), nil
		}
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

// The session's order over a tier (docs/routing.md "Affinity") is
// weighted rendezvous hashing of its bucket. The session key's top 16
// bits are its bucket (bucketOf), whose seed (bucketSeed) stands for the
// key; each target gets a 64-bit hash of that seed and of the target's
// identity,
//
//	h = hi ⊕ lo of the 128-bit product (key ⊕ HashID) × (key2 ⊕ seed2)
//
// (key being the bucket's seed; the multiply-and-fold of wyhash, which is
// also how Go's runtime mixes where it has no AES hash; key2 and seed2
// are second seeds of the key and of the target, keySeed and
// routes.SecondSeed), and from it
// u = 1 − t with t = (⌊h̄ ÷ 2¹¹⌋ + ½) ÷ 2⁵³, h̄ = 2⁶⁴ − 1 − h. The target
// with the lowest score −ln(u) ÷ weight, that is the highest −weight ÷
// ln u, comes first, so target i is the first choice of a share wᵢ ÷ Σw of
// the buckets, and a target that joins or leaves moves only the buckets
// whose first choice it is or becomes. When all weights are equal the order is
// that of h alone, highest first: the same order, without a logarithm.
// Equal scores go to the lower index. Everything is integer arithmetic or
// IEEE-754 basic operations in a fixed order (logScore), so every node,
// on any architecture, computes the same order.
//
// Since every key of a bucket has the bucket's order, a tier may remember
// each bucket's first choice (firstIndexed), and a share of the 2¹⁶
// buckets rather than of the keys goes to each target: off the weight's
// share by a binomial error of √(p(1 − p) ÷ 2¹⁶) for a share p
// (TestAffinityBucketShares).
//
// A rank encodes a target's place: the complement of h when the weights
// are equal, else the float64 bits of its score (which order like the
// positive scores); a lower rank comes first.

// mix is the multiply-and-fold: the high and low halves of a × b, xored.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// candidates is how many targets of a weighted tier firstIndexed keeps
// for its exact comparison before it settles the ones it has.
const candidates = 16

// candidateLimit is candidates, lowered by a test to exercise the early
// settling.
var candidateLimit = candidates

// firstIndexed is next for the first in the order of an indexed tier: the
// same result, without the bookkeeping of later ranks, since nearly every
// pick stops there; the rank may be left to s.rank (unranked). When every
// target of a tier of at least memoMin has the capabilities, the first
// choice is the bucket's: it reads the tier's memo (routes.FirstChoices)
// and, the first time, fills it from firstScanned. A weighted tier is screened without a
// logarithm (screened): about one target per pick needs its exact score,
// and when only one is left it needs none.
func (s *session) firstIndexed(x *routes.WeightIndex) (int, uint64) {
	rv := x.Rendezvous()
	if rv.Common&s.need != s.need || rv.Positive < memoMin || x.Len() > routes.FirstMax {
		return s.firstScanned(x)
	}
	// Every target has the capabilities: the first choice is the
	// bucket's, which the tier's memo holds once computed.
	memo := x.FirstChoices()
	if v := memo.Get(s.bucket); v != 0 {
		s.unranked, s.memoX, s.memoI = true, x, int(v-1)
		return int(v - 1), 0
	}
	i, r := s.firstScanned(x)
	memo.Set(s.bucket, uint32(i)+1)
	return i, r
}

// memoMin is the fewest targets of weight > 0 for which a tier keeps the
// memo of its buckets' first choices (routes.FirstChoices, 128 KiB): a
// smaller tier is scanned in about the time the memo's cache miss takes.
const memoMin = 16

// firstScanned is firstIndexed by a scan of the tier. It reads
// the index's rendezvous layout.
func (s *session) firstScanned(x *routes.WeightIndex) (int, uint64) {
	rv := x.Rendezvous()
	n := rv.Positive
	keys, caps := rv.Keys[:n], rv.Caps[:n]
	k1, k2, need := s.key, s.key2, s.need
	all := rv.Common&need == need // every target has the capabilities
	if x.Uniform() {
		// The layout is in tier order.
		if all && n >= 2 {
			i, h := highest(rv.Hash[:n], rv.Seed2[:n], k1, k2)
			return i, ^h
		}
		best, bestH := -1, uint64(0)
		for i, key := range keys {
			if caps[i]&need != need {
				continue
			}
			if h := mix(k1^key.Hash, k2^key.Seed2); best < 0 || h > bestH {
				best, bestH = i, h
			}
		}
		return best, ^bestH
	}
	var c screened
	c.screen(rv, k1, k2, need, all)
	// Usually one candidate is left: it is first, and its score is
	// needed only if the walk goes on (rank).
	last, left := -1, 0
	for i := range c.n {
		if c.within(rv, i) {
			last, left = i, left+1
		}
	}
	if left == 1 && c.best < 0 {
		j := int(c.pos[last])
		s.unranked, s.hbar, s.w = true, c.hbar[last], rv.Weight[j]
		return int(rv.Index[j]), 0
	}
	c.settle(rv)
	return c.best, math.Float64bits(c.bestF)
}

// screened is the screen of one weighted tier (firstIndexed): the
// candidates not ruled out yet, and the best of those already settled.
//
// Scores are compared in 0.64 fixed point. With m = h̄ with its low 11
// bits cleared, m ÷ 2⁶⁴ ≤ t, so m ÷ w is a lower bound of a target's score
// (−ln(1 − t) ≥ t), and a target is ruled out when m > bound × w, an
// integer product, bound being the least upper bound of a score seen so
// far: (t + t²) ÷ w for a target with t < ½ (−ln(1 − t) ≤ t + t² there),
// with a margin for rounding. Targets are laid out heaviest first, so the
// bound is small after the first few.
type screened struct {
	bound uint64 // the least upper bound seen, with a margin
	n     int
	pos   [candidates]int32  // the candidates' positions in the layout
	hbar  [candidates]uint64 // their h̄
	best  int                // the best settled target's index, or −1
	bestF float64            // its score
}

// screen runs the screen over rv's targets with the capabilities need
// (all: every target has them).
func (c *screened) screen(rv *routes.Rendezvous, k1, k2 uint64, need routes.Caps, all bool) {
	n := rv.Positive
	if n == 0 {
		c.best, c.n = -1, 0
		return
	}
	keys, caps, inv := rv.Keys[:n], rv.Caps[:n], rv.Inv[:n]
	c.best, c.bestF, c.n = -1, math.Inf(1), 0
	bound := uint64(math.MaxUint64)
	safe := math.MaxUint64 / keys[0].W // the heaviest: bound ≤ safe, and bound × w cannot overflow
	for j := 0; ; j++ {
		switch {
		case !all:
			j = nextCandidateCaps(j, keys, caps, need, k1, k2, bound)
		case bound <= safe:
			j = nextCandidate(j, keys, k1, k2, bound)
		default:
			j = nextCandidateCaps(j, keys, nil, 0, k1, k2, bound)
		}
		if j == n {
			break
		}
		hbar := ^mix(k1^keys[j].Hash, k2^keys[j].Seed2)
		if c.n == candidateLimit {
			c.bound = bound
			c.settle(rv)
		}
		c.pos[c.n], c.hbar[c.n] = int32(j), hbar
		c.n++
		if hbar < 1<<63 { // t < ½
			t := hbar + 1<<11 // ≥ t
			sq, _ := bits.Mul64(t, t)
			ub, _ := bits.Mul64(t+sq+1, inv[j])
			// The margin covers the reciprocal's rounding and logScore's.
			if ub += ub>>40 + 2; ub < bound {
				bound = ub
			}
		}
	}
	c.bound = bound
}

// nextCandidate returns the position, from j on, of the next target of
// keys that bound does not rule out (see screened), or len(keys); bound ×
// a weight must not overflow. It is a leaf function with few arguments so
// that its loop, which every target of the tier goes through, keeps
// everything in registers (hence noinline: inlined, its loop would share
// the registers of screen's).
//
//go:noinline
func nextCandidate(j int, keys []routes.RendezvousKey, k1, k2, bound uint64) int {
	for ; j < len(keys); j++ {
		key := &keys[j]
		if m := ^mix(k1^key.Hash, k2^key.Seed2) &^ 0x7ff; m <= bound*key.W {
			return j
		}
	}
	return len(keys)
}

// nextCandidateCaps is nextCandidate for any bound, among the targets
// whose capabilities include need (caps nil: all of them).
func nextCandidateCaps(j int, keys []routes.RendezvousKey, caps []routes.Caps, need routes.Caps, k1, k2, bound uint64) int {
	for ; j < len(keys); j++ {
		if caps != nil && caps[j]&need != need {
			continue
		}
		key := &keys[j]
		m := ^mix(k1^key.Hash, k2^key.Seed2) &^ 0x7ff
		if hi, lo := bits.Mul64(bound, key.W); hi != 0 || m <= lo {
			return j
		}
	}
	return len(keys)
}

// within reports whether candidate k is not ruled out by the bound.
func (c *screened) within(rv *routes.Rendezvous, k int) bool {
	hi, lo := bits.Mul64(c.bound, rv.Keys[c.pos[k]].W)
	return hi != 0 || c.hbar[k]&^0x7ff <= lo
}

// settle scores the candidates within the bound exactly, keeps the best
// and clears the list.
func (c *screened) settle(rv *routes.Rendezvous) {
	for k := range c.n {
		if !c.within(rv, k) {
			continue
		}
		j := int(c.pos[k])
		i := int(rv.Index[j])
		if f := logScore(c.hbar[k]>>11) / rv.Weight[j]; c.best < 0 || f < c.bestF || (f == c.bestF && i < c.best) {
			c.best, c.bestF = i, f
		}
	}
	c.n = 0
}

// highest returns the index and value of the highest mix(k1 ⊕ hashes[i],
// k2 ⊕ seed2[i]) (the lowest index among equals), for len(hashes) ≥ 2. It
// is a function of its own so that its loop keeps everything in
// registers, and it runs two lanes (even and odd indices) so that the
// running maximum is not one chain of dependent compares.
func highest(hashes, seed2 []uint64, k1, k2 uint64) (int, uint64) {
	n := len(hashes)
	seed2 = seed2[:n]
	b0, b1 := mix(k1^hashes[0], k2^seed2[0]), mix(k1^hashes[1], k2^seed2[1])
	i0, i1 := 0, 1
	for i := 2; i+1 < n; i += 2 {
		h0 := mix(k1^hashes[i], k2^seed2[i])
		h1 := mix(k1^hashes[i+1], k2^seed2[i+1])
		if h0 > b0 {
			b0, i0 = h0, i
		}
		if h1 > b1 {
			b1, i1 = h1, i+1
		}
	}
	if n%2 == 1 {
		if h := mix(k1^hashes[n-1], k2^seed2[n-1]); h > b0 {
			b0, i0 = h, n-1
		}
	}
	if b1 > b0 || (b1 == b0 && i1 < i0) {
		return i1, b1
	}
	return i0, b0
}

// rank returns r, or when the first in the order was returned without its
// rank (unranked), computes that rank.
func (s *session) rank(r uint64) uint64 {
	if !s.unranked {
		return r
	}
	s.unranked = false
	if x := s.memoX; x != nil {
		s.memoX = nil
		hash, _, w := x.Hashes()
		id := hash[s.memoI]
		s.hbar, s.w = ^mix(s.key^id, s.key2^routes.SecondSeed(id)), w[s.memoI]
		if x.Uniform() {
			return s.hbar
		}
	}
	return math.Float64bits(logScore(s.hbar>>11) / s.w)
}

// next returns the index and rank of the capability-matching target of
// tier that comes right after (prevR, prevI) in the session's order
// (prevI −1: the first), or −1. The order is by rank, then index. A tier
// without the index reads the targets themselves and always ranks by
// score.
func (s *session) next(tier []*routes.Target, x *routes.WeightIndex, prevR uint64, prevI int) (int, uint64) {
	var rv *routes.Rendezvous
	n := len(tier)
	if x != nil {
		rv = x.Rendezvous()
		n = rv.Positive
	}
	uniform := x != nil && x.Uniform()
	bestI, bestR, bestF := -1, uint64(math.MaxUint64), math.Inf(1)
	for j := range n {
		var (
			i       int
			id, id2 uint64
			c       routes.Caps
			w       float64
		)
		if rv != nil {
			i, id, id2, c, w = int(rv.Index[j]), rv.Keys[j].Hash, rv.Keys[j].Seed2, rv.Caps[j], rv.Weight[j]
		} else {
			t := tier[j]
			i, id, id2, c, w = j, t.HashID, routes.SecondSeed(t.HashID), t.Caps, float64(t.Weight)
		}
		if !c.Has(s.need) || w <= 0 {
			continue
		}
		hbar := ^mix(s.key^id, s.key2^id2)
		var r uint64
		if uniform {
			r = hbar
		} else {
			m := hbar >> 11
			// −ln(1 − t) ≥ t: a target whose lower bound cannot beat
			// the best so far needs no logarithm (with a margin for
			// rounding).
			if lb := float64(m) * 0x1p-53 / w; lb*(1-0x1p-40) > bestF {
				continue
			}
			f := logScore(m) / w
			r = math.Float64bits(f)
			if (r > prevR || (r == prevR && i > prevI)) && (bestI < 0 || r < bestR || (r == bestR && i < bestI)) {
				bestF = f
			}
		}
		if (r > prevR || (r == prevR && i > prevI)) && (bestI < 0 || r < bestR || (r == bestR && i < bestI)) {
			bestI, bestR = i, r
		}
	}
	return bestI, bestR
}

// Coefficients 1 ÷ (2k + 1) of the series of atanh(s) ÷ s in s².
const (
	c3, c5, c7, c9, c11, c13 = 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9, 1.0 / 11, 1.0 / 13
	c15, c17, c19, c21, c23  = 1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23
)

// atanhSeries returns 2·atanh(s) for |s| ≤ 0.172 (ln((1 + s) ÷ (1 − s))),
// to within a few units in the last place, from the series
// 2(s + s³/3 + s⁵/5 + …). Each product is rounded on its own (the explicit
// float64 conversions forbid fused multiply-adds), so the result is the
// same bit for bit on every architecture.
func atanhSeries(s float64) float64 {
	z := float64(s * s)
	p := float64(c23 * z)
	for _, c := range [...]float64{c21, c19, c17, c15, c13, c11, c9, c7, c5, c3} {
		p = float64((p + c) * z)
	}
	return 2 * float64(s+float64(s*p))
}

// logScore returns −ln(1 − t) for t = (m + ½) ÷ 2⁵³, 0 ≤ m < 2⁵³: the
// exponential variate of rendezvous hashing, before the division by the
// weight. It is computed with IEEE-754 basic operations only (not
// math.Log, whose last bit differs between architectures), so every node
// computes the same value, and agrees with math.Log1p(−t) to about 1e-15.
func logScore(m uint64) float64 {
	t := (float64(m) + 0.5) * 0x1p-53
	if t < 0.25 {
		// 1 − t = (1 − s) ÷ (1 + s) with s = t ÷ (2 − t) ≤ ⅐.
		return atanhSeries(t / (2 - t))
	}
	// u = 1 − t, exactly as (2⁵³ − 1 − m + ½) ÷ 2⁵³, is f · 2ᵉ with f in
	// [√½, √2): ln u = e·ln 2 + ln f, and ln f = 2·atanh((f − 1) ÷ (f + 1)).
	u := (float64(1<<53-1-m) + 0.5) * 0x1p-53
	f, e := math.Frexp(u) // f in [½, 1)
	if f < math.Sqrt2/2 {
		f, e = 2*f, e-1
	}
	return -float64(float64(float64(e)*math.Ln2) + atanhSeries((f-1)/(f+1)))
}
