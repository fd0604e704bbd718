package upstream

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/clock"
)

func stated(limit, remaining int64, reset time.Duration) Budget {
	return Budget{Stated: true, Limit: limit, Remaining: remaining, Reset: reset}
}

// take acquires a slot and returns the Result.Sent its lease would carry.
func take(t *testing.T, s *State) uint64 {
	t.Helper()
	if !s.Acquire() {
		t.Fatal("Acquire refused")
	}
	return s.Acquired()
}

// TestHeadroomHolds: a used-up budget holds the backend back until its
// reset (or RateLimitDefault when none was stated), counting the requests
// sent after the answer and ignoring stale answers.
func TestHeadroomHolds(t *testing.T) {
	tests := []struct {
		name string
		mode HeadroomMode
		// run sends and finishes requests; the backend then has
		// wantFree more Acquires before it is held, for wantHold.
		run      func(t *testing.T, s *State)
		wantFree int
		wantHold time.Duration
	}{
		{
			name: "no requests left until the reset",
			run: func(t *testing.T, s *State) {
				s.Finish(Result{Outcome: Success, Sent: take(t, s), Headroom: Headroom{Requests: stated(60, 0, 30*time.Second)}})
			},
			wantHold: 30 * time.Second,
		},
		{
			name: "the last requests are counted here",
			run: func(t *testing.T, s *State) {
				s.Finish(Result{Outcome: Success, Sent: take(t, s), Headroom: Headroom{Requests: stated(60, 3, 20*time.Second)}})
			},
			wantFree: 3, wantHold: 20 * time.Second,
		},
		{
			name: "requests sent after the answered one are not in its count",
			run: func(t *testing.T, s *State) {
				// Counting starts with the first budget stated.
				s.Finish(Result{Outcome: Success, Sent: take(t, s), Headroom: Headroom{Requests: stated(60, 50, 20*time.Second)}})
				first := take(t, s)
				take(t, s)
				take(t, s)
				s.Finish(Result{Outcome: Success, Sent: first, Headroom: Headroom{Requests: stated(60, 4, 20*time.Second)}})
			},
			wantFree: 2, wantHold: 20 * time.Second,
		},
		{
			name: "a stale answer does not undo a newer one",
			run: func(t *testing.T, s *State) {
				s.Finish(Result{Outcome: Success, Sent: take(t, s), Headroom: Headroom{Requests: stated(60, 50, 10*time.Second)}})
				old, newer := take(t, s), take(t, s)
				s.Finish(Result{Outcome: Success, Sent: newer, Headroom: Headroom{Requests: stated(60, 1, 10*time.Second)}})
				s.Finish(Result{Outcome: Success, Sent: old, Headroom: Headroom{Requests: stated(60, 50, 10*time.Second)}})
			},
			wantFree: 1, wantHold: 10 * time.Second,
		},
		{
			name: "used up without a stated reset holds for RateLimitDefault",
			run: func(t *testing.T, s *State) {
				s.Finish(Result{Outcome: Success, Sent: take(t, s), Headroom: Headroom{Requests: Budget{Stated: true}}})
			},
			wantHold: 5 * time.Second,
		},
		{
			name: "no tokens left, even on a 429",
			run: func(t *testing.T, s *State) {
				s.Finish(Result{Outcome: RateLimited, RetryAfter: time.Second, Sent: take(t, s), Headroom: Headroom{
					Requests: stated(60, 50, time.Second), Tokens: stated(1000, 0, 40*time.Second),
				}})
			},
			wantHold: 40 * time.Second,
		},
		{
			name: "off: the headers change nothing",
			mode: HeadroomOff,
			run: func(t *testing.T, s *State) {
				s.Finish(Result{Outcome: Success, Sent: take(t, s), Headroom: Headroom{Requests: stated(60, 0, 30*time.Second)}})
			},
			wantFree: 100,
		},
		{
			name: "no headers: nothing held",
			run: func(t *testing.T, s *State) {
				s.Finish(Result{Outcome: Success, Sent: take(t, s)})
			},
			wantFree: 100,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.NewFake(time.Unix(1000, 0))
			o := testOptions(c)
			o.Headroom = tt.mode
			s := newState(t, o, 1000)
			tt.run(t, s)
			for range s.InFlight() {
				s.Finish(Result{Outcome: Success}) // what run left in flight, answered without headers
			}
			free := 0
			for free < 100 && s.Acquire() {
				free++
				s.Finish(Result{Outcome: Success})
			}
			if free != tt.wantFree {
				t.Fatalf("%d Acquires before the hold, want %d", free, tt.wantFree)
			}
			if tt.wantHold == 0 {
				return
			}
			if got, want := s.EligibleAt(), c.Now().Add(tt.wantHold); !got.Equal(want) {
				t.Errorf("EligibleAt = %v, want %v", got, want)
			}
			if got := s.View().HeadroomUntil; !got.Equal(c.Now().Add(tt.wantHold)) {
				t.Errorf("View.HeadroomUntil = %v", got)
			}
			c.Advance(tt.wantHold - time.Millisecond)
			if s.Ready(s.Now()) || s.ReadyNow() || s.Acquire() {
				t.Fatal("eligible before the reset")
			}
			c.Advance(time.Millisecond)
			if !s.ReadyNow() || !s.Acquire() {
				t.Fatal("not eligible at the reset")
			}
			if got := s.View().HeldFor; got < tt.wantHold {
				t.Errorf("View.HeldFor = %v, want at least %v", got, tt.wantHold)
			}
		})
	}
}

// TestHeadroomFactor: how the remaining share scales P2C's cost in each
// mode, and that it lapses at the reset.
func TestHeadroomFactor(t *testing.T) {
	tests := []struct {
		name      string
		mode      HeadroomMode
		h         Headroom
		want      float64
		wantAfter float64 // after both resets
	}{
		{name: "cost: the tighter share", mode: HeadroomCost, h: Headroom{Requests: stated(100, 50, time.Minute), Tokens: stated(1000, 250, time.Minute)}, want: 0.25, wantAfter: 1},
		{name: "cost: floored", mode: HeadroomCost, h: Headroom{Requests: stated(1000, 1, time.Minute)}, want: minShare, wantAfter: 1},
		{name: "cost: no limit stated", mode: HeadroomCost, h: Headroom{Requests: stated(0, 5, time.Minute)}, want: 1, wantAfter: 1},
		{name: "gate: ignored", mode: HeadroomGate, h: Headroom{Requests: stated(100, 5, time.Minute)}, want: 1, wantAfter: 1},
		{name: "threshold: above", mode: HeadroomThreshold, h: Headroom{Requests: stated(100, 20, time.Minute)}, want: 1, wantAfter: 1},
		{name: "threshold: below", mode: HeadroomThreshold, h: Headroom{Requests: stated(100, 5, time.Minute)}, want: 0.1, wantAfter: 1},
		{name: "off", mode: HeadroomOff, h: Headroom{Requests: stated(100, 5, time.Minute)}, want: 1, wantAfter: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.NewFake(time.Unix(1000, 0))
			o := testOptions(c)
			o.Headroom = tt.mode
			s := newState(t, o, 10)
			s.Finish(Result{Outcome: Success, TTFB: time.Second, Sent: take(t, s), Headroom: tt.h})
			base := newState(t, o, 10)
			base.Finish(Result{Outcome: Success, TTFB: time.Second, Sent: take(t, base)})
			got := base.Cost(1, s.Now()) / s.Cost(1, s.Now())
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("cost ratio = %v, want %v", got, tt.want)
			}
			c.Advance(time.Minute)
			if got := base.Cost(1, s.Now()) / s.Cost(1, s.Now()); math.Abs(got-tt.wantAfter) > 1e-9 {
				t.Errorf("after the reset: cost ratio = %v, want %v", got, tt.wantAfter)
			}
		})
	}
}

// TestHeadroomView: the shares and the malformed count as metrics see
// them; malformed values are counted even with headroom off.
func TestHeadroomView(t *testing.T) {
	for _, mode := range []HeadroomMode{HeadroomCost, HeadroomOff} {
		c := clock.NewFake(time.Unix(1000, 0))
		o := testOptions(c)
		o.Headroom = mode
		s := newState(t, o, 10)
		s.Finish(Result{Outcome: Success, Sent: take(t, s), Headroom: Headroom{Requests: stated(100, 40, time.Minute), Malformed: 2}})
		v := s.View()
		type shares struct {
			Requests                   float64
			RequestsKnown, TokensKnown bool
			Malformed                  uint64
		}
		want := shares{Requests: 0.4, RequestsKnown: true, Malformed: 2}
		if mode == HeadroomOff {
			want.Requests, want.RequestsKnown = 0, false
		}
		if diff := cmp.Diff(shares{v.HeadroomRequests, v.HeadroomRequestsKnown, v.HeadroomTokensKnown, v.MalformedHeaders}, want); diff != "" {
			t.Errorf("mode %d: View (-got +want):\n%s", mode, diff)
		}
	}
}

// TestHeadroomRelease: a slot given back unused gives its request back.
func TestHeadroomRelease(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	s := newState(t, testOptions(c), 10)
	s.Finish(Result{Outcome: Success, Sent: take(t, s), Headroom: Headroom{Requests: stated(60, 1, time.Minute)}})
	for range 3 {
		take(t, s)
		s.Release()
	}
	take(t, s)
	if s.Acquire() {
		t.Fatal("a second request went out with one left")
	}
}

// TestFits: the token budget against a request's expected cost, less
// what was spent since the answer; a 0 cost always fits.
func TestFits(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	s := newState(t, testOptions(c), 10)
	if !s.Fits(1 << 40) {
		t.Fatal("no budget stated, yet no room")
	}
	sent := take(t, s)
	mark := s.Spend(100)
	s.Spend(300) // a request sent after the answered one
	s.Finish(Result{Outcome: Success, Sent: sent, SentTokens: mark, Headroom: Headroom{Tokens: stated(10000, 1000, 30*time.Second)}})
	// 1000 stated, less the 300 spent since: 700 left.
	for _, tt := range []struct {
		tokens int64
		want   bool
	}{{0, true}, {700, true}, {701, false}} {
		if got := s.Fits(tt.tokens); got != tt.want {
			t.Errorf("Fits(%d) = %v, want %v", tt.tokens, got, tt.want)
		}
	}
	if got, want := s.FitsAt(701), c.Now().Add(30*time.Second); !got.Equal(want) {
		t.Errorf("FitsAt = %v, want %v", got, want)
	}
	s.Spend(700)
	if s.Fits(1) {
		t.Error("room after spending the rest")
	}
	c.Advance(30 * time.Second)
	if !s.Fits(5000) {
		t.Error("no room after the reset")
	}
}

// TestHeadroomResetCapped: whatever reset a provider's headers name (a
// year ahead, a token reset years away, a limit of 0), the hold and the
// token budget's wait end by RateLimitMax, as a 429's Retry-After would.
func TestHeadroomResetCapped(t *testing.T) {
	const year = 8760 * time.Hour
	tests := []struct {
		name string
		h    Headroom
	}{
		{"requests used up, reset a year ahead", Headroom{Requests: stated(100, 0, year)}},
		{"tokens used up, reset years ahead", Headroom{Tokens: stated(1000, 0, 4*year)}},
		{"limit 0", Headroom{Requests: stated(0, 0, year), Tokens: stated(0, 0, year)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.NewFake(time.Unix(1000, 0))
			o := testOptions(c)
			o.RateLimitMax = 90 * time.Second
			s := newState(t, o, 10)
			s.Finish(Result{Outcome: Success, Sent: take(t, s), Headroom: tt.h})
			if s.ReadyNow() && s.Fits(1) {
				t.Fatal("not held back at all")
			}
			end := c.Now().Add(o.RateLimitMax)
			if got := s.EligibleAt(); got.After(end) {
				t.Errorf("EligibleAt = %v, after the cap %v", got, end)
			}
			if got := s.FitsAt(1); got.After(end) {
				t.Errorf("FitsAt = %v, after the cap %v", got, end)
			}
			c.Advance(o.RateLimitMax)
			if !s.ReadyNow() || !s.Fits(1) {
				t.Error("still held back at the cap")
			}
		})
	}
}

// TestForgetHeadroom: a newer routing table ends what the headers said
// (the hold, the budgets) for the backends it keeps, and nothing else: a
// cooldown after a 429 runs on, and a backend it does not keep stays held.
func TestForgetHeadroom(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	reg := NewRegistry(testOptions(c))
	kept, cooled, dropped := reg.Get(Identity{ID: "kept", Cap: 10}), reg.Get(Identity{ID: "cooled", Cap: 10}), reg.Get(Identity{ID: "dropped", Cap: 10})
	usedUp := Headroom{Requests: stated(100, 0, time.Minute), Tokens: stated(1000, 0, time.Minute)}
	for _, s := range []*State{kept, dropped} {
		s.Finish(Result{Outcome: Success, Sent: take(t, s), Headroom: usedUp})
	}
	cooled.Finish(Result{Outcome: RateLimited, RetryAfter: 30 * time.Second, Sent: take(t, cooled), Headroom: usedUp})
	if kept.ReadyNow() || dropped.ReadyNow() {
		t.Fatal("not held")
	}
	reg.ForgetHeadroom(func(id Identity) bool { return id.ID != "dropped" })
	v := kept.View()
	if !kept.ReadyNow() || !kept.Fits(1) || !v.HeadroomUntil.IsZero() || v.HeadroomRequestsKnown || v.HeadroomTokensKnown {
		t.Errorf("the kept backend still holds what the headers said: %+v", v)
	}
	if v.HeldFor == 0 {
		t.Error("the time held so far was forgotten too")
	}
	if cooled.ReadyNow() || cooled.View().CooldownUntil.IsZero() {
		t.Error("the 429's cooldown ended with the headroom")
	}
	if dropped.ReadyNow() {
		t.Error("a backend the table does not keep was released")
	}
	// The next answer states the budgets again.
	kept.Finish(Result{Outcome: Success, Sent: take(t, kept), Headroom: Headroom{Requests: stated(100, 0, time.Minute)}})
	if kept.ReadyNow() {
		t.Error("a new answer's used-up budget does not hold")
	}
}
