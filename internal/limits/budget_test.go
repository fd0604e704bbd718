package limits_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usd"
)

// budgetSubject binds one key k1 of tenant t1 with the given limits on a
// local limiter reading clk.
func budgetSubject(t *testing.T, clk *clock.Fake, share float64, key, tenant authsnap.Limits) *limits.Subject {
	t.Helper()
	l := limits.New(limits.Options{Clock: clk.Now, Share: share})
	b := l.Bind()
	sub := b.Subject("k1", "t1", key, tenant)
	b.Done()
	if sub == nil {
		t.Fatal("no subject for a budgeted key")
	}
	return sub
}

// spendOnce admits one request at the clock's time and charges it cost
// when it ends, at the same time; it fails the test on a refusal.
func spendOnce(t *testing.T, clk *clock.Fake, sub *limits.Subject, cost usd.Amount) limits.Status {
	t.Helper()
	tk, st, ok := sub.Admit(clk.Now())
	if !ok {
		t.Fatalf("refused at %s: %+v", clk.Now().Format(time.RFC3339), st)
	}
	tk.Charge(clk.Now(), cost)
	tk.Release()
	return st
}

// TestBudgetDayWindow: a day budget admits until the day's spend has
// reached it, then refuses with Retry-After to UTC midnight; at
// 00:00:00 the spend starts again from zero.
func TestBudgetDayWindow(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 6, 23, 59, 0, 0, time.UTC))
	sub := budgetSubject(t, clk, 1, authsnap.Limits{USDPerDay: "1"}, authsnap.Limits{})
	st := spendOnce(t, clk, sub, 600_000_000_000) // $0.60
	if st.Budget.Limit != usd.Dollar || st.Budget.Remaining != usd.Dollar {
		t.Errorf("first admission shows budget %+v, want $1 of $1 left", st.Budget)
	}
	st = spendOnce(t, clk, sub, 600_000_000_000) // $1.20 spent: past the budget (in flight when it ran out)
	if st.Budget.Remaining != 400_000_000_000 {
		t.Errorf("second admission shows %s left, want 0.4", st.Budget.Remaining)
	}
	clk.Advance(59 * time.Second) // 23:59:59
	_, st, ok := sub.Admit(clk.Now())
	if ok || st.Scope != limits.ScopeKey || st.Kind != limits.KindBudget || st.RetryAfter != time.Second {
		t.Fatalf("at 23:59:59: ok %v, %s %s retry %s; want a key budget refusal for 1s", ok, st.Scope, st.Kind, st.RetryAfter)
	}
	if st.Budget.Remaining != 0 || st.Budget.Reset != time.Second {
		t.Errorf("refusal shows budget %+v, want 0 left, reset in 1s", st.Budget)
	}
	clk.Advance(time.Second) // 00:00:00 the next day
	st = spendOnce(t, clk, sub, 1)
	if st.Budget.Remaining != usd.Dollar || st.Budget.Reset != 24*time.Hour {
		t.Errorf("at midnight: budget %+v, want the whole dollar for 24h", st.Budget)
	}
}

// TestBudgetMonthWindows: a month budget spans the UTC month, however
// long it is (a leap February's 29th is in February; March 1st is a new
// month), and the tenant's budget binds all its keys.
func TestBudgetMonthWindows(t *testing.T) {
	tests := []struct {
		name       string
		spent, end time.Time // the spend, the window's end
	}{
		{"leap day", time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC), time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC)},
		{"february of a common year", time.Date(2027, 2, 28, 23, 59, 59, 0, time.UTC), time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)},
		{"december into january", time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"a 30-day month", time.Date(2026, 4, 30, 0, 0, 0, 0, time.UTC), time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)},
		// 22:00 on May 31st at UTC-3 is 01:00 on June 1st UTC: June's budget.
		{"a time in another zone", time.Date(2026, 5, 31, 22, 0, 0, 0, time.FixedZone("UTC-3", -3*3600)), time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(tt.spent)
			sub := budgetSubject(t, clk, 1, authsnap.Limits{RequestsPerMinute: 1000}, authsnap.Limits{USDPerMonth: "5"})
			spendOnce(t, clk, sub, 5*usd.Dollar)
			_, st, ok := sub.Admit(clk.Now())
			if ok || st.Scope != limits.ScopeTenant || st.Kind != limits.KindBudget {
				t.Fatalf("after the month's budget: ok %v, %s %s; want a tenant budget refusal", ok, st.Scope, st.Kind)
			}
			if want := tt.end.Sub(tt.spent); st.RetryAfter != want {
				t.Errorf("Retry-After %s, want %s (to %s)", st.RetryAfter, want, tt.end)
			}
			clk.Set(tt.end.Add(-time.Nanosecond))
			if _, _, ok := sub.Admit(clk.Now()); ok {
				t.Error("admitted a nanosecond before the month's end")
			}
			clk.Set(tt.end)
			spendOnce(t, clk, sub, 1)
		})
	}
}

// TestBudgetShareAndRebind: the local store enforces the node's share of
// a budget, exactly; a new snapshot that raises the budget keeps the
// window's spend and admits again at once.
func TestBudgetShareAndRebind(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	l := limits.New(limits.Options{Clock: clk.Now, Share: 0.25})
	bind := func(day string) *limits.Subject {
		b := l.Bind()
		sub := b.Subject("k1", "t1", authsnap.Limits{USDPerDay: day}, authsnap.Limits{})
		b.Done()
		return sub
	}
	sub := bind("10")
	st := spendOnce(t, clk, sub, 2*usd.Dollar)
	if st.Budget.Limit != 2_500_000_000_000 {
		t.Errorf("share of $10 at 0.25 = %s, want 2.5", st.Budget.Limit)
	}
	spendOnce(t, clk, sub, usd.Dollar/2)
	if _, _, ok := sub.Admit(clk.Now()); ok {
		t.Fatal("admitted past the node's share")
	}
	sub = bind("20") // share $5, $2.50 spent
	st = spendOnce(t, clk, sub, 1)
	if st.Budget.Remaining != 2_500_000_000_000 {
		t.Errorf("after the raise: %s left, want 2.5", st.Budget.Remaining)
	}
}

// BenchmarkAdmitBudget is BenchmarkAdmit's key+tenant case with day and
// month budgets on both, and each admission's cost charged: what budgets
// add to an admission on the local store.
func BenchmarkAdmitBudget(b *testing.B) {
	const keys = 10000
	big := authsnap.Limits{RequestsPerMinute: authsnap.MaxLimit, TokensPerMinute: authsnap.MaxLimit, MaxConcurrent: 1 << 20}
	budgeted := big
	budgeted.USDPerDay, budgeted.USDPerMonth = "1000000", "1000000"
	for _, bc := range []struct {
		name   string
		kl, tl authsnap.Limits
		charge bool
	}{
		{"rate-limits", big, big, false},
		{"rate-limits+budgets", budgeted, budgeted, false},
		{"rate-limits+budgets+charge", budgeted, budgeted, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			now := time.Now()
			l := limits.New(limits.Options{})
			bd := l.Bind()
			subs := make([]*limits.Subject, keys)
			for i := range subs {
				subs[i] = bd.Subject("k_"+strconv.Itoa(i), "t_"+strconv.Itoa(i%100), bc.kl, bc.tl)
			}
			bd.Done()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tk, _, ok := subs[i].Admit(now)
				if !ok {
					b.Fatal("refused")
				}
				tk.Debit(now, 100)
				if bc.charge {
					tk.Charge(now, 1000)
				}
				tk.Release()
				if i++; i == keys {
					i = 0
				}
			}
		})
	}
}
