package upstream

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/clock"
)

// fixed returns a rand func that always yields r.
func fixedRand(r float64) func() float64 { return func() float64 { return r } }

func newTestBreaker(o BreakerOptions, rnd func() float64) (*Breaker, *clock.Fake) {
	c := clock.NewFake(time.Time{})
	return NewBreaker(o, c.Now, rnd), c
}

// breakerStep is one action on a breaker and what it must observe afterwards.
type breakerStep struct {
	do        string // "fail", "ok", "abandon", "allow", "advance"
	d         time.Duration
	wantAllow bool // for "allow"
	want      BreakerState
}

func TestBreakerTransitions(t *testing.T) {
	o := BreakerOptions{Failures: 3, Cooldown: time.Second, MaxCooldown: 10 * time.Second, Jitter: -1}
	tests := []struct {
		name  string
		steps []breakerStep
	}{
		{
			name: "opens after N consecutive failures",
			steps: []breakerStep{
				{do: "fail", want: BreakerClosed},
				{do: "fail", want: BreakerClosed},
				{do: "allow", wantAllow: true, want: BreakerClosed},
				{do: "fail", want: BreakerOpen},
				{do: "allow", wantAllow: false, want: BreakerOpen},
			},
		},
		{
			name: "a success breaks the streak",
			steps: []breakerStep{
				{do: "fail", want: BreakerClosed},
				{do: "fail", want: BreakerClosed},
				{do: "ok", want: BreakerClosed},
				{do: "fail", want: BreakerClosed},
				{do: "fail", want: BreakerClosed},
				{do: "fail", want: BreakerOpen},
			},
		},
		{
			name: "probe after cooldown, success closes",
			steps: []breakerStep{
				{do: "fail"}, {do: "fail"}, {do: "fail", want: BreakerOpen},
				{do: "advance", d: time.Second - 1, want: BreakerOpen},
				{do: "allow", wantAllow: false, want: BreakerOpen},
				{do: "advance", d: 1, want: BreakerOpen},
				{do: "allow", wantAllow: true, want: BreakerHalfOpen},
				{do: "allow", wantAllow: false, want: BreakerHalfOpen},
				{do: "ok", want: BreakerClosed},
				{do: "allow", wantAllow: true, want: BreakerClosed},
			},
		},
		{
			name: "failed probe reopens",
			steps: []breakerStep{
				{do: "fail"}, {do: "fail"}, {do: "fail", want: BreakerOpen},
				{do: "advance", d: time.Second, want: BreakerOpen},
				{do: "allow", wantAllow: true, want: BreakerHalfOpen},
				{do: "fail", want: BreakerOpen},
				{do: "advance", d: time.Second, want: BreakerOpen},
				{do: "allow", wantAllow: false, want: BreakerOpen}, // the period doubled to 2s
				{do: "advance", d: time.Second, want: BreakerOpen},
				{do: "allow", wantAllow: true, want: BreakerHalfOpen},
			},
		},
		{
			name: "abandoned probe lets the next caller probe at once",
			steps: []breakerStep{
				{do: "fail"}, {do: "fail"}, {do: "fail", want: BreakerOpen},
				{do: "advance", d: time.Second, want: BreakerOpen},
				{do: "allow", wantAllow: true, want: BreakerHalfOpen},
				{do: "abandon", want: BreakerOpen},
				{do: "allow", wantAllow: true, want: BreakerHalfOpen},
			},
		},
		{
			name: "outcomes while open are stale and ignored",
			steps: []breakerStep{
				{do: "fail"}, {do: "fail"}, {do: "fail", want: BreakerOpen},
				{do: "ok", want: BreakerOpen},
				{do: "fail", want: BreakerOpen},
				{do: "abandon", want: BreakerOpen},
				{do: "advance", d: time.Second, want: BreakerOpen},
				{do: "allow", wantAllow: true, want: BreakerHalfOpen}, // not extended by the stale failure
			},
		},
		{
			name: "abandon while closed changes nothing",
			steps: []breakerStep{
				{do: "fail"}, {do: "fail"},
				{do: "abandon", want: BreakerClosed},
				{do: "fail", want: BreakerOpen},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, c := newTestBreaker(o, nil)
			for i, s := range tt.steps {
				switch s.do {
				case "fail":
					b.Failure()
				case "ok":
					b.Success()
				case "abandon":
					b.Abandon()
				case "advance":
					c.Advance(s.d)
				case "allow":
					if got := b.Allow(); got != s.wantAllow {
						t.Fatalf("breakerStep %d: Allow = %v, want %v", i, got, s.wantAllow)
					}
				}
				if got := b.State(); got != s.want {
					t.Fatalf("breakerStep %d (%s): state %v, want %v", i, s.do, got, s.want)
				}
			}
		})
	}
}

// open drives a fresh breaker to open with o.Failures failures.
func open(b *Breaker) {
	for range b.o.Failures {
		b.Failure()
	}
}

// TestZeroAdmittedWhileOpenThenExactlyOneProbe checks the half-open rule:
// nothing gets through while open, and exactly one of 50 concurrent callers
// wins the probe at cooldown expiry.
func TestZeroAdmittedWhileOpenThenExactlyOneProbe(t *testing.T) {
	for round := range 200 {
		b, c := newTestBreaker(BreakerOptions{Failures: 2, Cooldown: time.Second}, fixedRand(0))
		open(b)
		var admitted atomic.Int64
		hammer := func() {
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 50 {
				wg.Go(func() {
					<-start
					if b.Allow() {
						admitted.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
		}
		hammer()
		if got := admitted.Load(); got != 0 {
			t.Fatalf("round %d: %d admitted while open, want 0", round, got)
		}
		c.Advance(time.Second)
		hammer()
		if got := admitted.Load(); got != 1 {
			t.Fatalf("round %d: %d probes admitted at cooldown expiry, want exactly 1", round, got)
		}
		if got := b.State(); got != BreakerHalfOpen {
			t.Fatalf("round %d: state %v, want half_open", round, got)
		}
	}
}

// TestCooldownGrowth checks the open periods: doubled after each failed
// probe, capped, reset by a success; no jitter (rand = 0).
func TestBreakerCooldownGrowth(t *testing.T) {
	b, c := newTestBreaker(BreakerOptions{Failures: 1, Cooldown: time.Second, MaxCooldown: 10 * time.Second}, fixedRand(0))
	var got []time.Duration
	period := func() time.Duration { return b.ReopenAt().Sub(c.Now()) }
	probeFails := func() {
		c.Set(b.ReopenAt())
		if !b.Allow() {
			t.Fatal("no probe at cooldown expiry")
		}
		b.Failure()
		got = append(got, period())
	}
	b.Failure()
	got = append(got, period())
	for range 5 {
		probeFails()
	}
	// A successful probe closes and resets the cooldown to its base.
	c.Set(b.ReopenAt())
	if !b.Allow() {
		t.Fatal("no probe at cooldown expiry")
	}
	b.Success()
	b.Failure()
	got = append(got, period())
	want := []time.Duration{1, 2, 4, 8, 10, 10, 1}
	for i := range want {
		want[i] *= time.Second
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("open periods (-got +want):\n%s", diff)
	}
}

// TestJitterBounds checks that an open period is the current cooldown
// shortened by Jitter × rand, never more than the cooldown or the cap.
func TestBreakerJitterBounds(t *testing.T) {
	tests := []struct {
		name   string
		o      BreakerOptions
		r      float64
		probes int // failed probes after opening
		want   time.Duration
	}{
		{"rand 0 keeps the period", BreakerOptions{Jitter: 0.5}, 0, 0, 5 * time.Second},
		{"rand shortens by Jitter × rand", BreakerOptions{Jitter: 0.5}, 0.75, 0, 3125 * time.Millisecond},
		{"default jitter 0.2", BreakerOptions{}, 0.5, 0, 4500 * time.Millisecond},
		{"negative jitter is none", BreakerOptions{Jitter: -1}, 0.9, 0, 5 * time.Second},
		{"jitter applies after the cap", BreakerOptions{MaxCooldown: 12 * time.Second, Jitter: 0.5}, 0.5, 3, 9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, c := newTestBreaker(tt.o, fixedRand(tt.r))
			open(b)
			for range tt.probes {
				c.Set(b.ReopenAt())
				if !b.Allow() {
					t.Fatal("no probe at cooldown expiry")
				}
				b.Failure()
			}
			if got := b.ReopenAt().Sub(c.Now()); got != tt.want {
				t.Errorf("open period = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBreakerOptionsWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   BreakerOptions
		want BreakerOptions
	}{
		{"zero", BreakerOptions{}, BreakerOptions{Failures: 5, Cooldown: 5 * time.Second, MaxCooldown: 5 * time.Minute, Jitter: 0.2}},
		{"max raised to cooldown", BreakerOptions{Cooldown: time.Hour}, BreakerOptions{Failures: 5, Cooldown: time.Hour, MaxCooldown: time.Hour, Jitter: 0.2}},
		{"jitter clamped", BreakerOptions{Jitter: 3}, BreakerOptions{Failures: 5, Cooldown: 5 * time.Second, MaxCooldown: 5 * time.Minute, Jitter: 0.9}},
		{"no jitter", BreakerOptions{Jitter: -0.5}, BreakerOptions{Failures: 5, Cooldown: 5 * time.Second, MaxCooldown: 5 * time.Minute, Jitter: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.in.WithDefaults(), tt.want); diff != "" {
				t.Errorf("WithDefaults (-got +want):\n%s", diff)
			}
		})
	}
}

func TestReadyAndReopenAt(t *testing.T) {
	b, c := newTestBreaker(BreakerOptions{Failures: 1, Cooldown: time.Second}, fixedRand(0))
	if !b.Ready() || !b.ReopenAt().IsZero() {
		t.Fatal("closed breaker must be ready with no reopen time")
	}
	b.Failure()
	if b.Ready() || !b.ReopenAt().Equal(c.Now().Add(time.Second)) {
		t.Fatalf("open: Ready=%v ReopenAt=%v", b.Ready(), b.ReopenAt())
	}
	c.Advance(time.Second)
	if !b.Ready() {
		t.Fatal("open with cooldown over must be ready")
	}
	if !b.Ready() || b.State() != BreakerOpen {
		t.Fatal("Ready must not take the probe")
	}
	b.Allow()
	if b.Ready() || !b.ReopenAt().IsZero() {
		t.Fatal("half-open: not ready, no reopen time")
	}
	if got := b.ConsecutiveFailures(); got != 1 {
		t.Fatalf("ConsecutiveFailures = %d, want 1", got)
	}
}

func TestBreakerNoAllocs(t *testing.T) {
	b, c := newTestBreaker(BreakerOptions{Failures: 1, Cooldown: time.Second}, fixedRand(0))
	allocs := testing.AllocsPerRun(100, func() {
		b.Allow()
		b.Failure()
		c.Advance(2 * time.Second)
		b.Allow()
		b.Success()
	})
	if allocs != 0 {
		t.Fatalf("allocs per cycle = %v, want 0", allocs)
	}
}

func BenchmarkAllowClosed(b *testing.B) {
	br := NewBreaker(BreakerOptions{}, nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		if !br.Allow() {
			b.Fatal("closed breaker refused")
		}
		br.Success()
	}
}

// gateClock blocks the first Now after arm until release is closed, so a
// test can stop one Allow between reading the breaker and its swap.
type gateClock struct {
	*clock.Fake
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gateClock) arm() {
	g.entered, g.release = make(chan struct{}), make(chan struct{})
	g.armed.Store(true)
}

func (g *gateClock) Now() time.Time {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
	return g.Fake.Now()
}

// TestProbeRaces forces the interleavings that the compare-and-swap and the
// generation guard against, deterministically.
func TestBreakerProbeRaces(t *testing.T) {
	tests := []struct {
		name string
		// between runs while the first caller is stopped inside Allow.
		between func(t *testing.T, b *Breaker)
	}{
		{
			name: "two callers past the cooldown check: one probe",
			between: func(t *testing.T, b *Breaker) {
				if !b.Allow() {
					t.Fatal("second caller did not get the probe")
				}
			},
		},
		{
			name: "probe failed and reopened meanwhile: the stale caller gets nothing",
			between: func(t *testing.T, b *Breaker) {
				if !b.Allow() {
					t.Fatal("second caller did not get the probe")
				}
				b.Failure() // reopens for 2s: the stopped caller read the old open period
				if b.State() != BreakerOpen {
					t.Fatal("not reopened")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &gateClock{Fake: clock.NewFake(time.Time{})}
			b := NewBreaker(BreakerOptions{Failures: 1, Cooldown: time.Second}, c.Now, fixedRand(0))
			b.Failure()
			c.Advance(time.Second)
			c.arm()
			first := make(chan bool)
			go func() { first <- b.Allow() }()
			<-c.entered
			tt.between(t, b)
			close(c.release)
			if <-first {
				t.Fatal("the stopped caller was admitted too: two probes")
			}
		})
	}
}
