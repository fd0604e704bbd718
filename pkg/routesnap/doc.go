// Package routesnap defines the routing snapshot, schemas 1 and 2: the document a
// control plane publishes so that ScootGate nodes know their provider
// backends and public models (docs/routing.md, docs/snapshots.md).
//
// # Basics
//
// A snapshot is complete, not a delta: it lists every backend and every
// public model a node serves. Credentials are referenced by name only; the
// values live in each node's local configuration (docs/snapshots.md).
//
//	{ "schema": 1, "version": 42, "generated_at": "2026-11-29T10:00:00Z",
//	  "backends": [ { "id": "openai-1", "protocol": "openai",
//	                  "base_url": "https://api.openai.com/v1",
//	                  "credential": "openai-main", "max_inflight_per_node": 256 } ],
//	  "models": [ { "name": "gpt-4o",
//	                "targets": [ { "backend": "openai-1", "model": "gpt-4o-2024-08-06",
//	                               "weight": 100, "stream": true, "tools": true,
//	                               "json_schema": false, "tier": 0 } ] } ] }
//
// Optional members may be left out: a target's capabilities and tier, and
// a backend's include_usage (OpenAI backends only; absent means the node
// may ask the backend for stream usage, docs/usage-events.md).
//
// A node applies a snapshot only if its version is strictly greater than
// the one it holds; an equal version means "no change" (docs/snapshots.md). The JSON
// Schema is proto/routesnap.schema.json; examples are in testdata/routesnap
// at the repository root.
//
// # Decoding and validation
//
// [Decode] is strict about shape: exactly one JSON object, no unknown
// members, no trailing data, values of the right JSON types. Its errors are
// [*DecodeError] values that name the member (for example
// models[2].targets[0].weight) and, for syntax errors and truncation, the
// line and column. [Snapshot.Validate] checks meaning and reports every
// problem at once in a [*ValidationError]: ids, duplicate backends, models
// and targets, unknown backend references, empty pools, weights, and base
// URLs ([CheckBaseURL]: plaintext only for loopback, no link-local or cloud
// metadata addresses). A node rejects the whole document if either fails,
// and keeps serving the previous one (docs/snapshots.md). The node additionally rejects a
// snapshot that names a credential its configuration does not define.
//
// Control-plane authors can build a [Snapshot], call Validate, and publish
// the result of encoding/json.Marshal: it decodes back to the same value.
//
// # Caveats
//
// The package imports only the standard library (and pkg/internal/contract,
// which does too) and does no I/O, so it can
// be vendored into any control plane. Error messages never quote a base
// URL, only member paths, ids and model names.
//
// Decode matches member names the way encoding/json does, so "Version"
// would be read as "version"; the JSON Schema rejects that spelling, and
// a publisher that checks against the schema never relies on it.
package routesnap
