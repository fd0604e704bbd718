// Package authsnap defines the authorization snapshot, schema 1: the
// document a control plane publishes so that ScootGate nodes can
// authenticate client API keys (docs/authorization.md).
//
// # Basics
//
// A snapshot lists every API key a node must accept, identified only by the
// SHA-256 digest of the raw key (lowercase hex, see [Digest]). Raw keys never
// appear in a snapshot, and a node never learns them except for the moment a
// request presents one.
//
//	{ "schema": 1, "version": 42, "generated_at": "2026-11-29T10:00:00Z",
//	  "keys": [ { "key_id": "k_123", "tenant_id": "t_9",
//	              "digest": "<64 lowercase hex sha256 of the raw key>",
//	              "models": ["demo-gpt"], "expires_at": "2027-01-01T00:00:00Z",
//	              "disabled": false } ] }
//
// A key's models field is its allowlist of public model names: omitted or
// null allows every model, an empty array allows none. expires_at is
// optional; a key is expired from that instant on. A disabled key is
// rejected exactly like a key that is not listed.
//
// A key may carry [Limits] (requests and tokens per minute, concurrent
// requests), and the optional tenants list gives a tenant limits shared by
// all its keys; a request must pass both (docs/limits.md). A member that
// is 0 in Go is no limit and is omitted in JSON, where 0 is refused.
//
// The snapshot is complete, not a delta: a key missing from the newest
// snapshot is revoked (docs/authorization.md). Nodes apply a snapshot only if its version is
// strictly greater than the one they hold; an equal version means "no
// change" (docs/snapshots.md). The JSON Schema is proto/authsnap.schema.json.
//
// # Decoding and validation
//
// [Decode] is strict about shape: exactly one JSON object, no unknown
// members, no trailing data. Its errors are [*DecodeError] values that name
// the member (for example keys[2].digest) and, for syntax errors, the line
// and column. [Snapshot.Validate] checks meaning and reports every problem at
// once in a [*ValidationError]. A node rejects the whole document if either
// fails, and keeps serving the previous snapshot (docs/snapshots.md).
//
// Control-plane authors can build a [Snapshot], call Validate, and publish
// the result of encoding/json.Marshal: it decodes back to the same value.
//
// # Caveats
//
// The package imports only the standard library (and pkg/internal/contract,
// which does too) and does no I/O, so it can
// be vendored into any control plane. Error messages never contain digest
// values, only member paths and key ids.
package authsnap
