package limits_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// atLimit offers one key on nodes of a fleet five times what its
// limit lets through, one request per op on a fake clock every (5 ×
// the rate the limit lets through), and reports the round trips to Redis per
// offered request. hold is how long each admitted request lasts; tokens
// what each is debited when it ends. The requests go round the nodes in
// turn. Holds are refreshed every second of the fake clock; their round
// trips count (one per node a second, whatever the keys).
func atLimit(b *testing.B, nodes int, every time.Duration, kl authsnap.Limits, hold time.Duration, tokens int64) {
	f := newAtLimitFleet(b, nodes, kl)
	b.ResetTimer()
	rt, admitted := f.offer(b, b.N, every, hold, tokens)
	b.ReportMetric(rt, "roundtrips/op")
	b.ReportMetric(admitted, "admitted/op")
}

// atLimitFleet is the fleet atLimit offers a key to: nodes on a fake
// clock, each with its own store on one Redis.
type atLimitFleet struct {
	fc       *clock.Fake
	stores   []*limits.Redis
	subs     []*limits.Subject
	lims     []*limits.Limiter
	inflight []atLimitRequest
	refresh  time.Time
}

type atLimitRequest struct {
	tk  limits.Ticket
	end time.Time
}

func newAtLimitFleet(tb testing.TB, nodes int, kl authsnap.Limits) *atLimitFleet {
	rs := startRedis(tb)
	f := &atLimitFleet{fc: clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	f.refresh = f.fc.Now()
	for range nodes {
		ups := make(chan bool, 4)
		st := limits.NewRedis(limits.RedisOptions{Address: rs.addr(), OnChange: func(up bool) { ups <- up },
			// Only takes and refreshes count: no health probes behind
			// the offer's back on a loaded machine.
			HealthInterval: time.Hour})
		// Holds are refreshed every second of the fake clock (offer), as
		// the store does every second of real time; set before Run.
		st.SetHoldRefresh(time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { st.Run(ctx) })
		tb.Cleanup(func() { cancel(); wg.Wait() })
		if !<-ups {
			tb.Fatal("store not up")
		}
		l := limits.New(limits.Options{Clock: f.fc.Now, Fleet: st})
		bd := l.Bind()
		f.subs = append(f.subs, bd.Subject("k", "t", kl, authsnap.Limits{}))
		bd.Done()
		f.stores, f.lims = append(f.stores, st), append(f.lims, l)
	}
	return f
}

func (f *atLimitFleet) calls() (n int64) {
	for _, st := range f.stores {
		n += st.Calls()
	}
	return n
}

// offer offers n requests, one every every, round the nodes, and returns
// the round trips and the admissions per offered request.
func (f *atLimitFleet) offer(tb testing.TB, n int, every, hold time.Duration, tokens int64) (roundTrips, admitted float64) {
	calls := f.calls()
	var ok int
	for i := range n {
		f.fc.Advance(every)
		now := f.fc.Now()
		if now.Sub(f.refresh) >= time.Second {
			f.refresh = now
			for _, l := range f.lims {
				if err := l.RefreshHolds(); err != nil {
					tb.Fatal(err)
				}
			}
		}
		kept := f.inflight[:0]
		for _, r := range f.inflight {
			if r.end.After(now) {
				kept = append(kept, r)
				continue
			}
			r.tk.Debit(now, tokens)
			r.tk.Release()
		}
		f.inflight = kept
		if tk, _, adm := f.subs[i%len(f.subs)].Admit(now); adm {
			ok++
			f.inflight = append(f.inflight, atLimitRequest{tk, now.Add(hold)})
		}
		for _, l := range f.lims {
			l.WaitPrefetches() // before the next request, as Redis answers in a real gap
		}
	}
	return float64(f.calls()-calls) / float64(n), float64(ok) / float64(n)
}

// TestFleetRoundTripsConcurrentAtLimit: two nodes share a key's
// max_concurrent of 10, offered five times what it lets through (10 s
// requests, 5 a second); past the first 20 s, the fleet pays at most 0.1
// round trips per offered request, refreshes included, and keeps every
// slot busy. Each node re-sending its unchanged hold every second cost
// 0.48.
func TestFleetRoundTripsConcurrentAtLimit(t *testing.T) {
	f := newAtLimitFleet(t, 2, authsnap.Limits{MaxConcurrent: 10})
	const every, hold = 200 * time.Millisecond, 10 * time.Second
	f.offer(t, 100, every, hold, 0) // 20 s: the first takes, and the waits after them grown
	rt, admitted := f.offer(t, 1000, every, hold, 0)
	t.Logf("%.3f round trips and %.3f admitted per offered request", rt, admitted)
	if rt > 0.1 {
		t.Errorf("%.3f round trips per offered request, want at most 0.1", rt)
	}
	if admitted < 0.19 {
		t.Errorf("%.3f admitted per offered request, want 0.2 (10 slots, 10 s requests, 5 offered a second)", admitted)
	}
}

// BenchmarkAtLimit: each kind of limit at five times its demand; the
// node must not pay a round trip per refused request.
func BenchmarkAtLimit(b *testing.B) {
	for _, rate := range []int64{1, 10} { // what the limit lets through a second
		every := time.Second / time.Duration(5*rate)
		b.Run("rpm/"+strconv.FormatInt(60*rate, 10), func(b *testing.B) {
			atLimit(b, 1, every, authsnap.Limits{RequestsPerMinute: 60 * rate}, 0, 0)
		})
		b.Run("tpm/"+strconv.FormatInt(6000*rate, 10), func(b *testing.B) {
			atLimit(b, 1, every, authsnap.Limits{TokensPerMinute: 6000 * rate}, 0, 100)
		})
		b.Run("concurrent/"+strconv.FormatInt(rate, 10), func(b *testing.B) {
			atLimit(b, 1, every, authsnap.Limits{MaxConcurrent: 10 * rate}, 10*time.Second, 0)
		})
		b.Run("concurrent-2nodes/"+strconv.FormatInt(rate, 10), func(b *testing.B) {
			atLimit(b, 2, every, authsnap.Limits{MaxConcurrent: 10 * rate}, 10*time.Second, 0)
		})
		b.Run("rpm-4nodes/"+strconv.FormatInt(60*rate, 10), func(b *testing.B) {
			atLimit(b, 4, every, authsnap.Limits{RequestsPerMinute: 60 * rate}, 0, 0)
		})
		b.Run("tpm-4nodes/"+strconv.FormatInt(6000*rate, 10), func(b *testing.B) {
			atLimit(b, 4, every, authsnap.Limits{TokensPerMinute: 6000 * rate}, 0, 100)
		})
		b.Run("concurrent-4nodes/"+strconv.FormatInt(rate, 10), func(b *testing.B) {
			atLimit(b, 4, every, authsnap.Limits{MaxConcurrent: 10 * rate}, 10*time.Second, 0)
		})
	}
}

// TestFleetRoundTripsSharedAtLimit: four nodes share a key's 60 requests
// (or 6,000 tokens) per minute, offered five times that; past the first
// minute the fleet pays at most 0.1 round trips per offered request and
// still admits the limit. Each node asking again after one lease's
// refill found a quarter of a lease each time: 0.25.
func TestFleetRoundTripsSharedAtLimit(t *testing.T) {
	for _, tt := range []struct {
		name   string
		kl     authsnap.Limits
		tokens int64
	}{
		{"rpm", authsnap.Limits{RequestsPerMinute: 60}, 0},
		{"tpm", authsnap.Limits{TokensPerMinute: 6000}, 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newAtLimitFleet(t, 4, tt.kl)
			const every = 200 * time.Millisecond
			f.offer(t, 300, every, 0, tt.tokens) // the first minute: the bucket's initial fill, the waits stretched
			rt, admitted := f.offer(t, 3000, every, 0, tt.tokens)
			t.Logf("%.3f round trips and %.4f admitted per offered request", rt, admitted)
			if rt > 0.1 {
				t.Errorf("%.3f round trips per offered request, want at most 0.1", rt)
			}
			if admitted < 0.195 || admitted > 0.205 {
				t.Errorf("%.4f admitted per offered request, want 0.2 (the limit, a fifth of the demand)", admitted)
			}
		})
	}
}
