package limits_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
)

// offer is one key's demand in a fairness run: a request every period,
// the first at phase.
type offer struct {
	period, phase time.Duration
}

// fairRun offers each key its requests for d under a tenant limited to
// rpm requests per minute (the keys unlimited) and returns what each was
// admitted in the last minute (the first two settle the buckets), in
// order of arrival: a key at an earlier phase comes first at equal times.
func fairRun(t *testing.T, newLimiter func(func() time.Time) *limits.Limiter, rpm int64, offers []offer, d time.Duration) []int {
	t.Helper()
	return fairRunLimits(t, newLimiter, lim{RequestsPerMinute: rpm}, 0, offers, d)
}

// fairRunLimits is fairRun under the tenant limits tl, each admitted
// request debited tokens when it ends (at once).
func fairRunLimits(t *testing.T, newLimiter func(func() time.Time) *limits.Limiter, tl lim, tokens int64, offers []offer, d time.Duration) []int {
	t.Helper()
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	start := fc.Now()
	l := newLimiter(fc.Now)
	b := binding{keys: map[string]keyEntry{}, tenants: map[string]lim{"t1": tl}}
	for i := range offers {
		b.keys["k"+strconv.Itoa(i)] = keyEntry{tenant: "t1"}
	}
	subs := b.bind(l)
	next := make([]time.Duration, len(offers))
	for i, o := range offers {
		next[i] = o.phase
	}
	got := make([]int, len(offers))
	for {
		// The next arrival: the earliest, the lower index first.
		i := 0
		for j := range next {
			if next[j] < next[i] {
				i = j
			}
		}
		if next[i] >= d {
			return got
		}
		fc.Advance(start.Add(next[i]).Sub(fc.Now()))
		tk, st, ok := subs["k"+strconv.Itoa(i)].Admit(fc.Now())
		kind := limits.KindRequests
		if tl.RequestsPerMinute == 0 {
			kind = limits.KindTokens
		}
		if ok {
			tk.Debit(fc.Now(), tokens)
			tk.Release()
			if next[i] >= d-time.Minute {
				got[i]++
			}
		} else if st.Scope != limits.ScopeTenant || st.Kind != kind || st.RetryAfter < 0 {
			t.Fatalf("key %d refused with %v %v after %v, want the tenant's %v limit", i, st.Scope, st.Kind, st.RetryAfter, kind)
		}
		next[i] += offers[i].period
	}
}

func localLimiter(now func() time.Time) *limits.Limiter {
	return limits.New(limits.Options{Clock: now})
}

// fleetLimiter returns a node of a fleet on a Redis of its own.
func fleetLimiter(t *testing.T) func(func() time.Time) *limits.Limiter {
	return func(now func() time.Time) *limits.Limiter {
		return limits.New(limits.Options{Clock: now, Fleet: runStore(t, startRedis(t).addr())})
	}
}

// stores are the limiters the fairness tests run on; slack is what one
// minute may admit above the limit (a lease taken the minute before, a
// twentieth of the 600).
var stores = []struct {
	name  string
	new   func(*testing.T) func(func() time.Time) *limits.Limiter
	slack int
}{
	{"local", func(*testing.T) func(func() time.Time) *limits.Limiter { return localLimiter }, 0},
	{"redis", fleetLimiter, 30},
}

// Two keys offered 25 requests a second each, at fixed phase-shifted
// intervals, under a tenant's 600 per minute: each gets half, whichever
// arrives first after each refill.
func TestFairTwoKeys(t *testing.T) {
	for _, store := range stores {
		for _, phase := range []time.Duration{time.Millisecond, 13 * time.Millisecond, 39 * time.Millisecond} {
			offers := []offer{{40 * time.Millisecond, 0}, {40 * time.Millisecond, phase}}
			got := fairRun(t, store.new(t), 600, offers, 3*time.Minute)
			for i, n := range got {
				if n < 285 || n > 315 {
					t.Errorf("%s, phase %v: key %d admitted %d in the third minute, want 300 ± 5 %% (all: %v)", store.name, phase, i, n, got)
				}
			}
		}
	}
}

// One heavy key and nine light ones (each below its fair share, 60 per
// minute): the light keys get all they ask, the heavy key the rest.
func TestFairHeavyAndLight(t *testing.T) {
	offers := []offer{{40 * time.Millisecond, 0}} // heavy: 1,500 a minute
	for i := range 9 {
		// 30 a minute each, at the same instants as some of the heavy
		// key's arrivals, which come first.
		offers = append(offers, offer{2 * time.Second, time.Duration(i+1) * 200 * time.Millisecond})
	}
	for _, store := range stores {
		got := fairRun(t, store.new(t), 600, offers, 3*time.Minute)
		light := 0
		for i, n := range got[1:] {
			if n != 30 {
				t.Errorf("%s: light key %d admitted %d in the third minute, want all 30 (all: %v)", store.name, i+1, n, got)
			}
			light += n
		}
		if rest := 600 - light; got[0] < rest*95/100 || got[0] > rest+store.slack {
			t.Errorf("%s: heavy key admitted %d in the third minute, want about the rest, %d (all: %v)", store.name, got[0], rest, got)
		}
	}
}

// Two keys offered 25 requests a second each, at fixed phase-shifted
// intervals, each request using 100 tokens, under a tenant's 60,000
// tokens per minute (600 such requests): each gets half, whichever
// arrives first once the balance is positive again.
func TestFairTwoKeysTokens(t *testing.T) {
	for _, store := range stores {
		for _, phase := range []time.Duration{time.Millisecond, 13 * time.Millisecond, 39 * time.Millisecond} {
			offers := []offer{{40 * time.Millisecond, 0}, {40 * time.Millisecond, phase}}
			got := fairRunLimits(t, store.new(t), lim{TokensPerMinute: 60000}, 100, offers, 3*time.Minute)
			t.Logf("%s, phase %v: %v", store.name, phase, got)
			for i, n := range got {
				if n < 285 || n > 315+store.slack {
					t.Errorf("%s, phase %v: key %d admitted %d in the third minute, want 300 ± 5 %% (all: %v)", store.name, phase, i, n, got)
				}
			}
		}
	}
}

// TestFairUnequalDemand measures the split of a tenant's 600 requests
// (or 60,000 tokens, 100 a request) per minute between keys of unequal
// demand, in the third minute: two keys offered 1,500 and 240 a minute,
// and ten keys offered 15, 30, …, 150 a minute (825 in all; the
// max-min fair split is 15, 30, 45, 60 and 75 for each of the six
// others). Each key gets at least its fair share (L / n) or all it
// asks, whichever is less (docs/limits.md "Fairness inside a tenant").
func TestFairUnequalDemand(t *testing.T) {
	two := []offer{{40 * time.Millisecond, 0}, {250 * time.Millisecond, time.Millisecond}}
	var ten []offer
	for i := range 10 {
		ten = append(ten, offer{4 * time.Second / time.Duration(i+1), time.Duration(i) * time.Millisecond})
	}
	for _, kind := range []struct {
		name   string
		tl     lim
		tokens int64
	}{
		{"requests", lim{RequestsPerMinute: 600}, 0},
		{"tokens", lim{TokensPerMinute: 60000}, 100},
	} {
		for _, store := range stores {
			for _, offers := range [][]offer{two, ten} {
				got := fairRunLimits(t, store.new(t), kind.tl, kind.tokens, offers, 3*time.Minute)
				t.Logf("%s, %s store, %d keys: %v", kind.name, store.name, len(offers), got)
				fair := 600 / len(offers)
				for i, n := range got {
					want := min(fair, int(time.Minute/offers[i].period))
					if n < want*95/100 {
						t.Errorf("%s, %s store: key %d of %d admitted %d in the third minute, want at least %d (all: %v)", kind.name, store.name, i, len(offers), n, want, got)
					}
				}
			}
		}
	}
}
