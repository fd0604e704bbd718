package config

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/snapsign"
)

func testKey(seed byte) ed25519.PublicKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)).Public().(ed25519.PublicKey)
}

// TestVerifyKeys: verify_keys takes PEM files and inline PEM, several
// keys per file, and reports each bad entry with its index.
func TestVerifyKeys(t *testing.T) {
	k1, k2, k3 := testKey(1), testKey(2), testKey(3)
	pem1, pem2, pem3 := string(snapsign.MarshalPublicKey(k1)), string(snapsign.MarshalPublicKey(k2)), string(snapsign.MarshalPublicKey(k3))
	files := fakeFS(map[string]string{
		"/keys/one.pub":  pem1,
		"/keys/two.pub":  pem2 + pem3, // a file may hold several (rotation)
		"/keys/priv.pem": string(snapsign.MarshalPrivateKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32)))),
	})
	parse := func(t *testing.T, add string) (*Config, error) {
		t.Helper()
		doc := edit(t, base, authzTable, "") + add
		return Parse([]byte(doc), ruleEnv(), files)
	}
	t.Run("files and inline", func(t *testing.T) {
		c, err := parse(t, "[authz]\nsource = \"file:/authz.json\"\nverify_keys = [\"/keys/two.pub\", '''\n"+pem1+"''']\n")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.Authz.VerifyKeys, []ed25519.PublicKey{k2, k3, k1}); diff != "" {
			t.Errorf("keys (-got +want):\n%s", diff)
		}
	})
	t.Run("routes snapshot source", func(t *testing.T) {
		c, err := Parse([]byte(`node_id = "n1"
[[egress.proxies]]
name = "p1"
url = "socks5://127.0.0.1:1080"
[authz]
source = "file:/authz.json"
[routes]
source = "file:/routes.json"
verify_keys = ["/keys/one.pub"]
`), ruleEnv(), files)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Routes.VerifyKeys) != 1 || !c.Routes.VerifyKeys[0].Equal(k1) || c.Authz.VerifyKeys != nil {
			t.Errorf("routes keys %v, authz keys %v", c.Routes.VerifyKeys, c.Authz.VerifyKeys)
		}
	})
	for _, tc := range []struct {
		name, add string
		want      []Problem
	}{
		{"missing file", `verify_keys = ["/keys/nope.pub"]`, []Problem{{"authz.verify_keys[0]", "cannot read: open /keys/nope.pub: file does not exist"}}},
		{"private key file", `verify_keys = ["/keys/one.pub", "/keys/priv.pem"]`, []Problem{{"authz.verify_keys[1]",
			`/keys/priv.pem: snapsign: not an ed25519 key: PEM block 1 is "PRIVATE KEY", expected "PUBLIC KEY" (as openssl pkey -pubout writes)`}}},
		{"bad inline", `verify_keys = ["-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"]`, nil},
		{"empty list", `verify_keys = []`, []Problem{{"authz.verify_keys",
			`empty; expected a list of PEM public key files or inline PEM texts ("-----BEGIN PUBLIC KEY-----..."), or leave verify_keys out to accept unsigned snapshots`}}},
		{"not a list", `verify_keys = "/keys/one.pub"`, []Problem{{"authz.verify_keys",
			`expected a list of PEM public key files or inline PEM texts ("-----BEGIN PUBLIC KEY-----..."), got a string`}}},
		{"not a string", `verify_keys = [1]`, []Problem{{"authz.verify_keys[0]", "expected a PEM file path or inline PEM text, got an integer"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, "[authz]\nsource = \"file:/authz.json\"\n"+tc.add+"\n")
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Parse = %v, want a *config.Error", err)
			}
			if tc.want == nil { // only the path is stable
				if len(cerr.Problems) != 1 || cerr.Problems[0].Path != "authz.verify_keys[0]" {
					t.Errorf("problems = %v", cerr.Problems)
				}
				return
			}
			if diff := cmp.Diff(cerr.Problems, tc.want); diff != "" {
				t.Errorf("problems (-got +want):\n%s", diff)
			}
		})
	}
	t.Run("static routes", func(t *testing.T) {
		_, err := parse(t, authzTable+"\n[routes]\nsource = \"static\"\nverify_keys = [\"/keys/one.pub\"]\n")
		var cerr *Error
		if !errors.As(err, &cerr) || len(cerr.Problems) != 1 || cerr.Problems[0].Path != "routes.verify_keys" {
			t.Fatalf("Parse = %v, want one problem at routes.verify_keys", err)
		}
	})
}
