package routesnap_test

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/internal/contract"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// jsonSchema is the subset of JSON Schema that proto/routesnap.schema.json
// uses.
type jsonSchema struct {
	Schema               string                 `json:"$schema"`
	Ref                  string                 `json:"$ref"`
	Type                 any                    `json:"type"`
	Const                any                    `json:"const"`
	Enum                 []string               `json:"enum"`
	Required             []string               `json:"required"`
	AdditionalProperties *bool                  `json:"additionalProperties"`
	Properties           map[string]*jsonSchema `json:"properties"`
	Defs                 map[string]*jsonSchema `json:"$defs"`
	Items                *jsonSchema            `json:"items"`
	MinItems             *int                   `json:"minItems"`
	MinLength            *int                   `json:"minLength"`
	MaxLength            *int                   `json:"maxLength"`
	Minimum              *json.Number           `json:"minimum"`
	Maximum              *json.Number           `json:"maximum"`
	Pattern              string                 `json:"pattern"`
}

// TestSchemaMatchesTypes keeps proto/routesnap.schema.json and the Go
// types in step: the same members, required exactly when the Go field has
// no omit option, and the limits Validate enforces.
func TestSchemaMatchesTypes(t *testing.T) {
	data, err := os.ReadFile("../../proto/routesnap.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var root jsonSchema
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		t.Fatalf("schema is not valid JSON: %v", err)
	}
	if root.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %q, want draft 2020-12", root.Schema)
	}
	arrayOf := func(s *jsonSchema, def string) *jsonSchema {
		t.Helper()
		if s == nil || s.Items == nil || s.Items.Ref != "#/$defs/"+def || s.MinItems == nil || *s.MinItems != 1 {
			t.Fatalf("schema does not describe a non-empty array of #/$defs/%s", def)
		}
		return root.Defs[def]
	}
	backend := arrayOf(root.Properties["backends"], "backend")
	model := arrayOf(root.Properties["models"], "model")
	target := arrayOf(model.Properties["targets"], "target")

	for _, tc := range []struct {
		name   string
		schema *jsonSchema
		typ    reflect.Type
	}{
		{"snapshot", &root, reflect.TypeFor[routesnap.Snapshot]()},
		{"backend", backend, reflect.TypeFor[routesnap.Backend]()},
		{"model", model, reflect.TypeFor[routesnap.Model]()},
		{"target", target, reflect.TypeFor[routesnap.Target]()},
		{"price", root.Defs["price"], reflect.TypeFor[routesnap.Price]()},
		{"priceTier", root.Defs["priceTier"], reflect.TypeFor[routesnap.PriceTier]()},
	} {
		props, required := jsonMembers(tc.typ)
		if diff := cmp.Diff(slices.Sorted(maps.Keys(tc.schema.Properties)), props); diff != "" {
			t.Errorf("%s properties mismatch (-schema +Go):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(slices.Sorted(slices.Values(tc.schema.Required)), required); diff != "" {
			t.Errorf("%s required mismatch (-schema +Go):\n%s", tc.name, diff)
		}
		if tc.schema.AdditionalProperties == nil || *tc.schema.AdditionalProperties {
			t.Errorf("%s: additionalProperties must be false (Decode rejects unknown members)", tc.name)
		}
	}

	bounds := func(what string, s *jsonSchema, lo, hi uint64) {
		t.Helper()
		if s.Minimum == nil || string(*s.Minimum) != strconv.FormatUint(lo, 10) ||
			s.Maximum == nil || string(*s.Maximum) != strconv.FormatUint(hi, 10) {
			t.Errorf("%s bounds = %v..%v, want %d..%d", what, s.Minimum, s.Maximum, lo, hi)
		}
	}
	bounds("schema", root.Properties["schema"], routesnap.MinSchema, routesnap.Schema)
	bounds("version", root.Properties["version"], 1, ^uint64(0))
	bounds("max_inflight_per_node", backend.Properties["max_inflight_per_node"], 1, routesnap.MaxInflight)
	bounds("weight", target.Properties["weight"], 1, routesnap.MaxWeight)
	bounds("tier", target.Properties["tier"], 0, routesnap.MaxTier)

	if diff := cmp.Diff(backend.Properties["protocol"].Enum, routesnap.Protocols()); diff != "" {
		t.Errorf("protocol enum mismatch (-schema +Go):\n%s", diff)
	}
	if ts := root.Properties["generated_at"]; ts.Pattern != contract.TimePattern {
		t.Errorf("generated_at pattern = %q, want the one Decode enforces, %q", ts.Pattern, contract.TimePattern)
	}
	id := root.Defs["id"]
	if id.MinLength == nil || *id.MinLength != 1 || id.MaxLength == nil || *id.MaxLength != routesnap.MaxIDLength || id.Pattern != "^[A-Za-z0-9._-]+$" {
		t.Errorf("id does not match Validate's rule (1-%d of [A-Za-z0-9._-])", routesnap.MaxIDLength)
	}
	for _, def := range []string{"modelName", "providerModelName"} {
		name := root.Defs[def]
		if name.MinLength == nil || *name.MinLength != 1 || name.MaxLength == nil || *name.MaxLength != routesnap.MaxModelNameLength ||
			!strings.Contains(name.Pattern, `\x00-\x1f\x7f-\x9f`) {
			t.Errorf("%s does not match Validate's rule", def)
		}
	}
	for what, ref := range map[string]string{
		"backend.id":         backend.Properties["id"].Ref,
		"backend.credential": backend.Properties["credential"].Ref,
		"target.backend":     target.Properties["backend"].Ref,
		"model.name":         model.Properties["name"].Ref,
		"target.model":       target.Properties["model"].Ref,
	} {
		want := "#/$defs/id"
		switch what {
		case "model.name":
			want = "#/$defs/modelName"
		case "target.model":
			want = "#/$defs/providerModelName"
		}
		if ref != want {
			t.Errorf("%s uses %q, want %q", what, ref, want)
		}
	}
}

// jsonMembers returns the JSON member names of struct type t, all and
// required (no omitempty/omitzero), sorted.
func jsonMembers(t reflect.Type) (all, required []string) {
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		all = append(all, name)
		if !strings.Contains(opts, "omit") {
			required = append(required, name)
		}
	}
	slices.Sort(all)
	slices.Sort(required)
	return all, required
}
