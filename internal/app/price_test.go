package app

import (
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// TestRoutesDecoderStampsPrices: a routing snapshot's prices carry its
// version, their identity in usage events (docs/usage-events.md "Cost").
func TestRoutesDecoderStampsPrices(t *testing.T) {
	doc := `{"schema": 2, "version": 17,
  "backends": [{"id": "b", "protocol": "openai", "base_url": "https://a.example/v1", "credential": "c", "max_inflight_per_node": 4}],
  "models": [{"name": "m", "targets": [{"backend": "b", "model": "x", "weight": 1, "price": {"input": "3", "output": "15"}}]}]}`
	var h routes.Holder
	_, apply, err := routesDecoder(&h, policyOf([]string{"a.example"}, "c"), upstream.NewRegistry(upstream.Options{}))([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	m, _ := h.Load().Model("m")
	p := m.Pools[provider.Chat][0].Price
	if p == nil || p.Version != 17 || p.Base.Input != 3_000_000 || p.Base.Output != 15_000_000 {
		t.Fatalf("price = %+v, want 3 and 15 per million at version 17", p)
	}
}
