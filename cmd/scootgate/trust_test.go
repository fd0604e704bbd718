package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/routesnap"
)

// trustConfig writes a node config with a routing snapshot source, the
// egress proxy proxyURL and the credential openai-main, allowed to the
// hosts listed in hosts (a TOML array, or "" for none).
func trustConfig(t *testing.T, dir, proxyURL, hosts string) string {
	t.Helper()
	t.Setenv("SG_TRUST_TEST_KEY", "sk-trust-canary-7f3a")
	toml := fmt.Sprintf("node_id = \"trust-test\"\n[[egress.proxies]]\nname = \"p\"\nurl = %q\n", proxyURL) +
		"[credentials.openai-main]\nenv = \"SG_TRUST_TEST_KEY\"\n"
	if hosts != "" {
		toml += "hosts = " + hosts + "\n"
	}
	toml += "[routes]\nsource = \"file:routes.json\"\n[authz]\nsource = \"file:authz.json\"\n"
	return writeFile(t, filepath.Join(dir, "node.toml"), []byte(toml))
}

// oneBackend is a routing document whose only backend sends openai-main
// to baseURL.
func oneBackend(baseURL string) *routesnap.Snapshot {
	return &routesnap.Snapshot{
		Schema: routesnap.Schema, Version: 1,
		Backends: []routesnap.Backend{{ID: "b1", Protocol: routesnap.ProtocolOpenAI, BaseURL: baseURL, Credential: "openai-main", MaxInflightPerNode: 1}},
		Models:   []routesnap.Model{{Name: "m", Targets: []routesnap.Target{{Backend: "b1", Model: "x", Weight: 1}}}},
	}
}

// TestCheckCredentialToAnyHost: a routing document can no longer send a
// credential to a host its [credentials.NAME] does not list; check names
// the backend, the credential and the host, never the secret.
func TestCheckCredentialToAnyHost(t *testing.T) {
	dir := t.TempDir()
	cfg := trustConfig(t, dir, "socks5://127.0.0.1:1080", `["api.openai.com", "*.openai.azure.com"]`)
	tests := []struct {
		name    string
		baseURL string
		code    int
		stderr  string
	}{
		{name: "listed host", baseURL: "https://api.openai.com/v1"},
		{name: "listed host, other case, port and trailing dot", baseURL: "https://API.OpenAI.com.:443/v1"},
		{name: "wildcard", baseURL: "https://my-resource.openai.azure.com/openai"},
		{
			name: "attacker's host", baseURL: "https://collector.example/v1", code: 1,
			stderr: `  backends[0].credential: backend "b1" sends credential "openai-main" to host "collector.example", which the node's credentials.openai-main.hosts does not list` + "\n",
		},
		{
			name: "wildcard does not match the bare domain", baseURL: "https://openai.azure.com/v1", code: 1,
			stderr: `  backends[0].credential: backend "b1" sends credential "openai-main" to host "openai.azure.com", which the node's credentials.openai-main.hosts does not list` + "\n",
		},
		{
			name: "suffix trick", baseURL: "https://api.openai.com.collector.example/v1", code: 1,
			stderr: `  backends[0].credential: backend "b1" sends credential "openai-main" to host "api.openai.com.collector.example", which the node's credentials.openai-main.hosts does not list` + "\n",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := writeJSON(t, filepath.Join(dir, fmt.Sprintf("routes%d.json", i)), oneBackend(tt.baseURL))
			code, stdout, stderr := runCmd(t, "", "check", "--routes", doc, "--config", cfg)
			if code != tt.code {
				t.Fatalf("exit code %d, want %d; stdout %q, stderr:\n%s", code, tt.code, stdout, stderr)
			}
			if tt.code != 0 {
				_, rest, _ := strings.Cut(stderr, "\n")
				if diff := cmp.Diff(rest, tt.stderr); diff != "" {
					t.Errorf("problems (-got +want):\n%s", diff)
				}
			}
			if strings.Contains(stdout+stderr, "sk-trust-canary") {
				t.Error("output contains the credential's value")
			}
		})
	}
}

// TestCheckPlaintextBackendThroughRemoteProxy: an http:// backend is
// tunnelled, so its "loopback" is the proxy's host and the request, the
// credential in its Authorization header, crosses the proxy in clear. It
// is refused unless every egress proxy is on the node's loopback.
func TestCheckPlaintextBackendThroughRemoteProxy(t *testing.T) {
	tests := []struct {
		name  string
		proxy string
		code  int
		want  string
	}{
		{name: "loopback proxy", proxy: "socks5://127.0.0.1:1080"},
		{
			name: "remote TLS proxy", proxy: "https://proxy.example:3129", code: 1,
			want: `  backends[0].base_url: plaintext http:// backend, but egress proxy "p" (egress.proxies[0].url) is not on loopback: ` +
				"the request and its credential would leave this machine unencrypted; use https://, or only loopback egress proxies\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := trustConfig(t, dir, tt.proxy, `["127.0.0.1"]`)
			doc := writeJSON(t, filepath.Join(dir, "routes.json"), oneBackend("http://127.0.0.1:18080/v1"))
			code, stdout, stderr := runCmd(t, "", "check", "--routes", doc, "--config", cfg)
			if code != tt.code {
				t.Fatalf("exit code %d, want %d; stdout %q, stderr:\n%s", code, tt.code, stdout, stderr)
			}
			if tt.code != 0 {
				_, rest, _ := strings.Cut(stderr, "\n")
				if diff := cmp.Diff(rest, tt.want); diff != "" {
					t.Errorf("problems (-got +want):\n%s", diff)
				}
			}
		})
	}
}
