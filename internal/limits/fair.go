package limits

import (
	"math"
	"time"
)

// Fairness inside a tenant (docs/limits.md "Fairness inside a tenant").
// A tenant's requests per minute are shared by its keys: each key active
// in the last window (offered a request) has a fair share of the
// tenant's rate, L / active keys per minute, kept as a bucket of that
// capacity refilling at that rate. The last fair share's worth of the
// tenant's bucket is a reserve: a key takes from it only while its own
// fair-share bucket holds a request. So a key that has used its share is
// refused first when the tenant's bucket runs short, whichever key
// happens to arrive first after each refill, and a key asking less than
// its share always finds the reserve.
//
// A tenant's tokens per minute are shared the same way, with a second
// fair-share bucket per key in tokens: the key's attempts are debited
// from it when they end (below zero if need be, as the tenant's own
// bucket is), and while it is not positive the key is admitted only if
// the tenant's bucket is above its reserve of one fair share of tokens.
//
// With the redis store a node judges by its own view: the keys active on
// it, and as the tenant's level what it holds leased plus the fleet's
// bucket as of its last take, refilled since (its local bucket, which
// shadows the fleet's).

// share is one key's fair share of its tenant's requests per minute;
// guarded by the tenant state's mu.
type share struct {
	level float64 // requests the key may still take from the reserve, ≥ 0
	tok   float64 // tokens the key may still use from the reserve; may go below 0
	at    int64   // when level and tok were last refilled
	last  int64   // when the key was last offered a request
	seen  bool    // last is set
}

// sweepEvery is how often a tenant recounts its active keys; between
// recounts a key that went quiet still counts, which only makes the
// shares smaller (the reserve is then larger than one share).
const sweepEvery = time.Second

// fairLocked notes that sh's key is offered a request at at, refills its
// shares and records in st the refusal fairness causes: the tenant's
// requests bucket, at level, or its tokens bucket, at tokLevel, is down
// to its reserve and the key has used its share of it. Call it with s.mu
// held, after s's own checks.
func (s *state) fairLocked(sh *share, scope Scope, at int64, level, tokLevel float64, st *Status) {
	if s.rpm == 0 && s.tpm == 0 || sh == nil {
		return
	}
	if !sh.seen || at-sh.last > int64(window) {
		// The key becomes active: its shares start full.
		s.active++
		sh.seen, sh.at = true, at
		sh.level, sh.tok = math.Inf(1), math.Inf(1) // clamped to the shares below
	}
	sh.last = max(sh.last, at)
	if at-s.swept >= int64(sweepEvery) {
		s.swept = at
		s.active = 0
		for _, o := range s.shares {
			if o.seen && at-o.last <= int64(window) {
				s.active++
			}
		}
	}
	n := float64(max(1, s.active))
	fair, fairTok := float64(s.rpm)/n, float64(s.tpm)/n
	if d := at - sh.at; d > 0 {
		el := float64(d) / float64(window)
		sh.level += el * fair
		sh.tok += el * fairTok
		sh.at = at
	}
	sh.level, sh.tok = min(sh.level, fair), min(sh.tok, fairTok)
	if st.Refused() {
		return
	}
	if s.rpm > 0 && sh.level < 1 && level-1 < fair {
		// Fits once the share holds a request or the bucket is above the
		// reserve again, whichever comes first.
		wait := min(time.Duration(math.Ceil((1-sh.level)/fair*float64(window))), perMinute(fair+1-level, s.rpm))
		st.refuse(scope, KindRequests, max(wait, 1)) // never 0: it does not fit now
	}
	if s.tpm > 0 && sh.tok <= 0 && tokLevel <= fairTok {
		// Fits once the share is positive or the bucket is above the
		// reserve again (strictly after: a nanosecond on top).
		wait := min(time.Duration(math.Ceil(-sh.tok/fairTok*float64(window))), perMinute(fairTok-tokLevel, s.tpm)) + 1
		st.refuse(scope, KindTokens, wait)
	}
}

// debitShareLocked spends tokens of sh's share of s's tokens per minute;
// the share may go below zero, and is paid back by its refill. Call it
// with s.mu held.
func (s *state) debitShareLocked(sh *share, tokens int64) {
	if s.tpm > 0 && sh != nil {
		sh.tok -= float64(tokens)
	}
}

// takeShare spends one request of sh's share; a share spent beyond zero
// stays at zero (the key then takes only what is above the reserve).
func (s *state) takeShare(sh *share) {
	if s.rpm > 0 && sh != nil {
		sh.level = max(0, sh.level-1)
	}
}
