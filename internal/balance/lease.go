package balance

import (
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// Lease is a picked target together with the in-flight slot the pick took
// on it. The attempt sent to the target ends with one call of Done, which
// reports the outcome to the backend's state and gives the slot back; the
// request path never touches the backend's state itself (as a grpc-go
// picker's result carries its own done callback).
//
// A Lease is a small value, so a pick allocates nothing. Done has a
// pointer receiver and clears the lease, so a second Done on the same
// Lease is a no-op; copies of a held Lease each hold the slot, so pass
// the one variable around, not copies.
type Lease struct {
	*routes.Target // the picked target; nil for the zero Lease
	held           bool
	sent           uint64 // the backend's Acquired count after the slot was taken
	spent          uint64 // the backend's Spend mark, once Fit spent tokens
}

// lease returns a held Lease on t, whose slot the caller has taken.
func lease(t *routes.Target) Lease {
	return Lease{Target: t, held: true, sent: t.Backend.State.Acquired()}
}

// Held reports whether l still holds its slot: Done has not been called.
func (l *Lease) Held() bool { return l.held }

// Done reports r to the target's backend state and releases the slot
// (upstream.State.Finish). Only the first call on l does anything.
func (l *Lease) Done(r upstream.Result) {
	if !l.held {
		return
	}
	l.held = false
	r.Sent, r.SentTokens = l.sent, l.spent
	l.Backend.State.Finish(r)
}

// Fit reports whether the target's token budget has room for a request
// expected to cost tokens (0: unknown, always room), and counts them
// against it. When it has none the slot is released and the Lease is
// done: the caller picks again without this target (docs/routing.md
// "Headroom").
func (l *Lease) Fit(tokens int64) bool {
	st := l.Backend.State
	if !st.Fits(tokens) {
		l.held = false
		st.Release()
		return false
	}
	if tokens > 0 {
		l.spent = st.Spend(tokens)
	}
	return true
}
