package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// base is the smallest valid document; each rule case edits it.
const base = `node_id = "n1"

[[egress.proxies]]
name = "p1"
url = "socks5://127.0.0.1:1080"

[credentials.c1]
env = "C1"
hosts = ["api.example.com", "x.example", "127.0.0.1", "127.0.0.2", "localhost", "::1"]

[backends.b1]
protocol = "openai"
base_url = "https://api.example.com/v1"
credential = "c1"
max_inflight_per_node = 8

[models.m1]
[[models.m1.targets]]
backend = "b1"
model = "real-1"
weight = 1

[authz]
source = "file:/authz.json"
`

// Anchors in base that cases edit.
const (
	nodeLine    = `node_id = "n1"`
	proxyName   = `name = "p1"`
	proxyURL    = `url = "socks5://127.0.0.1:1080"`
	credEnv     = `env = "C1"`
	credHosts   = `hosts = ["api.example.com", "x.example", "127.0.0.1", "127.0.0.2", "localhost", "::1"]`
	backendBase = `base_url = "https://api.example.com/v1"`
	backendProt = `protocol = "openai"`
	backendCred = `credential = "c1"`
	backendCap  = `max_inflight_per_node = 8`
	modelHeader = "[models.m1]\n[[models.m1.targets]]"
	targetBack  = `backend = "b1"`
	targetModel = `model = "real-1"`
	targetWt    = `weight = 1`
	authzSource = `source = "file:/authz.json"`
	authzTable  = "[authz]\n" + `source = "file:/authz.json"`
)

func ruleEnv() func(string) (string, bool) {
	return fakeEnv(map[string]string{
		"C1": "k1", "C2": "k2", "EMPTY": "", "PROXY_PW": "pw",
		"LONG_PW": strings.Repeat("p", 256),
	})
}

func ruleFS() func(string) ([]byte, error) {
	p := pems()
	return fakeFS(map[string]string{
		"/ca.pem":            p.cert,
		"/junk.pem":          "not a certificate",
		"/tls/cert.pem":      p.cert,
		"/tls/key.pem":       p.key,
		"/tls/other-key.pem": p.otherKey,
		"/secret/crlf":       "file-secret\r\n",
		"/secret/nl":         "\n",
	})
}

type ruleCase struct {
	name  string
	edits []string // old, new pairs applied to base
	add   string   // appended to the document
	want  []Problem
	// For valid documents: view picks the part of the Config to compare
	// with wantView.
	view     func(*Config) any
	wantView any
}

func runRules(t *testing.T, tests []ruleCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := edit(t, base, tt.edits...) + tt.add
			c, err := Parse([]byte(doc), ruleEnv(), ruleFS())
			if tt.want != nil {
				var cerr *Error
				if !errors.As(err, &cerr) {
					t.Fatalf("Parse = %v, want a *config.Error", err)
				}
				if diff := cmp.Diff(cerr.Problems, tt.want); diff != "" {
					t.Errorf("problems (-got +want):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tt.view == nil {
				t.Fatalf("test case checks nothing: set want or view")
			}
			if diff := cmp.Diff(tt.view(c), tt.wantView, cmpOpts); diff != "" {
				t.Errorf("config (-got +want):\n%s", diff)
			}
		})
	}
}

func TestRulesNodeAndRoot(t *testing.T) {
	runRules(t, []ruleCase{
		{name: "valid base", view: func(c *Config) any { return c.NodeID }, wantView: "n1"},
		{
			name: "node id charset and length", edits: []string{nodeLine, `node_id = "` + strings.Repeat("a", 64) + `"`},
			view: func(c *Config) any { return len(c.NodeID) }, wantView: 64,
		},
		{
			name: "node id missing", edits: []string{nodeLine, ""},
			want: []Problem{{"node_id", "missing; expected 1-64 characters from [A-Za-z0-9._-]"}},
		},
		{
			name: "node id with space", edits: []string{nodeLine, `node_id = "node a"`},
			want: []Problem{{"node_id", "invalid node id; expected 1-64 characters from [A-Za-z0-9._-]"}},
		},
		{
			name: "node id too long", edits: []string{nodeLine, `node_id = "` + strings.Repeat("a", 65) + `"`},
			want: []Problem{{"node_id", "invalid node id; expected 1-64 characters from [A-Za-z0-9._-]"}},
		},
		{
			name: "node id empty", edits: []string{nodeLine, `node_id = ""`},
			want: []Problem{{"node_id", "invalid node id; expected 1-64 characters from [A-Za-z0-9._-]"}},
		},
		{
			name: "node id wrong type", edits: []string{nodeLine, `node_id = 5`},
			want: []Problem{{"node_id", "expected a string, got an integer"}},
		},
		{
			name: "section wrong type", edits: []string{nodeLine, nodeLine + "\nlimits = 5"},
			want: []Problem{{"limits", "expected a table, got an integer"}},
		},
		{
			name: "unknown section", add: "[listn]\napi = \"x\"\n",
			want: []Problem{{"listn", "unknown key; expected one of: authz, backends, balance, breaker, control_plane, cooldown, credentials, drain, egress, limits, listen, models, mqtt, node_id, realtime, routes, timeouts, tracing, usage"}},
		},
		{
			name: "every problem is reported, in a fixed order",
			edits: []string{
				nodeLine, `node_id = "bad id"`,
				backendCap, "max_inflight_per_node = 0",
				targetWt, "weight = 0",
			},
			add: "[limits]\nmax_attempts = 9\n",
			want: []Problem{
				{"node_id", "invalid node id; expected 1-64 characters from [A-Za-z0-9._-]"},
				{"limits.max_attempts", "9 is out of range; expected 1..5"},
				{"backends.b1.max_inflight_per_node", "must be 1..100000, got 0"},
				{"models.m1.targets[0].weight", "must be 1..1000000, got 0"},
			},
		},
	})
}

func TestRulesListen(t *testing.T) {
	listen := func(c *Config) any { return c.Listen }
	runRules(t, []ruleCase{
		{
			name: "defaults", view: listen,
			wantView: Listen{API: "127.0.0.1:8080", Health: "127.0.0.1:8081"},
		},
		{
			name: "loopback names and port zero", add: "[listen]\napi = \"localhost:0\"\nhealth = \"[::1]:0\"\n", view: listen,
			wantView: Listen{API: "localhost:0", Health: "[::1]:0"},
		},
		{
			name: "no port", add: "[listen]\napi = \"127.0.0.1\"\n",
			want: []Problem{{"listen.api", `expected host:port with a numeric port, like "127.0.0.1:8080" or ":8080", got "127.0.0.1"`}},
		},
		{
			name: "port out of range", add: "[listen]\nhealth = \"127.0.0.1:65536\"\n",
			want: []Problem{{"listen.health", `expected host:port with a numeric port, like "127.0.0.1:8080" or ":8080", got "127.0.0.1:65536"`}},
		},
		{
			name: "health equals api", add: "[listen]\napi = \"127.0.0.1:9000\"\nhealth = \"127.0.0.1:9000\"\n",
			want: []Problem{{"listen.health", "must differ from listen.api (the health listener is separate, docs/operations.md)"}},
		},
		{
			name: "health on all interfaces collides with api port", add: "[listen]\napi = \"127.0.0.1:9000\"\nhealth = \":9000\"\n",
			want: []Problem{{"listen.health", "must differ from listen.api (the health listener is separate, docs/operations.md)"}},
		},
		{
			name: "same port, different hosts", add: "[listen]\napi = \"127.0.0.1:9000\"\nhealth = \"127.0.0.2:9000\"\n", view: listen,
			wantView: Listen{API: "127.0.0.1:9000", Health: "127.0.0.2:9000"},
		},
		{
			name: "plaintext on all interfaces", add: "[listen]\napi = \":8080\"\n",
			want: []Problem{{"listen.api", "plaintext API listener on a non-loopback address; set listen.tls_cert_file and listen.tls_key_file, " +
				"or listen.insecure_plaintext = true when TLS is terminated in front of the node (docs/operations.md)"}},
		},
		{
			name: "plaintext on a public address", add: "[listen]\napi = \"192.0.2.1:8080\"\n",
			want: []Problem{{"listen.api", "plaintext API listener on a non-loopback address; set listen.tls_cert_file and listen.tls_key_file, " +
				"or listen.insecure_plaintext = true when TLS is terminated in front of the node (docs/operations.md)"}},
		},
		{
			name: "plaintext with explicit opt-in", add: "[listen]\napi = \"0.0.0.0:8080\"\ninsecure_plaintext = true\n", view: listen,
			wantView: Listen{API: "0.0.0.0:8080", Health: "127.0.0.1:8081", InsecurePlaintext: true},
		},
		{
			name: "TLS", add: "[listen]\napi = \"0.0.0.0:8443\"\ntls_cert_file = \"/tls/cert.pem\"\ntls_key_file = \"/tls/key.pem\"\n", view: listen,
			wantView: Listen{API: "0.0.0.0:8443", Health: "127.0.0.1:8081", TLSCertFile: "/tls/cert.pem", TLSKeyFile: "/tls/key.pem"},
		},
		{
			name: "TLS cert without key", add: "[listen]\ntls_cert_file = \"/tls/cert.pem\"\n",
			want: []Problem{{"listen.tls_key_file", "missing; set together with listen.tls_cert_file"}},
		},
		{
			name: "TLS key without cert", add: "[listen]\ntls_key_file = \"/tls/key.pem\"\n",
			want: []Problem{{"listen.tls_cert_file", "missing; set together with listen.tls_key_file"}},
		},
		{
			name: "TLS key does not match", add: "[listen]\ntls_cert_file = \"/tls/cert.pem\"\ntls_key_file = \"/tls/other-key.pem\"\n",
			want: []Problem{{"listen.tls_cert_file", "not a usable PEM certificate and key pair: tls: private key does not match public key"}},
		},
		{
			name: "TLS files missing", add: "[listen]\ntls_cert_file = \"/nope/cert.pem\"\ntls_key_file = \"/nope/key.pem\"\n",
			want: []Problem{
				{"listen.tls_cert_file", "cannot read: open /nope/cert.pem: file does not exist"},
				{"listen.tls_key_file", "cannot read: open /nope/key.pem: file does not exist"},
			},
		},
		{
			name: "TLS and opt-in conflict", add: "[listen]\ntls_cert_file = \"/tls/cert.pem\"\ntls_key_file = \"/tls/key.pem\"\ninsecure_plaintext = true\n",
			want: []Problem{{"listen.insecure_plaintext", "conflicts with listen.tls_cert_file; remove one"}},
		},
		{
			name: "wrong types", add: "[listen]\napi = 8080\ninsecure_plaintext = \"yes\"\n",
			want: []Problem{
				{"listen.api", "expected a string, got an integer"},
				{"listen.insecure_plaintext", "expected a boolean, got a string"},
			},
		},
	})
}

func TestRulesLimitsTimeoutsDrainBalance(t *testing.T) {
	runRules(t, []ruleCase{
		{
			name: "limits in range", add: "[limits]\nbody_bytes = 1024\nmax_attempts = 5\n",
			view: func(c *Config) any { return c.Limits }, wantView: withLimits(1024, 5),
		},
		{
			name: "limits upper bounds", add: "[limits]\nbody_bytes = 1073741824\nmax_attempts = 1\n",
			view: func(c *Config) any { return c.Limits }, wantView: withLimits(1<<30, 1),
		},
		{
			name: "limits out of range", add: "[limits]\nbody_bytes = 1023\nmax_attempts = 0\n",
			want: []Problem{
				{"limits.body_bytes", "1023 is out of range; expected 1024..1073741824"},
				{"limits.max_attempts", "0 is out of range; expected 1..5"},
			},
		},
		{
			name: "body bytes too large", add: "[limits]\nbody_bytes = 1073741825\n",
			want: []Problem{{"limits.body_bytes", "1073741825 is out of range; expected 1024..1073741824"}},
		},
		{
			name: "body bytes as a string", add: "[limits]\nbody_bytes = \"32MiB\"\n",
			want: []Problem{{"limits.body_bytes", "expected an integer, got a string"}},
		},
		{
			name: "timeouts", add: "[timeouts]\nconnect = \"1s\"\nfirst_byte = \"2s\"\nstream_idle = \"3s\"\nnon_stream_total = \"4s\"\nstream_keepalive = \"2s\"\n",
			view: func(c *Config) any { return c.Timeouts },
			wantView: Timeouts{
				Connect: time.Second, FirstByte: 2 * time.Second, StreamIdle: 3 * time.Second,
				StreamProgress: 5 * time.Minute, StreamTotal: 30 * time.Minute,
				NonStreamTotal: 4 * time.Second, StreamKeepalive: 2 * time.Second,
			},
		},
		{
			name: "stream bounds", add: "[timeouts]\nstream_progress = \"1m\"\nstream_total = \"2h\"\n",
			view: func(c *Config) any { return c.Timeouts },
			wantView: Timeouts{
				Connect: 10 * time.Second, FirstByte: time.Minute, StreamIdle: 2 * time.Minute,
				StreamProgress: time.Minute, StreamTotal: 2 * time.Hour, NonStreamTotal: 10 * time.Minute,
			},
		},
		{
			name: "stream progress follows a longer idle", add: "[timeouts]\nstream_idle = \"7m\"\n",
			view: func(c *Config) any { return c.Timeouts },
			wantView: Timeouts{
				Connect: 10 * time.Second, FirstByte: time.Minute, StreamIdle: 7 * time.Minute,
				StreamProgress: 7 * time.Minute, StreamTotal: 30 * time.Minute, NonStreamTotal: 10 * time.Minute,
			},
		},
		{
			name: "timeout without unit", add: "[timeouts]\nconnect = \"10\"\n",
			want: []Problem{{"timeouts.connect", `expected a Go duration like "10s" or "15m", got "10"`}},
		},
		{
			name: "timeout as an integer", add: "[timeouts]\nfirst_byte = 10\n",
			want: []Problem{{"timeouts.first_byte", "expected a string, got an integer"}},
		},
		{
			name: "zero and negative timeouts", add: "[timeouts]\nstream_idle = \"0s\"\nnon_stream_total = \"-1s\"\n",
			want: []Problem{
				{"timeouts.stream_idle", "0s is too small; expected at least 1ms"},
				{"timeouts.non_stream_total", "-1s is too small; expected at least 1ms"},
			},
		},
		{
			name: "keepalive too small", add: "[timeouts]\nstream_keepalive = \"500ms\"\n",
			want: []Problem{{"timeouts.stream_keepalive", "500ms is too small; expected 0 (off) or at least 1s"}},
		},
		{
			name: "keepalive not shorter than idle", add: "[timeouts]\nstream_keepalive = \"2m\"\n",
			want: []Problem{{"timeouts.stream_keepalive", "2m0s must be shorter than timeouts.stream_idle (2m0s)"}},
		},
		{
			name: "drain", add: "[drain]\ndelay = \"5s\"\ngrace = \"0s\"\n",
			view: func(c *Config) any { return c.Drain }, wantView: Drain{Delay: 5 * time.Second},
		},
		{
			name: "negative drain", add: "[drain]\ndelay = \"-5s\"\ngrace = \"-1m\"\n",
			want: []Problem{
				{"drain.delay", "-5s is too small; expected at least 0s"},
				{"drain.grace", "-1m0s is too small; expected at least 0s"},
			},
		},
		{
			name: "weighted_random accepted", add: "[balance]\nalgorithm = \"weighted_random\"\n",
			view: func(c *Config) any { return c.Balance.Algorithm }, wantView: AlgorithmWeightedRandom,
		},
		{
			name: "unknown algorithm", add: "[balance]\nalgorithm = \"p2c\"\n",
			want: []Problem{{"balance.algorithm", `unknown algorithm "p2c"; expected "weighted_random" or "weighted_p2c"`}},
		},
	})
}

func TestRulesEgress(t *testing.T) {
	proxies := func(c *Config) any { return c.Egress }
	const cleartext = "would cross the network in cleartext to a non-loopback proxy; use an https:// proxy URL (TLS to the proxy) or a proxy on a loopback address"
	const optIn = "[egress]\ninsecure_plaintext_proxy = true\n"
	plainProxy := func(scheme string) string {
		return "plaintext " + scheme + ":// proxy on a non-loopback address: the connection to it is unencrypted; " +
			"use an https:// proxy (TLS to the proxy), a proxy on loopback, or set egress.insecure_plaintext_proxy = true (docs/egress.md)"
	}
	runRules(t, []ruleCase{
		{
			name: "several proxies in order", view: proxies, edits: []string{"[[egress.proxies]]\n" + proxyName, optIn + "[[egress.proxies]]\n" + proxyName},
			add: "[[egress.proxies]]\nname = \"p2\"\nurl = \"https://proxy.example.com:3129/\"\nusername = \"u\"\npassword = { env = \"PROXY_PW\" }\nca_file = \"/ca.pem\"\n" +
				"[[egress.proxies]]\nname = \"p3\"\nurl = \"http://proxy.example.com:3128\"\n" +
				"[egress.provider_tls]\nca_file = \"/ca.pem\"\n",
			wantView: Egress{
				Proxies: []Proxy{
					{Name: "p1", URL: mustURL(t, "socks5://127.0.0.1:1080")},
					{Name: "p2", URL: mustURL(t, "https://proxy.example.com:3129"), Username: "u", Password: secret.New("pw"), CAFile: "/ca.pem"},
					{Name: "p3", URL: mustURL(t, "http://proxy.example.com:3128")},
				},
				ProviderCAFile:         "/ca.pem",
				InsecurePlaintextProxy: true,
				DialsPerProxy:          64,
			},
		},
		{
			name: "dials_per_proxy", edits: []string{"[[egress.proxies]]\n" + proxyName, "[egress]\ndials_per_proxy = 8\n[[egress.proxies]]\n" + proxyName},
			view: func(c *Config) any { return c.Egress.DialsPerProxy }, wantView: 8,
		},
		{
			name: "dials_per_proxy out of range", edits: []string{"[[egress.proxies]]\n" + proxyName, "[egress]\ndials_per_proxy = 0\n[[egress.proxies]]\n" + proxyName},
			want: []Problem{{"egress.dials_per_proxy", "0 is out of range; expected 1..100000"}},
		},
		{
			name:  "plaintext proxy off loopback",
			edits: []string{proxyURL, `url = "socks5://10.0.0.5:1080"`},
			want:  []Problem{{"egress.proxies[0].url", plainProxy("socks5")}},
		},
		{
			name:  "plaintext proxy off loopback by name",
			edits: []string{proxyURL, `url = "http://proxy.internal:3128"`},
			want:  []Problem{{"egress.proxies[0].url", plainProxy("http")}},
		},
		{
			name: "plaintext proxy off loopback with the opt-in", view: proxies,
			edits:    []string{proxyURL, `url = "socks5://10.0.0.5:1080"`, "[[egress.proxies]]\n" + proxyName, optIn + "[[egress.proxies]]\n" + proxyName},
			wantView: Egress{Proxies: []Proxy{{Name: "p1", URL: mustURL(t, "socks5://10.0.0.5:1080")}}, InsecurePlaintextProxy: true, DialsPerProxy: 64},
		},
		{
			name: "the opt-in does not let a password cross in cleartext",
			edits: []string{proxyURL, `url = "socks5://10.0.0.5:1080"` + "\nusername = \"u\"\npassword = { env = \"PROXY_PW\" }",
				"[[egress.proxies]]\n" + proxyName, optIn + "[[egress.proxies]]\n" + proxyName},
			want: []Problem{{"egress.proxies[0].password", cleartext}},
		},
		{
			name: "the opt-in is a boolean", edits: []string{"[[egress.proxies]]\n" + proxyName, "[egress]\ninsecure_plaintext_proxy = \"yes\"\n[[egress.proxies]]\n" + proxyName},
			want: []Problem{{"egress.insecure_plaintext_proxy", "expected a boolean, got a string"}},
		},
		{
			name: "http:// backend through a loopback proxy", view: func(c *Config) any { return c.Backends[0].BaseURL },
			edits:    []string{backendBase, `base_url = "http://127.0.0.1:18080/v1"`},
			wantView: "http://127.0.0.1:18080/v1",
		},
		{
			name: "http:// backend through a TLS proxy off loopback",
			edits: []string{backendBase, `base_url = "http://127.0.0.1:18080/v1"`,
				proxyURL, proxyURL + "\n[[egress.proxies]]\nname = \"p2\"\nurl = \"https://proxy.example.com:3129\""},
			want: []Problem{{"backends.b1.base_url", `plaintext http:// backend, but egress proxy "p2" (egress.proxies[1].url) is not on loopback: ` +
				"the request and its credential would leave this machine unencrypted; use https://, or only loopback egress proxies"}},
		},
		{
			name: "http:// backend with the plaintext opt-in is still refused",
			edits: []string{backendBase, `base_url = "http://localhost:18080/v1"`, proxyURL, `url = "socks5://10.0.0.5:1080"`,
				"[[egress.proxies]]\n" + proxyName, optIn + "[[egress.proxies]]\n" + proxyName},
			want: []Problem{{"backends.b1.base_url", `plaintext http:// backend, but egress proxy "p1" (egress.proxies[0].url) is not on loopback: ` +
				"the request and its credential would leave this machine unencrypted; use https://, or only loopback egress proxies"}},
		},
		{
			name: "inline array of proxies", view: proxies,
			edits:    []string{"[[egress.proxies]]\n" + proxyName + "\n" + proxyURL, `egress = { proxies = [{ name = "p1", url = "http://[::1]:3128" }] }`},
			wantView: Egress{Proxies: []Proxy{{Name: "p1", URL: mustURL(t, "http://[::1]:3128")}}, DialsPerProxy: 64},
		},
		{
			name: "password over plaintext to loopback", view: proxies,
			edits:    []string{proxyURL, proxyURL + "\nusername = \"u\"\npassword = { env = \"PROXY_PW\" }"},
			wantView: Egress{Proxies: []Proxy{{Name: "p1", URL: mustURL(t, "socks5://127.0.0.1:1080"), Username: "u", Password: secret.New("pw")}}, DialsPerProxy: 64},
		},
		{
			name: "no proxies", edits: []string{"[[egress.proxies]]\n" + proxyName + "\n" + proxyURL, ""},
			want: []Problem{{"egress.proxies", "missing; expected at least one [[egress.proxies]] (docs/egress.md: there is no direct connection)"}},
		},
		{
			name: "empty proxy list", edits: []string{"[[egress.proxies]]\n" + proxyName + "\n" + proxyURL, "egress.proxies = []"},
			want: []Problem{{"egress.proxies", "empty; expected at least one proxy (docs/egress.md: there is no direct connection)"}},
		},
		{
			name: "proxies as a table", edits: []string{"[[egress.proxies]]", "[egress.proxies]"},
			want: []Problem{{"egress.proxies", "expected an array of tables, got a table"}},
		},
		{
			name: "proxy missing name and url", edits: []string{proxyName + "\n" + proxyURL, `username = "u"`},
			want: []Problem{
				{"egress.proxies[0].name", "missing; expected 1-64 characters from [A-Za-z0-9._-]"},
				{"egress.proxies[0].url", `missing; expected a proxy URL like "socks5://127.0.0.1:1080"`},
			},
		},
		{
			name: "duplicate and invalid names", add: "[[egress.proxies]]\nname = \"p1\"\nurl = \"socks5://127.0.0.1:1081\"\n[[egress.proxies]]\nname = \"p 3\"\nurl = \"socks5://127.0.0.1:1082\"\n",
			want: []Problem{
				{"egress.proxies[1].name", `duplicate proxy name "p1" (also egress.proxies[0])`},
				{"egress.proxies[2].name", "invalid proxy name; expected 1-64 characters from [A-Za-z0-9._-]"},
			},
		},
		{
			name: "unsupported scheme", edits: []string{proxyURL, `url = "socks4://127.0.0.1:1080"`},
			want: []Problem{{"egress.proxies[0].url", "expected a socks5://, http:// or https:// URL"}},
		},
		{
			name: "user info in the URL", edits: []string{proxyURL, `url = "http://user:hunter2@127.0.0.1:3128"`},
			want: []Problem{{"egress.proxies[0].url", "must not contain credentials; set username and password instead"}},
		},
		{
			name: "missing port", edits: []string{proxyURL, `url = "socks5://127.0.0.1"`},
			want: []Problem{{"egress.proxies[0].url", "missing port; expected scheme://host:port"}},
		},
		{
			name: "bad port", edits: []string{proxyURL, `url = "socks5://127.0.0.1:0"`},
			want: []Problem{{"egress.proxies[0].url", "invalid port; expected 1..65535"}},
		},
		{
			name: "path", edits: []string{proxyURL, `url = "http://127.0.0.1:3128/proxy"`},
			want: []Problem{{"egress.proxies[0].url", "must not have a path; expected scheme://host:port"}},
		},
		{
			name: "query", edits: []string{proxyURL, `url = "http://127.0.0.1:3128?x"`},
			want: []Problem{{"egress.proxies[0].url", "must not have a query or fragment"}},
		},
		{
			name: "no host", edits: []string{proxyURL, `url = "socks5://:1080"`},
			want: []Problem{{"egress.proxies[0].url", "expected a socks5://, http:// or https:// URL with a host"}},
		},
		{
			name: "ca_file on a plaintext proxy", edits: []string{proxyURL, proxyURL + "\nca_file = \"/ca.pem\""},
			want: []Problem{{"egress.proxies[0].ca_file", "only applies to https:// proxies"}},
		},
		{
			name: "ca_file without certificates", edits: []string{proxyURL, `url = "https://proxy.example.com:3129"` + "\nca_file = \"/junk.pem\""},
			want: []Problem{{"egress.proxies[0].ca_file", `no PEM certificates in "/junk.pem"`}},
		},
		{
			name: "provider ca_file missing", add: "[egress.provider_tls]\nca_file = \"/missing.pem\"\nverify = false\n",
			want: []Problem{
				{"egress.provider_tls.ca_file", "cannot read: open /missing.pem: file does not exist"},
				{"egress.provider_tls.verify", "unknown key; expected one of: ca_file"},
			},
		},
		{
			name:  "password over plaintext HTTP to a remote proxy",
			edits: []string{proxyURL, `url = "http://proxy.example.com:3128"` + "\nusername = \"u\"\npassword = { env = \"PROXY_PW\" }"},
			want:  []Problem{{"egress.proxies[0].password", cleartext}, {"egress.proxies[0].url", plainProxy("http")}},
		},
		{
			name:  "password over SOCKS5 to a remote proxy",
			edits: []string{proxyURL, `url = "socks5://10.0.0.5:1080"` + "\nusername = \"u\"\npassword = { env = \"PROXY_PW\" }"},
			want:  []Problem{{"egress.proxies[0].password", cleartext}, {"egress.proxies[0].url", plainProxy("socks5")}},
		},
		{
			name:  "password whose value failed to load is still checked",
			edits: []string{proxyURL, `url = "socks5://10.0.0.5:1080"` + "\nusername = \"u\"\npassword = { env = \"NOPE\" }"},
			want: []Problem{
				{"egress.proxies[0].password.env", `secret: environment variable "NOPE" is unset`},
				{"egress.proxies[0].password", cleartext},
				{"egress.proxies[0].url", plainProxy("socks5")},
			},
		},
		{
			name: "password without username", edits: []string{proxyURL, proxyURL + "\npassword = { env = \"PROXY_PW\" }"},
			want: []Problem{{"egress.proxies[0].username", "missing; a proxy password needs a username"}},
		},
		{
			name: "inline password", edits: []string{proxyURL, proxyURL + "\nusername = \"u\"\npassword = \"hunter2\""},
			want: []Problem{{"egress.proxies[0].password", `expected a secret reference { env = "NAME" } or { file = "PATH" }, got a string`}},
		},
		{
			name: "SOCKS5 password too long", edits: []string{proxyURL, proxyURL + "\nusername = \"u\"\npassword = { env = \"LONG_PW\" }"},
			want: []Problem{{"egress.proxies[0].password", "too long for SOCKS5; expected at most 255 bytes (RFC 1929)"}},
		},
		{
			name: "colon in an HTTP username", edits: []string{proxyURL, `url = "http://127.0.0.1:3128"` + "\nusername = \"a:b\""},
			want: []Problem{{"egress.proxies[0].username", "must not contain ':' (HTTP Basic authentication, RFC 7617)"}},
		},
		{
			name: "control character in username", edits: []string{proxyURL, proxyURL + "\nusername = \"a\\nb\""},
			want: []Problem{{"egress.proxies[0].username", "must not contain control characters"}},
		},
	})
}

func TestRulesCredentials(t *testing.T) {
	creds := func(c *Config) any { return c.Credentials }
	runRules(t, []ruleCase{
		{
			name: "env and file; unused credentials are fine", view: creds,
			add: "[credentials.c2]\nfile = \"/secret/crlf\"\nhosts = [\"a.example\"]\n" +
				"[credentials.c3]\nenv = \"C2\"\nhosts = [\"*.B.Example.\", \"[::FFFF:127.0.0.1]\"]\n",
			wantView: map[string]credential.Credential{
				"c1": {Secret: secret.New("k1"), Hosts: []string{"api.example.com", "x.example", "127.0.0.1", "127.0.0.2", "localhost", "::1"}},
				"c2": {Secret: secret.New("file-secret"), Hosts: []string{"a.example"}},
				"c3": {Secret: secret.New("k2"), Hosts: []string{"*.b.example", "127.0.0.1"}},
			},
		},
		{
			name: "both env and file", edits: []string{credEnv, credEnv + "\nfile = \"/secret/crlf\""},
			want: []Problem{{"credentials.c1", "set exactly one of env or file, not both"}},
		},
		{
			name: "neither env nor file", edits: []string{credEnv, `path = "/x"`},
			want: []Problem{
				{"credentials.c1", `missing; expected exactly one of env = "NAME" or file = "PATH"`},
				{"credentials.c1.path", "unknown key; expected one of: auth_header, env, file, hosts, kind"},
			},
		},
		{
			name: "auth_header", view: creds,
			edits: []string{credEnv, credEnv + "\n" + `auth_header = "api-key"`},
			wantView: map[string]credential.Credential{
				"c1": {Secret: secret.New("k1"), Hosts: []string{"api.example.com", "x.example", "127.0.0.1", "127.0.0.2", "localhost", "::1"}, Auth: credential.AuthAPIKey},
			},
		},
		{
			name: "auth_header outside the list", edits: []string{credEnv, credEnv + "\n" + `auth_header = "X-Api-Key"`},
			want: []Problem{{"credentials.c1.auth_header", `must be "bearer", "x-api-key", "api-key" or "x-goog-api-key"`}},
		},
		{
			name: "auth_header not a string", edits: []string{credEnv, credEnv + "\n" + `auth_header = 1`},
			want: []Problem{{"credentials.c1.auth_header", "expected a string, got an integer"}},
		},
		{
			name: "unset variable", edits: []string{credEnv, `env = "NOPE"`},
			want: []Problem{{"credentials.c1.env", `secret: environment variable "NOPE" is unset`}},
		},
		{
			name: "empty variable", edits: []string{credEnv, `env = "EMPTY"`},
			want: []Problem{{"credentials.c1.env", `secret: environment variable "EMPTY" is empty`}},
		},
		{
			name: "bad variable name", edits: []string{credEnv, `env = "A=B"`},
			want: []Problem{{"credentials.c1.env", "expected an environment variable name"}},
		},
		{
			name: "empty variable name", edits: []string{credEnv, `env = ""`},
			want: []Problem{{"credentials.c1.env", "expected an environment variable name"}},
		},
		{
			name: "missing file", edits: []string{credEnv, `file = "/secret/none"`},
			want: []Problem{{"credentials.c1.file", `secret: read file "/secret/none": file does not exist`}},
		},
		{
			name: "file holding only a newline", edits: []string{credEnv, `file = "/secret/nl"`},
			want: []Problem{{"credentials.c1.file", `secret: file "/secret/nl" is empty`}},
		},
		{
			name: "empty file path", edits: []string{credEnv, `file = ""`},
			want: []Problem{{"credentials.c1.file", "expected a file path"}},
		},
		{
			name: "env of the wrong type", edits: []string{credEnv, `env = 1`},
			want: []Problem{{"credentials.c1.env", "expected a string, got an integer"}},
		},
		{
			name: "invalid name", add: "[credentials.\"c 2\"]\nenv = \"C2\"\nhosts = [\"a.example\"]\n",
			want: []Problem{{`credentials."c 2"`, "invalid credential name; expected 1-64 characters from [A-Za-z0-9._-]"}},
		},
		{
			name: "not a table", edits: []string{"[credentials.c1]\n" + credEnv + "\n" + credHosts, "[credentials]\nc1 = \"sk-inline\""},
			want: []Problem{{"credentials.c1", "expected a table, got a string"}},
		},
	})
}

func TestRulesBackends(t *testing.T) {
	backend := func(c *Config) any { return c.Backends }
	const plaintext = "plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https:// (docs/egress.md)"
	one := func(base string) []routesnap.Backend {
		return []routesnap.Backend{{ID: "b1", Protocol: "openai", BaseURL: base, Credential: "c1", MaxInflightPerNode: 8}}
	}
	runRules(t, []ruleCase{
		{name: "valid", view: backend, wantView: one("https://api.example.com/v1")},
		{
			name: "sorted by id", view: func(c *Config) any { return []string{c.Backends[0].ID, c.Backends[1].ID, c.Backends[2].ID} },
			add:      "[backends.a0]\nprotocol = \"anthropic\"\nbase_url = \"https://x.example\"\ncredential = \"c1\"\nmax_inflight_per_node = 1\n[backends.c9]\nprotocol = \"openai\"\nbase_url = \"https://x.example\"\ncredential = \"c1\"\nmax_inflight_per_node = 100000\n",
			wantView: []string{"a0", "b1", "c9"},
		},
		{name: "trailing slashes kept as written (compiling drops them)", edits: []string{backendBase, `base_url = "https://api.example.com/v1//"`}, view: backend, wantView: one("https://api.example.com/v1//")},
		{name: "explicit port", edits: []string{backendBase, `base_url = "https://api.example.com:8443/v1"`}, view: backend, wantView: one("https://api.example.com:8443/v1")},
		{name: "http on 127.0.0.1", edits: []string{backendBase, `base_url = "http://127.0.0.1:18080/v1"`}, view: backend, wantView: one("http://127.0.0.1:18080/v1")},
		{name: "http on 127.0.0.2", edits: []string{backendBase, `base_url = "http://127.0.0.2/v1"`}, view: backend, wantView: one("http://127.0.0.2/v1")},
		{name: "http on ::1", edits: []string{backendBase, `base_url = "http://[::1]:18080/v1"`}, view: backend, wantView: one("http://[::1]:18080/v1")},
		{name: "http on localhost", edits: []string{backendBase, `base_url = "http://LocalHost:18080/v1"`}, view: backend, wantView: one("http://LocalHost:18080/v1")},
		{name: "upper-case scheme", edits: []string{backendBase, `base_url = "HTTPS://api.example.com/v1"`}, view: backend, wantView: one("HTTPS://api.example.com/v1")},
		{
			name: "http on a public host", edits: []string{backendBase, `base_url = "http://api.example.com/v1"`},
			want: []Problem{{"backends.b1.base_url", plaintext}},
		},
		{
			name: "http on a name that merely starts with localhost", edits: []string{backendBase, `base_url = "http://localhost.example.com/v1"`},
			want: []Problem{{"backends.b1.base_url", plaintext}},
		},
		{
			name: "http on a private address", edits: []string{backendBase, `base_url = "http://10.1.2.3/v1"`},
			want: []Problem{{"backends.b1.base_url", plaintext}},
		},
		{
			name: "relative", edits: []string{backendBase, `base_url = "/v1"`},
			want: []Problem{{"backends.b1.base_url", "expected an https:// URL (http:// only for a loopback host)"}},
		},
		{
			name: "no host", edits: []string{backendBase, `base_url = "https:///v1"`},
			want: []Problem{{"backends.b1.base_url", "expected an https:// URL (http:// only for a loopback host) with a host"}},
		},
		{
			name: "opaque", edits: []string{backendBase, `base_url = "https:api.example.com"`},
			want: []Problem{{"backends.b1.base_url", "expected an https:// URL (http:// only for a loopback host) with a host"}},
		},
		{
			name: "fragment", edits: []string{backendBase, `base_url = "https://api.example.com/v1#x"`},
			want: []Problem{{"backends.b1.base_url", "must not have a query or fragment"}},
		},
		{
			name: "empty query", edits: []string{backendBase, `base_url = "https://api.example.com/v1?"`},
			want: []Problem{{"backends.b1.base_url", "must not have a query or fragment"}},
		},
		{
			name: "port zero", edits: []string{backendBase, `base_url = "https://api.example.com:0/v1"`},
			want: []Problem{{"backends.b1.base_url", "invalid port; expected 1..65535"}},
		},
		{
			name: "empty port", edits: []string{backendBase, `base_url = "https://api.example.com:/v1"`},
			want: []Problem{{"backends.b1.base_url", "invalid port; expected 1..65535"}},
		},
		{
			name: "unparsable", edits: []string{backendBase, `base_url = "https://api.example.com/%zz"`},
			want: []Problem{{"backends.b1.base_url", "not a valid URL"}},
		},
		{
			name: "user info", edits: []string{backendBase, `base_url = "https://sk-inline@api.example.com/v1"`},
			want: []Problem{{"backends.b1.base_url", "must not contain user info; the backend's credential is named by credential"}},
		},
		{
			name: "unknown protocol", edits: []string{backendProt, `protocol = "cohere"`},
			want: []Problem{{"backends.b1.protocol", `must be "openai", "anthropic", "gemini" or "bedrock_converse"`}},
		},
		{
			name:  "everything missing",
			edits: []string{backendProt, "", backendBase, "", backendCred, "", backendCap, ""},
			want: []Problem{
				{"backends.b1.protocol", `missing; expected "openai", "anthropic", "gemini" or "bedrock_converse"`},
				{"backends.b1.base_url", `missing; expected an https:// URL like "https://api.openai.com/v1"`},
				{"backends.b1.credential", "missing; expected the name of a [credentials.<name>]"},
				{"backends.b1.max_inflight_per_node", "missing; expected an integer 1..100000"},
			},
		},
		{
			name: "cap too large", edits: []string{backendCap, "max_inflight_per_node = 100001"},
			want: []Problem{{"backends.b1.max_inflight_per_node", "must be 1..100000, got 100001"}},
		},
		{
			name: "include_usage off", edits: []string{backendCap, backendCap + "\ninclude_usage = false"},
			view: func(c *Config) any { return c.Backends[0].IncludeUsage }, wantView: new(false),
		},
		{
			name: "include_usage on", edits: []string{backendCap, backendCap + "\ninclude_usage = true"},
			view: func(c *Config) any { return c.Backends[0].IncludeUsage }, wantView: new(true),
		},
		{
			name: "include_usage on an anthropic backend", edits: []string{backendProt, `protocol = "anthropic"`, backendCap, backendCap + "\ninclude_usage = true"},
			want: []Problem{{"backends.b1.include_usage", `only applies to protocol "openai" (stream_options.include_usage); remove it`}},
		},
		{
			name: "include_usage not a boolean", edits: []string{backendCap, backendCap + "\ninclude_usage = \"no\""},
			want: []Problem{{"backends.b1.include_usage", "expected a boolean, got a string"}},
		},
		{
			name: "invalid id", edits: []string{"[backends.b1]", "[backends.\"b/1\"]", targetBack, `backend = "b/1"`},
			want: []Problem{
				{`backends."b/1"`, "must be 1-64 characters from [A-Za-z0-9._-]"},
				{"models.m1.targets[0].backend", "must be a backend id: 1-64 characters from [A-Za-z0-9._-]"},
			},
		},
		{
			name: "backend not a table", add: "[backends]\nb2 = \"https://x.example\"\n[[models.m2.targets]]\nbackend = \"b2\"\nmodel = \"r\"\nweight = 1\n",
			want: []Problem{{"backends.b2", "expected a table, got a string"}},
		},
		{
			name:  "no backends",
			edits: []string{"[backends.b1]\n" + backendProt + "\n" + backendBase + "\n" + backendCred + "\n" + backendCap, "[backends]"},
			want: []Problem{
				{"backends", "must list at least one backend"},
				{"models.m1.targets[0].backend", `unknown backend "b1"`},
			},
		},
	})
}

func TestRulesModels(t *testing.T) {
	models := func(c *Config) any { return c.Models }
	long := strings.Repeat("é", 256)
	runRules(t, []ruleCase{
		{
			name: "valid, with every target field", view: models,
			edits:    []string{targetWt, "weight = 1000000\nstream = true\ntools = true\njson_schema = true\ntier = 3"},
			wantView: []routesnap.Model{{Name: "m1", Targets: []routesnap.Target{{Backend: "b1", Model: "real-1", Weight: 1000000, Stream: true, Tools: true, JSONSchema: true, Tier: 3}}}},
		},
		{
			name: "price with a long-context tier", view: models,
			edits: []string{targetWt, "weight = 1\nprice = { input = \"3\", output = \"15\", cache_read = \"0.3\", cache_write = \"3.75\", " +
				"long_context = { above_input_tokens = 200000, input = \"6\", output = \"22.5\" } }"},
			wantView: []routesnap.Model{{Name: "m1", Targets: []routesnap.Target{{Backend: "b1", Model: "real-1", Weight: 1, Price: &routesnap.Price{
				Input: "3", Output: "15", CacheRead: "0.3", CacheWrite: "3.75",
				LongContext: &routesnap.PriceTier{AboveInputTokens: 200000, Input: "6", Output: "22.5"},
			}}}}},
		},
		{
			name: "price problems name the member", edits: []string{targetWt, "weight = 1\nprice = { input = 3, output = \"1.0000001\", cache_read = \"x\", extra = \"1\", " +
				"long_context = { above_input_tokens = 0, input = \"6\" } }"},
			want: []Problem{
				{"models.m1.targets[0].price.input", "expected a string, got an integer"},
				{"models.m1.targets[0].price.long_context.above_input_tokens", "0 is out of range; expected 1..9223372036854775807"},
				{"models.m1.targets[0].price.long_context.output", `missing; expected a price in USD per million tokens as a decimal string, like "3.75"`},
				{"models.m1.targets[0].price.extra", "unknown key; expected one of: cache_read, cache_write, input, long_context, output"},
				{"models.m1.targets[0].price.output", `"1.0000001" has too many digits after the point: want a price in USD per million tokens, a decimal string such as "3.75" with at most 6 digits after the point, up to 100000`},
				{"models.m1.targets[0].price.cache_read", `"x" is not a non-negative decimal: want a price in USD per million tokens, a decimal string such as "3.75" with at most 6 digits after the point, up to 100000`},
			},
		},
		{
			name: "affinity off", view: models,
			edits:    []string{modelHeader, "[models.m1]\naffinity = false\n[[models.m1.targets]]"},
			wantView: []routesnap.Model{{Name: "m1", Affinity: new(false), Targets: []routesnap.Target{{Backend: "b1", Model: "real-1", Weight: 1}}}},
		},
		{
			name: "prefix affinity on", view: models,
			edits:    []string{modelHeader, "[models.m1]\nprefix_affinity = true\n[[models.m1.targets]]"},
			wantView: []routesnap.Model{{Name: "m1", PrefixAffinity: new(true), Targets: []routesnap.Target{{Backend: "b1", Model: "real-1", Weight: 1}}}},
		},
		{
			name: "prefix affinity without affinity", edits: []string{modelHeader, "[models.m1]\naffinity = false\nprefix_affinity = true\n[[models.m1.targets]]"},
			want: []Problem{{"models.m1.prefix_affinity", "true needs affinity on (prefix affinity places by the same hash order)"}},
		},
		// Fallbacks and context windows (docs/routing.md "Fallbacks").
		{
			name: "fallbacks and a context window", view: models,
			edits: []string{modelHeader, "[models.m1]\nfallbacks = [\"m2\"]\n[[models.m1.targets]]", targetWt, "weight = 1\ncontext_window = 8192\nmax_output_tokens = 1024"},
			add:   "[[models.m2.targets]]\nbackend = \"b1\"\nmodel = \"r2\"\nweight = 1\n",
			wantView: []routesnap.Model{
				{Name: "m1", Fallbacks: []string{"m2"}, Targets: []routesnap.Target{{Backend: "b1", Model: "real-1", Weight: 1, ContextWindow: new(8192), MaxOutputTokens: new(1024)}}},
				{Name: "m2", Targets: []routesnap.Target{{Backend: "b1", Model: "r2", Weight: 1}}},
			},
		},
		{
			name: "fallback cycle", edits: []string{modelHeader, "[models.m1]\nfallbacks = [\"m2\"]\n[[models.m1.targets]]"},
			add:  "[models.m2]\nfallbacks = [\"m1\"]\n[[models.m2.targets]]\nbackend = \"b1\"\nmodel = \"r2\"\nweight = 1\n",
			want: []Problem{{"models.m1.fallbacks", `cycle: "m1" → "m2" → "m1"; a chain is walked once and must end`}},
		},
		{
			name: "fallback across protocols", edits: []string{modelHeader, "[models.m1]\nfallbacks = [\"m2\"]\n[[models.m1.targets]]"},
			add: "[backends.b2]\nprotocol = \"anthropic\"\nbase_url = \"https://api.example.com/v1\"\ncredential = \"c1\"\nmax_inflight_per_node = 1\n" +
				"[[models.m2.targets]]\nbackend = \"b2\"\nmodel = \"r2\"\nweight = 1\n",
			want: []Problem{{"models.m1.fallbacks[0]", `model "m2" speaks anthropic, this model openai; a fallback never converts between protocols`}},
		},
		{
			name: "fallbacks not a list", edits: []string{modelHeader, "[models.m1]\nfallbacks = \"m2\"\n[[models.m1.targets]]"},
			want: []Problem{{"models.m1.fallbacks", "expected a list of model names like [\"gpt-4o-mini\"], got a string"}},
		},
		{
			name: "affinity not a boolean", edits: []string{modelHeader, "[models.m1]\naffinity = 1\n[[models.m1.targets]]"},
			want: []Problem{{"models.m1.affinity", "expected a boolean, got an integer"}},
		},
		{
			name: "inline targets keep file order", view: models,
			edits: []string{modelHeader + "\n" + targetBack + "\n" + targetModel + "\n" + targetWt,
				"[models.m1]\ntargets = [{ backend = \"b1\", model = \"z\", weight = 2 }, { backend = \"b1\", model = \"a\", weight = 1, tier = 1 }]"},
			wantView: []routesnap.Model{{Name: "m1", Targets: []routesnap.Target{{Backend: "b1", Model: "z", Weight: 2}, {Backend: "b1", Model: "a", Weight: 1, Tier: 1}}}},
		},
		{
			name: "names are sorted and may hold any printable characters", view: func(c *Config) any { return []string{c.Models[0].Name, c.Models[1].Name} },
			add:      "[[models.\"" + long + "\".targets]]\nbackend = \"b1\"\nmodel = \"" + long + "\"\nweight = 1\n",
			wantView: []string{"m1", long},
		},
		{
			name: "name too long", add: "[[models.\"" + long + "x\".targets]]\nbackend = \"b1\"\nmodel = \"r\"\nweight = 1\n",
			want: []Problem{{`models."` + long + `x"`, "longer than 256 characters"}},
		},
		{
			name: "name with a control character", add: "[[models.\"a\\u0007b\".targets]]\nbackend = \"b1\"\nmodel = \"r\"\nweight = 1\n",
			want: []Problem{{`models."a\u0007b"`, "must not contain control characters"}},
		},
		{
			name: "empty name", add: "[[models.\"\".targets]]\nbackend = \"b1\"\nmodel = \"r\"\nweight = 1\n",
			want: []Problem{{`models.""`, "must not be empty"}},
		},
		{
			name: "no targets", add: "[models.m2]\n",
			want: []Problem{{"models.m2.targets", "missing; expected at least one [[models.<name>.targets]]"}},
		},
		{
			name: "empty targets", add: "[models.m2]\ntargets = []\n",
			want: []Problem{{"models.m2.targets", "must list at least one target (an empty pool can serve nothing)"}},
		},
		{
			name: "targets not tables", add: "[models.m2]\ntargets = [\"b1\"]\n",
			want: []Problem{{"models.m2.targets", "expected an array of tables, got a string"}},
		},
		{
			name: "target fields missing", edits: []string{targetBack + "\n" + targetModel + "\n" + targetWt, "stream = true"},
			want: []Problem{
				{"models.m1.targets[0].backend", "missing; expected the id of a [backends.<id>]"},
				{"models.m1.targets[0].model", "missing; expected the provider's model name"},
				{"models.m1.targets[0].weight", "missing; expected an integer 1..1000000"},
			},
		},
		{
			name: "unknown backend", edits: []string{targetBack, `backend = "b2"`},
			want: []Problem{{"models.m1.targets[0].backend", `unknown backend "b2"`}},
		},
		{
			name: "empty provider model", edits: []string{targetModel, `model = ""`},
			want: []Problem{{"models.m1.targets[0].model", "must not be empty"}},
		},
		{
			name: "weights", edits: []string{targetWt, "weight = 0"},
			add: "[[models.m1.targets]]\nbackend = \"b1\"\nmodel = \"r2\"\nweight = 1000001\n" +
				"[[models.m1.targets]]\nbackend = \"b1\"\nmodel = \"r3\"\nweight = 0.5\n" +
				"[[models.m1.targets]]\nbackend = \"b1\"\nmodel = \"r4\"\nweight = \"1\"\n",
			want: []Problem{
				// Types first (decoding), then meaning (the routing rules).
				{"models.m1.targets[2].weight", "expected an integer, got a float"},
				{"models.m1.targets[3].weight", "expected an integer, got a string"},
				{"models.m1.targets[0].weight", "must be 1..1000000, got 0"},
				{"models.m1.targets[1].weight", "must be 1..1000000, got 1000001"},
			},
		},
		{
			name: "negative tier and non-boolean capability", edits: []string{targetWt, "weight = 1\ntier = -1\nstream = \"yes\""},
			want: []Problem{
				{"models.m1.targets[0].stream", "expected a boolean, got a string"},
				{"models.m1.targets[0].tier", "must be 0..2147483647, got -1"},
			},
		},
		{
			name: "duplicate target", add: "[[models.m1.targets]]\nbackend = \"b1\"\nmodel = \"real-1\"\nweight = 5\n",
			want: []Problem{{"models.m1.targets[1]", "duplicate of targets[0] (same backend and model); merge their weights"}},
		},
		{
			name: "quoted model path", add: "[[models.\"gpt 4\".targets]]\nbackend = \"b1\"\nmodel = \"r\"\nweight = 0\n",
			want: []Problem{{`models."gpt 4".targets[0].weight`, "must be 1..1000000, got 0"}},
		},
		{
			name: "no models", edits: []string{modelHeader + "\n" + targetBack + "\n" + targetModel + "\n" + targetWt, "[models]"},
			want: []Problem{{"models", "must list at least one model"}},
		},
	})
}

func TestRulesAuthz(t *testing.T) {
	authz := func(c *Config) any { return c.Authz }
	runRules(t, []ruleCase{
		{name: "absolute file", view: authz, wantView: Authz{Source: "file:/authz.json"}},
		{name: "relative file (Parse leaves it)", edits: []string{authzSource, `source = "file:authz.json"`}, view: authz, wantView: Authz{Source: "file:authz.json"}},
		{name: "file URL", edits: []string{authzSource, `source = "file:///etc/a.json"`}, view: authz, wantView: Authz{Source: "file:/etc/a.json"}},
		{name: "file URL on localhost", edits: []string{authzSource, `source = "file://localhost/etc/a.json"`}, view: authz, wantView: Authz{Source: "file:/etc/a.json"}},
		{
			name: "file URL on another host", edits: []string{authzSource, `source = "file://server/a.json"`},
			want: []Problem{{"authz.source", `expected "file:<path>" or "file:///<absolute path>"`}},
		},
		{
			name: "https", edits: []string{authzSource, `source = "https://cp.example.com/v1/authz"`},
			view: authz, wantView: Authz{Source: "https://cp.example.com/v1/authz"},
		},
		{
			name: "http on loopback", edits: []string{authzSource, `source = "http://127.0.0.1:9000/authz"`},
			view: authz, wantView: Authz{Source: "http://127.0.0.1:9000/authz"},
		},
		{
			name: "plaintext http to a remote host", edits: []string{authzSource, `source = "http://cp.example.com/authz"`},
			want: []Problem{{"authz.source", "plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https://"}},
		},
		{
			name: "other scheme", edits: []string{authzSource, `source = "/etc/a.json"`},
			want: []Problem{{"authz.source", `expected "file:<path>" or an https:// URL (http:// only for a loopback host)`}},
		},
		{
			name: "empty path", edits: []string{authzSource, `source = "file:"`},
			want: []Problem{{"authz.source", `missing path; expected "file:<path>"`}},
		},
		{
			name: "missing source", edits: []string{authzSource, ""},
			want: []Problem{{"authz.source", `missing; expected "file:<path>" or an https:// URL (http:// only for a loopback host)`}},
		},
		{
			name: "missing table", edits: []string{authzTable, ""},
			want: []Problem{{"authz", `missing; expected an [authz] table with source = "file:<path>"`}},
		},
	})
}
