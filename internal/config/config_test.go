package config

import (
	"github.com/scootgate/scootgate/pkg/routesnap"

	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/secret"
)

const testdata = "../../testdata/config"

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseDevConfig(t *testing.T) {
	env := fakeEnv(map[string]string{
		"SCOOTGATE_DEV_OPENAI_KEY":    "dev-openai",
		"SCOOTGATE_DEV_ANTHROPIC_KEY": "dev-anthropic",
		"SCOOTGATE_DEV_GEMINI_KEY":    "dev-gemini",
		// Claude on Bedrock's demo keys.
		"SCOOTGATE_DEV_AWS_ACCESS_KEY_ID":     "dev-aws-id",
		"SCOOTGATE_DEV_AWS_SECRET_ACCESS_KEY": "dev-aws-secret",
		// Claude and Gemini on Vertex's demo service account.
		"SCOOTGATE_DEV_GCP_KEY": compactJSON(t, gcpKeyJSON(t, "https://127.0.0.1:18091/token")),
		// GPT on Azure OpenAI's demo api-key.
		"SCOOTGATE_DEV_AZURE_KEY": "dev-azure",
	})
	got, err := Parse(readTestdata(t, "dev.toml"), env, fakeFS(nil))
	if err != nil {
		t.Fatalf("Parse(dev.toml): %v", err)
	}
	// A minted credential holds its kind's material in Mint, not compared.
	if gcp := got.Credentials["fake-gcp"]; gcp.Mint == nil || !cmp.Equal(gcp.Hosts, []string{"127.0.0.1"}) {
		t.Errorf("fake-gcp: %+v, want a minted credential for 127.0.0.1", gcp)
	}
	delete(got.Credentials, "fake-gcp")
	want := Defaults()
	want.NodeID = "dev-1"
	want.Egress = Egress{Proxies: []Proxy{{Name: "dev-socks", URL: mustURL(t, "socks5://127.0.0.1:11090")}}, DialsPerProxy: 64}
	want.Credentials = map[string]credential.Credential{
		"fake-openai":    {Secret: secret.New("dev-openai"), Hosts: []string{"127.0.0.1"}},
		"fake-anthropic": {Secret: secret.New("dev-anthropic"), Hosts: []string{"127.0.0.1"}},
		"fake-gemini":    {Secret: secret.New("dev-gemini"), Hosts: []string{"127.0.0.1"}},
		"fake-azure":     {Secret: secret.New("dev-azure"), Hosts: []string{"127.0.0.1"}},
		"fake-aws": {Hosts: []string{"127.0.0.1"}, AWS: &credential.AWS{
			AccessKeyID: secret.New("dev-aws-id"), SecretAccessKey: secret.New("dev-aws-secret"), Region: "us-east-1"}},
	}
	// Backends and models come from the dev control plane's routing snapshot.
	want.ControlPlane.PollInterval = 2 * time.Second
	want.ControlPlane.LongPoll = 30 * time.Second
	want.Routes = Routes{Source: "http://127.0.0.1:18090/routes.json"}
	want.Authz = Authz{Source: "http://127.0.0.1:18090/authz.json"}
	want.MQTT.Broker = "tcp://127.0.0.1:11883"
	if diff := cmp.Diff(got, &want, cmpOpts); diff != "" {
		t.Errorf("Parse(dev.toml) (-got +want):\n%s", diff)
	}
}

func TestParseExampleConfig(t *testing.T) {
	env := fakeEnv(map[string]string{"OPENAI_API_KEY": "openai-key", "SG_PROXY_PASSWORD": "socks-pw", "SG_MQTT_PASSWORD": "mqtt-pw"})
	files := fakeFS(map[string]string{
		"/run/secrets/anthropic":       "anthropic-key\n",
		"/run/secrets/egress-password": "egress-pw\r\n",
	})
	got, err := Parse(readTestdata(t, "example.toml"), env, files)
	if err != nil {
		t.Fatalf("Parse(example.toml): %v", err)
	}
	want := Defaults()
	want.NodeID = "node-a"
	want.Egress = Egress{Proxies: []Proxy{
		{Name: "local-socks", URL: mustURL(t, "socks5://127.0.0.1:11080"), Username: "scootgate", Password: secret.New("socks-pw")},
		{Name: "egress-tls", URL: mustURL(t, "https://egress.internal.example:3129"), Username: "scootgate", Password: secret.New("egress-pw")},
	}, DialsPerProxy: 64}
	want.Credentials = map[string]credential.Credential{
		"openai-main":    {Secret: secret.New("openai-key"), Hosts: []string{"api.openai.com", "eu.api.openai.com"}},
		"anthropic-main": {Secret: secret.New("anthropic-key"), Hosts: []string{"api.anthropic.com"}},
	}
	want.Backends = []routesnap.Backend{
		{ID: "anthropic-1", Protocol: routesnap.ProtocolAnthropic, BaseURL: "https://api.anthropic.com/v1", Credential: "anthropic-main", MaxInflightPerNode: 128},
		{ID: "openai-1", Protocol: routesnap.ProtocolOpenAI, BaseURL: "https://api.openai.com/v1", Credential: "openai-main", MaxInflightPerNode: 256, IncludeUsage: new(true)},
	}
	want.Models = []routesnap.Model{
		{Name: "claude-*", Targets: []routesnap.Target{{Backend: "anthropic-1", Model: "claude-*", Weight: 1, Stream: true, Tools: true, JSONSchema: true}}},
		{Name: "claude-sonnet", Targets: []routesnap.Target{{Backend: "anthropic-1", Model: "claude-sonnet-4-5", Weight: 1, Stream: true, Tools: true, JSONSchema: true}}},
		{Name: "gpt-4o", Targets: []routesnap.Target{{Backend: "openai-1", Model: "gpt-4o-2024-08-06", Weight: 100, Stream: true, Tools: true,
			Price: &routesnap.Price{Input: "2.5", Output: "10", CacheRead: "1.25"}}}},
	}
	want.Authz = Authz{Source: "file:/etc/scootgate/authz.json"}
	want.MQTT.Broker, want.MQTT.Username, want.MQTT.Password = "tcp://127.0.0.1:1883", "scootgate", secret.New("mqtt-pw")
	if diff := cmp.Diff(got, &want, cmpOpts); diff != "" {
		t.Errorf("Parse(example.toml) (-got +want):\n%s", diff)
	}
}

// TestExampleSpellsOutDefaults keeps example.toml honest: every default it
// shows must be the real default.
func TestExampleSpellsOutDefaults(t *testing.T) {
	env := fakeEnv(map[string]string{"OPENAI_API_KEY": "k", "SG_PROXY_PASSWORD": "k", "SG_MQTT_PASSWORD": "k"})
	files := fakeFS(map[string]string{"/run/secrets/anthropic": "k", "/run/secrets/egress-password": "k"})
	got, err := Parse(readTestdata(t, "example.toml"), env, files)
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	type knobs struct {
		Listen   Listen
		Limits   Limits
		Timeouts Timeouts
		Drain    Drain
		Balance  Balance
		Breaker  Breaker
		Cooldown Cooldown
	}
	if diff := cmp.Diff(knobs{got.Listen, got.Limits, got.Timeouts, got.Drain, got.Balance, got.Breaker, got.Cooldown}, knobs{d.Listen, d.Limits, d.Timeouts, d.Drain, d.Balance, d.Breaker, d.Cooldown}, cmpOpts); diff != "" {
		t.Errorf("example.toml differs from Defaults() (-example +defaults):\n%s", diff)
	}
	if diff := cmp.Diff(got.Routes, d.Routes); diff != "" {
		t.Errorf("example.toml [routes] differs from Defaults() (-example +defaults):\n%s", diff)
	}
	cp := got.ControlPlane // the token has no default
	cp.Token = secret.Secret{}
	if diff := cmp.Diff(cp, d.ControlPlane, cmpOpts); diff != "" {
		t.Errorf("example.toml [control_plane] differs from Defaults() (-example +defaults):\n%s", diff)
	}
	m := got.MQTT // broker and credentials have no defaults
	m.Broker, m.Username, m.Password = "", "", secret.Secret{}
	if diff := cmp.Diff(m, d.MQTT, cmpOpts); diff != "" {
		t.Errorf("example.toml [mqtt] differs from Defaults() (-example +defaults):\n%s", diff)
	}
}

func TestDefaults(t *testing.T) {
	want := Config{
		Listen: Listen{API: "127.0.0.1:8080", Health: "127.0.0.1:8081"},
		Limits: Limits{
			BodyBytes: 33554432, MaxAttempts: 2,
			ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, SocketLifetime: time.Hour, MaxHeaderBytes: 65536, MaxConcurrentRequests: 10000, MaxUnauthenticatedPerClient: 256, ClientPenalty: 10 * time.Second, BodyReadTimeout: 2 * time.Minute, LingerTimeout: 5 * time.Second, ShedWait: 50 * time.Millisecond, ShedAfter: 100 * time.Millisecond, QueueWait: 10 * time.Second, LocalShare: 1,
			Store: StoreLocal, Redis: LimitsRedis{OnStoreFailure: OnStoreFailureLocal},
		},
		Egress: Egress{DialsPerProxy: 64},
		Timeouts: Timeouts{
			Connect: 10 * time.Second, FirstByte: 60 * time.Second, StreamIdle: 120 * time.Second,
			StreamProgress: 5 * time.Minute, StreamTotal: 30 * time.Minute,
			NonStreamTotal: 600 * time.Second, StreamKeepalive: 0,
		},
		Drain:    Drain{Delay: 0, Grace: 15 * time.Minute},
		Balance:  Balance{Algorithm: "weighted_p2c", SlowStart: 30 * time.Second, DefaultTTFB: time.Second, DecayWindow: 10 * time.Second, AffinityLoadFactor: 1.25},
		Breaker:  Breaker{Failures: 5, Cooldown: 5 * time.Second, MaxCooldown: 5 * time.Minute},
		Cooldown: Cooldown{RateLimitDefault: 5 * time.Second, RateLimitMax: time.Minute, Quota: 30 * time.Minute, DisabledProbe: 10 * time.Minute},
		MQTT:     MQTT{Topic: "scootgate/usage", Window: 1024, BatchMax: 1, MaxPayload: 262144, KeepAlive: 30 * time.Second, ConnectTimeout: 10 * time.Second},
		Usage:    Usage{Enabled: true, OutboxPath: "scootgate-outbox.db", MaxEvents: 100000, MaxBytes: 268435456, CommitInterval: 100 * time.Millisecond, CrashWindowEvents: 4096, CrashWindow: 3 * time.Second, OpenAIIncludeUsage: true},
		Tracing:  Tracing{SampleRatio: 1, Interval: 5 * time.Second},
		Realtime: Realtime{FrameBytes: 16 << 20, IdleTimeout: 5 * time.Minute, MaxDuration: time.Hour},

		ControlPlane: ControlPlane{PollInterval: 10 * time.Second, LongPollSilence: 10 * time.Second, StaleAfter: 5 * time.Minute, StateDir: "scootgate-state"},
		Routes:       Routes{Source: "static"},
	}
	if diff := cmp.Diff(Defaults(), want, cmpOpts); diff != "" {
		t.Errorf("Defaults() (-got +want):\n%s", diff)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := pems()
	for name, content := range map[string]string{
		"secrets/openai": "file-key\n",
		"ca.pem":         p.cert,
		"tls/cert.pem":   p.cert,
		"tls/key.pem":    p.key,
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SCOOTGATE_CONFIG_TEST_PW", "proxy-pw")
	doc := `node_id = "n1"
[listen]
api = "0.0.0.0:8443"
tls_cert_file = "tls/cert.pem"
tls_key_file = "tls/key.pem"
[[egress.proxies]]
name = "p1"
url = "https://proxy.example.com:3129"
username = "u"
password = { env = "SCOOTGATE_CONFIG_TEST_PW" }
ca_file = "ca.pem"
[egress.provider_tls]
ca_file = "ca.pem"
[credentials.c1]
file = "secrets/openai"
hosts = ["api.example.com"]
[backends.b1]
protocol = "openai"
base_url = "https://api.example.com/v1/"
credential = "c1"
max_inflight_per_node = 8
[[models.m1.targets]]
backend = "b1"
model = "real-1"
weight = 1
[authz]
source = "file:authz.json"
`
	cfgPath := filepath.Join(dir, "node.toml")
	if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Load(cfgPath)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	type view struct {
		Listen      Listen
		Egress      Egress
		Credentials map[string]credential.Credential
		BaseURL     string
		Authz       Authz
	}
	want := view{
		Listen: Listen{
			API: "0.0.0.0:8443", Health: "127.0.0.1:8081",
			TLSCertFile: filepath.Join(dir, "tls/cert.pem"), TLSKeyFile: filepath.Join(dir, "tls/key.pem"),
		},
		Egress: Egress{
			Proxies: []Proxy{{
				Name: "p1", URL: mustURL(t, "https://proxy.example.com:3129"), Username: "u",
				Password: secret.New("proxy-pw"), CAFile: filepath.Join(dir, "ca.pem"),
			}},
			ProviderCAFile: filepath.Join(dir, "ca.pem"), DialsPerProxy: 64,
		},
		Credentials: map[string]credential.Credential{"c1": {Secret: secret.New("file-key"), Hosts: []string{"api.example.com"}}},
		BaseURL:     "https://api.example.com/v1/",
		Authz:       Authz{Source: "file:" + filepath.Join(dir, "authz.json")},
	}
	gotView := view{got.Listen, got.Egress, got.Credentials, got.Backends[0].BaseURL, got.Authz}
	if diff := cmp.Diff(gotView, want, cmpOpts); diff != "" {
		t.Errorf("Load (-got +want):\n%s", diff)
	}
}

// TestLoadDev loads the `make run` config from disk, as the dev binary will.
func TestLoadDev(t *testing.T) {
	t.Setenv("SCOOTGATE_DEV_OPENAI_KEY", "dev-openai")
	t.Setenv("SCOOTGATE_DEV_ANTHROPIC_KEY", "dev-anthropic")
	t.Setenv("SCOOTGATE_DEV_GEMINI_KEY", "dev-gemini")
	t.Setenv("SCOOTGATE_DEV_AWS_ACCESS_KEY_ID", "dev-aws-id")
	t.Setenv("SCOOTGATE_DEV_AWS_SECRET_ACCESS_KEY", "dev-aws-secret")
	t.Setenv("SCOOTGATE_DEV_GCP_KEY", compactJSON(t, gcpKeyJSON(t, "https://127.0.0.1:18091/token")))
	t.Setenv("SCOOTGATE_DEV_AZURE_KEY", "dev-azure")
	c, err := Load(filepath.Join(testdata, "dev.toml"))
	if err != nil {
		t.Fatalf("Load(dev.toml): %v", err)
	}
	dir, err := filepath.Abs(testdata)
	if err != nil {
		t.Fatal(err)
	}
	// http sources stay as written; relative paths resolve against the file.
	if diff := cmp.Diff(c.Authz.Source, "http://127.0.0.1:18090/authz.json"); diff != "" {
		t.Errorf("authz source (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(c.ControlPlane.StateDir, filepath.Join(dir, "scootgate-state")); diff != "" {
		t.Errorf("state dir (-got +want):\n%s", diff)
	}
}

// TestLoadRelativePath: a relative config path still yields absolute paths.
func TestLoadRelativePath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k"), []byte("k1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := edit(t, base, credEnv, `file = "k"`, authzSource, `source = "file:authz.json"`)
	if err := os.WriteFile(filepath.Join(dir, "node.toml"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	c, err := Load("node.toml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(c.Authz.Source, "file:"+filepath.Join(dir, "authz.json")); diff != "" {
		t.Errorf("authz source (-got +want):\n%s", diff)
	}
	if c.Credentials["c1"].Secret.Reveal() != "k1" {
		t.Errorf("credential c1 was not read from the relative file")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.toml")
	if _, err := Load(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want an error wrapping os.ErrNotExist", err)
	}

	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("node_id = \"n1\"\nbogus = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(bad)
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("Load(bad) = %v, want a *config.Error", err)
	}
	if !strings.HasPrefix(err.Error(), "config "+bad+": ") {
		t.Errorf("Load(bad) error %q does not name the file", err)
	}
	if !strings.Contains(err.Error(), "\nbogus: unknown key") {
		t.Errorf("Load(bad) error %q does not list the unknown key on its own line", err)
	}
}

func TestErrorString(t *testing.T) {
	e := &Error{Problems: []Problem{
		{Path: "node_id", Msg: "missing"},
		{Path: `models."gpt 4".targets[2].weight`, Msg: "0 is out of range"},
		{Msg: "whole file"},
	}}
	want := "node_id: missing\n" + `models."gpt 4".targets[2].weight: 0 is out of range` + "\nwhole file"
	if diff := cmp.Diff(e.Error(), want); diff != "" {
		t.Errorf("Error() (-got +want):\n%s", diff)
	}
}

// TestInvalidFiles is the golden table for testdata/config/invalid: each
// file fails with exactly these problems.
func TestInvalidFiles(t *testing.T) {
	env := fakeEnv(map[string]string{"OPENAI_API_KEY": "k", "GEMINI_API_KEY": "k", "SG_PROXY_PASSWORD": "pw"})
	tests := []struct {
		file string
		want []Problem
	}{
		{
			file: "unknown-key.toml",
			want: []Problem{
				{"listen.helth", "unknown key; expected one of: api, health, insecure_plaintext, tls_cert_file, tls_key_file"},
				{"egress.proxies[0].timeout", "unknown key; expected one of: ca_file, name, password, url, username"},
				{`models."gpt 4".targets[0].wieght`, "unknown key; expected one of: backend, context_window, json_schema, max_output_tokens, model, price, stream, tier, tools, weight"},
				{"nodeid", "unknown key; expected one of: authz, backends, balance, breaker, control_plane, cooldown, credentials, drain, egress, limits, listen, models, mqtt, node_id, realtime, routes, timeouts, tracing, usage"},
			},
		},
		{
			file: "bad-url.toml",
			want: []Problem{
				{"backends.ftp.base_url", "expected an https:// URL (http:// only for a loopback host)"},
				{"backends.no-scheme.base_url", "expected an https:// URL (http:// only for a loopback host)"},
				{"backends.query.base_url", "must not have a query or fragment"},
				{"backends.userinfo.base_url", "must not contain user info; the backend's credential is named by credential"},
			},
		},
		{
			file: "plaintext-non-loopback.toml",
			want: []Problem{
				{"egress.proxies[0].password", "would cross the network in cleartext to a non-loopback proxy; use an https:// proxy URL (TLS to the proxy) or a proxy on a loopback address"},
				{"egress.proxies[0].url", "plaintext http:// proxy on a non-loopback address: the connection to it is unencrypted; use an https:// proxy (TLS to the proxy), a proxy on loopback, or set egress.insecure_plaintext_proxy = true (docs/egress.md)"},
				{"backends.openai-1.base_url", "plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https:// (docs/egress.md)"},
			},
		},
		{
			file: "plaintext-remote-proxy.toml",
			want: []Problem{
				{"egress.proxies[1].url", "plaintext socks5:// proxy on a non-loopback address: the connection to it is unencrypted; use an https:// proxy (TLS to the proxy), a proxy on loopback, or set egress.insecure_plaintext_proxy = true (docs/egress.md)"},
				{"backends.local.base_url", `plaintext http:// backend, but egress proxy "lan-socks" (egress.proxies[1].url) is not on loopback: the request and its credential would leave this machine unencrypted; use https://, or only loopback egress proxies`},
			},
		},
		{
			file: "credential-hosts.toml",
			want: []Problem{
				{"credentials.empty-hosts.hosts", "empty; expected at least one host this credential may be sent to"},
				{"credentials.no-hosts.hosts", `missing; expected the hosts this credential may be sent to, like ["api.openai.com", "*.openai.azure.com"] (docs/egress.md)`},
				{"credentials.openai-main.hosts[1]", "duplicate of hosts[0]"},
				{"credentials.openai-main.hosts[2]", `"*.com" would match every name under the public suffix "com", which anyone can register; list the hosts, or a wildcard under a domain its owner controls`},
				{"credentials.openai-main.hosts[3]", `"api.*.com": a wildcard is only allowed as a whole first label, "*.example.com"`},
				{"credentials.openai-main.hosts[4]", `"https://api.openai.com" is not a host name; write the host alone, without scheme or path`},
				{"credentials.openai-main.hosts[5]", `"api.openai.com:443": expected a host name without a port (a listed host may be reached on any port)`},
				{"credentials.openai-main.hosts[6]", `"bücher.example": write an internationalised name in punycode ("xn--…"), as base_url does`},
				{"credentials.openai-main.hosts[7]", `empty; expected a host name like "api.openai.com"`},
				{"backends.mispaired.credential", `backend "mispaired" sends credential "anthropic-main" to host "api.openai.com", which the node's credentials.anthropic-main.hosts does not list`},
			},
		},
		{
			file: "missing-credential.toml",
			want: []Problem{
				{"credentials.openai-main.env", `secret: environment variable "SCOOTGATE_TEST_SURELY_UNSET" is unset`},
				{"backends.openai-1.credential", `unknown credential "openai-typo"; this node's [credentials] does not define it`},
			},
		},
		{
			file: "bad-endpoints.toml",
			want: []Problem{
				{"backends.anthropic-1.endpoints[1]", "expected a string, got an integer"},
				{"backends.empty.endpoints", "must list at least one endpoint, or be left out for the protocol's default"},
				{"backends.openai-1.endpoints[1]", `unknown endpoint "count_tokens" for protocol "openai"; expected one of chat_completions, responses, embeddings, responses_compact, responses_input_tokens, completions, rerank, audio_speech, audio_transcriptions, audio_translations, image_generations, image_edits, realtime`},
				{"backends.openai-1.endpoints[2]", "duplicate of endpoints[0]"},
			},
		},
		{
			file: "bad-patterns.toml",
			want: []Problem{
				{`models."claude-*-latest"`, `"*" may appear only once, as the last character (a pattern: a literal prefix followed by "*")`},
				{"models.gpt-4o.targets[0].model", `"*" stands for what a pattern's star matched, and this model's name is no pattern (a name that ends in "*")`},
				{`models."openai/*".targets[0].model`, `"*" may appear only once (it stands for what the pattern's star matched)`},
			},
		},
		{
			file: "gemini-names.toml",
			want: []Problem{
				{"models.gemini-tuned.targets[0].model", "a gemini backend is sent {base_url}/models/{model}:{method}; the model must be " + routesnap.GeminiNameRule},
				{`models."google/gemini-pro"`, "a model with a gemini target is called at /v1beta/models/{model}:{method}; the name must be " + routesnap.GeminiNameRule},
			},
		},
		{
			file: "bad-weight.toml",
			want: []Problem{
				{`models."gpt 4".targets[1].weight`, "expected an integer, got a float"},
				{`models."gpt 4".targets[0].weight`, "must be 1..1000000, got 0"},
				{`models."gpt 4".targets[2].weight`, "must be 1..1000000, got -3"},
				{`models."gpt 4".targets[3].backend`, `unknown backend "openai-9"`},
				{`models."gpt 4".targets[3].weight`, "must be 1..1000000, got 1000001"},
			},
		},
	}
	seen := map[string]bool{"syntax-error.toml": true} // TestSyntaxError
	for _, tt := range tests {
		seen[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			_, err := Parse(readTestdata(t, "invalid/"+tt.file), env, fakeFS(nil))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Parse = %v, want a *config.Error", err)
			}
			if diff := cmp.Diff(cerr.Problems, tt.want); diff != "" {
				t.Errorf("problems (-got +want):\n%s", diff)
			}
		})
	}
	files, err := filepath.Glob(filepath.Join(testdata, "invalid", "*.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s has no expectation in TestInvalidFiles", f)
		}
	}
}

func TestSyntaxError(t *testing.T) {
	tests := []struct {
		name     string
		doc      []byte
		wantLine int
		wantCol  int
		wantMsg  string
	}{
		{
			name: "testdata file", doc: readTestdata(t, "invalid/syntax-error.toml"), wantLine: 5, wantCol: 22,
			wantMsg: "toml syntax error at line 5, column 22: strings cannot contain newlines",
		},
		{
			name: "duplicate key", doc: []byte("node_id = \"a\"\nnode_id = \"b\"\n"), wantLine: 2, wantCol: 15,
			wantMsg: "toml syntax error at line 2, column 15: Key 'node_id' has already been defined.",
		},
		{
			name: "missing value", doc: []byte("a = 1\n  b = = 2\n"), wantLine: 2, wantCol: 7,
			wantMsg: "toml syntax error at line 2, column 7: expected value but found '=' instead",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.doc, fakeEnv(nil), fakeFS(nil))
			var serr *SyntaxError
			if !errors.As(err, &serr) {
				t.Fatalf("Parse = %v, want a *config.SyntaxError", err)
			}
			var perr toml.ParseError
			if !errors.As(err, &perr) {
				t.Errorf("errors.As(err, *toml.ParseError) = false")
			}
			type pos struct{ Line, Col int }
			if diff := cmp.Diff(pos{serr.Line, serr.Column}, pos{tt.wantLine, tt.wantCol}); diff != "" {
				t.Errorf("position (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(err.Error(), tt.wantMsg); diff != "" {
				t.Errorf("message (-got +want):\n%s", diff)
			}
		})
	}
}

// TestCredentialControlCharacter: a credential value holding a control
// character (a secret file with a second line, a variable with a newline)
// is refused at load, at the credential's own key, without the value.
func TestCredentialControlCharacter(t *testing.T) {
	const value = "sk-canary-second-line"
	env := fakeEnv(map[string]string{"OPENAI_API_KEY": value + "\n", "SG_PROXY_PASSWORD": "k", "SG_MQTT_PASSWORD": "k"})
	files := fakeFS(map[string]string{"/run/secrets/anthropic": value + "\nleftover\n", "/run/secrets/egress-password": "k"})
	_, err := Parse(readTestdata(t, "example.toml"), env, files)
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("Parse = %v, want a *config.Error", err)
	}
	want := map[string]string{
		"credentials.openai-main.env":     `secret: environment variable "OPENAI_API_KEY" contains a control character (U+000A); a credential is one line of printable characters`,
		"credentials.anthropic-main.file": `secret: file "/run/secrets/anthropic" contains a control character (U+000A) after its one trailing newline is trimmed; a credential is one line of printable characters (a second line?)`,
	}
	got := map[string]string{}
	for _, p := range cerr.Problems {
		got[p.Path] = p.Msg
		if strings.Contains(p.Msg, value) {
			t.Errorf("problem %s quotes the credential value", p.Path)
		}
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("problems (-got +want):\n%s", diff)
	}
}
