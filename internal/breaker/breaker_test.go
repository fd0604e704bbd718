package breaker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/clock"
)

// fixed returns a rand func that always yields r.
func fixed(r float64) func() float64 { return func() float64 { return r } }

func newTest(o Options, rnd func() float64) (*Breaker, *clock.Fake) {
	c := clock.NewFake(time.Time{})
	return New(o, c, rnd), c
}

// step is one action on a breaker and what it must observe afterwards.
type step struct {
	do        string // "fail", "ok", "abandon", "allow", "advance"
	d         time.Duration
	wantAllow bool // for "allow"
	want      State
}

func TestTransitions(t *testing.T) {
	o := Options{Failures: 3, Cooldown: time.Second, MaxCooldown: 10 * time.Second, Jitter: -1}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "opens after N consecutive failures",
			steps: []step{
				{do: "fail", want: Closed},
				{do: "fail", want: Closed},
				{do: "allow", wantAllow: true, want: Closed},
				{do: "fail", want: Open},
				{do: "allow", wantAllow: false, want: Open},
			},
		},
		{
			name: "a success breaks the streak",
			steps: []step{
				{do: "fail", want: Closed},
				{do: "fail", want: Closed},
				{do: "ok", want: Closed},
				{do: "fail", want: Closed},
				{do: "fail", want: Closed},
				{do: "fail", want: Open},
			},
		},
		{
			name: "probe after cooldown, success closes",
			steps: []step{
				{do: "fail"}, {do: "fail"}, {do: "fail", want: Open},
				{do: "advance", d: time.Second - 1, want: Open},
				{do: "allow", wantAllow: false, want: Open},
				{do: "advance", d: 1, want: Open},
				{do: "allow", wantAllow: true, want: HalfOpen},
				{do: "allow", wantAllow: false, want: HalfOpen},
				{do: "ok", want: Closed},
				{do: "allow", wantAllow: true, want: Closed},
			},
		},
		{
			name: "failed probe reopens",
			steps: []step{
				{do: "fail"}, {do: "fail"}, {do: "fail", want: Open},
				{do: "advance", d: time.Second, want: Open},
				{do: "allow", wantAllow: true, want: HalfOpen},
				{do: "fail", want: Open},
				{do: "advance", d: time.Second, want: Open},
				{do: "allow", wantAllow: false, want: Open}, // the period doubled to 2s
				{do: "advance", d: time.Second, want: Open},
				{do: "allow", wantAllow: true, want: HalfOpen},
			},
		},
		{
			name: "abandoned probe lets the next caller probe at once",
			steps: []step{
				{do: "fail"}, {do: "fail"}, {do: "fail", want: Open},
				{do: "advance", d: time.Second, want: Open},
				{do: "allow", wantAllow: true, want: HalfOpen},
				{do: "abandon", want: Open},
				{do: "allow", wantAllow: true, want: HalfOpen},
			},
		},
		{
			name: "outcomes while open are stale and ignored",
			steps: []step{
				{do: "fail"}, {do: "fail"}, {do: "fail", want: Open},
				{do: "ok", want: Open},
				{do: "fail", want: Open},
				{do: "abandon", want: Open},
				{do: "advance", d: time.Second, want: Open},
				{do: "allow", wantAllow: true, want: HalfOpen}, // not extended by the stale failure
			},
		},
		{
			name: "abandon while closed changes nothing",
			steps: []step{
				{do: "fail"}, {do: "fail"},
				{do: "abandon", want: Closed},
				{do: "fail", want: Open},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, c := newTest(o, nil)
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
						t.Fatalf("step %d: Allow = %v, want %v", i, got, s.wantAllow)
					}
				}
				if got := b.State(); got != s.want {
					t.Fatalf("step %d (%s): state %v, want %v", i, s.do, got, s.want)
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
		b, c := newTest(Options{Failures: 2, Cooldown: time.Second}, fixed(0))
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
		if got := b.State(); got != HalfOpen {
			t.Fatalf("round %d: state %v, want half_open", round, got)
		}
	}
}

// TestCooldownGrowth checks the open periods: doubled after each failed
// probe, capped, reset by a success; no jitter (rand = 0).
func TestCooldownGrowth(t *testing.T) {
	b, c := newTest(Options{Failures: 1, Cooldown: time.Second, MaxCooldown: 10 * time.Second}, fixed(0))
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
func TestJitterBounds(t *testing.T) {
	tests := []struct {
		name   string
		o      Options
		r      float64
		probes int // failed probes after opening
		want   time.Duration
	}{
		{"rand 0 keeps the period", Options{Jitter: 0.5}, 0, 0, 5 * time.Second},
		{"rand shortens by Jitter × rand", Options{Jitter: 0.5}, 0.75, 0, 3125 * time.Millisecond},
		{"default jitter 0.2", Options{}, 0.5, 0, 4500 * time.Millisecond},
		{"negative jitter is none", Options{Jitter: -1}, 0.9, 0, 5 * time.Second},
		{"jitter applies after the cap", Options{MaxCooldown: 12 * time.Second, Jitter: 0.5}, 0.5, 3, 9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, c := newTest(tt.o, fixed(tt.r))
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

func TestOptionsWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Options
		want Options
	}{
		{"zero", Options{}, Options{Failures: 5, Cooldown: 5 * time.Second, MaxCooldown: 5 * time.Minute, Jitter: 0.2}},
		{"max raised to cooldown", Options{Cooldown: time.Hour}, Options{Failures: 5, Cooldown: time.Hour, MaxCooldown: time.Hour, Jitter: 0.2}},
		{"jitter clamped", Options{Jitter: 3}, Options{Failures: 5, Cooldown: 5 * time.Second, MaxCooldown: 5 * time.Minute, Jitter: 0.9}},
		{"no jitter", Options{Jitter: -0.5}, Options{Failures: 5, Cooldown: 5 * time.Second, MaxCooldown: 5 * time.Minute, Jitter: 0}},
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
	b, c := newTest(Options{Failures: 1, Cooldown: time.Second}, fixed(0))
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
	if !b.Ready() || b.State() != Open {
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

func TestNoAllocs(t *testing.T) {
	b, c := newTest(Options{Failures: 1, Cooldown: time.Second}, fixed(0))
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
	br := New(Options{}, nil, nil)
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
func TestProbeRaces(t *testing.T) {
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
				if b.State() != Open {
					t.Fatal("not reopened")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &gateClock{Fake: clock.NewFake(time.Time{})}
			b := New(Options{Failures: 1, Cooldown: time.Second}, c, fixed(0))
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
