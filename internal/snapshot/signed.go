package snapshot

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/scootgate/scootgate/pkg/snapsign"
)

// Signed wraps decode so that it sees the payload of a DSSE envelope
// (pkg/snapsign) instead of the fetched bytes. The poller persists and
// restores what was fetched, so the last good copy on disk keeps its
// envelope and is verified again by Restore.
//
// With trusted keys, a document must be an envelope of payloadType with a
// valid ed25519 signature by one of them; anything else (a plain
// document, a wrong key, a changed payload, another payload type) is
// rejected with an error wrapping [ErrSignature], before decode runs.
// Without trusted keys, plain documents are passed through unchanged and
// envelopes are unwrapped after a check of their payload type only, so a
// control plane can start signing before its nodes require signatures.
func Signed(payloadType string, trusted []ed25519.PublicKey, decode DecodeFunc) DecodeFunc {
	return func(data []byte) (uint64, func() error, error) {
		payload, err := Payload(data, payloadType, trusted)
		if err != nil {
			return 0, nil, err
		}
		return decode(payload)
	}
}

// Payload returns the document inside data by the rules of [Signed]: with
// trusted keys, the verified payload of an envelope of payloadType; without,
// data itself, or an envelope's payload when its type is payloadType.
func Payload(data []byte, payloadType string, trusted []ed25519.PublicKey) ([]byte, error) {
	if len(trusted) == 0 {
		if !snapsign.IsEnvelope(data) {
			return data, nil
		}
		e, err := snapsign.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSignature, err)
		}
		payload, err := e.Unwrap(payloadType)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSignature, err)
		}
		return payload, nil
	}
	payload, err := snapsign.Verify(data, payloadType, trusted)
	switch {
	case errors.Is(err, snapsign.ErrNotEnvelope) && !snapsign.IsEnvelope(data):
		return nil, fmt.Errorf("%w: the document is not a signed envelope, and signatures are required (verify_keys; sign it with `scootgate sign`)", ErrSignature)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	return payload, nil
}
