package snapsign_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/pkg/snapsign"
)

// vectorFile is the DSSE project's published protocol test vectors
// (testvectors/vectors.json of github.com/secure-systems-lab/dsse), kept
// unchanged: ed25519 keys from RFC 8032 section 7.1, deterministic
// signatures.
const vectorFile = "testdata/dsse-vectors.json"

type vectors struct {
	Keys map[string]struct {
		Seed   string `json:"seed"`
		Public string `json:"public"`
	} `json:"keys"`
	Vectors []struct {
		ID          string          `json:"id"`
		Envelope    json.RawMessage `json:"envelope"`
		Trusted     []string        `json:"trustedKeys"`
		Threshold   int             `json:"threshold"`
		Supported   []string        `json:"supportedPayloadTypes"`
		PAE         string          `json:"pae"`
		Expect      string          `json:"expect"`
		Description string          `json:"description"`
	} `json:"vectors"`
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	raw, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) < 9 {
		t.Fatalf("only %d vectors in %s", len(v.Vectors), vectorFile)
	}
	return v
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVectors runs every published DSSE vector: the PAE bytes, and the
// accept or reject verdict with the vector's trusted keys and threshold.
func TestVectors(t *testing.T) {
	v := loadVectors(t)
	for _, tc := range v.Vectors {
		t.Run(tc.ID, func(t *testing.T) {
			env, err := snapsign.Decode(tc.Envelope)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			// The PAE the vector's signatures cover; for an accepted
			// envelope, over its own type and payload.
			payload, err := env.Unwrap(env.PayloadType)
			if err != nil {
				t.Fatal(err)
			}
			if got := snapsign.PAE(env.PayloadType, payload); tc.Expect == "accept" && !bytes.Equal(got, mustHex(t, tc.PAE)) {
				t.Errorf("PAE = %q\nwant  %q", got, mustHex(t, tc.PAE))
			}
			var trusted []ed25519.PublicKey
			for _, name := range tc.Trusted {
				k := v.Keys[name]
				pub := ed25519.NewKeyFromSeed(mustHex(t, k.Seed)).Public().(ed25519.PublicKey)
				if !bytes.Equal(pub, mustHex(t, k.Public)) {
					t.Fatalf("key %s: seed and public key disagree", name)
				}
				trusted = append(trusted, pub)
			}
			want := tc.Supported[0]
			if slices.Contains(tc.Supported, env.PayloadType) {
				want = env.PayloadType
			}
			_, err = env.VerifyThreshold(want, trusted, tc.Threshold)
			if got := map[bool]string{true: "accept", false: "reject"}[err == nil]; got != tc.Expect {
				t.Errorf("%s: got %s (err %v), want %s", tc.Description, got, err, tc.Expect)
			}
		})
	}
}

// TestSignMatchesVectors: Sign with the vectors' key A reproduces the
// published signature (ed25519 is deterministic), so what Sign writes is
// what any DSSE implementation writes.
func TestSignMatchesVectors(t *testing.T) {
	v := loadVectors(t)
	key := ed25519.NewKeyFromSeed(mustHex(t, v.Keys["A"].Seed))
	var env struct {
		Payload    string `json:"payload"`
		Signatures []struct {
			Sig string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(v.Vectors[0].Envelope, &env); err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(env.Payload)
	got := snapsign.Sign("application/vnd.in-toto+json", payload, key)
	if got.Payload != env.Payload || got.Signatures[0].Sig != env.Signatures[0].Sig {
		t.Errorf("Sign = %+v, want payload %s sig %s", got, env.Payload, env.Signatures[0].Sig)
	}
}

func TestPAE(t *testing.T) {
	// The example in the DSSE protocol document.
	got := snapsign.PAE("http://example.com/HelloWorld", []byte("hello world"))
	if want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"; string(got) != want {
		t.Errorf("PAE = %q, want %q", got, want)
	}
}

func newKey(t *testing.T, seed byte) ed25519.PrivateKey {
	t.Helper()
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func TestVerify(t *testing.T) {
	good, other := newKey(t, 1), newKey(t, 2)
	doc := []byte(`{"schema":1,"version":3}`)
	signed := snapsign.Sign(snapsign.RoutesPayloadType, doc, good).Marshal()

	tamperedPayload := snapsign.Sign(snapsign.RoutesPayloadType, doc, good)
	tamperedPayload.Payload = base64.StdEncoding.EncodeToString([]byte(`{"schema":1,"version":4}`))
	retyped := snapsign.Sign(snapsign.RoutesPayloadType, doc, good)
	retyped.PayloadType = snapsign.AuthzPayloadType
	unsigned := snapsign.Sign(snapsign.RoutesPayloadType, doc)
	misleading := snapsign.Sign(snapsign.RoutesPayloadType, doc, good)
	misleading.Signatures[0].KeyID = snapsign.KeyID(pub(other)) // a hint only
	for _, tc := range []struct {
		name    string
		data    []byte
		typ     string
		keys    []ed25519.PublicKey
		wantErr error
	}{
		{"signed", signed, snapsign.RoutesPayloadType, []ed25519.PublicKey{pub(good)}, nil},
		{"second of two trusted keys (rotation)", signed, snapsign.RoutesPayloadType, []ed25519.PublicKey{pub(other), pub(good)}, nil},
		{"keyid names another key", misleading.Marshal(), snapsign.RoutesPayloadType, []ed25519.PublicKey{pub(other), pub(good)}, nil},
		{"wrong key", signed, snapsign.RoutesPayloadType, []ed25519.PublicKey{pub(other)}, snapsign.ErrNoValidSignature},
		{"no trusted keys", signed, snapsign.RoutesPayloadType, nil, snapsign.ErrNoValidSignature},
		{"routes envelope read as authz", signed, snapsign.AuthzPayloadType, []ed25519.PublicKey{pub(good)}, snapsign.ErrPayloadType},
		{"payload changed", tamperedPayload.Marshal(), snapsign.RoutesPayloadType, []ed25519.PublicKey{pub(good)}, snapsign.ErrNoValidSignature},
		{"payload type changed", retyped.Marshal(), snapsign.AuthzPayloadType, []ed25519.PublicKey{pub(good)}, snapsign.ErrNoValidSignature},
		{"no signatures", unsigned.Marshal(), snapsign.RoutesPayloadType, []ed25519.PublicKey{pub(good)}, snapsign.ErrNoValidSignature},
		{"plain document", doc, snapsign.RoutesPayloadType, []ed25519.PublicKey{pub(good)}, snapsign.ErrNotEnvelope},
		{"not JSON", []byte("garbage"), snapsign.RoutesPayloadType, []ed25519.PublicKey{pub(good)}, snapsign.ErrNotEnvelope},
		{"bad base64", []byte(`{"payloadType":"x","payload":"!!","signatures":[]}`), "x", []ed25519.PublicKey{pub(good)}, snapsign.ErrNotEnvelope},
		{"null payload", []byte(`{"payloadType":"x","payload":null,"signatures":[]}`), "x", []ed25519.PublicKey{pub(good)}, snapsign.ErrNotEnvelope},
		{"sig missing", []byte(`{"payloadType":"x","payload":"","signatures":[{"keyid":"a"}]}`), "x", []ed25519.PublicKey{pub(good)}, snapsign.ErrNotEnvelope},
		{"payload twice", bytes.Replace(signed, []byte(`"payload":`), []byte(`"payload": "e30=", "payload":`), 1), snapsign.RoutesPayloadType, []ed25519.PublicKey{pub(good)}, snapsign.ErrNotEnvelope},
		{"sig twice", bytes.Replace(signed, []byte(`"sig":`), []byte(`"sig": "", "sig":`), 1), snapsign.RoutesPayloadType, []ed25519.PublicKey{pub(good)}, snapsign.ErrNotEnvelope},
		{"member name case differs", []byte(`{"PayloadType":"x","payload":"","signatures":[]}`), "x", []ed25519.PublicKey{pub(good)}, snapsign.ErrNotEnvelope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := snapsign.Verify(tc.data, tc.typ, tc.keys)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify error = %v, want %v", err, tc.wantErr)
			}
			if err == nil && !bytes.Equal(got, doc) {
				t.Errorf("payload = %q, want %q", got, doc)
			}
			if err != nil && strings.Contains(err.Error(), signedSig(signed)) {
				t.Errorf("error quotes the signature: %v", err)
			}
		})
	}
}

func signedSig(data []byte) string {
	e, err := snapsign.Decode(data)
	if err != nil {
		panic(err)
	}
	return e.Signatures[0].Sig
}

// TestDecodeIgnoresUnknownMembers: DSSE consumers must ignore members
// they do not know, and an unset keyid equals an empty one.
func TestDecodeIgnoresUnknownMembers(t *testing.T) {
	k := newKey(t, 1)
	e := snapsign.Sign(snapsign.AuthzPayloadType, []byte("{}"), k)
	data := []byte(`{"extra":1,"payloadType":"` + e.PayloadType + `","payload":"` + e.Payload +
		`","signatures":[{"sig":"` + e.Signatures[0].Sig + `","future":true}]}`)
	if _, err := snapsign.Verify(data, snapsign.AuthzPayloadType, []ed25519.PublicKey{pub(k)}); err != nil {
		t.Fatal(err)
	}
}

func TestKeysRoundTrip(t *testing.T) {
	k := newKey(t, 7)
	priv, err := snapsign.ParsePrivateKey(snapsign.MarshalPrivateKey(k))
	if err != nil || !priv.Equal(k) {
		t.Fatalf("private key round trip: %v", err)
	}
	two := append(snapsign.MarshalPublicKey(pub(k)), snapsign.MarshalPublicKey(pub(newKey(t, 8)))...)
	keys, err := snapsign.ParsePublicKeys(two)
	if err != nil || len(keys) != 2 || !keys[0].Equal(pub(k)) {
		t.Fatalf("public keys: %v %v", keys, err)
	}
	for name, text := range map[string][]byte{
		"empty":       nil,
		"private PEM": snapsign.MarshalPrivateKey(k),
		"garbage":     []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"),
	} {
		if _, err := snapsign.ParsePublicKeys(text); !errors.Is(err, snapsign.ErrKey) {
			t.Errorf("%s: ParsePublicKeys error = %v, want ErrKey", name, err)
		}
	}
	if _, err := snapsign.ParsePrivateKey(snapsign.MarshalPublicKey(pub(k))); !errors.Is(err, snapsign.ErrKey) {
		t.Errorf("ParsePrivateKey of a public key: %v", err)
	}
}

// TestOpenSSL checks interoperability with OpenSSL: a key made by
// `openssl genpkey`, its public half from `openssl pkey -pubout`, a
// signature over the PAE bytes from `openssl pkeyutl -sign -rawin`, and
// the keyid from the DER form. Skipped without an openssl binary.
func TestOpenSSL(t *testing.T) {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("SKIP: no openssl in PATH; OpenSSL interoperability not checked")
	}
	dir := t.TempDir()
	keyFile, pubFile := filepath.Join(dir, "cp.key"), filepath.Join(dir, "cp.pub")
	run := func(stdin []byte, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Stdin = bytes.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("openssl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	run(nil, "genpkey", "-algorithm", "ed25519", "-out", keyFile)
	run(nil, "pkey", "-in", keyFile, "-pubout", "-out", pubFile)

	pemPub, _ := os.ReadFile(pubFile)
	keys, err := snapsign.ParsePublicKeys(pemPub)
	if err != nil {
		t.Fatal(err)
	}
	pemPriv, _ := os.ReadFile(keyFile)
	priv, err := snapsign.ParsePrivateKey(pemPriv)
	if err != nil {
		t.Fatal(err)
	}
	if !pub(priv).Equal(keys[0]) {
		t.Fatal("the public key openssl derived differs from ours")
	}

	// OpenSSL signs the PAE; we verify the envelope built around it.
	doc := []byte(`{"schema":1,"version":9}`)
	paeFile := filepath.Join(dir, "pae")
	if err := os.WriteFile(paeFile, snapsign.PAE(snapsign.AuthzPayloadType, doc), 0o600); err != nil {
		t.Fatal(err)
	}
	sig := run(nil, "pkeyutl", "-sign", "-rawin", "-inkey", keyFile, "-in", paeFile)
	env := &snapsign.Envelope{
		PayloadType: snapsign.AuthzPayloadType,
		Payload:     base64.StdEncoding.EncodeToString(doc),
		Signatures:  []snapsign.Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}},
	}
	if got, err := snapsign.Verify(env.Marshal(), snapsign.AuthzPayloadType, keys); err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("envelope signed by openssl: %v", err)
	}

	// We sign; OpenSSL verifies the PAE with the signature we wrote.
	ours := snapsign.Sign(snapsign.AuthzPayloadType, doc, priv)
	raw, _ := base64.StdEncoding.DecodeString(ours.Signatures[0].Sig)
	sigFile := filepath.Join(dir, "sig")
	if err := os.WriteFile(sigFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := run(nil, "pkeyutl", "-verify", "-rawin", "-pubin", "-inkey", pubFile, "-in", paeFile, "-sigfile", sigFile); !bytes.Contains(out, []byte("Success")) {
		t.Fatalf("openssl did not verify our signature: %s", out)
	}

	der := run(nil, "pkey", "-pubin", "-in", pubFile, "-outform", "DER")
	if got, want := snapsign.KeyID(keys[0]), sha256Hex(der); got != want {
		t.Errorf("KeyID = %s, want sha256 of the DER form %s", got, want)
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestIsEnvelope(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"payloadType":"x","payload":"","signatures":[]}`: true,
		`{"payloadType":"x"}`:                              true,
		`{"schema":1,"version":2}`:                         false,
		`{"payloadType":null}`:                             false,
		`{"payloadType":1}`:                                false,
		`{"note":"payloadType"}`:                           false,
		`["payloadType"]`:                                  false,
		`{"payloadType":"x"`:                               false, // truncated
	} {
		if got := snapsign.IsEnvelope([]byte(doc)); got != want {
			t.Errorf("IsEnvelope(%s) = %v, want %v", doc, got, want)
		}
	}
}
