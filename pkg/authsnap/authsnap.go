package authsnap

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Schema is the only schema number this package reads and writes.
const Schema = 1

// Limits enforced by [Snapshot.Validate].
const (
	// MaxIDLength is the longest key_id or tenant_id, in characters.
	MaxIDLength = 128
	// DigestLength is the length of a key digest: hex-encoded SHA-256.
	DigestLength = 2 * sha256.Size
)

// Snapshot is one complete authorization snapshot.
type Snapshot struct {
	Schema      int       `json:"schema"`                // must be [Schema]
	Version     uint64    `json:"version"`               // ≥ 1, strictly increasing per publisher
	GeneratedAt time.Time `json:"generated_at,omitzero"` // informational; zero = not given
	Keys        []Key     `json:"keys"`                  // required; empty = no key is accepted
}

// Key describes one client API key.
type Key struct {
	KeyID    string `json:"key_id"`    // stable id, safe to log (1–128 characters)
	TenantID string `json:"tenant_id"` // owner, safe to log (1–128 characters)
	Digest   string `json:"digest"`    // [Digest] of the raw key: 64 lowercase hex characters

	// Models is the allowlist of public model names. nil (omitted or null in
	// JSON) allows every model; an empty, non-nil slice allows none. An
	// entry that ends in "*" is a pattern: it allows every asked name that
	// starts with the part before the "*" and goes on for at least one
	// character ("claude-*" allows "claude-sonnet-4-5"). The
	// omitzero option keeps that distinction when encoding: omitempty would
	// drop an empty list and turn "no models" into "all models".
	Models []string `json:"models,omitzero"`

	ExpiresAt *time.Time `json:"expires_at,omitempty"` // nil = never expires
	Disabled  bool       `json:"disabled,omitempty"`   // rejected like an unknown key
}

// Digest returns the digest a snapshot stores for rawKey: the SHA-256 of
// its bytes, as 64 lowercase hex characters.
func Digest(rawKey string) string {
	sum := sha256.Sum256([]byte(rawKey))
	return hex.EncodeToString(sum[:])
}
