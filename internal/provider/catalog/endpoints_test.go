package catalog_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
)

// everySpec runs f for every endpoint of every API in the catalog.
func everySpec(t *testing.T, f func(t *testing.T, api *provider.API, s *provider.Spec)) {
	for _, api := range catalog.APIs() {
		for _, s := range api.Endpoints {
			t.Run(s.Endpoint.String(), func(t *testing.T) { f(t, api, s) })
		}
	}
}

// TestEveryEndpointInspects: the rules every endpoint's inspection
// follows, whatever its API: the model is a required, non-empty string
// that appears once and in its exact spelling, the body is a JSON object,
// and the rewrite changes the model's bytes and nothing else.
func TestEveryEndpointInspects(t *testing.T) {
	refused := []struct {
		body, code string
	}{
		{`{"messages":[]}`, "missing_model"},
		{`{"model":""}`, "invalid_model"},
		{`{"model":7}`, "invalid_model"},
		{`{"model":"a","model":"b"}`, "invalid_model"},
		{`{"model":"a","Model":"b"}`, "invalid_model"},
		{`{"MODEL":"a","model":"b"}`, "invalid_model"},
		{`[{"model":"a"}]`, "invalid_json"},
		{`{"model":"a"`, "invalid_json"},
		{``, "invalid_json"},
		{`null`, "invalid_json"},
	}
	everySpec(t, func(t *testing.T, _ *provider.API, s *provider.Spec) {
		for _, c := range refused {
			if _, berr := s.Inspect([]byte(c.body), ""); berr == nil || berr.Code != c.code {
				t.Errorf("Inspect(%s) = %v, want %s", c.body, berr, c.code)
			}
		}
		body := []byte("{ \"input\" : [1, \"model\"],\n \"model\" :\"public-\\u006d\" , \"z\":{\"model\":\"inner\"}}")
		r, berr := s.Inspect(body, "")
		if berr != nil {
			t.Fatalf("Inspect: %v", berr)
		}
		if r.Model != "public-m" {
			t.Errorf("model %q, want the decoded public-m", r.Model)
		}
		got := r.Rewrite(body, []byte(`"real"`), nil, true)
		want := "{ \"input\" : [1, \"model\"],\n \"model\" :\"real\" , \"z\":{\"model\":\"inner\"}}"
		if string(got) != want {
			t.Errorf("Rewrite = %s, want %s", got, want)
		}
	})
}

// TestEveryStreamEndsHonestly: what the node writes into a stream of any
// endpoint (its in-band error after a cut, its keepalives) is never read
// as the stream's clean end, and the in-band error is the provider's
// failure report as the endpoint's own Terminal reads it, or at least not
// a success: a client must never take a cut answer for a whole one.
func TestEveryStreamEndsHonestly(t *testing.T) {
	everySpec(t, func(t *testing.T, _ *provider.API, s *provider.Spec) {
		ss := s.Stream
		if ss == nil {
			return
		}
		for _, raw := range [][]byte{
			ss.InBandError(502, "upstream_failed", "the provider stream ended without its terminator", "sg-1", 3),
			ss.InBandError(503, "node_shutting_down", "the node is shutting down", "sg-1", 0),
			ss.Keepalive,
		} {
			evs := parseEvents(t, raw)
			for _, ev := range evs {
				if done, _ := ss.Terminal(&ev); done {
					t.Errorf("%q reads as the stream's end", raw)
				}
				if len(ev.Data) > 0 && !json.Valid(ev.Data) {
					t.Errorf("%q: data is not JSON", raw)
				}
			}
		}
		evs := parseEvents(t, ss.InBandError(502, "", "cut", "sg-1", 1))
		if len(evs) != 1 {
			t.Fatalf("in-band error: %d events, want 1", len(evs))
		}
		if _, failed := ss.Terminal(&evs[0]); !failed {
			t.Errorf("the in-band error %q is not a failure to the endpoint's Terminal", evs[0].Raw)
		}
		if bytes.Contains(evs[0].Raw, []byte("sg-1")) && !strings.Contains(string(evs[0].Data), "sg-1") {
			t.Errorf("request id outside the data: %q", evs[0].Raw)
		}
	})
}
