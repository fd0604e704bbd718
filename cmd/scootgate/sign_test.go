package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/pkg/snapsign"
)

var update = flag.Bool("update", false, "rewrite testdata/signed from the test-only key")

const signedDir = "../../testdata/signed"

// testKey is a test-only signing key: a fixed seed, so the examples of
// testdata/signed are reproducible (ed25519 signatures are deterministic).
// The private half is not committed; it is this seed.
func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

// signedExamples are the files of testdata/signed, built from the valid
// examples of testdata/routesnap and testdata/authz.
func signedExamples(t *testing.T) map[string][]byte {
	t.Helper()
	key, other := testKey(0x5c), testKey(0x0e)
	routes := readFile(t, filepath.Join(routesDir, "valid.json"))
	authz := readFile(t, filepath.Join(authzDir, "valid.json"))
	tampered := snapsign.Sign(snapsign.RoutesPayloadType, routes, key)
	tampered.Payload = base64.StdEncoding.EncodeToString(bytes.Replace(routes, []byte(`"version": 42`), []byte(`"version": 43`), 1))
	examples := map[string][]byte{
		"test-only.pub":           snapsign.MarshalPublicKey(key.Public().(ed25519.PublicKey)),
		"other.pub":               snapsign.MarshalPublicKey(other.Public().(ed25519.PublicKey)),
		"routes.signed.json":      snapsign.Sign(snapsign.RoutesPayloadType, routes, key).Marshal(),
		"authz.signed.json":       snapsign.Sign(snapsign.AuthzPayloadType, authz, key).Marshal(),
		"routes.tampered.json":    tampered.Marshal(),
		"routes.wrong-key.json":   snapsign.Sign(snapsign.RoutesPayloadType, routes, other).Marshal(),
		"authz.as-routes.json":    snapsign.Sign(snapsign.RoutesPayloadType, authz, key).Marshal(),
		"routes.two-sigs.json":    snapsign.Sign(snapsign.RoutesPayloadType, routes, other, key).Marshal(),
		"authz.no-signature.json": snapsign.Sign(snapsign.AuthzPayloadType, authz).Marshal(),
	}
	maps.Copy(examples, hostileEnvelopes(routes, authz, key, other))
	return examples
}

// hostileEnvelopes are the files of testdata/signed/hostile: envelopes
// that name a member twice in one object, or beside a twin in another
// letter case, so that the node and a DSSE reader that decodes into a Go
// struct (case-insensitive names, the last duplicate wins) would each find
// a valid signature but read different envelopes. The node must refuse
// every one; the twin follows the member the node reads, so a struct
// reader sees the twin.
func hostileEnvelopes(routes, authz []byte, key, other ed25519.PrivateKey) map[string][]byte {
	routes142 := bytes.Replace(routes, []byte(`"version": 42`), []byte(`"version": 142`), 1)
	b64 := func(b []byte) string { return strconv.Quote(base64.StdEncoding.EncodeToString(b)) }
	sig := func(k ed25519.PrivateKey, typ string, doc []byte) string {
		return b64(ed25519.Sign(k, snapsign.PAE(typ, doc)))
	}
	keyid := func(k ed25519.PrivateKey) string {
		return strconv.Quote(snapsign.KeyID(k.Public().(ed25519.PublicKey)))
	}
	routesType, authzType := strconv.Quote(snapsign.RoutesPayloadType), strconv.Quote(snapsign.AuthzPayloadType)
	one := func(k ed25519.PrivateKey, typ string, doc []byte) string {
		return `[{"keyid": ` + keyid(k) + `, "sig": ` + sig(k, typ, doc) + `}]`
	}
	two := `[{"keyid": ` + keyid(key) + `, "sig": ` + sig(key, snapsign.RoutesPayloadType, routes) + `}, {"keyid": ` + keyid(key) + `, "sig": ` + sig(key, snapsign.RoutesPayloadType, routes142) + `}]`
	withSig := func(members string) string {
		return `[{` + members + `}]`
	}
	return map[string][]byte{
		"hostile/payload-case-twin.json": object(
			"payloadType", routesType, "payload", b64(routes), "Payload", b64(routes142), "signatures", two),
		"hostile/payload-duplicate.json": object(
			"payloadType", routesType, "payload", b64(routes), "payload", b64(routes142), "signatures", two),
		"hostile/payload-type-case-twin.json": object(
			"payloadType", routesType, "PayloadType", authzType, "payload", b64(routes),
			"signatures", `[{"sig": `+sig(key, snapsign.RoutesPayloadType, routes)+`}, {"sig": `+sig(key, snapsign.AuthzPayloadType, routes)+`}]`),
		"hostile/envelope-case-twins.json": object(
			"payloadType", routesType, "payload", b64(routes), "signatures", one(key, snapsign.RoutesPayloadType, routes),
			"PayloadType", authzType, "Payload", b64(authz), "Signatures", one(key, snapsign.AuthzPayloadType, authz)),
		"hostile/sig-case-twin.json": object(
			"payloadType", routesType, "payload", b64(routes),
			"signatures", withSig(`"keyid": `+keyid(key)+`, "sig": `+sig(key, snapsign.RoutesPayloadType, routes)+`, "Sig": `+sig(other, snapsign.RoutesPayloadType, routes))),
		"hostile/sig-duplicate.json": object(
			"payloadType", routesType, "payload", b64(routes),
			"signatures", withSig(`"keyid": `+keyid(key)+`, "sig": `+sig(key, snapsign.RoutesPayloadType, routes)+`, "sig": `+sig(other, snapsign.RoutesPayloadType, routes))),
		"hostile/sig-long-s.json": object(
			"payloadType", routesType, "payload", b64(routes),
			"signatures", withSig(`"keyid": `+keyid(key)+`, "sig": `+sig(key, snapsign.RoutesPayloadType, routes)+`, "\u017fig": `+sig(other, snapsign.RoutesPayloadType, routes))),
		"hostile/keyid-case-twin.json": object(
			"payloadType", routesType, "payload", b64(routes),
			"signatures", withSig(`"keyid": `+keyid(key)+`, "KeyID": `+keyid(other)+`, "sig": `+sig(key, snapsign.RoutesPayloadType, routes))),
		"hostile/keyid-kelvin.json": object(
			"payloadType", routesType, "payload", b64(routes),
			"signatures", withSig(`"keyid": `+keyid(key)+`, "\u212aeyid": `+keyid(other)+`, "sig": `+sig(key, snapsign.RoutesPayloadType, routes))),
	}
}

// object writes a JSON object of name and raw value pairs, in order and
// repeats included, one member a line.
func object(pairs ...string) []byte {
	var b bytes.Buffer
	b.WriteString("{\n")
	for i := 0; i < len(pairs); i += 2 {
		fmt.Fprintf(&b, "  %q: %s", pairs[i], pairs[i+1])
		if i+2 < len(pairs) {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// TestSignedExamples keeps testdata/signed in step with the signer
// (-update rewrites it) and checks each example as `scootgate check
// --verify-key` does.
func TestSignedExamples(t *testing.T) {
	for name, want := range signedExamples(t) {
		path := filepath.Join(signedDir, name)
		if *update {
			writeFile(t, path, want)
			continue
		}
		if got := readFile(t, path); !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the signer writes; run go test ./cmd/scootgate -run TestSignedExamples -update", path)
		}
	}
	pub := filepath.Join(signedDir, "test-only.pub")
	for _, tc := range []struct {
		kind, file string
		code       int
		wantErr    string
	}{
		{"--routes", "routes.signed.json", 0, ""},
		{"--authz", "authz.signed.json", 0, ""},
		{"--routes", "routes.two-sigs.json", 0, ""},
		{"--routes", "routes.tampered.json", 1, "no valid signature"},
		{"--routes", "routes.wrong-key.json", 1, "no valid signature"},
		{"--authz", "authz.as-routes.json", 1, "wrong payload type"},
		{"--authz", "authz.no-signature.json", 1, "has no signatures"},
		{"--authz", "../authz/valid.json", 1, "not a signed envelope"},
		// Validly signed for a reader that folds case or keeps the last
		// duplicate; refused, naming the member.
		{"--routes", "hostile/payload-case-twin.json", 1, `Payload: unknown member; did you mean "payload"?`},
		{"--routes", "hostile/payload-duplicate.json", 1, `payload: duplicate member`},
		{"--routes", "hostile/payload-type-case-twin.json", 1, `PayloadType: unknown member; did you mean "payloadType"?`},
		{"--routes", "hostile/envelope-case-twins.json", 1, `PayloadType: unknown member; did you mean "payloadType"?`},
		{"--routes", "hostile/sig-case-twin.json", 1, `signatures[0].Sig: unknown member; did you mean "sig"?`},
		{"--routes", "hostile/sig-duplicate.json", 1, `signatures[0].sig: duplicate member`},
		{"--routes", "hostile/sig-long-s.json", 1, `signatures[0]["\u017fig"]: unknown member; did you mean "sig"?`},
		{"--routes", "hostile/keyid-case-twin.json", 1, `signatures[0].KeyID: unknown member; did you mean "keyid"?`},
		{"--routes", "hostile/keyid-kelvin.json", 1, `signatures[0]["\u212aeyid"]: unknown member; did you mean "keyid"?`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, "", "check", tc.kind, filepath.Join(signedDir, tc.file), "--verify-key", pub)
			if code != tc.code || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("exit %d, want %d; stderr %q, want %q; stdout %q", code, tc.code, stderr, tc.wantErr, stdout)
			}
			if code == 0 && !strings.Contains(stdout, "signature verified") {
				t.Errorf("stdout = %q", stdout)
			}
			if !strings.HasPrefix(tc.file, "hostile/") {
				return
			}
			// Without --verify-key the envelope is still decoded, and
			// refused the same way.
			code, stdout, stderr = runCmd(t, "", "check", tc.kind, filepath.Join(signedDir, tc.file))
			if code != tc.code || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("without --verify-key: exit %d, want %d; stderr %q, want %q; stdout %q", code, tc.code, stderr, tc.wantErr, stdout)
			}
		})
	}
}

// TestKeygenSignCheck is the control plane's CI flow: make a key pair,
// sign a snapshot, verify it; a second key pair does not verify it.
func TestKeygenSignCheck(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "cp")
	code, stdout, stderr := runCmd(t, "", "keygen", "--out", prefix)
	if code != 0 {
		t.Fatalf("keygen: %d %s", code, stderr)
	}
	keyPEM := readFile(t, prefix+".key")
	if fi, err := os.Stat(prefix + ".key"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v (%v), want 0600", fi.Mode(), err)
	}
	if strings.Contains(stdout+stderr, string(keyPEM[30:60])) {
		t.Error("keygen printed the private key")
	}
	if code, _, stderr := runCmd(t, "", "keygen", "--out", prefix); code != 1 || !strings.Contains(stderr, "exists") {
		t.Errorf("keygen over existing files: %d %q, want a refusal", code, stderr)
	}
	if code, _, _ := runCmd(t, "", "keygen", "--out", filepath.Join(dir, "other")); code != 0 {
		t.Fatal("second keygen failed")
	}

	code, envelope, stderr := runCmd(t, "", "sign", "--key", prefix+".key", filepath.Join(authzDir, "valid.json"))
	if code != 0 {
		t.Fatalf("sign: %d %s", code, stderr)
	}
	if !strings.Contains(envelope, snapsign.AuthzPayloadType) || strings.Contains(envelope, string(keyPEM[30:60])) {
		t.Errorf("envelope = %s", envelope)
	}
	signed := writeFile(t, filepath.Join(dir, "authz.json"), []byte(envelope))
	if code, _, stderr := runCmd(t, "", "check", "--authz", signed, "--verify-key", prefix+".pub"); code != 0 {
		t.Errorf("check with the signing key: %d %s", code, stderr)
	}
	if code, _, stderr := runCmd(t, "", "check", "--authz", signed, "--verify-key", filepath.Join(dir, "other.pub")); code != 1 {
		t.Errorf("check with another key: %d %s, want 1", code, stderr)
	}
	// Several --verify-key: any one of them (rotation).
	if code, _, stderr := runCmd(t, "", "check", "--authz", signed, "--verify-key", filepath.Join(dir, "other.pub"), "--verify-key", prefix+".pub"); code != 0 {
		t.Errorf("check with two keys: %d %s", code, stderr)
	}
	if code, _, _ := runCmd(t, "", "sign", "--key", prefix+".key", signed); code != 1 {
		t.Error("signing an envelope again was not refused")
	}
	if code, _, stderr := runCmd(t, "", "sign", "--key", prefix+".pub", signed); code != 1 || !strings.Contains(stderr, "PRIVATE KEY") {
		t.Errorf("sign with a public key: %d %q", code, stderr)
	}
}

// TestSignRefusesInvalid: an invalid document is not signed.
func TestSignRefusesInvalid(t *testing.T) {
	key := writeFile(t, filepath.Join(t.TempDir(), "k"), snapsign.MarshalPrivateKey(testKey(1)))
	code, stdout, stderr := runCmd(t, "", "sign", "--key", key, filepath.Join(authzDir, "invalid", "bad-digest.json"))
	if code != 1 || stdout != "" || !strings.Contains(stderr, "keys[0].digest") {
		t.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, _, stderr = runCmd(t, "", "sign", "--key", key, "--kind", "routes", filepath.Join(authzDir, "valid.json"))
	if code != 1 || !strings.Contains(stderr, "routes snapshot") {
		t.Errorf("authz signed as routes: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := runCmd(t, "", "check", "--config", "x.toml", "--verify-key", key); code != 2 {
		t.Errorf("--verify-key with --config: exit %d, want 2", code)
	}
}

// TestOpenSSLRecipe runs the OpenSSL-only signing recipe of
// proto/control-plane.md as written, and verifies what it produced, so
// the recipe cannot drift from what nodes accept. Skipped without bash
// and openssl.
func TestOpenSSLRecipe(t *testing.T) {
	bash, err1 := exec.LookPath("bash")
	_, err2 := exec.LookPath("openssl")
	if err1 != nil || err2 != nil {
		t.Skip("SKIP: bash or openssl missing; the OpenSSL recipe in proto/control-plane.md is not checked")
	}
	doc := string(readFile(t, "../../proto/control-plane.md"))
	var recipe string
	for block := range strings.SplitSeq(doc, "```sh\n") {
		if body, _, ok := strings.Cut(block, "```"); ok && strings.Contains(body, "openssl pkeyutl") {
			recipe = body
		}
	}
	if recipe == "" {
		t.Fatal("no ```sh block with openssl pkeyutl in proto/control-plane.md")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "routes.json"), readFile(t, filepath.Join(routesDir, "valid.json")))
	cmd := exec.Command(bash, "-euo", "pipefail", "-c", recipe)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("recipe: %v\n%s", err, out)
	}
	code, stdout, stderr := runCmd(t, "", "check", "--routes", filepath.Join(dir, "routes.signed.json"), "--verify-key", filepath.Join(dir, "cp.pub"))
	if code != 0 || !strings.Contains(stdout, "signature verified") {
		t.Errorf("check of the recipe's envelope: exit %d, %s%s", code, stdout, stderr)
	}
}

// TestCheckConfigVerifiesSignatures: check --config fetches each source
// and applies that source's verify_keys, as the node would.
func TestCheckConfigVerifiesSignatures(t *testing.T) {
	dir := t.TempDir()
	pubFile := filepath.Join(dir, "cp.pub")
	writeFile(t, pubFile, readFile(t, filepath.Join(signedDir, "test-only.pub")))
	for _, tc := range []struct {
		file    string
		code    int
		wantOut string
	}{
		{"authz.signed.json", 0, "authz.json: ok (version 42; signature verified)"},
		{"authz.no-signature.json", 1, "has no signatures"},
		{"../authz/valid.json", 1, "not a signed envelope"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			writeFile(t, filepath.Join(dir, "authz.json"), readFile(t, filepath.Join(signedDir, tc.file)))
			cfg := nodeConfig(t, dir, "static", "file:authz.json", "openai-main")
			text := string(readFile(t, cfg)) + "verify_keys = [\"cp.pub\"]\n" // the last table is [authz]
			writeFile(t, cfg, []byte(text))
			code, stdout, stderr := runCmd(t, "", "check", "--config", cfg)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.wantOut) {
				t.Errorf("exit %d, want %d; output %q, want %q", code, tc.code, stdout+stderr, tc.wantOut)
			}
		})
	}
}
