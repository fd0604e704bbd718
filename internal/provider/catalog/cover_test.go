package catalog_test

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestContractsNameEveryAPI: every API of the catalog, and every endpoint
// of each, is named in the wire contracts the node writes and reads: the
// routing snapshot's protocols and their endpoints (Go and JSON Schema)
// and the usage event's closed protocol set (Go and JSON Schema). A new
// API missing from one of them fails here, not in a consumer.
func TestContractsNameEveryAPI(t *testing.T) {
	var routing struct {
		Defs struct {
			Backend struct {
				Properties struct {
					Protocol struct {
						Enum []string `json:"enum"`
					} `json:"protocol"`
				} `json:"properties"`
			} `json:"backend"`
		} `json:"$defs"`
	}
	var usage struct {
		Properties struct {
			Protocol struct {
				Enum []string `json:"enum"`
			} `json:"protocol"`
		} `json:"properties"`
	}
	readJSON(t, "../../../proto/routesnap.schema.json", &routing)
	readJSON(t, "../../../proto/usage-event.schema.json", &usage)
	for _, a := range catalog.APIs() {
		name := a.Protocol.String()
		if !slices.Contains(routesnap.Protocols(), name) {
			t.Errorf("%s: not in routesnap.Protocols", name)
		}
		if !slices.Contains(usageevent.Protocols(), name) {
			t.Errorf("%s: not in usageevent.Protocols", name)
		}
		if !slices.Contains(routing.Defs.Backend.Properties.Protocol.Enum, name) {
			t.Errorf("%s: not in routesnap.schema.json's protocol enum", name)
		}
		if !slices.Contains(usage.Properties.Protocol.Enum, name) {
			t.Errorf("%s: not in usage-event.schema.json's protocol enum", name)
		}
		if p, ok := provider.ParseProtocol(name); !ok || p != a.Protocol {
			t.Errorf("%s: ParseProtocol = %v, %v", name, p, ok)
		}
		for _, s := range a.Endpoints {
			if !slices.Contains(routesnap.Endpoints(name), s.Endpoint.String()) {
				t.Errorf("%s: endpoint %s not in routesnap.Endpoints", name, s.Endpoint)
			}
		}
	}
	if n := len(catalog.APIs()); n != len(routesnap.Protocols()) || n != len(usageevent.Protocols()) {
		t.Errorf("%d APIs, %d routing protocols, %d usage protocols: want one each", n, len(routesnap.Protocols()), len(usageevent.Protocols()))
	}
}

// TestKeyHeaders: the key headers are every API's, canonical, each once,
// in the catalog's order with the default API's last; and so are the key
// query parameters.
func TestKeyHeaders(t *testing.T) {
	var want, queries []string
	apis := catalog.APIs()
	for _, a := range append(apis[1:len(apis):len(apis)], apis[0]) {
		for _, h := range a.KeyHeaders {
			if h != http.CanonicalHeaderKey(h) {
				t.Errorf("%v: key header %q is not canonical", a.Protocol, h)
			}
			if !slices.Contains(want, h) {
				want = append(want, h)
			}
		}
		if a.QueryKey != "" && !slices.Contains(queries, a.QueryKey) {
			queries = append(queries, a.QueryKey)
		}
	}
	if got := catalog.KeyHeaders(); !slices.Equal(got, want) {
		t.Errorf("KeyHeaders = %q, want %q", got, want)
	}
	if got := catalog.KeyQueries(); !slices.Equal(got, queries) {
		t.Errorf("KeyQueries = %q, want %q", got, queries)
	}
	// What clients have always sent works as before, in the same order.
	if got := catalog.KeyHeaders(); !slices.Equal(got, []string{"X-Api-Key", "X-Goog-Api-Key", "Api-Key"}) {
		t.Errorf("KeyHeaders = %q, want x-api-key, x-goog-api-key, api-key", got)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
