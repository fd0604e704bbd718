package config

import (
	"testing"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// awsCred is an aws credential c1 in place of base's static one.
const awsCred = "kind = \"aws\"\naccess_key_id = { env = \"C1\" }\nsecret_access_key = { env = \"C2\" }\nregion = \"us-east-1\""

// bedrockBackend makes base's backend a Bedrock one.
var bedrockBackend = []string{backendProt, `protocol = "anthropic"` + "\nplatform = \"bedrock\"\nregion = \"us-east-1\""}

// TestRulesPlatforms: the aws credential kind and a backend's cloud
// platform in the node's TOML (docs/egress.md "Credential kinds",
// docs/routing.md "Platforms").
func TestRulesPlatforms(t *testing.T) {
	creds := func(c *Config) any { return c.Credentials }
	backends := func(c *Config) any { return c.Backends }
	runRules(t, []ruleCase{
		{
			name: "aws credential", view: creds,
			edits: append([]string{credEnv, awsCred}, bedrockBackend...),
			wantView: map[string]credential.Credential{
				"c1": {Hosts: []string{"api.example.com", "x.example", "127.0.0.1", "127.0.0.2", "localhost", "::1"},
					AWS: &credential.AWS{AccessKeyID: secret.New("k1"), SecretAccessKey: secret.New("k2"), Region: "us-east-1"}},
			},
		},
		{
			name: "bedrock backend", view: backends,
			edits: append([]string{credEnv, awsCred}, bedrockBackend...),
			wantView: []routesnap.Backend{{ID: "b1", Protocol: "anthropic", Platform: "bedrock", Region: "us-east-1",
				BaseURL: "https://api.example.com/v1", Credential: "c1", MaxInflightPerNode: 8}},
		},
		{
			name:  "aws without its secret, with a static key's members",
			edits: []string{credEnv, "kind = \"aws\"\naccess_key_id = { env = \"C1\" }\nenv = \"C1\"\nauth_header = \"bearer\""},
			want: []Problem{
				{"credentials.c1.secret_access_key", `missing; expected a secret reference { env = "NAME" } or { file = "PATH" }`},
				{"credentials.c1.env", `does not apply to kind "aws": its keys are access_key_id, secret_access_key and session_token`},
				{"credentials.c1.auth_header", `does not apply to kind "aws": its keys are access_key_id, secret_access_key and session_token`},
				{"backends.b1.credential", `backend "b1" uses aws credential "c1", but only platform "bedrock" takes AWS-signed requests`},
			},
		},
		{
			name: "unknown kind", edits: []string{credEnv, credEnv + "\nkind = \"gcp\""},
			want: []Problem{{"credentials.c1.kind", `unknown credential kind "gcp"; expected "static", "aws", "aws_web_identity", "gcp_service_account" or "azure_entra"`}},
		},
		{
			name: "aws credential on a first-party backend", edits: []string{credEnv, awsCred},
			want: []Problem{{"backends.b1.credential", `backend "b1" uses aws credential "c1", but only platform "bedrock" takes AWS-signed requests`}},
		},
		{
			name:  "aws credential for another region",
			edits: append([]string{credEnv, awsCred}, backendProt, `protocol = "anthropic"`+"\nplatform = \"bedrock\"\nregion = \"eu-west-1\""),
			want:  []Problem{{"backends.b1.region", `backend "b1" is in region "eu-west-1", but aws credential "c1" is for region "us-east-1" only`}},
		},
		{
			name: "bedrock without region", edits: []string{backendProt, `protocol = "anthropic"` + "\nplatform = \"bedrock\""},
			want: []Problem{{"backends.b1.region", `required on platform "bedrock"; expected an AWS region like "us-east-1"`}},
		},
		{
			name: "platform of another protocol", edits: []string{backendProt, backendProt + "\nplatform = \"bedrock\"\nregion = \"us-east-1\""},
			want: []Problem{{"backends.b1.platform", `platform "bedrock" does not carry protocol "openai"; expected "openai", "azure" (or none, for the protocol's own wire)`}},
		},
	})
}
