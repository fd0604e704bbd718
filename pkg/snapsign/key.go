package snapsign

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// ErrKey reports PEM text that holds no usable ed25519 key.
var ErrKey = errors.New("snapsign: not an ed25519 key")

// KeyID returns the keyid [Sign] writes for pub: the lowercase hex
// SHA-256 of its PKIX DER encoding (the bytes between the PEM armour of
// `openssl pkey -pubout`).
func KeyID(pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// MarshalPublicKey returns pub as a PEM "PUBLIC KEY" block, the form of
// `openssl pkey -pubout`.
func MarshalPublicKey(pub ed25519.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic("snapsign: marshal public key: " + err.Error()) // only for a malformed key
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// MarshalPrivateKey returns key as a PEM PKCS#8 "PRIVATE KEY" block, the
// form of `openssl genpkey -algorithm ed25519`.
func MarshalPrivateKey(key ed25519.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic("snapsign: marshal private key: " + err.Error())
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// ParsePublicKeys returns every ed25519 key of the "PUBLIC KEY" blocks in
// text (one file may hold several, for rotation). Text outside blocks is
// ignored; any other block, or no block at all, is an error wrapping
// [ErrKey]. Public keys are not secret; errors still quote nothing.
func ParsePublicKeys(text []byte) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for n := 1; ; n++ {
		var b *pem.Block
		b, text = pem.Decode(text)
		if b == nil {
			break
		}
		if b.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("%w: PEM block %d is %q, expected \"PUBLIC KEY\" (as openssl pkey -pubout writes)", ErrKey, n, b.Type)
		}
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: PEM block %d: %w", ErrKey, n, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%w: PEM block %d is a %T, expected ed25519", ErrKey, n, k)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no PEM \"PUBLIC KEY\" block", ErrKey)
	}
	return keys, nil
}

// ParsePrivateKey reads one PEM PKCS#8 "PRIVATE KEY" block holding an
// ed25519 key. Errors wrap [ErrKey] and never include key bytes.
func ParsePrivateKey(text []byte) (ed25519.PrivateKey, error) {
	b, _ := pem.Decode(text)
	switch {
	case b == nil:
		return nil, fmt.Errorf("%w: no PEM block", ErrKey)
	case b.Type != "PRIVATE KEY":
		return nil, fmt.Errorf("%w: PEM block is %q, expected \"PRIVATE KEY\" (PKCS#8, as openssl genpkey -algorithm ed25519 writes)", ErrKey, b.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		// x509's messages describe the structure, never the key bytes.
		return nil, fmt.Errorf("%w: %s", ErrKey, strings.TrimPrefix(err.Error(), "x509: "))
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: the PEM block holds a %T, expected ed25519", ErrKey, k)
	}
	return priv, nil
}
