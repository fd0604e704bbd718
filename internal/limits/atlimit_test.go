package limits_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// atLimit offers one key of a node of the fleet five times what its
// limit lets through, one request per op on a fake clock every (5 ×
// the rate the limit lets through), and reports the round trips to Redis per
// offered request. hold is how long each admitted request lasts; tokens
// what each is debited when it ends.
func atLimit(b *testing.B, every time.Duration, kl authsnap.Limits, hold time.Duration, tokens int64) {
	rs := startRedis(b)
	store := runStore(b, rs.addr())
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	l := limits.New(limits.Options{Clock: fc.Now, Fleet: store})
	bd := l.Bind()
	sub := bd.Subject("k", "t", kl, authsnap.Limits{})
	bd.Done()
	type running struct {
		tk  limits.Ticket
		end time.Time
	}
	var inflight []running
	var admitted int
	calls := store.Calls()
	b.ResetTimer()
	for range b.N {
		fc.Advance(every)
		now := fc.Now()
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
		if tk, _, ok := sub.Admit(now); ok {
			admitted++
			inflight = append(inflight, running{tk, now.Add(hold)})
		}
	}
	b.ReportMetric(float64(store.Calls()-calls)/float64(b.N), "roundtrips/op")
	b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
}

// BenchmarkAtLimit: each kind of limit at five times its demand; the
// node must not pay a round trip per refused request.
func BenchmarkAtLimit(b *testing.B) {
	for _, rate := range []int64{1, 10} { // what the limit lets through a second
		every := time.Second / time.Duration(5*rate)
		b.Run("rpm/"+strconv.FormatInt(60*rate, 10), func(b *testing.B) {
			atLimit(b, every, authsnap.Limits{RequestsPerMinute: 60 * rate}, 0, 0)
		})
		b.Run("tpm/"+strconv.FormatInt(6000*rate, 10), func(b *testing.B) {
			atLimit(b, every, authsnap.Limits{TokensPerMinute: 6000 * rate}, 0, 100)
		})
		b.Run("concurrent/"+strconv.FormatInt(rate, 10), func(b *testing.B) {
			atLimit(b, every, authsnap.Limits{MaxConcurrent: 10 * rate}, 10*time.Second, 0)
		})
	}
}
