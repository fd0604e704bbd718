package limits

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usd"
)

// window is the period every per-minute limit refills over.
const window = time.Minute

// concurrencyRetry is the Retry-After given for a refusal by max_concurrent:
// when a slot frees is not known in advance, so the client is told to look
// again soon.
const concurrencyRetry = time.Second

// Options configure a Limiter.
type Options struct {
	// Share is the fraction of every limit this node enforces, in (0, 1];
	// 0 means 1 (docs/limits.md "Behind a load balancer").
	Share float64
	// Clock is the time source the callers of Admit and Debit read, and
	// Bind reads; nil means the real clock.
	Clock func() time.Time
	// Fleet, if set, makes requests and tokens per minute fleet-wide:
	// leased from the shared Redis store (docs/limits.md "Fleet-wide:
	// the redis store"), and so is max_concurrent: slots held in the
	// store. Share then applies only while the store is down (with
	// OnFailure FailLocal or FailOpen).
	Fleet *Redis
	// OnFailure is what Admit does while Fleet is down.
	OnFailure Failure
}

// Limiter holds the state of every limited key and tenant of the current
// authorization snapshot. It is safe for concurrent use.
type Limiter struct {
	// immutable
	share     float64
	clock     func() time.Time
	epoch     time.Time // state times are nanoseconds since epoch
	fleet     *Redis    // nil = local store
	onFailure Failure
	node      string // names this node's concurrency holds in the fleet's store
	// chargeInline sends budget charges to the fleet before Charge
	// returns instead of in the background (tests: export_test.go).
	chargeInline bool

	// The bound states with a fleet-wide max_concurrent, whose holds the
	// store refreshes; set by Done.
	concStates atomic.Pointer[[]*state]
	// The bound states with a budget, whose spend the store's refresh
	// sends (flushBudgets); set by Done.
	budgetStates atomic.Pointer[[]*state]

	// prefetches are the background takes in flight (prefetch): tests
	// on a fake clock wait for them, as a real one would outwait them.
	prefetches sync.WaitGroup

	mu      sync.Mutex        // serializes binds
	keys    map[string]*state // guarded by mu; the last bind's
	tenants map[string]*state // guarded by mu; the last bind's
}

// New returns a Limiter.
func New(o Options) *Limiter {
	if o.Share <= 0 || o.Share > 1 {
		o.Share = 1
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	l := &Limiter{share: o.Share, clock: o.Clock, epoch: o.Clock(), fleet: o.Fleet, onFailure: o.OnFailure,
		keys: map[string]*state{}, tenants: map[string]*state{}}
	if l.fleet != nil {
		l.node = newNodeID()
		l.fleet.addHolder(l)
	}
	return l
}

// Binder hands out the Subjects of one authorization snapshot. A key or
// tenant bound again keeps its state (what it used this minute, its
// requests in flight) and takes the new limits; one not bound again is
// forgotten by Done. Nothing changes until Done: a snapshot that fails to
// compile half-way leaves the limiter as it was.
type Binder struct {
	l             *Limiter
	keys, tenants map[string]*state
	updates       []update // applied by Done
	// shares are the bound keys' fair shares of each tenant, applied by
	// Done (a share not bound again is forgotten).
	shares map[*state]map[string]*share
}

// update is a bound state's limits as of the snapshot being bound.
type update struct {
	s       *state
	c, full caps
	budgets [numSpans]usd.Amount // before the share
	reserve bool                 // the budgets are held in reservation mode
}

// Bind starts binding a snapshot. It holds the limiter's bind lock until
// Done or Abort.
func (l *Limiter) Bind() *Binder {
	l.mu.Lock()
	return &Binder{l: l, keys: map[string]*state{}, tenants: map[string]*state{}, shares: map[*state]map[string]*share{}}
}

// Subject returns the hold on the limiter of a key with the given own and
// tenant limits, or nil when neither limits anything (nothing to check).
func (b *Binder) Subject(keyID, tenantID string, key, tenant authsnap.Limits) *Subject {
	if key.IsZero() && tenant.IsZero() {
		return nil
	}
	sub := &Subject{l: b.l}
	if !key.IsZero() {
		sub.key = b.bind(b.keys, b.l.keys, "k:", keyID, key)
	}
	if !tenant.IsZero() {
		sub.tenant = b.bind(b.tenants, b.l.tenants, "t:", tenantID, tenant)
		sub.share = b.share(sub.tenant, keyID)
	}
	keyBudget, tenantBudget := key.USDPerDay != "" || key.USDPerMonth != "", tenant.USDPerDay != "" || tenant.USDPerMonth != ""
	sub.budgeted = keyBudget || tenantBudget
	sub.reserving = [2]bool{keyBudget && key.Reserves(), tenantBudget && tenant.Reserves()}
	sub.reserves = sub.reserving[0] || sub.reserving[1]
	return sub
}

func (b *Binder) bind(next, prev map[string]*state, scope, id string, lim authsnap.Limits) *state {
	s := next[id]
	if s == nil {
		if s = prev[id]; s == nil {
			s = newState(scope + id)
		}
		next[id] = s
		// A tenant's limits are the same for each of its keys: the first
		// is enough.
		b.updates = append(b.updates, update{s, b.l.effective(lim), capsOf(lim), budgets(lim), lim.Reserves()})
	}
	return s
}

// share returns keyID's fair share of tenant ts: the one it has, if the
// key was bound before, else a new one.
func (b *Binder) share(ts *state, keyID string) *share {
	m := b.shares[ts]
	if m == nil {
		m = map[string]*share{}
		b.shares[ts] = m
	}
	sh := m[keyID]
	if sh == nil {
		ts.mu.Lock()
		sh = ts.shares[keyID]
		ts.mu.Unlock()
		if sh == nil {
			sh = &share{}
		}
		m[keyID] = sh
	}
	return sh
}

// Done applies the snapshot's limits, makes the bound keys and tenants the
// limiter's and forgets the others. Requests that hold a forgotten state
// finish with it.
func (b *Binder) Done() {
	now := b.l.clock()
	at := b.l.since(now)
	for _, u := range b.updates {
		u.s.mu.Lock()
		u.s.update(u.c, at)
		u.s.full = u.full
		u.s.updateBudgets(u.budgets, u.reserve, b.l.share, now)
		if m, ok := b.shares[u.s]; ok {
			u.s.shares = m
		}
		u.s.mu.Unlock()
	}
	b.l.keys, b.l.tenants = b.keys, b.tenants
	if b.l.fleet != nil {
		var cs, bs []*state
		for _, m := range [2]map[string]*state{b.keys, b.tenants} {
			for _, s := range m {
				if s.full.conc > 0 {
					cs = append(cs, s)
				}
				if s.spend[spanDay].full > 0 || s.spend[spanMonth].full > 0 {
					bs = append(bs, s)
				}
			}
		}
		b.l.concStates.Store(&cs)
		b.l.budgetStates.Store(&bs)
	}
	b.l.mu.Unlock()
}

// Abort ends a bind without changing the limiter.
func (b *Binder) Abort() { b.l.mu.Unlock() }

// Subject is one key's hold on the limiter: its state and its tenant's
// (nil for a side without limits). It is shared by every request of the
// key under one snapshot.
type Subject struct {
	l           *Limiter
	key, tenant *state
	share       *share  // the key's fair share of its tenant; nil without a tenant
	budgeted    bool    // the key or its tenant has a budget
	reserves    bool    // the key's or its tenant's budget reserves (reserve.go)
	reserving   [2]bool // the key's budgets reserve, the tenant's do
}

// Scope says whose limit refused a request.
type Scope uint8

// Scopes.
const (
	ScopeKey Scope = iota + 1
	ScopeTenant
)

func (s Scope) String() string {
	switch s {
	case ScopeKey:
		return "key"
	case ScopeTenant:
		return "tenant"
	}
	return "none"
}

// Kind says which limit refused a request.
type Kind uint8

// Kinds.
const (
	KindRequests Kind = iota + 1
	KindTokens
	KindConcurrency
	// KindStore is a refusal because the fleet's store is unreachable
	// and the node is configured to fail closed.
	KindStore
	// KindBudget is a refusal because a budget's window has been spent
	// (docs/limits.md "Budgets"): retrying before the window ends is
	// pointless.
	KindBudget
)

func (k Kind) String() string {
	switch k {
	case KindRequests:
		return "requests"
	case KindTokens:
		return "tokens"
	case KindConcurrency:
		return "concurrency"
	case KindStore:
		return "store"
	case KindBudget:
		return "budget"
	}
	return "none"
}

// Window is one per-minute limit as a client is shown it.
type Window struct {
	Limit     int64         // the node's share of the limit; 0 = no such limit
	Remaining int64         // what the bucket holds now, ≥ 0
	Reset     time.Duration // until the bucket is full again
}

// Status is what Admit saw: the binding requests and tokens windows (of the
// key and its tenant, the one with less remaining) and, on a refusal, why
// and when a request would fit.
type Status struct {
	Requests, Tokens Window
	// Budget is the binding budget (docs/limits.md "Budgets"); its Limit
	// is 0 when neither the key nor its tenant has one.
	Budget BudgetWindow

	// Set only on a refusal.
	Scope      Scope
	Kind       Kind
	RetryAfter time.Duration
}

// Refused reports whether the status is a refusal.
func (s *Status) Refused() bool { return s.Scope != 0 }

// Ticket is an admitted request's hold on its limits. The zero Ticket
// (unlimited request) does nothing.
type Ticket struct {
	l           *Limiter
	key, tenant *state       // nil when that side has no limits
	share       *share       // the key's fair share of its tenant; nil for none
	r           *reservation // what it holds of reserving budgets; nil for none
}

// Admit checks the key's and its tenant's limits at now and, if both
// pass, takes one request and one concurrency slot from each. On a refusal
// nothing is taken and ok is false; st says why. now is the caller's
// reading of the limiter's clock: the request path has read it already
// (reading it costs as much as the rest of the check).
//
// A nil Subject (nothing limits the key) admits everything and takes
// nothing. A budget in reservation mode holds one picodollar: use
// [Subject.AdmitReserve] for a request whose worst case is known.
func (sub *Subject) Admit(now time.Time) (t Ticket, st Status, ok bool) {
	return sub.AdmitReserve(now, 0)
}

// AdmitReserve is Admit for a request whose cost is at most worst: a
// budget in reservation mode (docs/limits.md "Reservations") admits it
// only if worst fits in what is left of its window, and holds worst until
// the ticket is released; budgets in charge mode ignore worst.
func (sub *Subject) AdmitReserve(now time.Time, worst usd.Amount) (t Ticket, st Status, ok bool) {
	if sub == nil {
		return Ticket{}, st, true
	}
	l := sub.l
	if sub.budgeted && (l.fleet == nil || l.fleet.Up() || l.onFailure == FailLocal) {
		// Budgets first: a spent window refuses until it ends, whatever
		// the per-minute limits say.
		var (
			bst   Status
			fleet bool
			r     *reservation
		)
		switch {
		case l.fleet != nil && l.fleet.Up() && sub.syncBudgets(now):
			fleet = true
			bst = sub.checkBudgetsFleet(now)
		case l.fleet == nil || l.onFailure == FailLocal:
			// The local store, or the store down with FailLocal: this
			// node's own spend against its share.
			bst = sub.checkBudgets(now)
		}
		if sub.reserves && !bst.Refused() {
			worst = max(worst, 1)
			var err error
			if fleet {
				r, err = sub.reserveFleet(now, worst, &bst)
			}
			if (!fleet || err != nil) && (l.fleet == nil || l.onFailure == FailLocal) {
				r = sub.reserveLocal(now, worst, &bst)
			}
		}
		if bst.Refused() {
			return Ticket{}, bst, false
		}
		defer func() {
			st.Budget = bst.Budget
			if ok {
				t.r = r
			} else {
				r.cancel()
			}
		}()
	}
	if f := l.fleet; f != nil {
		if f.Up() {
			if t, st, ok, done := sub.admitFleet(now); done {
				return t, st, ok
			}
		}
		// The store is down (or went down on this request's take).
		switch l.onFailure {
		case FailOpen:
			return sub.admitOpen()
		case FailClosed:
			st.Scope, st.Kind, st.RetryAfter = ScopeKey, KindStore, concurrencyRetry
			if sub.key == nil {
				st.Scope = ScopeTenant
			}
			return Ticket{}, st, false
		}
	}
	at := l.since(now)
	ks, ts := sub.key, sub.tenant
	// Key before tenant, always: one lock order for every request.
	if ks != nil {
		ks.mu.Lock()
		defer ks.mu.Unlock()
		ks.refill(at)
		ks.check(ScopeKey, &st)
	}
	if ts != nil {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.refill(at)
		ts.check(ScopeTenant, &st)
		ts.fairLocked(sub.share, ScopeTenant, at, ts.reqLevel, ts.tokLevel, &st)
	}
	if st.Refused() {
		if ks != nil {
			ks.report(&st)
		}
		if ts != nil {
			ts.report(&st)
		}
		return Ticket{}, st, false
	}
	if ks != nil {
		ks.take()
		ks.owe(l.fleet, at)
		ks.report(&st)
	}
	if ts != nil {
		ts.take()
		ts.takeShare(sub.share)
		ts.owe(l.fleet, at)
		ts.report(&st)
	}
	return Ticket{l: l, key: ks, tenant: ts, share: sub.share}, st, true
}

// owe records a request admitted by the local share while the fleet's
// store is down as owed to the fleet's bucket: the lease goes below zero,
// and the next take pays the debt (or a window on, it is forgiven). So
// the outage's requests count once the store is back, and the fleet
// does not admit a second minute's worth on top of them.
func (s *state) owe(fleet *Redis, at int64) {
	if fleet != nil && s.full.rpm > 0 {
		s.req.expire(at)
		s.req.bal--
	}
}

// Debit takes tokens used by one attempt from the key's and the tenant's
// tokens buckets; now is when the attempt ended. Call it when the attempt
// ends; the balance may go below zero, and the next request waits until it
// is positive again.
func (t Ticket) Debit(now time.Time, tokens int64) {
	if t.l == nil || tokens <= 0 {
		return
	}
	at := t.l.since(now)
	for _, s := range [2]*state{t.key, t.tenant} {
		if s == nil {
			continue
		}
		s.mu.Lock()
		s.refill(at)
		if s.tpm > 0 {
			s.tokLevel -= float64(tokens)
		}
		if s == t.tenant {
			s.debitShareLocked(t.share, tokens)
		}
		// The fleet's lease pays too, whether or not the store is up:
		// a debt is paid to the fleet's bucket with the next take.
		fetch := t.l.fleet != nil && s.full.tpm > 0 && s.debitLeaseLocked(tokens, at)
		s.mu.Unlock()
		if fetch {
			t.l.prefetch(s, &s.tok, now)
		}
	}
}

// Release gives the concurrency slots back. Call it exactly once, when the
// request ends, whichever way it ends.
func (t Ticket) Release() {
	if t.r != nil {
		t.r.settle(usd.Amount(t.r.spent.Load()))
	}
	for _, s := range [2]*state{t.key, t.tenant} {
		if s == nil {
			continue
		}
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}
}

// EstimateTokens is what an attempt that may have reached the provider but
// reported no usage is debited: a quarter of its request body's bytes (a
// common rule of thumb for tokens), at least 1, never 0.
func EstimateTokens(requestBytes int64) int64 {
	return max(1, (requestBytes+3)/4)
}

// Len returns how many keys and tenants have state (for tests).
func (l *Limiter) Len() (keys, tenants int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys), len(l.tenants)
}

// since converts a reading of the clock to the states' time.
func (l *Limiter) since(t time.Time) int64 { return int64(t.Sub(l.epoch)) }

// caps are a subject's limits as this node enforces them, or (full) as
// the fleet does.
type caps struct{ rpm, tpm, conc int64 }

func capsOf(lim authsnap.Limits) caps {
	return caps{max(0, lim.RequestsPerMinute), max(0, lim.TokensPerMinute), max(0, lim.MaxConcurrent)}
}

// effective applies the node's share: floor(L × share), at least 1; 0
// (no limit) stays 0.
func (l *Limiter) effective(lim authsnap.Limits) caps {
	f := func(v int64) int64 {
		if v <= 0 {
			return 0
		}
		if l.share == 1 {
			return v
		}
		return max(1, int64(math.Floor(float64(v)*l.share)))
	}
	return caps{f(lim.RequestsPerMinute), f(lim.TokensPerMinute), f(lim.MaxConcurrent)}
}

// state is one key's or one tenant's buckets and in-flight count.
type state struct {
	mu sync.Mutex
	// guarded by mu
	caps               // as of the last update
	reqLevel, tokLevel float64
	at                 int64 // when the levels were last refilled
	inflight           int64

	// Budgets: spend in the current UTC day and month (budget.go), and
	// with the redis store the fleet's (spendfleet.go).
	spend   [numSpans]spend
	fleet   [numSpans]fleetSpend
	reserve bool   // the budgets are held in reservation mode (reserve.go)
	bkey    string // prefix of the fleet's spend counters; immutable

	// Fleet mode only (docs/limits.md "Fleet-wide: the redis store").
	full     caps   // the limits before the share
	req, tok lease  // budget leased from the fleet's buckets
	hold     hold   // slots held of the fleet's max_concurrent
	rkey     string // the fleet's requests bucket; immutable
	tkey     string // the fleet's tokens bucket; immutable
	ckey     string // the fleet's concurrency holds; immutable

	// A tenant's only: its keys' fair shares (fair.go), by key ID.
	shares map[string]*share
	active int64 // keys offered a request in the last window, as of swept
	swept  int64 // when active was last recounted
}

// newState returns the state of one key ("k:"+id) or tenant ("t:"+id).
func newState(id string) *state {
	const prefix = "scootgate:limits:"
	return &state{rkey: prefix + id + ":requests", tkey: prefix + id + ":tokens", ckey: prefix + id + ":concurrent", bkey: prefix + id + ":usd:"}
}

// update applies a snapshot's limits, refilling the buckets to now first.
// A limit that appears starts full; one that shrinks clamps the level.
func (s *state) update(c caps, now int64) {
	s.refill(now)
	if c.rpm != s.rpm {
		if s.rpm == 0 {
			s.reqLevel = float64(c.rpm)
		}
		s.reqLevel = min(s.reqLevel, float64(c.rpm))
		s.rpm = c.rpm
	}
	if c.tpm != s.tpm {
		if s.tpm == 0 {
			s.tokLevel = float64(c.tpm)
		}
		s.tokLevel = min(s.tokLevel, float64(c.tpm))
		s.tpm = c.tpm
	}
	s.conc = c.conc
}

// refill adds what the buckets earned since the last refill, up to their
// capacities.
func (s *state) refill(now int64) {
	if d := now - s.at; d > 0 {
		el := float64(d) / float64(window)
		if s.rpm > 0 {
			s.reqLevel = min(float64(s.rpm), s.reqLevel+el*float64(s.rpm))
		}
		if s.tpm > 0 {
			s.tokLevel = min(float64(s.tpm), s.tokLevel+el*float64(s.tpm))
		}
	}
	if now > s.at {
		s.at = now
	}
}

// check records in st the refusal s would cause, keeping the one with the
// longest wait: Retry-After is when every limit lets a request through.
func (s *state) check(scope Scope, st *Status) {
	refuse := func(k Kind, wait time.Duration) { st.refuse(scope, k, wait) }
	if s.rpm > 0 && s.reqLevel < 1 {
		refuse(KindRequests, perMinute(1-s.reqLevel, s.rpm))
	}
	if s.tpm > 0 && s.tokLevel <= 0 {
		// Positive again strictly after -level/rate; a nanosecond on top.
		refuse(KindTokens, perMinute(-s.tokLevel, s.tpm)+1)
	}
	if s.conc > 0 && s.inflight >= s.conc {
		refuse(KindConcurrency, concurrencyRetry)
	}
}

// take holds one request and one slot.
func (s *state) take() {
	if s.rpm > 0 {
		s.reqLevel--
	}
	s.inflight++
}

// report folds s's windows into st, keeping for each kind the one with
// less remaining: the one that will refuse first.
func (s *state) report(st *Status) {
	fold := func(w *Window, capacity int64, level float64) {
		if capacity == 0 {
			return
		}
		rem := int64(max(0, math.Floor(level)))
		if w.Limit != 0 && rem >= w.Remaining {
			return
		}
		*w = Window{Limit: capacity, Remaining: rem, Reset: perMinute(float64(capacity)-level, capacity)}
	}
	fold(&st.Requests, s.rpm, s.reqLevel)
	fold(&st.Tokens, s.tpm, s.tokLevel)
}

// perMinute is how long a bucket refilling capacity per minute takes to
// earn amount, rounded up to a nanosecond. A thousandth of a nanosecond
// of floating-point noise is ignored, so that 1 request of 3 per minute
// reads 20s, not 20.000000001s.
func perMinute(amount float64, capacity int64) time.Duration {
	if amount <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(amount*float64(window)/float64(capacity) - 1e-3))
}
