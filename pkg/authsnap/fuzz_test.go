package authsnap_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/schematest"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// FuzzDecodeRoundTrip: Decode never panics, and a document that decodes and
// validates survives encoding/json.Marshal and a second Decode unchanged.
func FuzzDecodeRoundTrip(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "*.json"))
	invalid, _ := filepath.Glob(filepath.Join(fixtures, "invalid", "*.json"))
	for _, p := range append(files, invalid...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"schema":1,"version":1,"keys":[{"key_id":"a","tenant_id":"t","digest":"` + digestA + `","models":[]}]}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := authsnap.Decode(data)
		if err != nil {
			if s != nil {
				t.Fatal("Decode returned a snapshot and an error")
			}
			return
		}
		if s.Validate() != nil {
			return
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := authsnap.Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Marshal(s)): %v\n%s", err, enc)
		}
		if diff := cmp.Diff(again, s); diff != "" {
			t.Fatalf("round trip mismatch (-got +want):\n%s", diff)
		}
	})
}

// FuzzSchemaConformance runs each input through a JSON Schema validator
// with proto/authsnap.schema.json and through Decode and Validate: what the schema
// rejects, Decode and Validate reject, and what the schema accepts they
// reject only for the rules the schema cannot express
// (schematest.AuthRules). Seeds: every fixture, the hostile ones included.
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
	schema := schematest.MustLoad("../../proto/authsnap.schema.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		schemaErr := schema.Check(data)
		s, err := authsnap.Decode(data)
		if err == nil {
			err = s.Validate()
		}
		switch {
		case schemaErr != nil && err == nil:
			t.Fatalf("the schema rejects %q (%s); Decode and Validate accept it", data, schematest.Short(schemaErr))
		case schemaErr == nil && err != nil:
			if p, ok := schematest.Explained(schematest.Problems(err), schematest.AuthRules); !ok {
				t.Fatalf("the schema accepts %q; Decode and Validate reject it for a rule not accounted for: %s", data, p)
			}
		}
	})
}
