package routesnap_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/schematest"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// baseURLMessages is every message CheckBaseURL can return. None is built
// from the URL, which could carry credentials.
var baseURLMessages = map[string]bool{
	"required":        true,
	"not a valid URL": true,
	"expected an https:// URL (http:// only for a loopback host)":                                                        true,
	"expected an https:// URL (http:// only for a loopback host) with a host":                                            true,
	"must not contain user info; the backend's credential is named by credential":                                        true,
	"must not have a query or fragment":                                                                                  true,
	"invalid port; expected 1..65535":                                                                                    true,
	"link-local address; not allowed (cloud metadata services live there)":                                               true,
	"cloud metadata service address; not allowed":                                                                        true,
	"not a unicast address":                                                                                              true,
	"invalid host name; expected ASCII letters, digits, '-' and '_' in dot-separated labels (IDNs in punycode)":          true,
	"numeric host that is not a valid IP address":                                                                        true,
	"cloud metadata service host; not allowed":                                                                           true,
	"plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https:// (docs/egress.md)": true,
	"IPv6 address embedding a link-local IPv4 address; not allowed (cloud metadata services live there)":                 true,
	"IPv6 address embedding a cloud metadata service address; not allowed":                                               true,
}

// FuzzDecodeValidate: Decode never panics and returns exactly one of a
// snapshot or a *DecodeError; Validate never panics, returns a
// *ValidationError with at least one problem or nil, and never quotes a
// base_url; a document that decodes and validates survives
// encoding/json.Marshal and a second Decode unchanged.
func FuzzDecodeValidate(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "*.json"))
	invalid, _ := filepath.Glob(filepath.Join(fixtures, "invalid", "*.json"))
	for _, p := range append(files, invalid...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"schema":1,"version":1,"backends":[` + backendB + `],"models":[{"name":"m","targets":[{"backend":"b","model":"x","weight":1}]}]}`))
	f.Add([]byte(`{"schema":1,"version":1,"backends":[{"id":"b","protocol":"openai","base_url":"https://u:SECRET@b.example/","credential":"c","max_inflight_per_node":1}],"models":[]}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := routesnap.Decode(data)
		if err != nil {
			var de *routesnap.DecodeError
			if s != nil || !errors.As(err, &de) {
				t.Fatalf("Decode = %v, %v; want nil and a *DecodeError", s, err)
			}
			return
		}
		if s == nil {
			t.Fatal("Decode returned neither a snapshot nor an error")
		}
		if err := s.Validate(); err != nil {
			var ve *routesnap.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Validate = %v, want a *ValidationError with problems", err)
			}
			for _, p := range ve.Problems {
				if strings.HasSuffix(p.Path, ".base_url") && !baseURLMessages[p.Msg] {
					t.Fatalf("%s: message %q is not one of the fixed base_url messages (it may quote the URL)", p.Path, p.Msg)
				}
			}
			return
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := routesnap.Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Marshal(s)): %v\n%s", err, enc)
		}
		if diff := cmp.Diff(again, s); diff != "" {
			t.Fatalf("round trip mismatch (-got +want):\n%s", diff)
		}
	})
}

// FuzzSchemaConformance runs each input through a JSON Schema validator
// with proto/routesnap.schema.json and through Decode and Validate: what the schema
// rejects, Decode and Validate reject, and what the schema accepts they
// reject only for the rules the schema cannot express
// (schematest.RouteRules). Seeds: every fixture, the hostile ones included.
func FuzzSchemaConformance(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "*.json"))
	invalid, _ := filepath.Glob(filepath.Join(fixtures, "invalid", "*.json"))
	for _, p := range append(files, invalid...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	schema := schematest.MustLoad("../../proto/routesnap.schema.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		schemaErr := schema.Check(data)
		s, err := routesnap.Decode(data)
		if err == nil {
			err = s.Validate()
		}
		switch {
		case schemaErr != nil && err == nil:
			t.Fatalf("the schema rejects %q (%s); Decode and Validate accept it", data, schematest.Short(schemaErr))
		case schemaErr == nil && err != nil:
			if p, ok := schematest.Explained(schematest.Problems(err), schematest.RouteRules); !ok {
				t.Fatalf("the schema accepts %q; Decode and Validate reject it for a rule not accounted for: %s", data, p)
			}
		}
	})
}
