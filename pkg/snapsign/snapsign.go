package snapsign

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/scootgate/scootgate/pkg/internal/contract"
)

// The payload types of the two snapshot kinds. A node verifying a routing
// snapshot accepts only RoutesPayloadType, an authorization snapshot only
// AuthzPayloadType.
const (
	RoutesPayloadType = "application/vnd.scootgate.routes+json"
	AuthzPayloadType  = "application/vnd.scootgate.authz+json"
)

// Errors from [Decode] and [Verify]; test with errors.Is.
var (
	// ErrNotEnvelope: the document is not a DSSE JSON envelope (for
	// example a plain, unsigned snapshot).
	ErrNotEnvelope = errors.New("snapsign: not a DSSE envelope")
	// ErrPayloadType: the envelope carries another kind of document.
	ErrPayloadType = errors.New("snapsign: wrong payload type")
	// ErrNoValidSignature: no signature verifies with a trusted key
	// (none at all, a wrong key, or a payload or payload type changed
	// after signing).
	ErrNoValidSignature = errors.New("snapsign: no valid signature by a trusted key")
)

// Envelope is the DSSE JSON envelope. Payload is kept in its base64 form,
// as received; [Envelope.Verify] decodes it.
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature. KeyID is a hint, never trusted.
type Signature struct {
	KeyID string `json:"keyid,omitempty"`
	Sig   string `json:"sig"`
}

// PAE is the DSSE pre-authentication encoding that signatures cover:
//
//	"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
//
// where LEN is the decimal byte length (of the UTF-8 type) without leading
// zeros.
func PAE(payloadType string, payload []byte) []byte {
	b := make([]byte, 0, len("DSSEv1  ")+2*20+len(payloadType)+len(payload)+2)
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	return append(b, payload...)
}

// Sign returns an envelope of payload, signed by each key in order, with
// standard base64 and each signature's keyid set to [KeyID] of its key.
func Sign(payloadType string, payload []byte, keys ...ed25519.PrivateKey) *Envelope {
	pae := PAE(payloadType, payload)
	e := &Envelope{
		PayloadType: payloadType,
		Payload:     base64.StdEncoding.EncodeToString(payload),
		Signatures:  make([]Signature, 0, len(keys)),
	}
	for _, k := range keys {
		e.Signatures = append(e.Signatures, Signature{
			KeyID: KeyID(k.Public().(ed25519.PublicKey)),
			Sig:   base64.StdEncoding.EncodeToString(ed25519.Sign(k, pae)),
		})
	}
	return e
}

// Marshal returns the envelope as indented JSON with a final newline, the
// form `scootgate sign` prints.
func (e *Envelope) Marshal() []byte {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		panic("snapsign: marshal: " + err.Error()) // strings and a slice: cannot fail
	}
	return append(b, '\n')
}

// IsEnvelope reports whether data looks like a DSSE envelope rather than a
// plain document: a JSON object with a string payloadType member, its name
// written without escapes. It does not check anything else. A document
// without the bytes "payloadType" in quotes is answered without parsing,
// so asking costs a plain document next to nothing.
func IsEnvelope(data []byte) bool {
	if !bytes.Contains(data, []byte(`"payloadType"`)) {
		return false
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(data, &probe) != nil {
		return false
	}
	var typ string
	raw, ok := probe["payloadType"]
	return ok && strictString(raw, &typ) == nil
}

// envelopeShape is the members Decode reads, all required but keyid;
// other members are allowed (DSSE parsing rules), but not in another
// letter case.
var envelopeShape = contract.ShapeOf(reflect.TypeFor[Envelope]()).Open().Required()

// Decode reads an envelope with the DSSE parsing rules: payload,
// payloadType, signatures and each signature's sig are required (they
// may be empty), keyid is optional, unknown members are ignored. Member
// names are matched exactly, as proto/envelope.schema.json reads them: a
// name that appears twice in one object, at any depth, a name that
// differs from one of these only in letter case ("Payload", "Sig",
// "KeyID", or a look-alike under Unicode case folding such as
// "\u017fig"), or a string that is not well-formed Unicode, is an error
// naming the member. Errors wrap [ErrNotEnvelope].
func Decode(data []byte) (*Envelope, error) {
	// Two readers must never see two envelopes in one document. Go's
	// encoding/json matches "Payload" to a payload field and keeps the
	// last of two duplicates; other DSSE implementations keep the first.
	// Both of an envelope's readings may carry a valid signature (a
	// signer signs two payloads and lists both signatures), so a DSSE
	// reader that decodes into a struct would verify and audit another
	// payload, payload type or signature than the one this node applies.
	if l, ok, syntax := contract.Exact(data, envelopeShape); !ok && !syntax {
		return nil, fmt.Errorf("%w: %s", ErrNotEnvelope, l.Text(""))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return nil, fmt.Errorf("%w: expected a JSON object with payloadType, payload and signatures", ErrNotEnvelope)
	}
	var e Envelope
	for _, m := range []struct {
		name string
		dst  any
	}{{"payloadType", &e.PayloadType}, {"payload", &e.Payload}} {
		raw, ok := top[m.name]
		if !ok {
			return nil, fmt.Errorf("%w: missing member %q", ErrNotEnvelope, m.name)
		}
		if err := strictString(raw, m.dst.(*string)); err != nil {
			return nil, fmt.Errorf("%w: member %q: expected a string", ErrNotEnvelope, m.name)
		}
	}
	raw, ok := top["signatures"]
	if !ok {
		return nil, fmt.Errorf("%w: missing member \"signatures\"", ErrNotEnvelope)
	}
	var sigs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &sigs); err != nil || sigs == nil {
		return nil, fmt.Errorf("%w: member \"signatures\": expected an array of objects", ErrNotEnvelope)
	}
	e.Signatures = make([]Signature, len(sigs))
	for i, s := range sigs {
		sig, ok := s["sig"]
		if !ok || s == nil {
			return nil, fmt.Errorf("%w: signatures[%d]: missing member \"sig\"", ErrNotEnvelope, i)
		}
		if strictString(sig, &e.Signatures[i].Sig) != nil {
			return nil, fmt.Errorf("%w: signatures[%d].sig: expected a string", ErrNotEnvelope, i)
		}
		if kid, ok := s["keyid"]; ok && strictString(kid, &e.Signatures[i].KeyID) != nil {
			return nil, fmt.Errorf("%w: signatures[%d].keyid: expected a string", ErrNotEnvelope, i)
		}
	}
	return &e, nil
}

// strictString decodes a JSON string; null is not one.
func strictString(raw json.RawMessage, dst *string) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("null")
	}
	return json.Unmarshal(raw, dst)
}

// Verify decodes data as an envelope and verifies it (see
// [Envelope.Verify]); it returns the payload.
func Verify(data []byte, payloadType string, trusted []ed25519.PublicKey) ([]byte, error) {
	e, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return e.Verify(payloadType, trusted)
}

// Verify returns the payload when at least one signature verifies with one
// of the trusted keys and the payload type is payloadType. It is
// [Envelope.VerifyThreshold] with a threshold of 1.
func (e *Envelope) Verify(payloadType string, trusted []ed25519.PublicKey) ([]byte, error) {
	return e.VerifyThreshold(payloadType, trusted, 1)
}

// VerifyThreshold returns the payload when signatures by at least
// threshold distinct trusted keys verify over PAE(e.PayloadType, payload)
// and e.PayloadType is payloadType (the DSSE multi-signature rule; the
// order of checks is the protocol's: signatures, then type). Keyids are
// not consulted: every signature is tried against every trusted key.
// Errors wrap [ErrNotEnvelope] (bad base64), [ErrNoValidSignature] or
// [ErrPayloadType] and never quote the payload or a signature.
func (e *Envelope) VerifyThreshold(payloadType string, trusted []ed25519.PublicKey, threshold int) ([]byte, error) {
	payload, err := decodeBase64(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %w", ErrNotEnvelope, err)
	}
	pae := PAE(e.PayloadType, payload)
	threshold = max(threshold, 1)
	accepted := make([]bool, len(trusted))
	n := 0
	for i, s := range e.Signatures {
		sig, err := decodeBase64(s.Sig)
		if err != nil {
			return nil, fmt.Errorf("%w: signatures[%d].sig: %w", ErrNotEnvelope, i, err)
		}
		if len(sig) != ed25519.SignatureSize {
			continue // another algorithm's signature, or garbage: not ours
		}
		for k, pub := range trusted {
			if !accepted[k] && len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, pae, sig) {
				accepted[k] = true
				n++
				break
			}
		}
	}
	switch {
	case n < threshold && len(e.Signatures) == 0:
		return nil, fmt.Errorf("%w: the envelope has no signatures", ErrNoValidSignature)
	case n < threshold && threshold == 1:
		return nil, fmt.Errorf("%w: none of %d signature(s) verifies with any of the %d trusted key(s) (wrong key, or the payload or payload type was changed after signing)",
			ErrNoValidSignature, len(e.Signatures), len(trusted))
	case n < threshold:
		return nil, fmt.Errorf("%w: %d distinct trusted key(s) signed, %d required", ErrNoValidSignature, n, threshold)
	case e.PayloadType != payloadType:
		return nil, fmt.Errorf("%w: %q, expected %q", ErrPayloadType, e.PayloadType, payloadType)
	}
	return payload, nil
}

// Unwrap returns the payload of an envelope of payloadType without
// verifying any signature: for readers that do not require signatures
// (a node without trusted keys, `scootgate check` without --verify-key).
func (e *Envelope) Unwrap(payloadType string) ([]byte, error) {
	if e.PayloadType != payloadType {
		return nil, fmt.Errorf("%w: %q, expected %q", ErrPayloadType, e.PayloadType, payloadType)
	}
	payload, err := decodeBase64(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %w", ErrNotEnvelope, err)
	}
	return payload, nil
}

// decodeBase64 accepts standard and URL-safe base64, padded or not: DSSE
// verifiers must accept either alphabet, and signers differ on padding.
// The signature covers the decoded bytes, so a lenient decoding cannot
// make a forgery verify.
func decodeBase64(s string) ([]byte, error) {
	enc := base64.StdEncoding
	for i := 0; i < len(s); i++ {
		if s[i] == '-' || s[i] == '_' {
			enc = base64.URLEncoding
			break
		}
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, errors.New("not valid base64")
	}
	return b, nil
}
