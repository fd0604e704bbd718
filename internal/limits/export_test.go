package limits

import (
	"context"
	"time"
)

// RefreshHolds runs one refresh of l's concurrency holds now, as the
// store's Run does every holdRefresh.
func (l *Limiter) RefreshHolds() error { return l.refreshHolds(context.Background()) }

// SetHoldRefresh changes how often Run refreshes the holds; call it
// before Run. Tests that refresh by hand make it long.
func (r *Redis) SetHoldRefresh(d time.Duration) { r.refresh = d }

// HoldTTL is how long a hold outlives its last refresh.
const HoldTTL = holdTTL

// ChargeInline makes Charge send budget charges to the fleet before it
// returns, so that tests see them in order.
func (l *Limiter) ChargeInline() { l.chargeInline = true }

// FlushBudgets runs one settlement of l's budget counters now, as the
// store's Run does every holdRefresh.
func (l *Limiter) FlushBudgets() error { return l.flushBudgets(context.Background()) }

// WaitPrefetches waits for the background takes in flight: a test on a
// fake clock that advances it faster than Redis answers would otherwise
// race them (a real request gap outlasts a take by orders of magnitude).
func (l *Limiter) WaitPrefetches() { l.prefetches.Wait() }
