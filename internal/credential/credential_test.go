package credential_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  string // a substring of the error; "" = no error
	}{
		{in: "api.openai.com", want: "api.openai.com"},
		{in: "API.OpenAI.COM", want: "api.openai.com"},
		{in: "api.openai.com.", want: "api.openai.com"},
		{in: "*.openai.azure.com", want: "*.openai.azure.com"},
		{in: "*.OpenAI.Azure.com.", want: "*.openai.azure.com"},
		{in: "xn--bcher-kva.example", want: "xn--bcher-kva.example"},
		{in: "localhost", want: "localhost"},
		{in: "my_host.internal", want: "my_host.internal"},
		{in: "127.0.0.1", want: "127.0.0.1"},
		{in: "::1", want: "::1"},
		{in: "[::1]", want: "::1"},
		{in: "0:0::1", want: "::1"},
		{in: "::ffff:10.0.0.1", want: "10.0.0.1"},
		{in: "2001:DB8::1", want: "2001:db8::1"},
		{in: "", wantErr: "empty"},
		{in: "bücher.example", wantErr: "punycode"},
		{in: "*.com", wantErr: `public suffix "com"`},
		{in: "*.co.uk", wantErr: `public suffix "co.uk"`},
		{in: "*.azurewebsites.net", wantErr: "public suffix"},
		{in: "*.internal", wantErr: "public suffix"},
		{in: "*", wantErr: "whole first label"},
		{in: "*.", wantErr: "whole first label"},
		{in: "api.*.com", wantErr: "whole first label"},
		{in: "*api.openai.com", wantErr: "whole first label"},
		{in: "*.*.openai.com", wantErr: "whole first label"},
		{in: "https://api.openai.com", wantErr: "without scheme"},
		{in: "api.openai.com/v1", wantErr: "without scheme"},
		{in: "api.openai.com:443", wantErr: "without a port"},
		{in: "[::1]:443", wantErr: "without a port"},
		{in: "fe80::1%eth0", wantErr: "not a host name"},
		{in: "api..openai.com", wantErr: "not a host name"},
		{in: "api openai.com", wantErr: "not a host name"},
		{in: "1.2.3", wantErr: "numeric label"},
		{in: "x.0x7f", wantErr: "numeric label"},
		{in: strings.Repeat("a", 64) + ".com", wantErr: "not a host name"},
		{in: strings.Repeat("a.", 200) + "com", wantErr: "longer than 256"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := credential.ParseHost(tt.in)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ParseHost(%q) = %v", tt.in, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("ParseHost(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.wantErr)
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("ParseHost(%q) (-got +want):\n%s", tt.in, diff)
			}
		})
	}
}

// TestAllows matches a base_url's host (as url.URL.Hostname returns it)
// against patterns ParseHost accepted.
func TestAllows(t *testing.T) {
	c := credential.Credential{Hosts: []string{"api.openai.com", "*.openai.azure.com", "127.0.0.1", "::1", "xn--bcher-kva.example"}}
	tests := []struct {
		host string
		want bool
	}{
		{"api.openai.com", true},
		{"API.OPENAI.COM", true},        // hosts are case-insensitive
		{"api.openai.com.", true},       // the trailing dot names the same host
		{"res.openai.azure.com", true},  // wildcard: one label
		{"a.b.openai.azure.com", true},  // wildcard: several labels
		{"RES.OpenAI.Azure.Com.", true}, // wildcard, any case, trailing dot
		{"openai.azure.com", false},     // the wildcard never matches the bare domain
		{"evilopenai.azure.com", false}, // nor a label that merely ends like it
		{"openai.azure.com.evil.example", false},
		{"api.openai.com.evil.example", false}, // a listed host as a prefix
		{"evil-api.openai.com", false},
		{"eu.api.openai.com", false}, // an exact entry has no subdomains
		{"127.0.0.1", true},
		{"127.0.0.2", false},
		{"::1", true},
		{"0:0:0:0:0:0:0:1", true},  // IPv6 compares as an address
		{"::ffff:127.0.0.1", true}, // IPv4-mapped is the IPv4 address
		{"xn--bcher-kva.example", true},
		{"bücher.example", false}, // base_url hosts are ASCII; the Unicode spelling is never listed
		{"", false},
		{"localhost", false},
	}
	for _, tt := range tests {
		if got := c.Allows(tt.host); got != tt.want {
			t.Errorf("Allows(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
	if (credential.Credential{}).Allows("api.openai.com") {
		t.Error("a credential without hosts allows a host")
	}
	// An IP address never matches a wildcard, whatever its labels.
	if (credential.Credential{Hosts: []string{"*.0.0.1"}}).Allows("127.0.0.1") {
		t.Error("a wildcard matched an IP address")
	}
}

// TestPolicyCheck: a routing document that pairs a credential with a host
// it does not list, or names a plaintext backend while a proxy is off
// loopback, gets one problem per backend, naming the backend, the
// credential and the host, never the value.
func TestPolicyCheck(t *testing.T) {
	const canary = "sk-policy-canary-91c2"
	creds := map[string]credential.Credential{
		"openai": {Secret: secret.New(canary), Hosts: []string{"api.openai.com"}},
		"dev":    {Secret: secret.New(canary), Hosts: []string{"127.0.0.1", "localhost"}},
	}
	bs := []routesnap.Backend{
		{ID: "ok", BaseURL: "https://api.openai.com/v1", Credential: "openai"},
		{ID: "elsewhere", BaseURL: "https://Collector.Example.:8443/v1", Credential: "openai"},
		{ID: "plain", BaseURL: "http://127.0.0.1:18080/v1", Credential: "dev"},
		{ID: "plain-elsewhere", BaseURL: "http://localhost:18080/v1", Credential: "openai"},
		{ID: "undefined", BaseURL: "https://x.example/v1", Credential: "nope"},         // routesnap reports it
		{ID: "bad-url", BaseURL: "https://user:pw@x.example/v1", Credential: "openai"}, // routesnap reports it
	}
	loopbackOnly := credential.Policy{Credentials: creds}
	remote := credential.Policy{Credentials: creds, RemoteProxy: "corp", RemoteProxyPath: "egress.proxies[1].url"}
	plaintext := func(i int) routesnap.Problem {
		return routesnap.Problem{Path: "backends[" + string(rune('0'+i)) + "].base_url", Msg: `plaintext http:// backend, but egress proxy "corp" (egress.proxies[1].url) is not on loopback: ` +
			"the request and its credential would leave this machine unencrypted; use https://, or only loopback egress proxies"}
	}
	elsewhere := routesnap.Problem{Path: "backends[1].credential", Msg: `backend "elsewhere" sends credential "openai" to host "collector.example", which the node's credentials.openai.hosts does not list`}
	plainElsewhere := routesnap.Problem{Path: "backends[3].credential", Msg: `backend "plain-elsewhere" sends credential "openai" to host "localhost", which the node's credentials.openai.hosts does not list`}
	tests := []struct {
		name   string
		policy credential.Policy
		want   []routesnap.Problem
	}{
		{"loopback proxies only", loopbackOnly, []routesnap.Problem{elsewhere, plainElsewhere}},
		{"a proxy off loopback", remote, []routesnap.Problem{elsewhere, plaintext(2), plaintext(3), plainElsewhere}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.policy.Check(bs)
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("Check (-got +want):\n%s", diff)
			}
			for _, p := range got {
				if strings.Contains(p.String(), canary) {
					t.Errorf("problem %q holds the credential's value", p)
				}
			}
		})
	}
}

// TestPolicyValidate: the document's own problems and the policy's are one
// error, the document's first.
func TestPolicyValidate(t *testing.T) {
	p := credential.Policy{Credentials: map[string]credential.Credential{"c": {Hosts: []string{"a.example"}}}}
	doc := &routesnap.Snapshot{
		Schema: routesnap.Schema, Version: 1,
		Backends: []routesnap.Backend{
			{ID: "a", Protocol: routesnap.ProtocolOpenAI, BaseURL: "https://a.example/v1", Credential: "c", MaxInflightPerNode: 1},
			{ID: "b", Protocol: routesnap.ProtocolOpenAI, BaseURL: "https://b.example/v1", Credential: "c", MaxInflightPerNode: 1},
		},
		Models: []routesnap.Model{{Name: "m", Targets: []routesnap.Target{{Backend: "a", Model: "x", Weight: 0}}}},
	}
	if err := p.Validate(doc); err == nil {
		t.Fatal("Validate = nil")
	} else if diff := cmp.Diff(err.Error(), "routesnap: invalid snapshot: models[0].targets[0].weight: must be 1..1000000, got 0; "+
		`backends[1].credential: backend "b" sends credential "c" to host "b.example", which the node's credentials.c.hosts does not list`); diff != "" {
		t.Errorf("Validate (-got +want):\n%s", diff)
	}
	doc.Models[0].Targets[0].Weight = 1
	doc.Backends[1].BaseURL = "https://a.example/v2"
	if err := p.Validate(doc); err != nil {
		t.Errorf("Validate = %v, want nil", err)
	}
}

// TestPolicyKinds: a credential of a kind only one platform takes is a
// problem at the backend's credential path on any other platform: aws
// keys sign for Bedrock, Entra tokens are Azure's, Google access tokens
// Vertex's.
func TestPolicyKinds(t *testing.T) {
	hosts := []string{"*.example.com"}
	p := credential.Policy{Credentials: map[string]credential.Credential{
		"aws":   {AWS: &credential.AWS{}, Hosts: hosts},
		"entra": {Kind: credential.KindAzureEntra, Hosts: hosts},
		"gcp":   {Kind: credential.KindGCPServiceAccount, Hosts: hosts},
	}}
	backend := func(id, platform, cred string) routesnap.Backend {
		return routesnap.Backend{ID: id, BaseURL: "https://" + id + ".example.com", Platform: platform, Credential: cred}
	}
	bs := []routesnap.Backend{
		backend("bedrock", routesnap.PlatformBedrock, "aws"),
		backend("azure", routesnap.PlatformAzure, "entra"),
		backend("vertex", routesnap.PlatformVertex, "gcp"),
		backend("gemini", "", "gcp"),
		backend("google", routesnap.PlatformGoogle, "gcp"),
		backend("azure-gcp", routesnap.PlatformAzure, "gcp"),
		backend("vertex-entra", routesnap.PlatformVertex, "entra"),
		backend("vertex-aws", routesnap.PlatformVertex, "aws"),
	}
	gcp := func(i int, id string) routesnap.Problem {
		return routesnap.Problem{Path: fmt.Sprintf("backends[%d].credential", i),
			Msg: fmt.Sprintf(`backend %q uses gcp_service_account credential "gcp", but only platform "vertex" takes Google Cloud access tokens`, id)}
	}
	want := []routesnap.Problem{
		gcp(3, "gemini"), gcp(4, "google"), gcp(5, "azure-gcp"),
		{Path: "backends[6].credential", Msg: `backend "vertex-entra" uses azure_entra credential "entra", but only platform "azure" takes Entra tokens`},
		{Path: "backends[7].credential", Msg: `backend "vertex-aws" uses aws credential "aws", but only platform "bedrock" takes AWS-signed requests`},
	}
	if diff := cmp.Diff(p.Check(bs), want); diff != "" {
		t.Errorf("Check (-got +want):\n%s", diff)
	}
}
