package config

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gcpKeyJSON is a service-account key file as Google downloads it
// (indented JSON over several lines), naming tokenURI.
var gcpKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func gcpKeyJSON(t *testing.T, tokenURI string) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(gcpKey())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "abc",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "sa@p.iam.gserviceaccount.com", "token_uri": tokenURI,
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGCPServiceAccount: the gcp_service_account kind reads the key file
// Google downloads (several lines) with key_file, and checks at load the
// key and its token endpoint's host against hosts.
func TestGCPServiceAccount(t *testing.T) {
	files := map[string]string{
		"/keys/good.json":  gcpKeyJSON(t, "https://oauth2.googleapis.com/token"),
		"/keys/other.json": gcpKeyJSON(t, "https://tokens.example.net/token"),
		"/keys/user.json":  `{"type": "authorized_user"}`,
	}
	vertexHosts := `hosts = ["oauth2.googleapis.com", "us-east5-aiplatform.googleapis.com"]`
	tests := []struct {
		name, cred string
		want       []Problem
	}{
		{"key file", "kind = \"gcp_service_account\"\nkey_file = \"/keys/good.json\"\n" + vertexHosts, nil},
		{"scopes", "kind = \"gcp_service_account\"\nkey_file = \"/keys/good.json\"\nscopes = [\"https://www.googleapis.com/auth/cloud-platform.read-only\"]\n" + vertexHosts, nil},
		{"token host outside hosts", "kind = \"gcp_service_account\"\nkey_file = \"/keys/other.json\"\n" + vertexHosts,
			[]Problem{{"credentials.c1.key_file", `credential "c1": token endpoint host "tokens.example.net" is not in credentials.c1.hosts: the token endpoint is egress like the provider, list its host there`}}},
		{"not a service account", "kind = \"gcp_service_account\"\nkey_file = \"/keys/user.json\"\n" + vertexHosts,
			[]Problem{{"credentials.c1.key_file", `credential "c1": service-account key: "type" is not "service_account" (a user or external-account credential file is not a service-account key)`}}},
		{"no key", "kind = \"gcp_service_account\"\n" + vertexHosts,
			[]Problem{{"credentials.c1.key_file", `missing; expected key_file = "PATH" (the service account's JSON key file) or key = { env = "NAME" }`}}},
		{"both", "kind = \"gcp_service_account\"\nkey_file = \"/keys/good.json\"\nkey = { env = \"C1\" }\n" + vertexHosts,
			[]Problem{{"credentials.c1", "set exactly one of key_file or key, not both"}}},
		{"static members", "kind = \"gcp_service_account\"\nkey_file = \"/keys/good.json\"\nenv = \"C1\"\n" + vertexHosts,
			[]Problem{{"credentials.c1.env", `does not apply to kind "gcp_service_account": its key is key_file or key`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := edit(t, base, credEnv+"\n"+credHosts, tt.cred)
			doc = strings.Replace(doc, `protocol = "openai"`, "protocol = \"gemini\"\nplatform = \"vertex\"\nproject = \"my-project\"\nlocation = \"us-east5\"", 1)
			doc = strings.Replace(doc, `base_url = "https://api.example.com/v1"`, `base_url = "https://us-east5-aiplatform.googleapis.com"`, 1)
			c, err := Parse([]byte(doc), ruleEnv(), fakeFS(files))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v\n%s", err, doc)
				}
				if cr := c.Credentials["c1"]; cr.Mint == nil || !cr.Secret.IsZero() {
					t.Errorf("credential %+v: want a minted one", cr)
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

// compactJSON is doc on one line, as a key is put in an environment
// variable.
func compactJSON(t *testing.T, doc string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestGCPServiceAccountVertexOnly: a Google access token is for Vertex
// AI: a backend on another platform may not use a gcp_service_account
// credential, even on a host the credential lists (the Gemini API's own
// host among them), and the problem names the backend's credential key.
func TestGCPServiceAccountVertexOnly(t *testing.T) {
	files := map[string]string{"/keys/good.json": gcpKeyJSON(t, "https://oauth2.googleapis.com/token")}
	cred := "kind = \"gcp_service_account\"\nkey_file = \"/keys/good.json\"\n" +
		`hosts = ["oauth2.googleapis.com", "generativelanguage.googleapis.com", "api.example.com"]`
	tests := []struct {
		name    string
		backend string // replaces protocol = "openai" and base_url
	}{
		{"the Gemini API", "protocol = \"gemini\"\nbase_url = \"https://generativelanguage.googleapis.com/v1beta\""},
		{"an OpenAI backend", "protocol = \"openai\"\nbase_url = \"https://api.example.com/v1\""},
		{"platform google", "protocol = \"gemini\"\nplatform = \"google\"\nbase_url = \"https://generativelanguage.googleapis.com/v1beta\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := edit(t, base, credEnv+"\n"+credHosts, cred)
			doc = edit(t, doc, backendProt+"\n"+backendBase, tt.backend)
			_, err := Parse([]byte(doc), ruleEnv(), fakeFS(files))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Parse = %v, want a *config.Error\n%s", err, doc)
			}
			want := []Problem{{"backends.b1.credential", `backend "b1" uses gcp_service_account credential "c1", but only platform "vertex" takes Google Cloud access tokens`}}
			if diff := cmp.Diff(cerr.Problems, want); diff != "" {
				t.Errorf("problems (-got +want):\n%s", diff)
			}
		})
	}
}
