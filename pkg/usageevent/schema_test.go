package usageevent_test

import (
	"encoding/json"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// jsonSchema is the subset of JSON Schema that proto/usage-event.schema.json
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
	OneOf                []*jsonSchema          `json:"oneOf"`
	MinLength            *int                   `json:"minLength"`
	MaxLength            *int                   `json:"maxLength"`
	Minimum              *json.Number           `json:"minimum"`
	Maximum              *json.Number           `json:"maximum"`
	Pattern              string                 `json:"pattern"`
	Description          string                 `json:"description"`
}

// TestSchemaMatchesTypes keeps proto/usage-event.schema.json and the Go
// types in step: the same members, every member required (the Go fields
// have no omit options), the same constants and limits, and objects left
// open for members added later (proto/VERSIONING.md).
func TestSchemaMatchesTypes(t *testing.T) {
	data, err := os.ReadFile("../../proto/usage-event.schema.json")
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
	usage := root.Defs["usage"]
	if usage == nil || root.Properties["usage"] == nil || len(root.Properties["usage"].OneOf) != 2 ||
		root.Properties["usage"].OneOf[1].Ref != "#/$defs/usage" {
		t.Fatal("schema does not describe usage as null or #/$defs/usage")
	}

	for _, tc := range []struct {
		name   string
		schema *jsonSchema
		typ    reflect.Type
	}{
		{"event", &root, reflect.TypeFor[usageevent.Event]()},
		{"usage", usage, reflect.TypeFor[usageevent.Usage]()},
	} {
		props, required := jsonMembers(t, tc.typ)
		if diff := cmp.Diff(slices.Sorted(maps.Keys(tc.schema.Properties)), props); diff != "" {
			t.Errorf("%s properties mismatch (-schema +Go):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(slices.Sorted(slices.Values(tc.schema.Required)), required); diff != "" {
			t.Errorf("%s required mismatch (-schema +Go):\n%s", tc.name, diff)
		}
		if tc.schema.AdditionalProperties != nil && !*tc.schema.AdditionalProperties {
			t.Errorf("%s: additionalProperties must stay open: consumers accept members added later", tc.name)
		}
		for name, p := range tc.schema.Properties {
			if p.Description == "" {
				t.Errorf("%s.%s has no description", tc.name, name)
			}
		}
	}

	p := root.Properties
	for _, c := range []struct {
		member string
		got    any
		want   any
	}{
		{"schema", p["schema"].Const, float64(usageevent.Schema)},
		{"authoritative", p["authoritative"].Const, false},
		{"protocol", p["protocol"].Enum, []any{usageevent.ProtocolOpenAI, usageevent.ProtocolAnthropic, usageevent.ProtocolGemini, usageevent.ProtocolBedrockConverse}},
		{"send_state", p["send_state"].Enum, []any{usageevent.SendDefinitelyNotSent, usageevent.SendPossiblySent, usageevent.SendResponseReceived}},
		{"failure_stage", p["failure_stage"].Pattern, "^$|^[a-z][a-z0-9_]{0," + strconv.Itoa(usageevent.MaxStageLength-1) + "}$"},
		{"event_id", p["event_id"].Pattern, "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
		{"attempt minimum", p["attempt"].Minimum, ptr(json.Number("1"))},
		// The maxima are what the Go fields hold, so that a number the
		// schema accepts decodes.
		{"attempt maximum", p["attempt"].Maximum, ptr(json.Number(strconv.Itoa(usageevent.MaxAttempt)))},
		{"request_bytes maximum", p["request_bytes"].Maximum, ptr(json.Number(strconv.FormatInt(math.MaxInt64, 10)))},
		{"response_bytes maximum", p["response_bytes"].Maximum, ptr(json.Number(strconv.FormatInt(math.MaxInt64, 10)))},
		{"count maximum", root.Defs["count"].Maximum, ptr(json.Number(strconv.FormatInt(math.MaxInt64, 10)))},
	} {
		if diff := cmp.Diff(c.got, c.want); diff != "" {
			t.Errorf("%s mismatch (-schema +Go):\n%s", c.member, diff)
		}
	}

	name := root.Defs["name"]
	if name == nil || name.MinLength == nil || *name.MinLength != 1 || name.MaxLength == nil || *name.MaxLength != usageevent.MaxStringLength {
		t.Errorf("$defs/name length bounds do not match MaxStringLength %d", usageevent.MaxStringLength)
	}
	if name != nil && !strings.Contains(name.Pattern, `\x00-\x1f\x7f`) {
		t.Errorf("$defs/name pattern %q does not exclude the control characters Validate rejects", name.Pattern)
	}
	for _, m := range []string{"node_id", "request_id", "tenant_id", "key_id", "public_model", "provider_model", "backend"} {
		if p[m].Ref != "#/$defs/name" {
			t.Errorf("%s does not use #/$defs/name", m)
		}
	}
	for m, s := range usage.Properties {
		if s.Ref != "#/$defs/count" {
			t.Errorf("usage.%s does not use #/$defs/count", m)
		}
	}

	// Every failure stage the package names appears in the description,
	// which is where schema readers learn them.
	for _, stage := range []string{
		usageevent.StageConnect, usageevent.StageSend, usageevent.StageTimeout,
		usageevent.StageProviderAuth, usageevent.StageProviderStatus, usageevent.StageResponseBody,
		usageevent.StageFirstEvent, usageevent.StageStream, usageevent.StageProviderStreamError,
		usageevent.StageClientCancelled, usageevent.StageClientWrite, usageevent.StageInternal,
		usageevent.StageStreamTotal, usageevent.StageNoProgress, usageevent.StageClientStalled,
	} {
		if !strings.Contains(p["failure_stage"].Description, " "+stage+",") && !strings.Contains(p["failure_stage"].Description, " "+stage+".") {
			t.Errorf("failure_stage description does not list %q", stage)
		}
	}
}

// jsonMembers returns the JSON member names of struct type t, all and
// required (no omit option), sorted. Every field must have a json tag.
func jsonMembers(t *testing.T, typ reflect.Type) (all, required []string) {
	t.Helper()
	for f := range typ.Fields() {
		tag, ok := f.Tag.Lookup("json")
		if !ok {
			t.Errorf("%s.%s has no json tag", typ.Name(), f.Name)
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		all = append(all, name)
		if !strings.Contains(opts, "omit") {
			required = append(required, name)
		}
	}
	slices.Sort(all)
	slices.Sort(required)
	return all, required
}

func ptr[T any](v T) *T { return &v }
