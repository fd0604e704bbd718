package snapshot_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/snapsign"
)

func signingKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func trust(keys ...ed25519.PrivateKey) []ed25519.PublicKey {
	out := make([]ed25519.PublicKey, len(keys))
	for i, k := range keys {
		out[i] = k.Public().(ed25519.PublicKey)
	}
	return out
}

func signed(typ, doc string, keys ...ed25519.PrivateKey) string {
	return string(snapsign.Sign(typ, []byte(doc), keys...).Marshal())
}

func newSignedPoller(t *testing.T, store *snapshot.DiskStore, trusted []ed25519.PublicKey) *pollerEnv {
	t.Helper()
	e := newPollerEnv(t, nil, 0)
	e.p = snapshot.NewPoller(snapshot.PollerOptions{
		Name:   "routes",
		Source: e.src,
		Decode: snapshot.Signed(snapsign.RoutesPayloadType, trusted, e.tg.decode),
		Store:  store,
		Clock:  e.clock.Now,
		Logger: slog.New(slog.NewTextHandler(&syncWriter{w: e.logs}, nil)),
	})
	return e
}

// TestSignedPoller: with trusted keys, every document that is not an
// envelope of the right type signed by one of them is rejected whole, the
// previous one keeps serving, and the rejection is counted apart.
func TestSignedPoller(t *testing.T) {
	good, rotated, stranger := signingKey(1), signingKey(2), signingKey(3)
	store, err := snapshot.OpenDiskStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newSignedPoller(t, store, trust(good, rotated))

	tampered := snapsign.Sign(snapsign.RoutesPayloadType, []byte(doc(6)), good)
	tampered.Payload = base64.StdEncoding.EncodeToString([]byte(doc(60)))
	steps := []struct {
		name     string
		data     string
		version  uint64 // applied afterwards
		sigRejs  uint64
		wantText string // in the error
	}{
		{"signed", signed(snapsign.RoutesPayloadType, doc(1), good), 1, 0, ""},
		{"unsigned", doc(2), 1, 1, "not a signed envelope"},
		{"wrong key", signed(snapsign.RoutesPayloadType, doc(3), stranger), 1, 2, "no valid signature"},
		{"no signatures", signed(snapsign.RoutesPayloadType, doc(4)), 1, 3, "has no signatures"},
		{"authz envelope", signed(snapsign.AuthzPayloadType, doc(5), good), 1, 4, "wrong payload type"},
		{"payload changed after signing", string(tampered.Marshal()), 1, 5, "no valid signature"},
		{"signed by the rotated key", signed(snapsign.RoutesPayloadType, doc(7), rotated), 7, 5, ""},
		{"two signatures, one trusted", signed(snapsign.RoutesPayloadType, doc(8), stranger, good), 8, 5, ""},
	}
	for _, st := range steps {
		e.src.set(st.data, true, nil)
		err := e.p.Poll(t.Context())
		s := e.p.Status()
		if s.Version != st.version || s.SignatureRejections != st.sigRejs {
			t.Errorf("%s: version %d, signature rejections %d; want %d, %d", st.name, s.Version, s.SignatureRejections, st.version, st.sigRejs)
		}
		switch {
		case st.wantText == "" && err != nil:
			t.Errorf("%s: Poll = %v", st.name, err)
		case st.wantText != "" && (!errors.Is(err, snapshot.ErrSignature) || !strings.Contains(err.Error(), st.wantText)):
			t.Errorf("%s: Poll = %v, want ErrSignature with %q", st.name, err, st.wantText)
		}
	}
	if s := e.p.Status(); s.Rejections != 5 {
		t.Errorf("rejections = %d, want 5", s.Rejections)
	}
	if !strings.Contains(e.logs.String(), "not a signed envelope") {
		t.Errorf("log does not say why:\n%s", e.logs)
	}

	// The last good copy on disk keeps its envelope.
	data, _, _, ok, err := store.Load("routes")
	if err != nil || !ok || !snapsign.IsEnvelope(data) {
		t.Fatalf("persisted copy is not the envelope (ok %v, err %v): %.60s", ok, err, data)
	}

	// A restart verifies it again: with the same keys it serves...
	again := newSignedPoller(t, store, trust(good))
	if err := again.p.Restore(); err != nil || again.p.Status().Version != 8 {
		t.Fatalf("restore with the signing key: %v, version %d", err, again.p.Status().Version)
	}
	// ...and with a key that did not sign it, it is rejected.
	other := newSignedPoller(t, store, trust(rotated))
	err = other.p.Restore()
	if !errors.Is(err, snapshot.ErrSignature) || other.p.Status().Version != 0 || other.p.Status().SignatureRejections != 1 {
		t.Fatalf("restore with another key: %v, status %+v", err, other.p.Status())
	}
}

// TestSignedWithoutKeys: a node without verify_keys reads plain documents
// and envelopes alike (so a control plane can start signing before nodes
// require it), but never an envelope of another kind.
func TestSignedWithoutKeys(t *testing.T) {
	e := newSignedPoller(t, nil, nil)
	for _, st := range []struct {
		name    string
		data    string
		version uint64
		wantErr error
	}{
		{"plain", doc(1), 1, nil},
		{"envelope, not verified", signed(snapsign.RoutesPayloadType, doc(2), signingKey(3)), 2, nil},
		{"unsigned envelope", signed(snapsign.RoutesPayloadType, doc(3)), 3, nil},
		{"authz envelope", signed(snapsign.AuthzPayloadType, doc(4), signingKey(3)), 3, snapshot.ErrSignature},
		{"malformed envelope", `{"payloadType":"` + snapsign.RoutesPayloadType + `","payload":"%%","signatures":[]}`, 3, snapshot.ErrSignature},
	} {
		e.src.set(st.data, true, nil)
		err := e.p.Poll(t.Context())
		if !errors.Is(err, st.wantErr) || e.p.Status().Version != st.version {
			t.Errorf("%s: Poll = %v, version %d; want %v, %d", st.name, err, e.p.Status().Version, st.wantErr, st.version)
		}
	}
}

// BenchmarkSigned is what verify_keys costs a node per document: opening
// and verifying the envelope of a 100-key authorization snapshot, against
// decoding and validating that snapshot (what every node does anyway).
func BenchmarkSigned(b *testing.B) {
	doc := authsnap.Snapshot{Schema: authsnap.Schema, Version: 2}
	for i := range 100 {
		doc.Keys = append(doc.Keys, authsnap.Key{KeyID: fmt.Sprintf("k%d", i), TenantID: "t", Digest: authsnap.Digest(fmt.Sprint(i))})
	}
	plain, err := json.Marshal(doc)
	if err != nil {
		b.Fatal(err)
	}
	key := signingKey(1)
	env := snapsign.Sign(snapsign.AuthzPayloadType, plain, key).Marshal()
	b.Run("decode-validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, err := authsnap.Decode(plain)
			if err != nil || d.Validate() != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify-envelope", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := snapshot.Payload(env, snapsign.AuthzPayloadType, trust(key)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSignedRefusesHostileEnvelopes: an envelope that names a member twice,
// or beside a twin in another letter case (testdata/signed/hostile), is
// refused before decode runs, with or without trusted keys, and the error
// names the member. A DSSE reader decoding into a Go struct would find a
// valid signature on each, over another payload, payload type or
// signature than the one the node reads.
func TestSignedRefusesHostileEnvelopes(t *testing.T) {
	text, err := os.ReadFile("../../testdata/signed/test-only.pub")
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := snapsign.ParsePublicKeys(text)
	if err != nil {
		t.Fatal(err)
	}
	for file, member := range map[string]string{
		"payload-case-twin.json":      "Payload",
		"payload-duplicate.json":      "payload",
		"payload-type-case-twin.json": "PayloadType",
		"envelope-case-twins.json":    "PayloadType",
		"sig-case-twin.json":          "signatures[0].Sig",
		"sig-duplicate.json":          "signatures[0].sig",
		"sig-long-s.json":             `signatures[0]["\u017fig"]`,
		"keyid-case-twin.json":        "signatures[0].KeyID",
		"keyid-kelvin.json":           `signatures[0]["\u212aeyid"]`,
	} {
		data, err := os.ReadFile(filepath.Join("../../testdata/signed/hostile", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, keys := range [][]ed25519.PublicKey{trusted, nil} {
			decoded := false
			decode := snapshot.Signed(snapsign.RoutesPayloadType, keys, func([]byte) (uint64, func() error, error) {
				decoded = true
				return 42, func() error { return nil }, nil
			})
			_, _, err := decode(data)
			if !errors.Is(err, snapshot.ErrSignature) || !strings.Contains(err.Error(), member+": ") || decoded {
				t.Errorf("%s with %d trusted key(s): err = %v (decode ran: %v), want ErrSignature naming %s", file, len(keys), err, decoded, member)
			}
		}
	}
}
