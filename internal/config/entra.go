package config

import (
	"strconv"
	"strings"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/secret"
)

// azureEntra reads an azure_entra credential (docs/egress.md "Credential
// kinds"): tenant_id and client_id (required), client_secret (a secret
// reference, required), authority_host (optional, a sovereign cloud's
// https://HOST) and scopes (optional). It checks them as the node will
// build the token source, the token endpoint's host against hosts
// included, so that a credential the node could not use is refused at
// load; the node makes the token source once it has its egress transport
// (Mint). A static credential's env, file and auth_header do not apply.
func (v *validator) azureEntra(name string, t *table, hosts []string) credential.Credential {
	defer t.done()
	before := len(v.ps.list)
	str := func(key string, required bool) string { return v.kindString(t, kindEntra, key, required) }
	tenant := str("tenant_id", true)
	client := str("client_id", true)
	authority := str("authority_host", false)
	var clientSecret secret.Secret
	if raw, ok := t.get("client_secret", ""); ok {
		clientSecret = v.secretRef(t, "client_secret", raw)
	} else {
		v.ps.add(t.at("client_secret"), `missing; expected a secret reference { env = "NAME" } or { file = "PATH" }`)
	}
	var scopes []string
	if t.has("scopes") {
		scopes, _ = t.strs("scopes", `a list of scopes like ["https://cognitiveservices.azure.com/.default"]`)
	}
	for _, k := range []string{"env", "file", "auth_header"} {
		if t.has(k) {
			v.ps.add(t.at(k), "does not apply to kind %q: its keys are tenant_id, client_id, client_secret, authority_host and scopes", kindEntra)
		}
	}
	mint := func(o credential.TokenOptions) (*credential.TokenSource, error) {
		return credential.NewAzureEntra(credential.AzureOptions{
			TokenOptions: o, TenantID: tenant, ClientID: client,
			ClientSecret: clientSecret, Scopes: scopes, AuthorityHost: authority,
		})
	}
	// Azure OpenAI takes an Entra token as Authorization: Bearer, where
	// its static key goes in api-key.
	c := credential.Credential{Hosts: hosts, Mint: mint, Kind: kindEntra, Auth: credential.AuthBearer}
	if len(v.ps.list) > before || v.badHosts[t.path] {
		return c
	}
	// The checks the node makes when it builds the token source; no grant
	// is made.
	if _, err := mint(credential.TokenOptions{Name: name, Hosts: hosts, Transport: noTransport{}}); err != nil {
		msg, _ := strings.CutPrefix(err.Error(), "credential "+strconv.Quote(name)+": ")
		v.ps.add(t.path, "%s", msg)
	}
	return c
}

// kindString reads the string member key of a credential of kind (""
// when absent), and reports it missing when required.
func (v *validator) kindString(t *table, kind, key string, required bool) string {
	if !t.has(key) {
		if required {
			v.ps.add(t.at(key), "missing; required for kind %q", kind)
		}
		return ""
	}
	s, _ := t.str(key, "")
	return s
}
