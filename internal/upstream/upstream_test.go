package upstream

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/clock"
)

// testOptions: fake clock, no jitter, slow start off unless a test sets it.
func testOptions(c *clock.Fake) Options {
	return Options{
		Clock:       c.Now,
		Rand:        func() float64 { return 0 },
		DefaultTTFB: time.Second,
		DecayWindow: 10 * time.Second,
		SlowStart:   -1,
		Breaker:     BreakerOptions{Failures: 3, Cooldown: time.Second, MaxCooldown: 8 * time.Second},
	}
}

func newState(t *testing.T, o Options, capacity int) *State {
	t.Helper()
	return NewRegistry(o).Get(Identity{ID: "b", Cap: capacity})
}

func TestCapNeverExceeded(t *testing.T) {
	s := newState(t, Options{}, 5)

	// 200 goroutines each try once and hold what they got: exactly the cap
	// succeeds, whatever the interleaving.
	var got atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 200 {
		wg.Go(func() {
			<-start
			if s.Acquire() {
				got.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := got.Load(); n != 5 || s.InFlight() != 5 {
		t.Fatalf("%d acquired, in-flight %d; want exactly the cap, 5", n, s.InFlight())
	}
	for range 5 {
		s.Release()
	}

	// Then they hammer acquire/finish; in-flight never leaves 1..5.
	var peak atomic.Int64
	for range 200 {
		wg.Go(func() {
			for range 200 {
				if !s.Acquire() {
					continue
				}
				n := s.InFlight()
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				s.Finish(Result{Outcome: Success, TTFB: time.Millisecond})
			}
		})
	}
	wg.Wait()
	if got := peak.Load(); got > 5 || got < 1 {
		t.Fatalf("peak in-flight = %d, want 1..5", got)
	}
	if got := s.InFlight(); got != 0 {
		t.Fatalf("in-flight after all finished = %d, want 0", got)
	}
}

func TestRegistryKeepsStateByIdentity(t *testing.T) {
	r := NewRegistry(Options{})
	a := r.Get(Identity{ID: "a", BaseURL: "https://x", Cap: 2})
	if !a.Acquire() {
		t.Fatal("first acquire failed")
	}
	if b := r.Get(Identity{ID: "a", BaseURL: "https://x", Cap: 2}); b != a {
		t.Fatal("same identity returned a different state")
	}
	if c := r.Get(Identity{ID: "a", BaseURL: "https://x", Cap: 3}); c == a {
		t.Fatal("changed cap must give a fresh state")
	}
	if r.Len() != 2 {
		t.Fatalf("Len = %d, want 2", r.Len())
	}
}

func TestPrune(t *testing.T) {
	r := NewRegistry(Options{})
	idle, busy, kept := Identity{ID: "idle", Cap: 1}, Identity{ID: "busy", Cap: 1}, Identity{ID: "kept", Cap: 1}
	r.Get(idle)
	b := r.Get(busy)
	k := r.Get(kept)
	if !b.Acquire() {
		t.Fatal("acquire failed")
	}
	keepOnly := func(id Identity) bool { return id == kept }
	ids := func() map[string]bool {
		m := map[string]bool{}
		for id := range r.All() {
			m[id.ID] = true
		}
		return m
	}

	r.Prune(keepOnly)
	if diff := cmp.Diff(ids(), map[string]bool{"busy": true, "kept": true}); diff != "" {
		t.Fatalf("after first prune (-got +want):\n%s", diff)
	}
	// Re-adding the busy backend while its request runs reuses its state,
	// so the cap of 1 still holds.
	if r.Get(busy) != b || r.Get(busy).Acquire() {
		t.Fatal("busy state must be reused with its slot still taken")
	}
	b.Release()
	r.Prune(keepOnly)
	if diff := cmp.Diff(ids(), map[string]bool{"kept": true}); diff != "" {
		t.Fatalf("after second prune (-got +want):\n%s", diff)
	}
	if r.Get(kept) != k {
		t.Fatal("kept state replaced")
	}
	// A pruned state still works for requests pinned to an old table.
	if !b.Acquire() {
		t.Fatal("pruned state refused")
	}
	b.Finish(Result{Outcome: Success, TTFB: time.Second})
	if r.Get(busy) == b {
		t.Fatal("a pruned identity must get a fresh state")
	}
}

// TestPeakEWMA checks the estimate against the closed form in the package
// doc: the largest sample so far, each decayed by e^(−age/window).
func TestPeakEWMA(t *testing.T) {
	const tau = 10 * time.Second
	type sample struct {
		after time.Duration // clock advance before the sample
		ttfb  time.Duration
	}
	e := math.Exp
	tests := []struct {
		name    string
		samples []sample
		readAt  time.Duration // clock advance after the samples, before reading
		want    float64       // seconds
	}{
		{"new backend starts at the default", nil, 0, 1},
		{"the default decays like a sample", nil, tau, e(-1)},
		{"a slower sample replaces the estimate at once", []sample{{time.Second, 5 * time.Second}}, 0, 5},
		{"a faster sample does not lower it", []sample{{0, 100 * time.Millisecond}}, 0, 1},
		{"time does: one window later it is down by 1/e", []sample{{0, 5 * time.Second}, {tau, 100 * time.Millisecond}}, 0, 5 * e(-1)},
		{
			"only time counts, not the number of faster samples",
			[]sample{{0, 5 * time.Second}, {tau / 4, time.Second}, {tau / 4, time.Second}, {tau / 4, time.Second}, {tau / 4, time.Second}},
			0, 5 * e(-1),
		},
		{"a sample above the decayed estimate replaces it", []sample{{0, 5 * time.Second}, {3 * tau, 300 * time.Millisecond}}, 0, 0.3},
		{"a slowness is forgotten after window × ln(slow/fast)", []sample{{0, 2 * time.Second}}, time.Duration(float64(tau) * math.Log(20)), 0.1},
		{"reads stop at 1% of the default", []sample{{0, 2 * time.Second}}, 100 * tau, 0.01},
		{"zero TTFB is not a sample", []sample{{tau, 0}}, 0, e(-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.NewFake(time.Time{})
			s := newState(t, testOptions(c), 10)
			for _, sm := range tt.samples {
				c.Advance(sm.after)
				if !s.Acquire() {
					t.Fatal("acquire failed")
				}
				s.Finish(Result{Outcome: Success, TTFB: sm.ttfb})
			}
			c.Advance(tt.readAt)
			got := s.lat.read(int64(s.Now()), s.sh.invTau, s.sh.floor)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("estimate = %.15f s, want %.15f s", got, tt.want)
			}
			if v := s.View().EWMA; math.Abs(v.Seconds()-tt.want) > 1e-9 {
				t.Errorf("View().EWMA = %v, want %.9f s", v, tt.want)
			}
		})
	}
}

// TestErrorRepliesHoldTheEstimate: only a success is a latency sample
// (docs/failures.md "Fast errors"). Error replies and transport
// failures keep the stored estimate and restart its decay, so they never
// make the backend look faster; neutral outcomes touch nothing.
func TestErrorRepliesHoldTheEstimate(t *testing.T) {
	for o := ProviderError; o <= NodeOverloaded; o++ {
		t.Run(o.String(), func(t *testing.T) {
			c := clock.NewFake(time.Time{})
			s := newState(t, testOptions(c), 10)
			c.Advance(5 * time.Second)
			s.Acquire()
			s.Finish(Result{Outcome: Success, TTFB: 3 * time.Second})
			est, at := s.lat.load()
			c.Advance(5 * time.Second)
			before := s.View().EWMA
			s.Acquire()
			s.Finish(Result{Outcome: o, TTFB: time.Millisecond, RetryAfter: time.Second})
			gotEst, gotAt := s.lat.load()
			if gotEst != est {
				t.Fatalf("stored estimate %v became %v", est, gotEst)
			}
			after := s.View().EWMA
			if after < before {
				t.Fatalf("estimate lowered from %v to %v", before, after)
			}
			wantAt, wantAfter := at, before // neutral: untouched
			if o != EgressFault && o != Cancelled && o != NodeOverloaded && o != AuthRejected {
				wantAt, wantAfter = int64(s.Now()), 3*time.Second // held: decay restarts from 3s
			}
			if gotAt != wantAt || after != wantAfter {
				t.Fatalf("after %v: (at %d, estimate %v), want (at %d, estimate %v)", o, gotAt, after, wantAt, wantAfter)
			}
		})
	}
}

func TestSlowStartRamp(t *testing.T) {
	c := clock.NewFake(time.Time{})
	o := testOptions(c)
	o.SlowStart = 30 * time.Second
	reg := NewRegistry(o)
	c.Advance(time.Minute) // the ramp counts from the state's creation, not the registry's
	s := reg.Get(Identity{ID: "b", Cap: 1})
	var got []float64
	for _, at := range []time.Duration{0, time.Second, 15 * time.Second, 29 * time.Second, 30 * time.Second, time.Hour} {
		c.Set(s.sh.time(s.created).Add(at))
		got = append(got, s.EffectiveWeight(10, s.Now()))
	}
	want := []float64{1, 1, 5, 29.0 / 3, 10, 10}
	if diff := cmp.Diff(got, want, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
		t.Errorf("effective weight of 10 during slow start (-got +want):\n%s", diff)
	}
	if got := s.View().SlowStart; got != 1 {
		t.Errorf("View().SlowStart after the ramp = %v, want 1", got)
	}

	off := newState(t, testOptions(c), 1) // SlowStart -1
	if got := off.EffectiveWeight(10, off.Now()); got != 10 {
		t.Errorf("slow start off: effective weight %v, want 10", got)
	}
}

func TestCost(t *testing.T) {
	c := clock.NewFake(time.Time{})
	o := testOptions(c)
	o.SlowStart = 10 * time.Second
	s := newState(t, o, 10)
	c.Advance(5 * time.Second) // ramp 0.5; estimate 1s decayed by e^-0.5
	s.Acquire()
	s.Acquire()
	want := math.Exp(-0.5) * 3 / (4 * 0.5) // estimate × (2 in flight + 1) ÷ (weight 4 × ramp 0.5)
	if got := s.Cost(4, s.Now()); math.Abs(got-want) > 1e-12 {
		t.Fatalf("Cost = %v, want %v", got, want)
	}
}

// TestCheaper: Cheaper orders two states as their Costs do, over states
// whose estimates were set at different times (some decayed to the floor),
// with slots in flight and slow start ramping; exact ties are not cheaper
// either way, so P2C keeps its first draw.
func TestCheaper(t *testing.T) {
	c := clock.NewFake(time.Time{})
	o := testOptions(c)
	o.SlowStart = time.Minute
	reg := NewRegistry(o)
	type target struct {
		s *State
		w int
	}
	var ts []target
	for i := range 12 {
		s := reg.Get(Identity{ID: fmt.Sprint(i), Cap: 100})
		for range i % 4 {
			s.Acquire()
		}
		if i%3 != 0 { // i%3 == 0 keeps the default estimate, decaying from creation
			s.Acquire()
			s.Finish(Result{Outcome: Success, TTFB: time.Duration(i*137%900+50) * time.Millisecond})
		}
		ts = append(ts, target{s, 1 + i%5})
		c.Advance(time.Duration(i) * time.Second)
	}
	// Two fresh states: same estimate, time, ramp, weight and in-flight.
	twins := [2]*State{reg.Get(Identity{ID: "twin1", Cap: 100}), reg.Get(Identity{ID: "twin2", Cap: 100})}
	ts = append(ts, target{twins[0], 2}, target{twins[1], 2})
	c.Advance(20 * time.Second) // the first states' estimates are at the floor, the last ones ramp

	now := twins[0].Now()
	floor := time.Duration(reg.sh.floor * float64(time.Second))
	floored, ramping, checked := 0, 0, 0
	for _, a := range ts {
		if v := a.s.View(); v.EWMA == floor {
			floored++
		} else if v.SlowStart < 1 {
			ramping++
		}
		for _, b := range ts {
			ca, cb := a.s.Cost(a.w, now), b.s.Cost(b.w, now)
			if ca != cb && math.Abs(ca-cb) <= 1e-12*max(ca, cb) {
				continue // too close to call through different rounding
			}
			checked++
			if got := a.s.Cheaper(a.w, b.s, b.w, now); got != (ca < cb) {
				t.Errorf("Cheaper = %v for costs %v and %v", got, ca, cb)
			}
		}
	}
	if floored < 3 || ramping < 3 || checked != len(ts)*len(ts) {
		t.Fatalf("%d states at the floor, %d ramping, %d of %d pairs checked: the test lost its cases", floored, ramping, checked, len(ts)*len(ts))
	}
	if twins[0].Cheaper(2, twins[1], 2, now) || twins[1].Cheaper(2, twins[0], 2, now) {
		t.Error("one of two exactly tied states is cheaper")
	}
}

// TestCooldowns covers the 429 outcomes: Retry-After honoured, defaulted,
// capped; quota cooldowns; a cooldown never shortened.
func TestCooldowns(t *testing.T) {
	tests := []struct {
		name    string
		results []Result
		want    time.Duration // cooldown left after the results
	}{
		{"429 without Retry-After", []Result{{Outcome: RateLimited}}, 5 * time.Second},
		{"429 honours Retry-After", []Result{{Outcome: RateLimited, RetryAfter: 20 * time.Second}}, 20 * time.Second},
		{"429 Retry-After capped", []Result{{Outcome: RateLimited, RetryAfter: time.Hour}}, time.Minute},
		{"quota default", []Result{{Outcome: QuotaExhausted}}, 30 * time.Minute},
		{"quota shorter Retry-After ignored", []Result{{Outcome: QuotaExhausted, RetryAfter: time.Minute}}, 30 * time.Minute},
		{"quota longer Retry-After honoured", []Result{{Outcome: QuotaExhausted, RetryAfter: 2 * time.Hour}}, 2 * time.Hour},
		{"quota Retry-After counted up to 24h", []Result{{Outcome: QuotaExhausted, RetryAfter: 100 * time.Hour}}, 24 * time.Hour},
		{
			"a shorter cooldown never ends a longer one",
			[]Result{{Outcome: RateLimited, RetryAfter: 40 * time.Second}, {Outcome: RateLimited, RetryAfter: time.Second}},
			40 * time.Second,
		},
		{"provider error: no cooldown", []Result{{Outcome: ProviderError, RetryAfter: time.Minute}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.NewFake(time.Time{})
			s := newState(t, testOptions(c), 10)
			for range tt.results {
				if !s.Acquire() {
					t.Fatal("acquire failed before the results")
				}
			}
			for _, r := range tt.results {
				s.Finish(r)
			}
			var got time.Duration
			if at := s.EligibleAt(); !at.IsZero() {
				got = at.Sub(c.Now())
			}
			if got != tt.want {
				t.Fatalf("cooldown = %v, want %v", got, tt.want)
			}
			if until := s.View().CooldownUntil; tt.want > 0 && !until.Equal(c.Now().Add(tt.want)) {
				t.Errorf("View().CooldownUntil = %v, want now + %v", until, tt.want)
			}
			if tt.want == 0 {
				return
			}
			c.Advance(tt.want - 1)
			if s.Acquire() || s.Ready(s.Now()) {
				t.Fatal("admitted during the cooldown")
			}
			c.Advance(1)
			if !s.Ready(s.Now()) || !s.Acquire() {
				t.Fatal("refused after the cooldown")
			}
			if !s.View().CooldownUntil.IsZero() {
				t.Error("View().CooldownUntil set after the cooldown")
			}
		})
	}
}

// TestAuthRejectedDisables: a provider 401/403 takes the backend out until
// its probe is due (Options.AuthProbeAfter), whatever else happens; the
// same identity keeps the disable, a new one starts enabled.
func TestAuthRejectedDisables(t *testing.T) {
	c := clock.NewFake(time.Time{})
	o := testOptions(c)
	o.AuthProbeAfter = 10 * time.Minute
	r := NewRegistry(o)
	id := Identity{ID: "b", Credential: "old", Cap: 10}
	s := r.Get(id)
	s.Acquire()
	s.Finish(Result{Outcome: AuthRejected})
	disabledAt := c.Now()
	c.Advance(10*time.Minute - time.Nanosecond)
	if s.Acquire() || s.Ready(s.Now()) {
		t.Fatal("disabled backend admitted a request before its probe was due")
	}
	if !s.View().Disabled || !s.Disabled() {
		t.Fatal("View().Disabled = false")
	}
	if at, want := s.EligibleAt(), disabledAt.Add(10*time.Minute); !at.Equal(want) {
		t.Fatalf("EligibleAt = %v, want the probe time %v", at, want)
	}
	if r.Get(id) != s {
		t.Fatal("same identity must keep the disabled state")
	}
	id.Credential = "new"
	if fresh := r.Get(id); !fresh.Acquire() {
		t.Fatal("a new identity must start enabled")
	}
}

// TestDisabledBackendProbe: once the probe is due exactly one request is
// admitted, under any concurrency; what its outcome does to the backend.
func TestDisabledBackendProbe(t *testing.T) {
	const after = 10 * time.Minute
	tests := []struct {
		name        string
		end         func(s *State)
		wantEnabled bool
		wantProbeIn time.Duration // when still disabled: the next probe is due after this
	}{
		{"success re-enables", func(s *State) { s.Finish(Result{Outcome: Success, TTFB: time.Millisecond}) }, true, 0},
		{"another provider error re-enables", func(s *State) { s.Finish(Result{Outcome: ProviderError}) }, true, 0},
		{"a quota answer re-enables (then cools)", func(s *State) { s.Finish(Result{Outcome: QuotaExhausted}) }, true, 0},
		{"401 again waits another delay", func(s *State) { s.Finish(Result{Outcome: AuthRejected}) }, false, after},
		{"transport failure: the next request probes", func(s *State) { s.Finish(Result{Outcome: TransportFailure}) }, false, 0},
		{"egress fault: the next request probes", func(s *State) { s.Finish(Result{Outcome: EgressFault}) }, false, 0},
		{"released: the next request probes", func(s *State) { s.Release() }, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.NewFake(time.Time{})
			o := testOptions(c)
			o.AuthProbeAfter = after
			s := newState(t, o, 100)
			s.Acquire()
			s.Finish(Result{Outcome: AuthRejected})
			c.Advance(after)
			if !s.Ready(s.Now()) {
				t.Fatal("probe due but Ready = false")
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if s.Acquire() {
						admitted.Add(1)
					}
				}()
			}
			wg.Wait()
			if n := admitted.Load(); n != 1 {
				t.Fatalf("%d requests admitted, want exactly one probe", n)
			}
			if s.Ready(s.Now()) || s.Acquire() {
				t.Fatal("a second request admitted while the probe is out")
			}
			tt.end(s)
			if tt.wantEnabled {
				if s.Disabled() {
					t.Fatal("still disabled after the probe")
				}
				if s.View().CooldownUntil.After(c.Now()) {
					return // re-enabled, and cooling down as the answer asked
				}
				for i := range 5 {
					if !s.Acquire() {
						t.Fatalf("request %d refused after the backend came back", i)
					}
				}
				return
			}
			if !s.Disabled() {
				t.Fatal("enabled by an inconclusive or failed probe")
			}
			if tt.wantProbeIn > 0 {
				c.Advance(tt.wantProbeIn - time.Nanosecond)
				if s.Acquire() {
					t.Fatal("probed again before the delay was over")
				}
				c.Advance(time.Nanosecond)
			}
			if !s.Acquire() {
				t.Fatal("no next probe")
			}
			if s.Acquire() {
				t.Fatal("two probes")
			}
		})
	}
}

// TestEnable: a disabled backend comes back at once when a newer routing
// table still lists it (the app calls Enable).
func TestEnable(t *testing.T) {
	c := clock.NewFake(time.Time{})
	s := newState(t, testOptions(c), 10)
	s.Acquire()
	s.Finish(Result{Outcome: AuthRejected})
	s.Enable()
	if s.Disabled() || !s.Acquire() || !s.Acquire() {
		t.Fatal("Enable did not re-enable the backend")
	}
	if !s.EligibleAt().IsZero() {
		t.Fatalf("EligibleAt = %v, want now (zero)", s.EligibleAt())
	}
}

// TestBreakerThroughState: which outcomes count toward the breaker
// (egress faults do not; a provider answer breaks the streak), and
// what an open breaker does to Acquire, Ready and EligibleAt.
func TestBreakerThroughState(t *testing.T) {
	tests := []struct {
		name     string
		outcomes []Outcome
		want     BreakerState
	}{
		{"transport failures open it", []Outcome{TransportFailure, TransportFailure, TransportFailure}, BreakerOpen},
		{"egress faults never count", []Outcome{EgressFault, EgressFault, EgressFault, EgressFault, EgressFault}, BreakerClosed},
		{"egress faults and cancels are neutral in a streak", []Outcome{TransportFailure, EgressFault, TransportFailure, Cancelled, TransportFailure}, BreakerOpen},
		{"the node's own overload never counts", []Outcome{NodeOverloaded, NodeOverloaded, NodeOverloaded, NodeOverloaded, NodeOverloaded}, BreakerClosed},
		{"the node's own overload is neutral in a streak", []Outcome{TransportFailure, NodeOverloaded, TransportFailure, NodeOverloaded, TransportFailure}, BreakerOpen},
		{"a provider answer breaks the streak", []Outcome{TransportFailure, TransportFailure, ProviderError, TransportFailure, TransportFailure}, BreakerClosed},
		{"a 429 breaks the streak", []Outcome{TransportFailure, TransportFailure, RateLimited, TransportFailure, TransportFailure}, BreakerClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.NewFake(time.Time{})
			s := newState(t, testOptions(c), 100)
			for _, o := range tt.outcomes {
				c.Advance(time.Minute) // past any 429 cooldown
				if !s.Acquire() {
					t.Fatal("acquire failed")
				}
				s.Finish(Result{Outcome: o})
			}
			if got := s.View().BreakerState; got != tt.want {
				t.Fatalf("breaker %v, want %v", got, tt.want)
			}
		})
	}

	c := clock.NewFake(time.Time{})
	s := newState(t, testOptions(c), 100)
	for range 3 {
		s.Acquire()
		s.Finish(Result{Outcome: TransportFailure})
	}
	if s.Acquire() || s.Ready(s.Now()) {
		t.Fatal("open breaker admitted a request")
	}
	if got, want := s.EligibleAt(), c.Now().Add(time.Second); !got.Equal(want) {
		t.Fatalf("EligibleAt = %v, want the reopen time %v", got, want)
	}
	if v := s.View(); v.ConsecutiveFailures != 3 || v.InFlight != 0 {
		t.Fatalf("View = %+v", v)
	}
	c.Advance(time.Second)
	if !s.Ready(s.Now()) || !s.EligibleAt().IsZero() {
		t.Fatal("breaker due for a probe must read as eligible")
	}
	if !s.Acquire() {
		t.Fatal("probe refused")
	}
	if got, want := s.EligibleAt(), c.Now().Add(time.Second); !got.Equal(want) {
		t.Fatalf("EligibleAt with the probe out = %v, want now + base cooldown %v", got, want)
	}
	s.Finish(Result{Outcome: TransportFailure}) // failed probe: reopen for 2s
	c.Advance(2 * time.Second)
	if !s.Acquire() {
		t.Fatal("second probe refused")
	}
	s.Finish(Result{Outcome: Success, TTFB: time.Second})
	if v := s.View(); v.BreakerState != BreakerClosed || v.ConsecutiveFailures != 0 {
		t.Fatalf("after a successful probe: %+v", v)
	}
}

// TestExactlyOneProbe, at the State level: 50
// concurrent Acquire calls at cooldown expiry admit exactly one probe, and
// a released probe lets exactly one more through.
func TestExactlyOneProbe(t *testing.T) {
	for round := range 100 {
		c := clock.NewFake(time.Time{})
		s := newState(t, testOptions(c), 1000)
		for range 3 {
			s.Acquire()
			s.Finish(Result{Outcome: TransportFailure})
		}
		hammer := func() int64 {
			var admitted atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 50 {
				wg.Go(func() {
					<-start
					if s.Acquire() {
						admitted.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			return admitted.Load()
		}
		if n := hammer(); n != 0 {
			t.Fatalf("round %d: %d admitted while open", round, n)
		}
		c.Advance(time.Second)
		if n := hammer(); n != 1 {
			t.Fatalf("round %d: %d probes at cooldown expiry, want 1", round, n)
		}
		s.Release() // the probe was never sent
		if n := hammer(); n != 1 {
			t.Fatalf("round %d: %d probes after a released probe, want 1", round, n)
		}
		if got := s.InFlight(); got != 1 {
			t.Fatalf("round %d: in-flight %d, want 1 (the probe)", round, got)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	c := clock.NewFake(time.Time{})
	s := newState(t, testOptions(c), 10)
	results := []Result{
		{Outcome: Success, TTFB: time.Second}, {Outcome: ProviderError}, {Outcome: RateLimited},
		{Outcome: TransportFailure}, {Outcome: EgressFault}, {Outcome: Cancelled},
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, r := range results {
			c.Advance(time.Minute)
			if s.Acquire() {
				s.Finish(r)
			}
		}
		if s.Acquire() {
			s.Release()
		}
		s.Cost(1, s.Now())
		s.Cheaper(1, s, 2, s.Now())
	})
	if allocs != 0 {
		t.Fatalf("allocs = %v, want 0", allocs)
	}
}

// TestEWMAConcurrent runs readers against writers (for -race and the
// seqlock): every read is a value some write could have produced.
func TestEWMAConcurrent(t *testing.T) {
	s := newState(t, Options{DefaultTTFB: 100 * time.Millisecond}, 1<<20)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 2000 {
				s.Acquire()
				s.Finish(Result{Outcome: Success, TTFB: time.Duration(100+i%100) * time.Millisecond})
			}
		})
		wg.Go(func() {
			for range 2000 {
				est, _ := s.lat.load()
				if est < 0.1 || est > 0.2 {
					t.Errorf("estimate %v outside the samples' range", est)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestOutcomeString(t *testing.T) {
	var got []string
	for o := Success; o <= CredentialUnavailable+1; o++ {
		got = append(got, o.String())
	}
	want := []string{"success", "provider_error", "rate_limited", "quota_exhausted", "auth_rejected", "transport_failure", "egress_fault", "cancelled", "node_overloaded", "credential_unavailable", "unknown"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

// countingClock counts its reads.
type countingClock struct {
	*clock.Fake
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return c.Fake.Now()
}

// TestReadyNow: ReadyNow agrees with Ready at the clock's time through a
// cap, a cooldown, an open breaker and a disable, and reads the clock only
// while a cooldown, a disable or an open breaker needs it.
func TestReadyNow(t *testing.T) {
	c := &countingClock{Fake: clock.NewFake(time.Time{})}
	o := testOptions(c.Fake)
	o.Clock = c.Now
	s := NewRegistry(o).Get(Identity{ID: "b", Cap: 1})
	check := func(step string, wantReads bool) {
		t.Helper()
		before := c.reads.Load()
		got := s.ReadyNow()
		reads := c.reads.Load() - before
		if want := s.Ready(s.Now()); got != want {
			t.Fatalf("%s: ReadyNow = %v, Ready = %v", step, got, want)
		}
		if (reads > 0) != wantReads {
			t.Fatalf("%s: ReadyNow read the clock %d times", step, reads)
		}
	}
	check("fresh", false)
	s.Acquire()
	check("at its cap", false)
	s.Finish(Result{Outcome: RateLimited, RetryAfter: time.Second})
	check("cooling down", true)
	c.Advance(time.Second)
	check("cooldown over", true)
	if !s.Acquire() {
		t.Fatal("acquire after the cooldown")
	}
	s.Finish(Result{Outcome: Success, TTFB: time.Millisecond})
	check("cooldown cleared by the acquire", false)
	for range 3 { // the breaker opens
		s.Acquire()
		s.Finish(Result{Outcome: TransportFailure})
	}
	check("breaker open", true) // the breaker reads the clock itself
	c.Advance(time.Second)
	check("breaker due for a probe", true)
	s.Acquire()
	s.Finish(Result{Outcome: AuthRejected})
	check("disabled", true)
	c.Advance(DefaultAuthProbeAfter)
	check("disabled, probe due", true)
}
