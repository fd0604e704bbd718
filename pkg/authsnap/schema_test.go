package authsnap_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/internal/contract"
)

// jsonSchema is the subset of JSON Schema that proto/authsnap.schema.json
// uses.
type jsonSchema struct {
	Schema               string                 `json:"$schema"`
	Ref                  string                 `json:"$ref"`
	Type                 any                    `json:"type"`
	Const                any                    `json:"const"`
	Enum                 []any                  `json:"enum"`
	Required             []string               `json:"required"`
	AdditionalProperties *bool                  `json:"additionalProperties"`
	Properties           map[string]*jsonSchema `json:"properties"`
	Defs                 map[string]*jsonSchema `json:"$defs"`
	Items                *jsonSchema            `json:"items"`
	MinLength            *int                   `json:"minLength"`
	MaxLength            *int                   `json:"maxLength"`
	Minimum              *json.Number           `json:"minimum"`
	Maximum              *json.Number           `json:"maximum"`
	Pattern              string                 `json:"pattern"`
}

// TestSchemaMatchesTypes keeps proto/authsnap.schema.json and the Go types
// in step: the same members, required exactly when the Go field has no
// omit option, and the limits Validate enforces.
func TestSchemaMatchesTypes(t *testing.T) {
	data, err := os.ReadFile("../../proto/authsnap.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var root jsonSchema
	if err := json.Unmarshal(data, &root); err != nil {
		t.Fatalf("schema is not valid JSON: %v", err)
	}
	if root.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %q, want draft 2020-12", root.Schema)
	}
	key := root.Defs["key"]
	if key == nil || root.Properties["keys"] == nil || root.Properties["keys"].Items.Ref != "#/$defs/key" {
		t.Fatal("schema does not describe keys as an array of #/$defs/key")
	}

	for _, tc := range []struct {
		name   string
		schema *jsonSchema
		typ    reflect.Type
	}{
		{"snapshot", &root, reflect.TypeFor[authsnap.Snapshot]()},
		{"key", key, reflect.TypeFor[authsnap.Key]()},
		{"tenant", root.Defs["tenant"], reflect.TypeFor[authsnap.Tenant]()},
		{"limits", root.Defs["limits"], reflect.TypeFor[authsnap.Limits]()},
	} {
		props, required := jsonMembers(tc.typ)
		gotProps := slices.Sorted(func(yield func(string) bool) {
			for p := range tc.schema.Properties {
				if !yield(p) {
					return
				}
			}
		})
		if diff := cmp.Diff(gotProps, props); diff != "" {
			t.Errorf("%s properties mismatch (-schema +Go):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(slices.Sorted(slices.Values(tc.schema.Required)), required); diff != "" {
			t.Errorf("%s required mismatch (-schema +Go):\n%s", tc.name, diff)
		}
		if tc.schema.AdditionalProperties == nil || *tc.schema.AdditionalProperties {
			t.Errorf("%s: additionalProperties must be false (Decode rejects unknown members)", tc.name)
		}
	}

	if v := root.Properties["schema"]; v.Minimum == nil || *v.Minimum != json.Number(strconv.Itoa(authsnap.MinSchema)) ||
		v.Maximum == nil || *v.Maximum != json.Number(strconv.Itoa(authsnap.Schema)) {
		t.Errorf("schema bounds = %v..%v, want %d..%d", v.Minimum, v.Maximum, authsnap.MinSchema, authsnap.Schema)
	}
	if v := root.Properties["version"]; v.Minimum == nil || *v.Minimum != "1" ||
		v.Maximum == nil || *v.Maximum != json.Number(strconv.FormatUint(^uint64(0), 10)) {
		t.Errorf("version bounds = %v..%v, want 1..max uint64", v.Minimum, v.Maximum)
	}
	id := root.Defs["id"]
	if id.MinLength == nil || *id.MinLength != 1 || id.MaxLength == nil || *id.MaxLength != authsnap.MaxIDLength {
		t.Errorf("id length bounds do not match MaxIDLength %d", authsnap.MaxIDLength)
	}
	if !strings.Contains(id.Pattern, `\x00-\x1f\x7f`) {
		t.Errorf("id pattern %q does not exclude the control characters Validate rejects", id.Pattern)
	}
	for _, p := range []string{"key_id", "tenant_id"} {
		if key.Properties[p].Ref != "#/$defs/id" {
			t.Errorf("%s does not use #/$defs/id", p)
		}
	}
	for what, ts := range map[string]*jsonSchema{"generated_at": root.Properties["generated_at"], "expires_at": key.Properties["expires_at"]} {
		if ts.Pattern != contract.TimePattern {
			t.Errorf("%s pattern = %q, want the one Decode enforces, %q", what, ts.Pattern, contract.TimePattern)
		}
	}
	if want := "^[0-9a-f]{" + strconv.Itoa(authsnap.DigestLength) + "}$"; key.Properties["digest"].Pattern != want {
		t.Errorf("digest pattern = %q, want %q", key.Properties["digest"].Pattern, want)
	}
	if ts := root.Properties["tenants"]; ts == nil || ts.Items == nil || ts.Items.Ref != "#/$defs/tenant" {
		t.Error("schema does not describe tenants as an array of #/$defs/tenant")
	}
	if root.Defs["tenant"].Properties["tenant_id"].Ref != "#/$defs/id" {
		t.Error("tenants[].tenant_id does not use #/$defs/id")
	}
	for what, l := range map[string]*jsonSchema{"key": key.Properties["limits"], "tenant": root.Defs["tenant"].Properties["limits"]} {
		if l.Ref != "#/$defs/limits" {
			t.Errorf("%s limits do not use #/$defs/limits", what)
		}
	}
	for name, m := range root.Defs["limits"].Properties {
		if strings.HasPrefix(name, "usd_") {
			if m.Ref != "#/$defs/budget" {
				t.Errorf("limits.%s does not use #/$defs/budget", name)
			}
			continue
		}
		if name == "budget_mode" {
			if !slices.Equal(m.Enum, []any{authsnap.BudgetCharge, authsnap.BudgetReserve, nil}) {
				t.Errorf("limits.budget_mode enum = %v, want charge, reserve, null", m.Enum)
			}
			continue
		}
		if m.Ref != "#/$defs/limit" {
			t.Errorf("limits.%s does not use #/$defs/limit", name)
		}
	}
	if l := root.Defs["limit"]; l.Minimum == nil || *l.Minimum != "1" || l.Maximum == nil || *l.Maximum != json.Number(strconv.FormatInt(authsnap.MaxLimit, 10)) {
		t.Errorf("limit bounds = %v..%v, want 1..MaxLimit", l.Minimum, l.Maximum)
	}
	if m := key.Properties["models"].Items; m == nil || m.MinLength == nil || *m.MinLength != 1 {
		t.Errorf("model names must have minLength 1")
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
