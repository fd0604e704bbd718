package snapsign_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/pkg/snapsign"
)

// hostileDir holds envelopes that a reader matching member names exactly
// and one decoding into a Go struct (encoding/json: case-insensitive
// names, the last duplicate wins) would read differently, each finding a
// valid signature. They are written by cmd/scootgate's TestSignedExamples.
const hostileDir = "../../testdata/signed/hostile"

// TestHostileEnvelopes: Decode and Verify refuse every hostile envelope,
// naming the member, although a struct reader finds it validly signed.
func TestHostileEnvelopes(t *testing.T) {
	var trusted []ed25519.PublicKey
	for _, f := range []string{"test-only.pub", "other.pub"} {
		text, err := os.ReadFile(filepath.Join(hostileDir, "..", f))
		if err != nil {
			t.Fatal(err)
		}
		keys, err := snapsign.ParsePublicKeys(text)
		if err != nil {
			t.Fatal(err)
		}
		trusted = append(trusted, keys...)
	}
	want := map[string]string{ // file: the error's member and message
		"payload-case-twin.json":      `Payload: unknown member; did you mean "payload"?`,
		"payload-duplicate.json":      `payload: duplicate member (each name may appear once)`,
		"payload-type-case-twin.json": `PayloadType: unknown member; did you mean "payloadType"?`,
		"envelope-case-twins.json":    `PayloadType: unknown member; did you mean "payloadType"?`,
		"sig-case-twin.json":          `signatures[0].Sig: unknown member; did you mean "sig"?`,
		"sig-duplicate.json":          `signatures[0].sig: duplicate member (each name may appear once)`,
		"sig-long-s.json":             `signatures[0]["\u017fig"]: unknown member; did you mean "sig"?`,
		"keyid-case-twin.json":        `signatures[0].KeyID: unknown member; did you mean "keyid"?`,
		"keyid-kelvin.json":           `signatures[0]["\u212aeyid"]: unknown member; did you mean "keyid"?`,
	}
	files, err := filepath.Glob(filepath.Join(hostileDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if wantNames := slices.Sorted(mapKeys(want)); !slices.Equal(names, wantNames) {
		t.Fatalf("files in %s = %v, want %v", hostileDir, names, wantNames)
	}
	for name, msg := range want {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(hostileDir, name))
			if err != nil {
				t.Fatal(err)
			}
			// The fixture is hostile only if a lenient reader accepts it.
			var lenient snapsign.Envelope
			if err := json.Unmarshal(data, &lenient); err != nil {
				t.Fatal(err)
			}
			if _, err := lenient.Verify(lenient.PayloadType, trusted); err != nil {
				t.Fatalf("a struct reader finds no valid signature, so the fixture proves nothing: %v", err)
			}

			_, err = snapsign.Decode(data)
			if !errors.Is(err, snapsign.ErrNotEnvelope) || !strings.Contains(err.Error(), msg) {
				t.Errorf("Decode error = %v, want ErrNotEnvelope with %q", err, msg)
			}
			_, err = snapsign.Verify(data, snapsign.RoutesPayloadType, trusted)
			if !errors.Is(err, snapsign.ErrNotEnvelope) || !strings.Contains(err.Error(), msg) {
				t.Errorf("Verify error = %v, want ErrNotEnvelope with %q", err, msg)
			}
		})
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
