package limits_test

import (
	"strconv"
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
	rs := startRedis(b)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	stores := make([]*limits.Redis, nodes)
	subs := make([]*limits.Subject, nodes)
	lims := make([]*limits.Limiter, nodes)
	for i := range nodes {
		stores[i] = runStore(b, rs.addr())
		// Holds are refreshed every second of the fake clock, below,
		// as the store does every second of real time.
		stores[i].SetHoldRefresh(time.Hour)
		l := limits.New(limits.Options{Clock: fc.Now, Fleet: stores[i]})
		lims[i] = l
		bd := l.Bind()
		subs[i] = bd.Subject("k", "t", kl, authsnap.Limits{})
		bd.Done()
	}
	allCalls := func() (n int64) {
		for _, st := range stores {
			n += st.Calls()
		}
		return n
	}
	type running struct {
		tk  limits.Ticket
		end time.Time
	}
	var inflight []running
	var admitted int
	calls := allCalls()
	refreshed := fc.Now()
	b.ResetTimer()
	for i := range b.N {
		fc.Advance(every)
		now := fc.Now()
		if now.Sub(refreshed) >= time.Second {
			refreshed = now
			for _, l := range lims {
				if err := l.RefreshHolds(); err != nil {
					b.Fatal(err)
				}
			}
		}
		kept := inflight[:0]
		for _, r := range inflight {
			if r.end.After(now) {
				kept = append(kept, r)
				continue
			}
			r.tk.Debit(now, tokens)
			r.tk.Release()
		}
		inflight = kept
		if tk, _, ok := subs[i%nodes].Admit(now); ok {
			admitted++
			inflight = append(inflight, running{tk, now.Add(hold)})
		}
	}
	b.ReportMetric(float64(allCalls()-calls)/float64(b.N), "roundtrips/op")
	b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
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
	}
}
