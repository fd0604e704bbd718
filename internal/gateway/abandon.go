package gateway

import (
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/usage"
)

// Abandoned requests (docs/limits.md "Abandoned requests"): a key whose
// client cancels its requests almost as soon as they arrive, before the
// node could send them, is flooding, not asking: request-then-reset over
// HTTP/1.1, or an HTTP/2 rapid reset. Each such request still costs the
// node its authentication, routing and an egress dial. Per key, AbandonBurst
// of them are allowed at once and AbandonRate a second after that; while
// a key is past that, its new requests are refused with 429 before
// routing, which costs the node about what a refused key costs.
//
// Only requests cancelled within abandonWithin of their arrival and before
// anything was sent count: a client's own timeout (seconds), a user who
// stops an answer, and an editor that cancels the completion it no longer
// needs all come later or after the request went out, so no honest client
// is refused. The bound is per key, not per address, so clients behind one
// NAT or load balancer do not share it; it is always on.
const (
	AbandonRate   = 5  // per second, per key
	AbandonBurst  = 50 // per key
	abandonWithin = 100 * time.Millisecond
)

// abandons is the handler's per-key budget of abandoned requests.
type abandons struct {
	budget *usage.KeyBudget
	// last is when a key last ran out (UnixNano; 0: never). Until a key
	// that ran out has refilled, over looks the key up; otherwise no
	// request pays for the lock.
	last atomic.Int64
}

func newAbandons() *abandons {
	return &abandons{budget: usage.NewKeyBudget(AbandonRate, AbandonBurst)}
}

// refill is how long an empty budget takes to fill again.
const refill = time.Duration(AbandonBurst / AbandonRate * float64(time.Second))

// note counts one abandoned request of key at now.
func (ab *abandons) note(key string, now time.Time) {
	if ok, _ := ab.budget.Take(key, now); !ok {
		ab.last.Store(now.UnixNano())
	}
}

// over reports whether key's abandoned requests are past its budget at
// now: its new requests are refused.
func (ab *abandons) over(key string, now time.Time) bool {
	last := ab.last.Load()
	if last == 0 || now.UnixNano()-last > int64(refill) {
		return false
	}
	return ab.budget.Empty(key, now)
}

// noteAbandoned counts a's request as abandoned when its client cancelled
// it within abandonWithin of its arrival, before anything was sent.
func (c *call) noteAbandoned(a *attempt) {
	if a.state != provider.NotSent || a.stage != stageClientCancelled || c.principal == nil {
		return
	}
	if now := c.h.o.Now(); now.Sub(c.start) < abandonWithin {
		c.h.abandons.note(c.principal.KeyID, now)
	}
}

// refuseAbandoned answers a request of a key past its budget of abandoned
// requests: 429, nothing sent.
func (c *call) refuseAbandoned() {
	c.h.o.Observer.ObserveLimitRefusal("key", "abandoned")
	c.sw.keyID, c.sw.tenantID, c.sw.limit = c.principal.KeyID, c.principal.TenantID, "abandoned"
	c.fail(apierr.Abandoned("this API key's requests are being cancelled by its client before they can be sent, faster than the node serves them", time.Second/AbandonRate))
}
