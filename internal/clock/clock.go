// Package clock lets time-dependent code take its clock as a value, so
// tests drive breakers, EWMA decay, cooldowns and staleness with a Fake
// instead of sleeping (so tests are deterministic; tailscale tstime/tstest shape).
package clock

import (
	"sync"
	"time"
)

// Clock is the time source components take. Real is the production one.
type Clock interface {
	Now() time.Time
}

// Real reads the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Fake is a manually advanced clock, safe for concurrent use.
type Fake struct {
	mu  sync.Mutex
	now time.Time // guarded by mu
}

// NewFake returns a Fake set to start (or a fixed date when zero).
func NewFake(start time.Time) *Fake {
	if start.IsZero() {
		start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	return &Fake{now: start}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the fake time forward by d.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// Set moves the fake time to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
}
