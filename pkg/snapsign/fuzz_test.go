package snapsign_test

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"github.com/scootgate/scootgate/pkg/snapsign"
)

// FuzzVerify: no input makes Decode or Verify panic, and whatever
// verifies is exactly what the trusted key signed: a changed payload or
// payload type never verifies.
func FuzzVerify(f *testing.F) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{4}, ed25519.SeedSize))
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	signedDoc := []byte(`{"schema":1,"version":1}`)
	f.Add(snapsign.Sign(snapsign.RoutesPayloadType, signedDoc, key).Marshal())
	f.Add(snapsign.Sign(snapsign.AuthzPayloadType, signedDoc, key).Marshal())
	f.Add([]byte(`{"payloadType":"","payload":"","signatures":[{"sig":""}]}`))
	f.Add([]byte(`{"payloadType":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := snapsign.Decode(data)
		if err != nil {
			return
		}
		payload, err := e.Verify(snapsign.RoutesPayloadType, trusted)
		if err != nil {
			return
		}
		if e.PayloadType != snapsign.RoutesPayloadType || !bytes.Equal(payload, signedDoc) {
			t.Fatalf("verified a payload the key never signed: type %q, payload %q", e.PayloadType, payload)
		}
	})
}
