package limits_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

type lim = authsnap.Limits

// step is one action against a limiter: advance the clock, then admit,
// debit or release, and what the admission must report.
type step struct {
	advance time.Duration
	key     string // "" = k1
	tenant  string // "" = t1
	kl, tl  lim
	debit   int64 // debit the last ticket this much instead of admitting
	release int   // release the ticket admitted at this step (1-based) instead of admitting
	want    result
}

type result struct {
	OK         bool
	Scope      string
	Kind       string
	RetryAfter time.Duration
	Requests   limits.Window
	Tokens     limits.Window
}

// binding is a test's authorization snapshot: each key's tenant and own
// limits, each tenant's limits.
type binding struct {
	keys    map[string]keyEntry
	tenants map[string]lim
}

type keyEntry struct {
	tenant string
	limits lim
}

// bind binds every key of b, as a new snapshot would, and returns their
// subjects.
func (b binding) bind(l *limits.Limiter) map[string]*limits.Subject {
	bd := l.Bind()
	subs := map[string]*limits.Subject{}
	for id, k := range b.keys {
		subs[id] = bd.Subject(id, k.tenant, k.limits, b.tenants[k.tenant])
	}
	bd.Done()
	return subs
}

func run(t *testing.T, share float64, steps []step) {
	t.Helper()
	fc := clock.NewFake(time.Time{})
	l := limits.New(limits.Options{Share: share, Clock: fc.Now})
	snap := binding{keys: map[string]keyEntry{}, tenants: map[string]lim{}}
	tickets := make([]limits.Ticket, len(steps))
	var last limits.Ticket
	for i, s := range steps {
		fc.Advance(s.advance)
		switch {
		case s.release > 0:
			tickets[s.release-1].Release()
			continue
		case s.debit > 0:
			last.Debit(fc.Now(), s.debit)
			continue
		}
		key, tenant := s.key, s.tenant
		if key == "" {
			key = "k1"
		}
		if tenant == "" {
			tenant = "t1"
		}
		// Each admission comes with a new snapshot that gives key and
		// tenant the step's limits and keeps the others.
		snap.keys[key] = keyEntry{tenant, s.kl}
		snap.tenants[tenant] = s.tl
		tk, st, ok := snap.bind(l)[key].Admit(fc.Now())
		got := result{OK: ok, Requests: st.Requests, Tokens: st.Tokens}
		if st.Refused() {
			got.Scope, got.Kind, got.RetryAfter = st.Scope.String(), st.Kind.String(), st.RetryAfter
		}
		if diff := cmp.Diff(got, s.want); diff != "" {
			t.Fatalf("step %d: mismatch (-got +want):\n%s", i+1, diff)
		}
		if ok {
			tickets[i], last = tk, tk
		}
	}
}

func TestAdmit(t *testing.T) {
	rpm3 := lim{RequestsPerMinute: 3}
	req := func(limit, rem int64, reset time.Duration) limits.Window {
		return limits.Window{Limit: limit, Remaining: rem, Reset: reset}
	}
	tests := []struct {
		name  string
		share float64
		steps []step
	}{
		{
			name: "unlimited takes nothing",
			steps: []step{
				{want: result{OK: true}},
				{want: result{OK: true}},
			},
		},
		{
			name: "requests per minute: a bucket, Retry-After when one request fits",
			steps: []step{
				{kl: rpm3, want: result{OK: true, Requests: req(3, 2, 20*time.Second)}},
				{kl: rpm3, want: result{OK: true, Requests: req(3, 1, 40*time.Second)}},
				{kl: rpm3, want: result{OK: true, Requests: req(3, 0, 60*time.Second)}},
				{kl: rpm3, want: result{Scope: "key", Kind: "requests", RetryAfter: 20 * time.Second, Requests: req(3, 0, 60*time.Second)}},
				{advance: 19 * time.Second, kl: rpm3, want: result{Scope: "key", Kind: "requests", RetryAfter: time.Second, Requests: req(3, 0, 41*time.Second)}},
				{advance: time.Second, kl: rpm3, want: result{OK: true, Requests: req(3, 0, 60*time.Second)}},
				{advance: time.Hour, kl: rpm3, want: result{OK: true, Requests: req(3, 2, 20*time.Second)}},
			},
		},
		{
			name: "tenant: shared by its keys",
			steps: []step{
				{key: "a", tl: lim{RequestsPerMinute: 2}, want: result{OK: true, Requests: req(2, 1, 30*time.Second)}},
				{key: "b", tl: lim{RequestsPerMinute: 2}, want: result{OK: true, Requests: req(2, 0, 60*time.Second)}},
				{key: "c", tl: lim{RequestsPerMinute: 2}, want: result{Scope: "tenant", Kind: "requests", RetryAfter: 30 * time.Second, Requests: req(2, 0, 60*time.Second)}},
				{key: "c", tenant: "t2", tl: lim{RequestsPerMinute: 2}, want: result{OK: true, Requests: req(2, 1, 30*time.Second)}},
			},
		},
		{
			name: "a tenant refusal takes nothing from the key",
			steps: []step{
				{kl: lim{RequestsPerMinute: 2}, tl: lim{RequestsPerMinute: 1}, want: result{OK: true, Requests: req(1, 0, 60*time.Second)}},
				{kl: lim{RequestsPerMinute: 2}, tl: lim{RequestsPerMinute: 1}, want: result{Scope: "tenant", Kind: "requests", RetryAfter: 60 * time.Second, Requests: req(1, 0, 60*time.Second)}},
				{kl: lim{RequestsPerMinute: 2}, tl: lim{RequestsPerMinute: 1}, want: result{Scope: "tenant", Kind: "requests", RetryAfter: 60 * time.Second, Requests: req(1, 0, 60*time.Second)}},
				// The key still has one request: the refusals took none.
				{kl: lim{RequestsPerMinute: 2}, want: result{OK: true, Requests: req(2, 0, 60*time.Second)}},
			},
		},
		{
			name: "the longest wait decides Retry-After and the scope",
			steps: []step{
				{kl: lim{RequestsPerMinute: 60}, tl: lim{RequestsPerMinute: 1}, want: result{OK: true, Requests: req(1, 0, 60*time.Second)}},
				{kl: lim{RequestsPerMinute: 1}, tl: lim{RequestsPerMinute: 1}, want: result{Scope: "tenant", Kind: "requests", RetryAfter: 60 * time.Second, Requests: req(1, 0, 60*time.Second)}},
			},
		},
		{
			name: "tokens: admitted while positive, debited after, paid back before the next",
			steps: []step{
				{kl: lim{TokensPerMinute: 1000}, want: result{OK: true, Tokens: req(1000, 1000, 0)}},
				{debit: 1500},
				{kl: lim{TokensPerMinute: 1000}, want: result{Scope: "key", Kind: "tokens", RetryAfter: 30*time.Second + 1, Tokens: req(1000, 0, 90*time.Second)}},
				{advance: 30 * time.Second, kl: lim{TokensPerMinute: 1000}, want: result{Scope: "key", Kind: "tokens", RetryAfter: 1, Tokens: req(1000, 0, 60*time.Second)}},
				{advance: 60 * time.Millisecond, kl: lim{TokensPerMinute: 1000}, want: result{OK: true, Tokens: req(1000, 1, 59940*time.Millisecond)}},
			},
		},
		{
			name: "tokens: the tenant is debited too",
			steps: []step{
				{kl: lim{TokensPerMinute: 1000}, tl: lim{TokensPerMinute: 100}, want: result{OK: true, Tokens: req(100, 100, 0)}},
				{debit: 100},
				{key: "other", tl: lim{TokensPerMinute: 100}, want: result{Scope: "tenant", Kind: "tokens", RetryAfter: 1, Tokens: req(100, 0, 60*time.Second)}},
				{kl: lim{TokensPerMinute: 1000}, want: result{OK: true, Tokens: req(1000, 900, 6*time.Second)}},
			},
		},
		{
			name: "concurrency: exact, a released slot is free at once",
			steps: []step{
				{kl: lim{MaxConcurrent: 2}, want: result{OK: true}},
				{kl: lim{MaxConcurrent: 2}, want: result{OK: true}},
				{kl: lim{MaxConcurrent: 2}, want: result{Scope: "key", Kind: "concurrency", RetryAfter: time.Second}},
				{release: 1},
				{kl: lim{MaxConcurrent: 2}, want: result{OK: true}},
				{key: "k2", tl: lim{MaxConcurrent: 1}, want: result{OK: true}},
				{key: "k3", tl: lim{MaxConcurrent: 1}, want: result{Scope: "tenant", Kind: "concurrency", RetryAfter: time.Second}},
			},
		},
		{
			name:  "share: floor(L × share)",
			share: 0.5,
			steps: []step{
				{kl: lim{RequestsPerMinute: 5, MaxConcurrent: 4}, want: result{OK: true, Requests: req(2, 1, 30*time.Second)}},
				{kl: lim{RequestsPerMinute: 5, MaxConcurrent: 4}, want: result{OK: true, Requests: req(2, 0, 60*time.Second)}},
				{kl: lim{RequestsPerMinute: 5, MaxConcurrent: 4}, want: result{Scope: "key", Kind: "requests", RetryAfter: 30 * time.Second, Requests: req(2, 0, 60*time.Second)}},
				{key: "k2", kl: lim{MaxConcurrent: 4}, want: result{OK: true}},
				{key: "k2", kl: lim{MaxConcurrent: 4}, want: result{OK: true}},
				{key: "k2", kl: lim{MaxConcurrent: 4}, want: result{Scope: "key", Kind: "concurrency", RetryAfter: time.Second}},
			},
		},
		{
			name:  "share: at least 1",
			share: 0.1,
			steps: []step{
				{kl: lim{RequestsPerMinute: 5}, want: result{OK: true, Requests: req(1, 0, 60*time.Second)}},
				{kl: lim{RequestsPerMinute: 5}, want: result{Scope: "key", Kind: "requests", RetryAfter: 60 * time.Second, Requests: req(1, 0, 60*time.Second)}},
			},
		},
		{
			name: "a new snapshot's limits apply at once; what was used stays used",
			steps: []step{
				{kl: lim{RequestsPerMinute: 10}, want: result{OK: true, Requests: req(10, 9, 6*time.Second)}},
				{kl: lim{RequestsPerMinute: 2}, want: result{OK: true, Requests: req(2, 1, 30*time.Second)}},
				{kl: lim{RequestsPerMinute: 2}, want: result{OK: true, Requests: req(2, 0, 60*time.Second)}},
				{kl: lim{RequestsPerMinute: 2}, want: result{Scope: "key", Kind: "requests", RetryAfter: 30 * time.Second, Requests: req(2, 0, 60*time.Second)}},
				{kl: lim{MaxConcurrent: 4}, want: result{OK: true}},
				{kl: lim{MaxConcurrent: 4}, want: result{Scope: "key", Kind: "concurrency", RetryAfter: time.Second}},
				// Limits removed, then given again: a fresh start.
				{kl: lim{}, want: result{OK: true}},
				{kl: lim{RequestsPerMinute: 2}, want: result{OK: true, Requests: req(2, 1, 30*time.Second)}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt.share, tt.steps) })
	}
}

func TestZeroTicket(t *testing.T) {
	var tk limits.Ticket
	tk.Debit(time.Now(), 100)
	tk.Release()
}

func TestEstimateTokens(t *testing.T) {
	for _, tt := range []struct{ bytes, want int64 }{{0, 1}, {1, 1}, {4, 1}, {5, 2}, {4000, 1000}} {
		if got := limits.EstimateTokens(tt.bytes); got != tt.want {
			t.Errorf("EstimateTokens(%d) = %d, want %d", tt.bytes, got, tt.want)
		}
	}
}

// TestBind: a key bound again keeps its state; one left out is forgotten
// and starts afresh when it comes back; an aborted bind changes nothing.
func TestBind(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	l := limits.New(limits.Options{Clock: fc.Now})
	one := lim{RequestsPerMinute: 1}
	b := l.Bind()
	a, c := b.Subject("a", "t", one, lim{}), b.Subject("c", "t", lim{}, lim{MaxConcurrent: 1})
	if got := b.Subject("free", "t2", lim{}, lim{}); got != nil {
		t.Errorf("an unlimited key has a subject")
	}
	b.Done()
	admit := func(sub *limits.Subject) bool { _, _, ok := sub.Admit(fc.Now()); return ok }
	if !admit(a) || admit(a) || !admit(c) {
		t.Fatal("first snapshot: want a admitted once, c once")
	}
	type n struct{ Keys, Tenants int }
	keys, tenants := l.Len()
	if diff := cmp.Diff(n{keys, tenants}, n{1, 1}); diff != "" {
		t.Errorf("after the first bind (-got +want):\n%s", diff)
	}

	b = l.Bind()
	a2 := b.Subject("a", "t", one, lim{})
	b.Subject("c", "t", lim{}, lim{MaxConcurrent: 2})
	b.Abort()
	if admit(c) {
		t.Error("an aborted bind changed the tenant's max_concurrent")
	}
	b = l.Bind()
	c2 := b.Subject("c", "t", lim{}, lim{MaxConcurrent: 1})
	b.Done()
	if admit(a2) {
		t.Error("a's used request was forgotten by a bind that kept a")
	}
	if admit(c2) {
		t.Error("the tenant's slot held under the old snapshot was forgotten")
	}
	keys, tenants = l.Len()
	if diff := cmp.Diff(n{keys, tenants}, n{0, 1}); diff != "" {
		t.Errorf("after a was left out (-got +want):\n%s", diff)
	}
	b = l.Bind()
	a3 := b.Subject("a", "t", one, lim{})
	b.Done()
	if !admit(a3) {
		t.Error("a key that came back did not start afresh")
	}
}

// TestConcurrentAdmit: under contention, in flight never exceeds
// max_concurrent for a key or its tenant, and every slot comes back.
func TestConcurrentAdmit(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	l := limits.New(limits.Options{Clock: fc.Now})
	const workers, rounds, keyCap, tenantCap = 8, 300, 2, 3
	snap := binding{keys: map[string]keyEntry{}, tenants: map[string]lim{"t": {MaxConcurrent: tenantCap}}}
	for i := range 4 {
		snap.keys["k"+strconv.Itoa(i)] = keyEntry{"t", lim{MaxConcurrent: keyCap}}
	}
	subs := snap.bind(l)
	var inflight [4]atomic.Int64
	var tenantIn atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			k := w % 4
			id := "k" + strconv.Itoa(k)
			for range rounds {
				tk, _, ok := subs[id].Admit(fc.Now())
				if !ok {
					continue
				}
				if n := inflight[k].Add(1); n > keyCap {
					t.Errorf("key %s: %d in flight", id, n)
				}
				if n := tenantIn.Add(1); n > tenantCap {
					t.Errorf("tenant: %d in flight", n)
				}
				tenantIn.Add(-1)
				inflight[k].Add(-1)
				tk.Release()
			}
		})
	}
	// Snapshots swapped meanwhile keep every state.
	for range 20 {
		snap.bind(l)
	}
	wg.Wait()
	for i := range tenantCap {
		if _, _, ok := subs["k"+strconv.Itoa(i)].Admit(fc.Now()); !ok {
			t.Fatal("a slot never came back")
		}
	}
}

func TestAdmitDoesNotAllocate(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	l := limits.New(limits.Options{Clock: fc.Now})
	now := fc.Now()
	kl, tl := lim{RequestsPerMinute: authsnap.MaxLimit, TokensPerMinute: 1 << 40, MaxConcurrent: 1 << 20}, lim{RequestsPerMinute: authsnap.MaxLimit}
	b := l.Bind()
	sub := b.Subject("k", "t", kl, tl)
	b.Done()
	n := testing.AllocsPerRun(1000, func() {
		tk, _, ok := sub.Admit(now)
		if !ok {
			t.Fatal("refused")
		}
		tk.Debit(now, 10)
		tk.Release()
	})
	if n != 0 {
		t.Errorf("Admit, Debit, Release allocate %v times", n)
	}
}

// BenchmarkAdmit measures the check a limited request pays, with 10,000
// keys of 100 tenants bound, taken in turn (so the states are mostly not
// in the CPU's cache): Admit and Release (and a Debit).
func BenchmarkAdmit(b *testing.B) {
	const keys = 10000
	ids := make([]string, keys)
	tenants := make([]string, keys)
	for i := range ids {
		ids[i] = "k_" + strconv.Itoa(i)
		tenants[i] = "t_" + strconv.Itoa(i%100)
	}
	big := lim{RequestsPerMinute: authsnap.MaxLimit, TokensPerMinute: authsnap.MaxLimit, MaxConcurrent: 1 << 20}
	for _, bc := range []struct {
		name   string
		kl, tl lim
		debit  bool
	}{
		{"key", big, lim{}, false},
		{"key+tenant", big, big, false},
		{"key+tenant+debit", big, big, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			now := time.Now()
			l := limits.New(limits.Options{})
			bd := l.Bind()
			subs := make([]*limits.Subject, keys)
			for i := range ids {
				subs[i] = bd.Subject(ids[i], tenants[i], bc.kl, bc.tl)
			}
			bd.Done()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tk, _, ok := subs[i].Admit(now)
				if !ok {
					b.Fatal("refused")
				}
				if bc.debit {
					tk.Debit(now, 100)
				}
				tk.Release()
				i++
				if i == keys {
					i = 0
				}
			}
		})
	}
}
