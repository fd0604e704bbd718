package usage

import (
	"sync"
	"time"
)

// The budget of each key for attempts its client cancelled before anything
// was sent (docs/usage-events.md "Attempts that reached no provider"): their events,
// and their request log lines, are kept up to CancelBurst at once and
// CancelRate a second after that; the rest are counted, not recorded.
// Such an attempt reached no provider and carries no usage, so what is
// left out is a count, never tokens.
const (
	CancelRate  = 2  // per second, per key
	CancelBurst = 20 // per key
)

// pruneAt is the number of keys a KeyBudget holds before it forgets the
// keys whose bucket has refilled (those are as good as new).
const pruneAt = 1024

// KeyBudget is a token bucket per key id: each key may Take burst at once
// and rate a second after that, whatever other keys do. Its memory is
// bounded by the keys active within burst/rate seconds: a key whose bucket
// has refilled is forgotten when the map grows. Safe for concurrent use.
type KeyBudget struct {
	rate  float64 // tokens per second
	burst float64

	mu      sync.Mutex
	keys    map[string]*bucket // guarded by mu
	pruneAt int                // guarded by mu: prune when keys grows to this
}

type bucket struct {
	tokens  float64
	at      time.Time // when tokens was last brought up to date
	refused uint64    // Takes refused since the last one allowed
}

// NewKeyBudget returns a budget of burst at once and rate per second for
// each key.
func NewKeyBudget(rate, burst float64) *KeyBudget {
	return &KeyBudget{rate: rate, burst: burst, keys: make(map[string]*bucket), pruneAt: pruneAt}
}

// Take spends one of key's tokens at now. It reports whether one was left,
// and, when it was, how many Takes of key were refused since the last one
// allowed (for a line that says how many were left out). A now earlier than
// the key's last Take (clocks of concurrent callers) refills nothing.
func (kb *KeyBudget) Take(key string, now time.Time) (ok bool, refused uint64) {
	kb.mu.Lock()
	defer kb.mu.Unlock()
	b := kb.keys[key]
	if b == nil {
		if len(kb.keys) >= kb.pruneAt {
			kb.pruneLocked(now)
		}
		b = &bucket{tokens: kb.burst, at: now}
		kb.keys[key] = b
	}
	if dt := now.Sub(b.at); dt > 0 {
		b.tokens = min(kb.burst, b.tokens+dt.Seconds()*kb.rate)
		b.at = now
	}
	if b.tokens < 1 {
		b.refused++
		return false, 0
	}
	b.tokens--
	refused, b.refused = b.refused, 0
	return true, refused
}

// Empty reports whether key has no token left at now, without taking
// one: whether its next Take would be refused.
func (kb *KeyBudget) Empty(key string, now time.Time) bool {
	kb.mu.Lock()
	defer kb.mu.Unlock()
	b := kb.keys[key]
	if b == nil {
		return false
	}
	tokens := b.tokens
	if dt := now.Sub(b.at); dt > 0 {
		tokens = min(kb.burst, tokens+dt.Seconds()*kb.rate)
	}
	return tokens < 1
}

// pruneLocked forgets the keys whose bucket is full again at now, and
// refused nothing since it was last allowed, then sets the next size to
// prune at: twice what is left, so pruning stays amortised O(1) per key.
// kb.mu must be held.
func (kb *KeyBudget) pruneLocked(now time.Time) {
	for k, b := range kb.keys {
		if b.refused == 0 && b.tokens+now.Sub(b.at).Seconds()*kb.rate >= kb.burst {
			delete(kb.keys, k)
		}
	}
	kb.pruneAt = max(pruneAt, 2*len(kb.keys))
}
