package catalog_test

import (
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
)

// TestByPathAlsoPaths: an endpoint is found at its path and at each of
// its further paths, and every path leads to one endpoint only.
func TestByPathAlsoPaths(t *testing.T) {
	owner := map[string]provider.Endpoint{}
	for _, api := range catalog.APIs() {
		for _, s := range api.Endpoints {
			if s.Path == "" {
				continue
			}
			for _, p := range append([]string{s.Path}, s.AlsoPaths...) {
				if e, ok := owner[p]; ok {
					t.Errorf("%s is the path of %s and %s", p, e, s.Endpoint)
				}
				owner[p] = s.Endpoint
				if got, _ := catalog.ByPath(p); got != s {
					t.Errorf("ByPath(%q) = %v, want %s", p, got, s.Endpoint)
				}
			}
		}
	}
	if got, _ := catalog.ByPath("/v2/rerank"); got == nil || got.Endpoint != provider.Rerank {
		t.Errorf("ByPath(/v2/rerank) = %v, want rerank", got)
	}
}
