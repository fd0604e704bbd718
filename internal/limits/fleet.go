package limits

import (
	"context"
	"time"
)

// leaseFraction is the slice of a limit one take from the fleet asks for:
// with a twentieth, a key at its limit costs its node about one round trip
// to Redis every 3 s, whatever its rate, and the fleet overshoots by at
// most 1.5/20 of the limit per node (docs/limits.md).
const leaseFraction = 20

// maxTakes bounds the takes one admission makes per try: requests of one
// key racing on a nearly empty fleet bucket may spend each other's
// leases; after this many the request is refused, as the fleet would.
const maxTakes = 3

// maxLoops bounds the rounds one admission makes, waits for other
// requests' takes included.
const maxLoops = 12

// minRetake and maxRetake bound how long a node waits before it asks a
// fleet bucket that gave it less than a lease, or has less than one
// left, again (retake): the time
// the bucket takes to refill one lease, so that the next take finds a
// lease's worth, but at most a second the first time, so that a node
// comes back to a key freed by its neighbours quickly. A node that is
// short again on its next take too (demand at the limit) waits the whole
// refill time of a lease: each of its takes then brings a full lease (if
// the other nodes leave it), so a key held at its limit costs its node
// about one round trip per lease, however many requests it is offered.
// A bucket that refills a lease faster than 100 ms is asked at most ten
// times a second.
const (
	minRetake = 100 * time.Millisecond
	maxRetake = time.Second
)

// maxShared and maxSharedRetake bound how far a node stretches its wait
// when the fleet's bucket is shared at the limit. With n nodes each
// asking after one lease's refill, each take finds about a lease/n, and
// a key held at its limit costs each node a round trip per lease refill
// (four nodes at 60 requests a minute: 0.25 round trips per offered
// request, BenchmarkAtLimit). So each take in a row that got half a
// lease or less doubles the wait, up to maxShared doublings and maxSharedRetake,
// until the nodes' takes each find a whole lease; one that left the
// bucket a lease or more (the wait is longer than the fleet needs) ends
// the stretch. The wait only delays takes: what a node holds, and so the
// overshoot, stays as it was, and the bucket keeps refilling meanwhile
// (a stretched wait is far shorter than the minute a bucket takes to
// fill, so nothing refilled is lost).
const (
	maxShared       = 3
	maxSharedRetake = 24 * time.Second
)

// retake is how long a node leaves a fleet bucket of capacity alone
// after a short take (less than a lease given or left): the time it refills one
// lease, at least minRetake, and at most maxRetake unless the previous
// take was short too (short), doubled for each of the shared takes in
// a row that got half a lease or less (up to maxShared times,
// and not past maxSharedRetake); or wait (when the fleet's next unit is
// further away) if longer.
func retake(wait time.Duration, capacity int64, short bool, shared int) time.Duration {
	refill := max(time.Duration(float64(window)*float64(leaseSize(capacity))/float64(max(capacity, 1))), minRetake)
	if !short {
		refill = min(refill, maxRetake)
	} else if stretched := refill << min(shared, maxShared); stretched > refill {
		refill = max(refill, min(stretched, maxSharedRetake))
	}
	return max(wait, refill)
}

// lease is what a node holds of one fleet bucket.
type lease struct {
	bal        int64         // leased and unspent; tokens may go below zero (owed to the fleet)
	at         int64         // when the last lease was granted
	fleet      int64         // the fleet bucket's level after the last take, for headers
	emptyUntil int64         // the fleet had less than a lease to give: no take before this
	short      bool          // the last take got less than a lease or left the fleet's bucket below one
	shared     int           // takes in a row, at the limit, that got half a lease or less (maxShared)
	fetching   chan struct{} // non-nil while a take is in flight; closed when it ends
}

// leaseSize is what one take asks for: a twentieth of the limit, at
// least 1.
func leaseSize(capacity int64) int64 { return max(1, capacity/leaseFraction) }

// expire drops what is left of a lease granted more than a window ago:
// leased budget is the window's, and a node must not hoard it. A debt as
// old is forgiven too: the fleet's bucket has refilled meanwhile, as a
// local one would have.
func (ls *lease) expire(at int64) {
	if ls.bal != 0 && at-ls.at > int64(window) {
		ls.bal = 0
	}
}

// wantsTake reports whether the lease should be topped up now, ahead of
// time: below half a lease, no take in flight, and the fleet not known
// to be empty.
func (ls *lease) wantsTake(capacity, at int64) bool {
	return capacity > 0 && ls.fetching == nil && at >= ls.emptyUntil && 2*ls.bal < leaseSize(capacity)
}

// refuse records a refusal in st, keeping the one with the longest wait.
func (st *Status) refuse(scope Scope, k Kind, wait time.Duration) {
	if !st.Refused() || wait > st.RetryAfter {
		st.Scope, st.Kind, st.RetryAfter = scope, k, wait
	}
}

// need is a lease an admission found empty, or (ls nil) a hold of
// concurrency slots it found full.
type need struct {
	s  *state
	ls *lease
}

// admitFleet is Admit with the redis store up: requests and tokens per
// minute are spent from the node's leases, concurrency slots from its
// holds; only a lease that is empty, or a hold that is full, costs the
// request a round trip. done is false when the store failed on the way
// (nothing was taken): the caller falls back.
func (sub *Subject) admitFleet(now time.Time) (t Ticket, st Status, ok, done bool) {
	l := sub.l
	at := l.since(now)
	gen := l.fleet.gen.Load()
	ks, ts := sub.key, sub.tenant
	// waiting[i] is set while this admission counts in the pending
	// slots of ks (0) or ts (1): the next take asks for it too.
	var waiting [2]bool
	unwaitLocked := func() {
		if waiting[0] {
			ks.hold.pending--
		}
		if waiting[1] {
			ts.hold.pending--
		}
	}
	lock := func() {
		// Key before tenant, always: one lock order for every request.
		if ks != nil {
			ks.mu.Lock()
		}
		if ts != nil {
			ts.mu.Lock()
		}
	}
	unlock := func() {
		if ts != nil {
			ts.mu.Unlock()
		}
		if ks != nil {
			ks.mu.Unlock()
		}
	}
	// try counts the rounds in which this admission sent a take itself;
	// rounds in which it only waited for another request's take count
	// in loops alone (a burst of requests on a fresh hold waits for one
	// take that asks for all of them).
	for try, loops := 0, 0; ; loops++ {
		var needs [6]need
		n := 0
		st = Status{}
		lock()
		if ks != nil {
			n = ks.checkFleet(ScopeKey, at, gen, &st, needs[:], n, &waiting[0])
		}
		if ts != nil {
			n = ts.checkFleet(ScopeTenant, at, gen, &st, needs[:], n, &waiting[1])
			if ts.full.rpm > 0 || ts.full.tpm > 0 {
				ts.fairLocked(sub.share, ScopeTenant, at, ts.reqLevel+float64(ts.req.bal), ts.tokLevel+float64(ts.tok.bal), &st)
			}
		}
		if n > 0 && (try == maxTakes || loops == maxLoops) {
			// Concurrent requests spent every lease or slot taken
			// meanwhile.
			for _, nd := range needs[:n] {
				scope, kind, capacity := nd.s.whose(ks, nd.ls)
				wait := concurrencyRetry
				if kind != KindConcurrency {
					wait = perMinute(1, capacity)
				}
				st.refuse(scope, kind, wait)
			}
		}
		if st.Refused() {
			unwaitLocked()
			if ks != nil {
				ks.reportFleet(&st)
			}
			if ts != nil {
				ts.reportFleet(&st)
			}
			unlock()
			return Ticket{}, st, false, true
		}
		if n == 0 {
			var pre [4]need
			np := 0
			for _, s := range [2]*state{ks, ts} {
				if s == nil {
					continue
				}
				if s.full.rpm > 0 {
					s.req.bal--
				}
				if s == ts {
					s.takeShare(sub.share)
				}
				s.inflight++
				s.hold.peak = max(s.hold.peak, s.inflight)
				s.reportFleet(&st)
				if s.req.wantsTake(s.full.rpm, at) {
					pre[np] = need{s, &s.req}
					np++
				}
				if s.tok.wantsTake(s.full.tpm, at) {
					pre[np] = need{s, &s.tok}
					np++
				}
			}
			unwaitLocked()
			unlock()
			for _, p := range pre[:np] {
				l.prefetch(p.s, p.ls, now)
			}
			return Ticket{l: l, key: ks, tenant: ts, share: sub.share}, st, true, true
		}
		unlock()
		sent := false
		for _, nd := range needs[:n] {
			var err error
			waited := false
			if nd.ls == nil {
				waited, err = l.fetchHold(nd.s, gen, now)
			} else {
				err = l.fetch(nd.s, nd.ls, now)
			}
			sent = sent || !waited
			if err != nil || !l.fleet.Up() {
				lock()
				unwaitLocked()
				unlock()
				return Ticket{}, Status{}, false, false
			}
		}
		if !l.fleet.Up() {
			lock()
			unwaitLocked()
			unlock()
			return Ticket{}, Status{}, false, false
		}
		if sent {
			try++
		}
	}
}

// whose says which scope and kind a lease of s is, and its limit.
func (s *state) whose(key *state, ls *lease) (Scope, Kind, int64) {
	scope := ScopeTenant
	if s == key {
		scope = ScopeKey
	}
	switch ls {
	case nil:
		return scope, KindConcurrency, s.full.conc
	case &s.tok:
		return scope, KindTokens, s.full.tpm
	}
	return scope, KindRequests, s.full.rpm
}

// checkFleet records in st the refusal s causes in fleet mode, and in
// needs[n:] the leases that are empty but may be topped up and the hold
// of slots that is full but may grow; it returns the new n. An admission
// that needs a slot counts, once, in the pending slots (*waiting).
func (s *state) checkFleet(scope Scope, at int64, gen uint64, st *Status, needs []need, n int, waiting *bool) int {
	// The local buckets keep refilling: they take over if the store fails.
	s.refill(at)
	if s.full.conc > 0 && s.inflight >= s.hold.usable(gen) {
		// A node that holds the whole limit has nothing to ask for.
		whole := s.hold.gen == gen && s.hold.fetching == nil && s.hold.held >= s.full.conc
		if whole || at < s.hold.fullUntil {
			st.refuse(scope, KindConcurrency, concurrencyRetry)
		} else {
			needs[n] = need{s: s}
			n++
			if !*waiting {
				s.hold.pending++
				*waiting = true
			}
		}
	}
	if s.full.rpm > 0 {
		s.req.expire(at)
		if s.req.bal < 1 {
			if at < s.req.emptyUntil {
				s.stretchedShadow(&s.req, s.full.rpm, at)
				st.refuse(scope, KindRequests, time.Duration(s.req.emptyUntil-at))
			} else {
				needs[n] = need{s, &s.req}
				n++
			}
		}
	}
	if s.full.tpm > 0 {
		s.tok.expire(at)
		if s.tok.bal <= 0 {
			if at < s.tok.emptyUntil {
				s.stretchedShadow(&s.tok, s.full.tpm, at)
				st.refuse(scope, KindTokens, time.Duration(s.tok.emptyUntil-at))
			} else {
				needs[n] = need{s, &s.tok}
				n++
			}
		}
	}
	return n
}

// reportFleet folds s's fleet windows into st: the fleet's level as of
// the last take plus what this node holds unspent.
func (s *state) reportFleet(st *Status) {
	fold := func(w *Window, capacity int64, ls *lease) {
		if capacity == 0 {
			return
		}
		rem := min(capacity, max(0, ls.fleet+ls.bal))
		if w.Limit != 0 && rem >= w.Remaining {
			return
		}
		*w = Window{Limit: capacity, Remaining: rem, Reset: perMinute(float64(capacity-rem), capacity)}
	}
	fold(&st.Requests, s.full.rpm, &s.req)
	fold(&st.Tokens, s.full.tpm, &s.tok)
}

// debitLeaseLocked spends tokens from the tokens lease (below zero if
// need be: the debt is paid with the next take) and reports whether a
// take should start.
func (s *state) debitLeaseLocked(tokens, at int64) bool {
	s.tok.bal -= tokens
	return s.tok.wantsTake(s.full.tpm, at)
}

// take is one lease take's arguments, fixed under the state's lock.
type take struct {
	s                    *state
	ls                   *lease
	key                  string
	capacity, debt, want int64
	done                 chan struct{}
}

// beginLocked marks a take of ls in flight and returns its arguments.
func (s *state) beginLocked(ls *lease) take {
	tk := take{s: s, ls: ls, key: s.rkey, capacity: s.full.rpm, done: make(chan struct{})}
	if ls == &s.tok {
		tk.key, tk.capacity = s.tkey, s.full.tpm
	}
	tk.debt = max(0, -ls.bal)
	tk.want = leaseSize(tk.capacity)
	ls.fetching = tk.done
	return tk
}

// run sends the take to Redis and credits the lease with what the fleet
// granted (and the debt it accepted).
func (l *Limiter) run(tk take, now time.Time) error {
	grant, level, wait, err := l.fleet.take(context.Background(), tk.key, tk.capacity, now.UnixMilli(), tk.debt, tk.want)
	s, ls := tk.s, tk.ls
	s.mu.Lock()
	if err == nil {
		at := l.since(now)
		ls.bal += tk.debt + grant
		ls.fleet = level
		s.shadow(ls, level, at)
		ls.emptyUntil = 0
		if grant > 0 {
			ls.at = at
		}
		// Short: the take got less than a lease, or left the fleet's
		// bucket below one; a top-up before it refilled would find
		// (next to) nothing.
		short := grant < tk.want || level < tk.want
		switch {
		case !short:
			// More than the fleet needed: the nodes may ask sooner.
			ls.shared = max(ls.shared-1, 0)
		case ls.short && 2*grant <= tk.want:
			// At the limit, and other nodes took most of what refilled:
			// wait longer, so that each take finds more (maxShared).
			ls.shared++
		}
		if short {
			ls.emptyUntil = at + int64(retake(wait, tk.capacity, ls.short || ls.shared > 0, ls.shared))
		}
		ls.short = short
	}
	ls.fetching = nil
	close(tk.done)
	s.mu.Unlock()
	return err
}

// shadow keeps the local share's bucket of ls's kind no fuller than the
// node's share of the fleet's bucket, level after a take: if the store
// goes down, the fallback starts where the fleet was. At the limit the
// fleet's bucket is empty while a node's share bucket, spent only at the
// node's share of the rate, stays full; without this, every node would
// fall back to a fresh minute at once.
func (s *state) shadow(ls *lease, level, at int64) {
	s.refill(at)
	if ls == &s.req && s.full.rpm > 0 {
		s.reqLevel = min(s.reqLevel, float64(max(level, 0))*float64(s.rpm)/float64(s.full.rpm))
	} else if ls == &s.tok && s.full.tpm > 0 {
		s.tokLevel = min(s.tokLevel, float64(level)*float64(s.tpm)/float64(s.full.tpm))
	}
}

// stretchedShadow keeps, while a node waits longer than one lease's
// refill before it asks the fleet again (maxShared), its local bucket of
// ls's kind no fuller than one lease's share: between takes the local
// bucket refills at the whole rate, while the fleet's is shared with the
// other nodes at the limit, so the fallback, if the store goes down,
// starts no fuller than it did when each node asked every lease refill.
func (s *state) stretchedShadow(ls *lease, capacity, at int64) {
	if ls.shared > 0 {
		s.shadow(ls, leaseSize(capacity), at)
	}
}

// fetch tops up ls now, or waits for the take already in flight.
func (l *Limiter) fetch(s *state, ls *lease, now time.Time) error {
	s.mu.Lock()
	if ch := ls.fetching; ch != nil {
		s.mu.Unlock()
		<-ch
		return nil
	}
	if ls == &s.req && s.full.rpm == 0 || ls == &s.tok && s.full.tpm == 0 {
		s.mu.Unlock() // the limit went away meanwhile
		return nil
	}
	tk := s.beginLocked(ls)
	s.mu.Unlock()
	return l.run(tk, now)
}

// prefetch tops up ls in the background, if it still wants it: the
// request that noticed the lease running low does not wait for Redis.
// The goroutine lives as long as one take (bounded by the store's
// timeout).
func (l *Limiter) prefetch(s *state, ls *lease, now time.Time) {
	if !l.fleet.Up() {
		return
	}
	s.mu.Lock()
	capacity := s.full.rpm
	if ls == &s.tok {
		capacity = s.full.tpm
	}
	if !ls.wantsTake(capacity, l.since(now)) {
		s.mu.Unlock()
		return
	}
	tk := s.beginLocked(ls)
	s.mu.Unlock()
	l.prefetches.Go(func() { _ = l.run(tk, now) })
}

// admitOpen is Admit while the store is down with FailOpen: no requests
// or tokens per minute, only the node's max_concurrent.
func (sub *Subject) admitOpen() (t Ticket, st Status, ok bool) {
	ks, ts := sub.key, sub.tenant
	// Key before tenant, always: one lock order for every request.
	if ks != nil {
		ks.mu.Lock()
		defer ks.mu.Unlock()
		if ks.conc > 0 && ks.inflight >= ks.conc {
			st.refuse(ScopeKey, KindConcurrency, concurrencyRetry)
		}
	}
	if ts != nil {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if ts.conc > 0 && ts.inflight >= ts.conc {
			st.refuse(ScopeTenant, KindConcurrency, concurrencyRetry)
		}
	}
	if st.Refused() {
		return Ticket{}, st, false
	}
	if ks != nil {
		ks.inflight++
	}
	if ts != nil {
		ts.inflight++
	}
	return Ticket{l: sub.l, key: ks, tenant: ts}, st, true
}
