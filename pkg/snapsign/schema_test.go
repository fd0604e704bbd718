package snapsign_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/schematest"
	"github.com/scootgate/scootgate/pkg/snapsign"
)

type schemaNode struct {
	Required   []string               `json:"required"`
	Properties map[string]*schemaNode `json:"properties"`
	Items      *schemaNode            `json:"items"`
	Enum       []string               `json:"enum"`
	Pattern    string                 `json:"pattern"`
}

func loadSchema(t *testing.T) *schemaNode {
	t.Helper()
	data, err := os.ReadFile("../../proto/envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s schemaNode
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// jsonNames lists a struct's JSON member names and the required ones
// (no omitempty).
func jsonNames(typ reflect.Type) (names, required []string) {
	for f := range typ.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		names = append(names, name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	slices.Sort(names)
	slices.Sort(required)
	return names, required
}

// TestSchemaMatchesTypes keeps proto/envelope.schema.json, the Go types
// and the payload type constants in step.
func TestSchemaMatchesTypes(t *testing.T) {
	s := loadSchema(t)
	for _, c := range []struct {
		node *schemaNode
		typ  reflect.Type
	}{
		{s, reflect.TypeFor[snapsign.Envelope]()},
		{s.Properties["signatures"].Items, reflect.TypeFor[snapsign.Signature]()},
	} {
		names, required := jsonNames(c.typ)
		var props []string
		for k := range c.node.Properties {
			props = append(props, k)
		}
		slices.Sort(props)
		req := slices.Sorted(slices.Values(c.node.Required))
		if !slices.Equal(props, names) || !slices.Equal(req, required) {
			t.Errorf("%s: schema members %v required %v; Go %v required %v", c.typ, props, req, names, required)
		}
	}
	if want := []string{snapsign.RoutesPayloadType, snapsign.AuthzPayloadType}; !slices.Equal(s.Properties["payloadType"].Enum, want) {
		t.Errorf("payloadType enum = %v, want %v", s.Properties["payloadType"].Enum, want)
	}
}

// TestExamplesMatchSchema: every envelope in testdata/signed has the
// schema's members, payload type and base64 patterns.
func TestExamplesMatchSchema(t *testing.T) {
	s := loadSchema(t)
	b64 := regexp.MustCompile(s.Properties["payload"].Pattern)
	files, _ := filepath.Glob("../../testdata/signed/*.json")
	if len(files) < 5 {
		t.Fatalf("only %d examples", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(data, &top); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, r := range s.Required {
			if _, ok := top[r]; !ok {
				t.Errorf("%s: missing %s", f, r)
			}
		}
		e, err := snapsign.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Contains(s.Properties["payloadType"].Enum, e.PayloadType) || !b64.MatchString(e.Payload) {
			t.Errorf("%s: payloadType %q or payload does not match the schema", f, e.PayloadType)
		}
		for _, sig := range e.Signatures {
			if !b64.MatchString(sig.Sig) {
				t.Errorf("%s: sig %q does not match the schema", f, sig.Sig)
			}
		}
	}
}

// TestSchemaConformance: a JSON Schema validator with
// proto/envelope.schema.json and Decode agree on the member names of every
// envelope in testdata/signed, the hostile ones included, and a few built
// here: the same envelopes are refused for a name twice in one object or
// in another letter case, and unknown members are accepted by both.
func TestSchemaConformance(t *testing.T) {
	schema := schematest.MustLoad("../../proto/envelope.schema.json")
	files, err := filepath.Glob("../../testdata/signed/*.json")
	if err != nil {
		t.Fatal(err)
	}
	hostile, err := filepath.Glob("../../testdata/signed/hostile/*.json")
	if err != nil || len(hostile) == 0 {
		t.Fatalf("no hostile envelopes: %v", err)
	}
	docs := map[string][]byte{}
	for _, f := range append(files, hostile...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = data
	}
	signed := docs["../../testdata/signed/routes.signed.json"]
	edit := func(old, new string) []byte {
		t.Helper()
		if !strings.Contains(string(signed), old) {
			t.Fatalf("routes.signed.json has no %q", old)
		}
		return []byte(strings.Replace(string(signed), old, new, 1))
	}
	for name, d := range map[string][]byte{
		"(built) unknown members":          edit(`"payload":`, `"extra": {"Payload": 1}, "payload":`),
		"(built) unknown signature member": edit(`"sig":`, `"keyidx": "a", "sig":`),
		"(built) PAYLOADTYPE":              edit(`"payload":`, `"PAYLOADTYPE": 1, "payload":`),
		"(built) escaped payload twice":    edit(`"payload":`, `"p\u0061yload": "", "payload":`),
		"(built) Signatures, empty":        edit(`"payload":`, `"Signatures": [], "payload":`),
		"(built) keyid missing":            edit(`"keyid":`, `"note":`),
		"(built) sig missing":              edit(`"sig":`, `"note":`),
	} {
		docs[name] = d
	}
	for name, d := range docs {
		schemaErr := schema.Check(d)
		_, err := snapsign.Decode(d)
		if (schemaErr == nil) != (err == nil) {
			t.Errorf("%s: schema %s; Decode error %v", name, schematest.Short(schemaErr), err)
		}
	}
}
