package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
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

// TestWaitingDialTakesReturnedConnection: a request that finds no idle
// connection while every dial slot is busy takes the connection a
// finished request gives back, and the dial made for it gives up without
// opening a tunnel (ErrNotNeeded). Without the Want, that dial would
// open one more tunnel once a slot frees.
func TestWaitingDialTakesReturnedConnection(t *testing.T) {
	for _, kind := range []string{"connect", "socks5"} {
		t.Run(kind, func(t *testing.T) {
			inA, releaseA := make(chan struct{}), make(chan struct{})
			var requests atomic.Int64
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if requests.Add(1) == 1 {
					close(inA)
					<-releaseA
				}
				io.WriteString(w, "ok")
			}))
			t.Cleanup(provider.Close)
			h, u := startHeld(t, kind)
			d := newDialer(t, Options{Proxies: []Proxy{{Name: kind, URL: mustURL(t, u)}}, DialsPerProxy: 1})
			waiting := make(chan struct{}, 1)
			waited := make(chan error, 1)
			d.turnHook = func(w bool, err error) {
				if w {
					waiting <- struct{}{}
				} else {
					waited <- err
				}
			}
			tr := d.Transport()
			t.Cleanup(tr.CloseIdleConnections)

			// A holds its connection at the provider.
			resA := make(chan error, 1)
			go func() { resA <- fetch(t, tr, provider.URL) }()
			<-inA
			// Another dial holds the only slot at the proxy.
			h.hold.Store(true)
			holder := make(chan error, 1)
			go func() {
				c, err := d.DialContext(t.Context(), "tcp", provider.Listener.Addr().String())
				if err == nil {
					c.Close()
				}
				holder <- err
			}()
			<-h.entered
			// B finds no idle connection and its dial waits its turn.
			resB := make(chan error, 1)
			go func() { resB <- fetch(t, tr, provider.URL) }()
			<-waiting
			// A ends; its connection goes to B, and B's dial gives up.
			close(releaseA)
			if err := <-resA; err != nil {
				t.Fatal(err)
			}
			if err := <-resB; err != nil {
				t.Fatal(err)
			}
			// The holder's slot frees: a dial still waiting would take it.
			h.hold.Store(false)
			h.release <- struct{}{}
			if err := <-holder; err != nil {
				t.Fatal(err)
			}
			if err := <-waited; !errors.Is(err, ErrNotNeeded) {
				t.Errorf("B's dial ended its wait with %v, want ErrNotNeeded", err)
			}
			tr.CloseIdleConnections()
			if got := h.dials.Load(); got != 2 {
				t.Errorf("the proxy was asked for %d tunnels, want 2 (A's and the holder's)", got)
			}
		})
	}
}

// fetch gets "/" from the target through tr, as the request path does:
// with a Want settled when the connection is there and when the round
// trip returns.
func fetch(t *testing.T, tr *http.Transport, u string) error {
	var w Want
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { w.Settle() }})
	ctx = WithWant(ctx, &w)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := tr.RoundTrip(req)
	w.Settle()
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
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
