package egress

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
)

// TestTransportKeepsABurstsTunnels: every tunnel a burst of concurrent
// requests opened stays open for the next burst, which opens none. A
// bound below the burst (the transport once kept 256 per host) closes
// the tunnels beyond it as their requests end, and the next burst opens
// them again through the proxy: during an overload, that is a proxy
// handshake per request on top of the request itself.
func TestTransportKeepsABurstsTunnels(t *testing.T) {
	const burst = 300
	var (
		conns   atomic.Int64
		arrived sync.WaitGroup // every request of a round is in the handler at once
	)
	provider := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		arrived.Wait()
		io.WriteString(w, "ok")
	}))
	provider.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	provider.Start()
	t.Cleanup(provider.Close)
	_, addr := startConnect(t, connectproxy.Options{})
	d := newDialer(t, Options{Proxies: []Proxy{{Name: "connect", URL: mustURL(t, "http://"+addr)}}})
	tr := d.Transport()
	t.Cleanup(tr.CloseIdleConnections)

	round := func() int64 {
		before := conns.Load()
		arrived.Add(burst)
		var wg sync.WaitGroup
		errs := make(chan error, burst)
		for range burst {
			wg.Go(func() {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, provider.URL, nil)
				if err != nil {
					errs <- err
					return
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				// Read to the end: the transport has put the connection back
				// (or closed it) before the body's io.EOF is returned.
				if _, err := io.ReadAll(resp.Body); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return conns.Load() - before
	}
	if n := round(); n != burst {
		t.Fatalf("first burst opened %d connections, want %d", n, burst)
	}
	if n := round(); n != 0 {
		t.Fatalf("second burst opened %d new tunnels, want 0 (all %d kept idle)", n, burst)
	}
}
