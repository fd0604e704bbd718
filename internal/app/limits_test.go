package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/pkg/authsnap"
)

// TestNodeLimits: through a whole node, the authorization snapshot's
// limits, the node's local_share of them, the 429 before anything reaches
// the provider, the headers, and the refusal metric; a key without limits
// is not held back.
func TestNodeLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authz-limits.json")
	doc := authsnap.Snapshot{Schema: authsnap.Schema, Version: 1,
		Keys: []authsnap.Key{
			{KeyID: "k-full", TenantID: "t-1", Digest: authsnap.Digest(clientKey)},
			{KeyID: "k-limited", TenantID: "t-2", Digest: authsnap.Digest(limitedKey), Limits: authsnap.Limits{RequestsPerMinute: 4}},
		},
		Tenants: []authsnap.Tenant{{TenantID: "t-1", Limits: authsnap.Limits{MaxConcurrent: 100}}},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Two nodes' worth: each enforces half, 2 requests a minute.
	s := startStack(t, stackOptions{authzSource: "file:" + path, limits: "local_share = 0.5"})
	body := `{"model":"` + openAIModel + `","messages":[{"role":"user","content":"hi"}]}`
	var statuses []int
	for range 3 {
		r := s.do("POST", "/v1/chat/completions", bearer(limitedKey), body)
		statuses = append(statuses, r.status)
		if r.status == 429 {
			if got := r.header.Get("X-Ratelimit-Limit-Requests"); got != "2" {
				t.Errorf("429: x-ratelimit-limit-requests %q, want 2 (the node's share)", got)
			}
			if r.header.Get("Retry-After") != "30" || r.header.Get("X-Should-Retry") != "true" || !strings.Contains(r.body, `"code":"key_rate_limited"`) {
				t.Errorf("429: %v %s", r.header, r.body)
			}
		}
	}
	if want := []int{200, 200, 429}; !slices.Equal(statuses, want) {
		t.Fatalf("statuses %v, want %v", statuses, want)
	}
	if n := s.prov.RequestCount(); n != 2 {
		t.Errorf("the provider got %d requests, want 2", n)
	}
	for range 5 {
		if r := s.do("POST", "/v1/chat/completions", bearer(clientKey), body); r.status != 200 {
			t.Fatalf("a key without rate limits: %d", r.status)
		}
	}
	if m := s.scrapeMetrics(); !strings.Contains(m, `scootgate_limits_refused_total{kind="requests",scope="key"} 1`) {
		t.Errorf("refusal metric missing:\n%s", grepLines(m, "limits_refused"))
	}
}
