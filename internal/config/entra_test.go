package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/credential"
)

// TestRulesAzureEntra: the azure_entra credential kind (docs/egress.md
// "Credential kinds") is checked at load as the node will build it, its
// token host against hosts included, and only platform azure may use it.
func TestRulesAzureEntra(t *testing.T) {
	const (
		ids       = "tenant_id = \"contoso.onmicrosoft.com\"\nclient_id = \"00000000-0000-0000-0000-000000000001\"\n"
		secretRef = "client_secret = { env = \"C2\" }\n"
		authority = "authority_host = \"https://x.example\"\n"
	)
	azure := func(doc string) string {
		doc = strings.Replace(doc, `protocol = "openai"`, "protocol = \"openai\"\nplatform = \"azure\"\napi_version = \"2024-10-21\"", 1)
		return strings.Replace(doc, `base_url = "https://api.example.com/v1"`, `base_url = "https://api.example.com"`, 1)
	}
	firstParty := func(doc string) string { return doc }
	tests := []struct {
		name, cred string
		backend    func(string) string
		want       []Problem
	}{
		{"authority on a listed host", "kind = \"azure_entra\"\n" + ids + secretRef + authority + credHosts, azure, nil},
		{"scopes", "kind = \"azure_entra\"\n" + ids + secretRef + authority + "scopes = [\"https://cognitiveservices.azure.com/.default\"]\n" + credHosts, azure, nil},
		{"token endpoint outside hosts", "kind = \"azure_entra\"\n" + ids + secretRef + credHosts, azure,
			[]Problem{{"credentials.c1", `token endpoint host "login.microsoftonline.com" is not in credentials.c1.hosts: the token endpoint is egress like the provider, list its host there`}}},
		{"missing members, static members", "kind = \"azure_entra\"\nenv = \"C1\"\n" + credHosts, azure,
			[]Problem{
				{"credentials.c1.tenant_id", `missing; required for kind "azure_entra"`},
				{"credentials.c1.client_id", `missing; required for kind "azure_entra"`},
				{"credentials.c1.client_secret", `missing; expected a secret reference { env = "NAME" } or { file = "PATH" }`},
				{"credentials.c1.env", `does not apply to kind "azure_entra": its keys are tenant_id, client_id, client_secret, authority_host and scopes`},
			}},
		{"client id not a GUID", "kind = \"azure_entra\"\ntenant_id = \"t1\"\nclient_id = \"secret-pasted-here\"\n" + secretRef + authority + credHosts, azure,
			[]Problem{{"credentials.c1", `client id must be the application (client) id, a GUID`}}},
		{"on a first-party backend", "kind = \"azure_entra\"\n" + ids + secretRef + authority + credHosts, firstParty,
			[]Problem{{"backends.b1.credential", `backend "b1" uses azure_entra credential "c1", but only platform "azure" takes Entra tokens`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.backend(edit(t, base, credEnv+"\n"+credHosts, tt.cred))
			c, err := Parse([]byte(doc), ruleEnv(), fakeFS(nil))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v\n%s", err, doc)
				}
				cr := c.Credentials["c1"]
				if cr.Mint == nil || cr.Kind != credential.KindAzureEntra || cr.Auth != credential.AuthBearer || !cr.Secret.IsZero() {
					t.Fatalf("credential %+v: want a minted azure_entra one", cr)
				}
				if _, err := cr.Mint(credential.TokenOptions{Name: "c1", Hosts: cr.Hosts, Transport: noTransport{}}); err != nil {
					t.Errorf("Mint: %v", err)
				}
				return
			}
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Parse = %v, want a *config.Error\n%s", err, doc)
			}
			if diff := cmp.Diff(cerr.Problems, tt.want); diff != "" {
				t.Errorf("problems (-got +want):\n%s", diff)
			}
		})
	}
}
