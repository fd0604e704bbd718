package egress

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
	"github.com/scootgate/scootgate/internal/devstack/tunnel"
)

// heldProxy starts an in-process proxy of kind ("connect" or "socks5")
// whose connections to the target wait, while hold is set, until the test
// releases them one by one; entered is sent a value as each one starts to
// wait. It returns the proxy's URL.
type heldProxy struct {
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
	active  atomic.Int64 // connections to the target being opened now
	most    atomic.Int64 // the most of them at once
	dials   atomic.Int64 // connections to the target the proxy began to open
}

func startHeld(t *testing.T, kind string) (*heldProxy, string) {
	t.Helper()
	h := &heldProxy{entered: make(chan struct{}, 64), release: make(chan struct{})}
	var d net.Dialer
	o := tunnel.Options{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.dials.Add(1)
		n := h.active.Add(1)
		defer h.active.Add(-1)
		for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
		}
		if h.hold.Load() {
			h.entered <- struct{}{}
			<-h.release
		}
		return d.DialContext(ctx, network, addr)
	}}
	switch kind {
	case "socks5":
		_, addr := startSOCKS(t, socks5proxy.Options(o))
		return h, "socks5://" + addr
	default:
		_, addr := startConnect(t, connectproxy.Options(o))
		return h, "http://" + addr
	}
}

// TestDialsPerProxyBound: no more than DialsPerProxy tunnels are being
// opened through a proxy at once; the dials beyond wait their turn and
// then succeed. Without the bound, all six would reach the proxy at once.
func TestDialsPerProxyBound(t *testing.T) {
	for _, kind := range []string{"connect", "socks5"} {
		t.Run(kind, func(t *testing.T) {
			tg := newTarget(t, false)
			h, u := startHeld(t, kind)
			h.hold.Store(true)
			d := newDialer(t, Options{Proxies: []Proxy{{Name: kind, URL: mustURL(t, u)}}, DialsPerProxy: 2})
			const dials = 6
			errs := make(chan error, dials)
			for range dials {
				go func() {
					c, err := d.DialContext(t.Context(), "tcp", tg.Listener.Addr().String())
					if err == nil {
						c.Close()
					}
					errs <- err
				}()
			}
			// Release the held connections one at a time: each lets one
			// waiting dial in.
			<-h.entered
			<-h.entered
			for i := range dials {
				h.release <- struct{}{}
				if i < dials-2 {
					<-h.entered
				}
			}
			for range dials {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if got := h.most.Load(); got != 2 {
				t.Errorf("%d tunnels were being opened at once, want 2 (DialsPerProxy)", got)
			}
		})
	}
}

// TestDialWaitsOutConnectTimeout: a dial that gets no turn within the
// connect timeout fails as the node's own overload (StageNode,
// ErrDialsBusy and ErrConnectTimeout), never blaming the proxy, and is
// not reported to OnFailure.
func TestDialWaitsOutConnectTimeout(t *testing.T) {
	tg := newTarget(t, false)
	_, addr := startConnect(t, connectproxy.Options{})
	var reported atomic.Int64
	d := newDialer(t, Options{Proxies: []Proxy{{Name: "connect", URL: mustURL(t, "http://"+addr)}}, DialsPerProxy: 1,
		ConnectTimeout: 50 * time.Millisecond, OnFailure: func(*NotSentError) { reported.Add(1) }})
	d.proxies[0].slots <- struct{}{} // a dial that never ends holds the only turn
	_, err := d.DialContext(t.Context(), "tcp", tg.Listener.Addr().String())
	nse := notSent(t, err)
	if nse.Stage != StageNode || !nse.NodeFault() || nse.EgressFault() || !errors.Is(err, ErrDialsBusy) || !errors.Is(err, ErrConnectTimeout) {
		t.Errorf("got %v (stage %v); want StageNode with ErrDialsBusy and ErrConnectTimeout", err, nse.Stage)
	}
	if n := reported.Load(); n != 0 {
		t.Errorf("OnFailure told of %d failures, want 0", n)
	}
	if n := tg.conns.Load(); n != 0 {
		t.Errorf("the target saw %d connections, want 0", n)
	}
}
