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
// follows, whatever its API: the body is a JSON object; a "model" member
// appears once and in its exact spelling; the model is a required,
// non-empty string in the body, or, for an endpoint whose path names it,
// the path's, which a body "model" must name too, or, for an endpoint
// that only its doors reach (Bedrock's Converse), the path's alone, which
// the body must not name; and the rewrite changes the model's bytes and
// nothing else.
func TestEveryEndpointInspects(t *testing.T) {
	const pathModel = "public-m"
	refused := []struct {
		body string
		code string // for an endpoint whose body names the model
		path string // for one whose path does; "" = accepted
		door string // for one only doors reach, whose path alone names it
	}{
		{`{"messages":[]}`, "missing_model", "", ""},
		{`{"model":""}`, "invalid_model", "invalid_model", "invalid_model"},
		{`{"model":7}`, "invalid_model", "invalid_model", "invalid_model"},
		{`{"model":null}`, "invalid_model", "invalid_model", "invalid_model"},
		{`{"model":"other"}`, "", "invalid_model", "invalid_model"},
		{`{"model":"models/other"}`, "", "invalid_model", "invalid_model"},
		{`{"model":"public-m"}`, "", "", "invalid_model"},
		{`{"model":"models/public-m"}`, "", "", "invalid_model"},
		{`{"model":"a","model":"b"}`, "invalid_model", "invalid_model", "invalid_model"},
		{`{"model":"public-m","model":"public-m"}`, "invalid_model", "invalid_model", "invalid_model"},
		{`{"model":"a","Model":"b"}`, "invalid_model", "invalid_model", "invalid_model"},
		{`{"MODEL":"a","model":"b"}`, "invalid_model", "invalid_model", "invalid_model"},
		{`{"Model":"public-m"}`, "invalid_model", "invalid_model", "invalid_model"},
		{`[{"model":"a"}]`, "invalid_json", "invalid_json", "invalid_json"},
		{`{"model":"a"`, "invalid_json", "invalid_json", "invalid_json"},
		{``, "invalid_json", "invalid_json", "invalid_json"},
		{`null`, "invalid_json", "invalid_json", "invalid_json"},
	}
	everySpec(t, func(t *testing.T, _ *provider.API, s *provider.Spec) {
		if s.InspectForm != nil {
			t.Skip("a multipart body: the form's own tests (internal/provider/openai form_test.go)")
		}
		if s.Realtime != nil {
			t.Skip("a realtime session has no body: its frames' own tests (internal/provider/openai realtime_test.go)")
		}
		doorsOnly := s.Path == "" && s.Match == nil
		pm := ""
		if s.Match != nil || doorsOnly {
			pm = pathModel
		}
		for _, c := range refused {
			want := c.code
			switch {
			case s.Match != nil:
				want = c.path
			case doorsOnly:
				want = c.door
			}
			_, berr := s.Inspect([]byte(c.body), pm)
			switch {
			case want == "" && berr != nil:
				t.Errorf("Inspect(%s) = %v, want accepted", c.body, berr)
			case want != "" && (berr == nil || berr.Code != want):
				t.Errorf("Inspect(%s) = %v, want %s", c.body, berr, want)
			}
		}
		if doorsOnly {
			// The body goes as it came: nothing in it names the model.
			body := []byte("{ \"messages\" : [{\"role\":\"user\",\"content\":[{\"text\":\"model\"}]}],\n \"z\":{\"model\":\"inner\"}}")
			if _, berr := s.Inspect(body, ""); berr == nil {
				t.Error("Inspect without the path's model accepted the body")
			}
			r, berr := s.Inspect(body, pm)
			if berr != nil {
				t.Fatalf("Inspect: %v", berr)
			}
			if r.Model != pathModel {
				t.Errorf("model %q, want the path's", r.Model)
			}
			if got := r.Rewrite(body, nil, nil, true); !bytes.Equal(got, body) {
				t.Errorf("Rewrite = %s, want the body unchanged", got)
			}
			return
		}
		body := []byte("{ \"input\" : [1, \"model\"],\n \"model\" :\"public-\\u006d\" , \"z\":{\"model\":\"inner\"}}")
		model, named := []byte(`"real"`), []byte(`"models/real"`)
		want := "{ \"input\" : [1, \"model\"],\n \"model\" :\"real\" , \"z\":{\"model\":\"inner\"}}"
		if s.Match != nil {
			// The model is in the path: the attempt passes no model, and a
			// body member that names it names the provider model as
			// "models/{model}".
			model, want = nil, "{ \"input\" : [1, \"model\"],\n \"model\" :\"models/real\" , \"z\":{\"model\":\"inner\"}}"
			if _, berr := s.Inspect(body, ""); berr == nil {
				t.Error("Inspect without the path's model accepted the body")
			}
		}
		r, berr := s.Inspect(body, pm)
		if berr != nil {
			t.Fatalf("Inspect: %v", berr)
		}
		if r.Model != "public-m" {
			t.Errorf("model %q, want the decoded public-m", r.Model)
		}
		if got := r.Rewrite(body, model, named, true); string(got) != want {
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
