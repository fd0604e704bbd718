package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// Canary values: if any of these shows up in an error or in a printed
// Config, a secret leaked.
const (
	canaryEnv  = "sk-canary-env-4b1d9e0f7a"
	canaryFile = "sk-canary-file-93c2a6d8e1"
	canaryDoc  = "sk-canary-doc-5e7f1a2b3c" // pasted into the document where a reference belongs
)

func canaryEnvFunc() func(string) (string, bool) {
	return fakeEnv(map[string]string{
		"C1": canaryEnv, "PW": canaryEnv, "LONG_PW": canaryEnv + strings.Repeat("x", 300),
	})
}

func canaryFS() func(string) ([]byte, error) {
	return fakeFS(map[string]string{"/secret/k": canaryFile + "\n", "/secret/pw": canaryFile})
}

func assertNoCanary(t *testing.T, what, s string) {
	t.Helper()
	for _, c := range []string{canaryEnv, canaryFile, canaryDoc} {
		if strings.Contains(s, c) {
			t.Errorf("%s reveals a secret (canary %.14s…)", what, c)
		}
	}
}

func TestNoSecretInErrors(t *testing.T) {
	docs := map[string]string{
		"refs loaded, everything else wrong": `node_id = "bad id"
[[egress.proxies]]
name = "p1"
url = "http://proxy.example.com:3128"
username = "u"
password = { env = "PW" }
[[egress.proxies]]
name = "p2"
url = "socks5://127.0.0.1:1080"
username = "u"
password = { env = "LONG_PW" }
[credentials.c1]
env = "C1"
[credentials."c 2"]
file = "/secret/k"
[credentials.c3]
env = "C1"
file = "/secret/k"
[backends.b1]
protocol = "x"
base_url = "http://api.example.com/v1"
credential = "nope"
max_inflight_per_node = 0
[[models.m1.targets]]
backend = "b2"
model = ""
weight = 0
[authz]
source = "https://x"
`,
		"secrets pasted into the document": `node_id = "n1"
[[egress.proxies]]
name = "p1"
url = "socks5://u:` + canaryDoc + `@127.0.0.1:1080"
[[egress.proxies]]
name = "p2"
url = "socks5://127.0.0.1:1080"
username = "u"
password = "` + canaryDoc + `"
[credentials]
c1 = "` + canaryDoc + `"
c2 = { env = 1, file = "` + canaryDoc + `" }
c3 = { key = "` + canaryDoc + `" }
[backends.b1]
protocol = "openai"
base_url = "https://` + canaryDoc + `@api.example.com/v1"
credential = "c1"
max_inflight_per_node = 1
[backends.b2]
protocol = "openai"
base_url = "https://u:` + canaryDoc + `@api.example.com/v1?x#y"
credential = "c1"
max_inflight_per_node = 1
[backends.b3]
protocol = "openai"
base_url = "https://u:` + canaryDoc + `@api example.com/v1"
credential = "c1"
max_inflight_per_node = 1
[[models.m1.targets]]
backend = "b1"
model = "r"
weight = 1
[authz]
source = "file:/a"
`,
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(doc), canaryEnvFunc(), canaryFS())
			if err == nil {
				t.Fatal("Parse succeeded; the test needs an invalid document")
			}
			if n := strings.Count(err.Error(), "\n") + 1; n < 8 {
				t.Errorf("only %d problems reported; the document has more", n)
			}
			assertNoCanary(t, "error", err.Error())
			assertNoCanary(t, "error %+v", fmt.Sprintf("%+v", err))
		})
	}
}

func TestNoSecretInPrintedConfig(t *testing.T) {
	doc := edit(t, base, proxyURL, proxyURL+"\nusername = \"u\"\npassword = { env = \"PW\" }") +
		"[credentials.c2]\nfile = \"/secret/k\"\nhosts = [\"a.example\"]\n"
	c, err := Parse([]byte(doc), canaryEnvFunc(), canaryFS())
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.Credentials["c1"].Secret.Reveal() != canaryEnv || c.Credentials["c2"].Secret.Reveal() != canaryFile || c.Egress.Proxies[0].Password.Reveal() != canaryEnv {
		t.Fatal("secrets were not loaded; the test would prove nothing")
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		assertNoCanary(t, "Sprintf("+verb+")", fmt.Sprintf(verb, c))
		assertNoCanary(t, "Sprintf("+verb+") of the value", fmt.Sprintf(verb, *c))
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	assertNoCanary(t, "json.Marshal", string(b))
	var log strings.Builder
	slog.New(slog.NewJSONHandler(&log, nil)).Info("config", "config", c)
	assertNoCanary(t, "slog", log.String())
}
