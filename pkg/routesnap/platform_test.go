package routesnap_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/schematest"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// TestPlatformFixture: the platforms example decodes, validates and
// passes the JSON Schema.
func TestPlatformFixture(t *testing.T) {
	data := readFixture(t, "platforms/valid.json")
	s, err := routesnap.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := s.Backends[1]; got.Platform != routesnap.PlatformBedrock || got.Region != "us-east-1" {
		t.Errorf("backend = %+v", got)
	}
	schema := schematest.MustLoad("../../proto/routesnap.schema.json")
	if err := schema.Check(data); err != nil {
		t.Errorf("schema refuses the example: %v", err)
	}
}

func TestValidatePlatform(t *testing.T) {
	backend := func(protocol, platform string, set func(*routesnap.Backend)) routesnap.Backend {
		b := routesnap.Backend{ID: "b", Protocol: protocol, Platform: platform, BaseURL: "https://x.example.com", Credential: "c", MaxInflightPerNode: 1}
		if set != nil {
			set(&b)
		}
		return b
	}
	region := func(b *routesnap.Backend) { b.Region = "us-east-1" }
	tests := []struct {
		name   string
		schema int
		b      routesnap.Backend
		want   []routesnap.Problem
	}{
		{"none", 1, backend("anthropic", "", nil), nil},
		{"first party by name", 2, backend("anthropic", "anthropic", nil), nil},
		{"bedrock", 2, backend("anthropic", "bedrock", region), nil},
		{"vertex gemini", 2, backend("gemini", "vertex", func(b *routesnap.Backend) { b.Project, b.Location = "my-project", "us-central1" }), nil},
		{"azure", 2, backend("openai", "azure", func(b *routesnap.Backend) { b.APIVersion = "2024-10-21" }), nil},
		{"bedrock in schema 1", 1, backend("anthropic", "bedrock", region), []routesnap.Problem{
			{Path: "backends[0].platform", Msg: "needs schema 2 or later (this document is schema 1); raise schema or remove the member"},
			{Path: "backends[0].region", Msg: "needs schema 2 or later (this document is schema 1); raise schema or remove the member"},
		}},
		{"bedrock without region", 2, backend("anthropic", "bedrock", nil), []routesnap.Problem{
			{Path: "backends[0].region", Msg: `required on platform "bedrock"; expected an AWS region like "us-east-1"`},
		}},
		{"bedrock for openai", 2, backend("openai", "bedrock", region), []routesnap.Problem{
			{Path: "backends[0].platform", Msg: `platform "bedrock" does not carry protocol "openai"; expected "openai", "azure" (or none, for the protocol's own wire)`},
		}},
		{"google for anthropic", 2, backend("anthropic", "google", nil), []routesnap.Problem{
			{Path: "backends[0].platform", Msg: `platform "google" does not carry protocol "anthropic"; expected "anthropic", "bedrock", "vertex" (or none, for the protocol's own wire)`},
		}},
		{"unknown", 2, backend("anthropic", "aws", nil), []routesnap.Problem{
			{Path: "backends[0].platform", Msg: `platform "aws" does not carry protocol "anthropic"; expected "anthropic", "bedrock", "vertex" (or none, for the protocol's own wire)`},
		}},
		{"region elsewhere", 2, backend("anthropic", "", region), []routesnap.Problem{
			{Path: "backends[0].region", Msg: `only applies to platform "bedrock"; remove it`},
		}},
		{"bad region", 2, backend("anthropic", "bedrock", func(b *routesnap.Backend) { b.Region = "us-east-1.evil.com/" }), []routesnap.Problem{
			{Path: "backends[0].region", Msg: `must be an AWS region like "us-east-1"`},
		}},
		{"bedrock count_tokens", 2, backend("anthropic", "bedrock", func(b *routesnap.Backend) {
			region(b)
			b.Endpoints = []string{"messages", "count_tokens"}
		}), nil},
		{"vertex without project", 2, backend("anthropic", "vertex", func(b *routesnap.Backend) { b.Location = "global" }), []routesnap.Problem{
			{Path: "backends[0].project", Msg: `required on platform "vertex"; expected a Google Cloud project id like "my-project"`},
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
