package routesnap_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/schematest"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// TestConverseFixture: the Bedrock Converse example decodes, validates
// and passes the JSON Schema, and the schema refuses what Validate
// refuses: a converse backend off Bedrock, or in a schema 1 document.
func TestConverseFixture(t *testing.T) {
	data := readFixture(t, "converse/valid.json")
	s, err := routesnap.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	schema := schematest.MustLoad("../../proto/routesnap.schema.json")
	if err := schema.Check(data); err != nil {
		t.Errorf("schema refuses the example: %v", err)
	}
	for name, doc := range map[string]string{
		"no platform": `{"schema":2,"version":1,"backends":[{"id":"b","protocol":"bedrock_converse","base_url":"https://x.example.com","credential":"c","max_inflight_per_node":1}],` +
			`"models":[{"name":"m","targets":[{"backend":"b","model":"m","weight":1}]}]}`,
		"schema 1": `{"schema":1,"version":1,"backends":[{"id":"b","protocol":"bedrock_converse","base_url":"https://x.example.com","credential":"c","max_inflight_per_node":1}],` +
			`"models":[{"name":"m","targets":[{"backend":"b","model":"m","weight":1}]}]}`,
		"messages": `{"schema":2,"version":1,"backends":[{"id":"b","protocol":"bedrock_converse","platform":"bedrock","region":"us-east-1","base_url":"https://x.example.com","credential":"c","max_inflight_per_node":1,"endpoints":["messages"]}],` +
			`"models":[{"name":"m","targets":[{"backend":"b","model":"m","weight":1}]}]}`,
		"include_usage": `{"schema":2,"version":1,"backends":[{"id":"b","protocol":"bedrock_converse","platform":"bedrock","region":"us-east-1","base_url":"https://x.example.com","credential":"c","max_inflight_per_node":1,"include_usage":true}],` +
			`"models":[{"name":"m","targets":[{"backend":"b","model":"m","weight":1}]}]}`,
	} {
		if schema.Check([]byte(doc)) == nil {
			t.Errorf("%s: the schema accepts it", name)
		}
		s, err := routesnap.Decode([]byte(doc))
		if err == nil {
			err = s.Validate()
		}
		if err == nil {
			t.Errorf("%s: Validate accepts it", name)
		}
	}
}

func TestValidateConverse(t *testing.T) {
	backend := func(platform string, set func(*routesnap.Backend)) routesnap.Backend {
		b := routesnap.Backend{ID: "b", Protocol: routesnap.ProtocolBedrockConverse, Platform: platform, BaseURL: "https://x.example.com", Credential: "c", MaxInflightPerNode: 1}
		if set != nil {
			set(&b)
		}
		return b
	}
	region := func(b *routesnap.Backend) { b.Region = "us-east-1" }
	needs2 := "needs schema 2 or later (this document is schema 1); raise schema or remove the member"
	tests := []struct {
		name   string
		schema int
		b      routesnap.Backend
		want   []routesnap.Problem
	}{
		{"bedrock", 2, backend("bedrock", region), nil},
		{"both endpoints", 2, backend("bedrock", func(b *routesnap.Backend) {
			region(b)
			b.Endpoints = []string{"converse_stream", "converse"}
		}), nil},
		{"no platform", 2, backend("", nil), []routesnap.Problem{
			{Path: "backends[0].platform", Msg: `required for protocol "bedrock_converse": it is served only by Amazon Bedrock; set "bedrock"`},
		}},
		{"another platform", 2, backend("vertex", func(b *routesnap.Backend) { b.Project, b.Location = "my-project", "global" }), []routesnap.Problem{
			{Path: "backends[0].platform", Msg: `platform "vertex" does not carry protocol "bedrock_converse"; expected "bedrock"`},
		}},
		{"its own name is no first party", 2, backend("anthropic", nil), []routesnap.Problem{
			{Path: "backends[0].platform", Msg: `platform "anthropic" does not carry protocol "bedrock_converse"; expected "bedrock"`},
		}},
		{"schema 1", 1, backend("bedrock", region), []routesnap.Problem{
			{Path: "backends[0].platform", Msg: needs2},
			{Path: "backends[0].region", Msg: needs2},
			{Path: "backends[0].protocol", Msg: needs2},
		}},
		{"an anthropic endpoint", 2, backend("bedrock", func(b *routesnap.Backend) {
			region(b)
			b.Endpoints = []string{"messages"}
		}), []routesnap.Problem{
			{Path: "backends[0].endpoints[0]", Msg: `unknown endpoint "messages" for protocol "bedrock_converse"; expected one of converse, converse_stream`},
		}},
		{"include_usage", 2, backend("bedrock", func(b *routesnap.Backend) {
			region(b)
			on := true
			b.IncludeUsage = &on
		}), []routesnap.Problem{
			{Path: "backends[0].include_usage", Msg: `only applies to protocol "openai" (stream_options.include_usage); remove it`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &routesnap.Snapshot{Schema: tt.schema, Version: 1, Backends: []routesnap.Backend{tt.b},
				Models: []routesnap.Model{{Name: "m", Targets: []routesnap.Target{{Backend: "b", Model: "m", Weight: 1}}}}}
			var got []routesnap.Problem
			if err := s.Validate(); err != nil {
				got = err.(*routesnap.ValidationError).Problems
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("problems (-got +want):\n%s", diff)
			}
		})
	}
}
