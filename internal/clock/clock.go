// Package clock holds Fake, a manually advanced clock for tests.
//
// Components take their time source as a func() time.Time (nil or
// time.Now in production), so a test passes a Fake's Now and drives
// breakers, EWMA decay, cooldowns, buckets and staleness by advancing it
// instead of sleeping.
package clock

import (
	"sync"
	"time"
)

// Fake is a manually advanced clock, safe for concurrent use. Pass its Now
// method where a component takes a func() time.Time.
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
