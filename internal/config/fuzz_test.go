package config

import (
	"github.com/scootgate/scootgate/pkg/routesnap"

	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/BurntSushi/toml"
)

// FuzzParse checks that Parse never panics, that it fails only with the two
// documented error types, that a success satisfies the cross-reference
// rules, and that no secret value leaks into an error or a printed Config.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"*.toml", "invalid/*.toml"} {
		files, err := filepath.Glob(filepath.Join(testdata, pattern))
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte(base))
	f.Add([]byte(base + "[listen]\napi = \":0\"\ntls_cert_file = \"/tls/cert.pem\"\ntls_key_file = \"/tls/key.pem\"\n"))
	f.Add([]byte(base + "[credentials.c2]\nfile = \"/secret/k\"\n[egress.provider_tls]\nca_file = \"/ca.pem\"\n"))
	f.Add([]byte(`egress = { proxies = [{ name = "p", url = "https://[::1]:1", username = "u", password = { env = "PW" } }] }`))

	env := canaryEnvFunc()
	p := pems()
	files := fakeFS(map[string]string{
		"/secret/k": canaryFile + "\n", "/secret/pw": canaryFile,
		"/ca.pem": p.cert, "/tls/cert.pem": p.cert, "/tls/key.pem": p.key,
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, env, files)
		// A canary the input itself contains may be echoed legitimately.
		check := !bytes.Contains(data, []byte("sk-canary"))
		if err != nil {
			var cerr *Error
			var perr toml.ParseError
			switch {
			case errors.As(err, &cerr):
				if len(cerr.Problems) == 0 {
					t.Fatal("*Error with no problems")
				}
				for _, p := range cerr.Problems {
					if p.Msg == "" {
						t.Fatalf("problem at %q has no message", p.Path)
					}
				}
			case errors.As(err, &perr):
			default:
				t.Fatalf("error of type %T is neither *Error nor toml.ParseError: %v", err, err)
			}
			if c != nil {
				t.Fatal("non-nil Config with an error")
			}
			if check {
				assertNoCanary(t, "error", err.Error())
			}
			return
		}
		checkInvariants(t, c)
		if check {
			assertNoCanary(t, "Config", fmt.Sprintf("%+v", c))
		}
	})
}

// checkInvariants asserts what every successfully parsed Config promises.
func checkInvariants(t *testing.T, c *Config) {
	t.Helper()
	if !routesnap.ValidID(c.NodeID) || len(c.Egress.Proxies) == 0 || len(c.Backends) == 0 || len(c.Models) == 0 || c.Authz.Source == "" {
		t.Fatalf("incomplete config accepted: %+v", c)
	}
	for _, p := range c.Egress.Proxies {
		if p.URL == nil || p.URL.User != nil || p.URL.Port() == "" {
			t.Fatalf("proxy %q: bad URL accepted", p.Name)
		}
	}
	backends := map[string]bool{}
	for i, b := range c.Backends {
		if i > 0 && c.Backends[i-1].ID >= b.ID {
			t.Fatalf("backends not sorted by ID")
		}
		if _, ok := c.Credentials[b.Credential]; !ok {
			t.Fatalf("backend %q: unresolved credential", b.ID)
		}
		if routesnap.CheckBaseURL(b.BaseURL) != nil {
			t.Fatalf("backend %q: bad base URL accepted", b.ID)
		}
		if b.MaxInflightPerNode < 1 {
			t.Fatalf("backend %q: cap %d accepted", b.ID, b.MaxInflightPerNode)
		}
		backends[b.ID] = true
	}
	for i, m := range c.Models {
		if i > 0 && c.Models[i-1].Name >= m.Name {
			t.Fatalf("models not sorted by name")
		}
		if len(m.Targets) == 0 {
			t.Fatalf("model %q: no targets accepted", m.Name)
		}
		for _, tg := range m.Targets {
			if !backends[tg.Backend] || tg.Weight < 1 || tg.Model == "" || tg.Tier < 0 {
				t.Fatalf("model %q: bad target accepted: %+v", m.Name, tg)
			}
		}
	}
	for name, s := range c.Credentials {
		if s.Secret.IsZero() {
			t.Fatalf("credential %q: empty value accepted", name)
		}
	}
}
