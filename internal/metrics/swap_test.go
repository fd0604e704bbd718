package metrics_test

import (
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// TestBackendGaugesAfterSwap: a route snapshot redefines backend "a"
// (cap 64 → 32) while a request pinned to the old table is in flight.
// The gauges show the new definition, with the old request counted in
// flight, and once it ends they show the new definition alone: before,
// the old and new states of the id were added up until the next swap
// (capacity 96).
func TestBackendGaugesAfterSwap(t *testing.T) {
	reg := newRegistry(clock.NewFake(time.Time{}), false)
	var holder routes.Holder
	creds := map[string]credential.Credential{"cred": {Secret: secret.New("sk-canary-cred"), Hosts: []string{"api.example.com"}}}
	// apply swaps in a table as the routes poller does: compile, store,
	// then prune what the new table no longer uses.
	apply := func(capacity int) {
		t.Helper()
		tab, err := routes.Compile([]routesnap.Backend{{
			ID: "a", Protocol: routesnap.ProtocolOpenAI, BaseURL: "https://api.example.com/v1", Credential: "cred",
			MaxInflightPerNode: capacity,
		}}, []routesnap.Model{{Name: "m", Targets: []routesnap.Target{{Backend: "a", Model: "p", Weight: 1}}}}, creds, reg)
		if err != nil {
			t.Fatal(err)
		}
		holder.Store(tab)
		reg.Prune(tab.Uses)
	}
	m := newMetrics(t)
	m.RegisterBackends(metrics.RegistryBackends(reg, func(id upstream.Identity) bool {
		tb := holder.Load()
		return tb != nil && tb.Uses(id)
	}))

	apply(64)
	mdl, _ := holder.Load().Model("m")
	pinned := mdl.Pools[provider.Chat][0].Backend.State
	mustAcquire(t, pinned)
	apply(32)
	if reg.Len() != 2 {
		t.Fatalf("registry holds %d states, want the old (busy) and the new", reg.Len())
	}
	compare(t, m, `
# HELP scootgate_backend_capacity The backend's max_inflight_per_node (hard cap).
# TYPE scootgate_backend_capacity gauge
scootgate_backend_capacity{backend="a"} 32
# HELP scootgate_backend_inflight Requests in flight to the backend from this node.
# TYPE scootgate_backend_inflight gauge
scootgate_backend_inflight{backend="a"} 1
`, "scootgate_backend_capacity", "scootgate_backend_inflight")

	pinned.Finish(upstream.Result{Outcome: upstream.Success, TTFB: time.Second})
	if reg.Len() != 2 {
		t.Fatalf("registry holds %d states; the idle old one stays until the next swap", reg.Len())
	}
	compare(t, m, `
# HELP scootgate_backend_capacity The backend's max_inflight_per_node (hard cap).
# TYPE scootgate_backend_capacity gauge
scootgate_backend_capacity{backend="a"} 32
# HELP scootgate_backend_inflight Requests in flight to the backend from this node.
# TYPE scootgate_backend_inflight gauge
scootgate_backend_inflight{backend="a"} 0
`, "scootgate_backend_capacity", "scootgate_backend_inflight")
}
