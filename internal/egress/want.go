package egress

import (
	"context"
	"errors"
	"sync"
)

// ErrNotNeeded is wrapped by the NotSentError of a dial that gave up
// while it waited behind Options.DialsPerProxy because its request got a
// connection another way (a finished request's, returned to the idle
// pool). The transport drops the error: nobody waits for it.
var ErrNotNeeded = errors.New("egress: the request got a connection while this dial waited for its turn")

// ErrDialsBusy is wrapped by the NotSentError (StageNode) of a dial that
// waited out the connect timeout behind Options.DialsPerProxy: the node
// opened tunnels no faster than they were asked for.
var ErrDialsBusy = errors.New("egress: every tunnel slot of the proxy stayed busy for the connect timeout")

// Want is one request's need of a connection, as a dial made for it sees
// it. http.Transport dials for a request that finds no idle connection
// and hands the request whichever comes first: that dial's connection or
// one a finished request returns to the idle pool. A dial waiting for its
// turn behind Options.DialsPerProxy asks the Want whether its request
// still waits, and gives up once it does not, so a burst opens tunnels
// only for the requests the returned connections could not serve.
//
// The caller puts a Want in the request's context with WithWant and
// calls Settle when the request has its connection (httptrace GotConn)
// and again when the round trip returns. The zero value waits. A Want
// must not be copied after first use.
type Want struct {
	mu      sync.Mutex
	settled bool
	ch      chan struct{} // made by the first dial that waits; closed by Settle
}

// Settle says that the request no longer waits for a connection.
func (w *Want) Settle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.settled {
		w.settled = true
		if w.ch != nil {
			close(w.ch)
		}
	}
}

// done returns a channel closed once w is settled.
func (w *Want) done() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
		if w.settled {
			close(w.ch)
		}
	}
	return w.ch
}

// isSettled reports whether Settle was called.
func (w *Want) isSettled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.settled
}

type wantKey struct{}

// WithWant returns ctx carrying w for the dials made for the request.
// http.Transport dials with the request context's values (not its
// cancellation), so w reaches DialContext and DialTLSContext.
func WithWant(ctx context.Context, w *Want) context.Context {
	return context.WithValue(ctx, wantKey{}, w)
}

// wantOf returns the Want in ctx, nil if there is none.
func wantOf(ctx context.Context) *Want {
	w, _ := ctx.Value(wantKey{}).(*Want)
	return w
}

// takeTurn waits for one of p's dial slots: it returns nil holding the
// slot (give it back with p.leaveTurn), ErrNotNeeded when the request the
// dial is for got a connection meanwhile, or ctx's cause (the connect
// timeout).
func (d *Dialer) takeTurn(ctx context.Context, p *egressProxy) (err error) {
	w := wantOf(ctx)
	if w != nil && w.isSettled() {
		return ErrNotNeeded
	}
	select {
	case p.slots <- struct{}{}:
		return nil
	default:
	}
	var settled <-chan struct{} // nil without a Want: wait for a slot alone
	if w != nil {
		settled = w.done()
	}
	if d.turnHook != nil {
		d.turnHook(true, nil)
		defer func() { d.turnHook(false, err) }()
	}
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-settled:
		return ErrNotNeeded
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// leaveTurn gives back the slot takeTurn took.
func (p *egressProxy) leaveTurn() { <-p.slots }
