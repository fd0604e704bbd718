package egress

import (
	"context"
	"errors"
)

// ErrDialsBusy is wrapped by the NotSentError (StageNode) of a dial that
// waited out the connect timeout behind Options.DialsPerProxy: the node
// opened tunnels no faster than they were asked for.
var ErrDialsBusy = errors.New("egress: every tunnel slot of the proxy stayed busy for the connect timeout")

// takeTurn waits for one of p's dial slots: it returns nil holding the
// slot (give it back with p.leaveTurn), or ctx's cause (the connect
// timeout). A dial that waits keeps waiting even when its request got a
// connection another way meanwhile: http.Transport may hand a dial
// started for one request to another that still waits, so the dial
// cannot know that nobody needs it.
func (d *Dialer) takeTurn(ctx context.Context, p *egressProxy) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// leaveTurn gives back the slot takeTurn took.
func (p *egressProxy) leaveTurn() { <-p.slots }
