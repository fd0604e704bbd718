// Package authz authenticates client API keys against the authorization
// snapshot (docs/authorization.md).
//
// # Basics
//
// [ExtractKey] finds the key in a request: Authorization: Bearer <key>, or
// x-api-key: <key>; Bearer wins when both are present. [Compile] turns a
// validated [authsnap.Snapshot] into an immutable [Index] keyed by the
// SHA-256 digest of each key. A [Store] holds the current Index behind one
// atomic pointer: [Store.Authenticate] loads it once per call, hashes the
// presented key and looks the digest up; [SnapshotDecoder] plugs the
// document into a snapshot.Poller, which fetches it, applies the version
// rules (strictly newer only) and then compiles and swaps it in.
// The zero Store holds no snapshot and rejects every key (docs/authorization.md:
// while no valid authorization snapshot is loaded, every key is rejected).
//
// A revoked key stops working with the first snapshot that omits it (or
// marks it disabled). A request that already authenticated keeps its
// [Principal]; swaps never touch in-flight requests.
//
// # Secrets
//
// The raw key exists only in the request header and, for the duration of
// Authenticate, as the input to SHA-256. It is never stored, logged,
// formatted into an error, or compared directly: docs/authorization.md forbids even a prefix.
// Digests are not printed either; errors name keys by key_id at most.
//
// # Timing
//
// Lookup is a Go map access keyed by the [32]byte SHA-256 of the presented
// key. That is safe against timing attacks without a constant-time compare:
// the map's hash function is seeded per map at random, so bucket choice
// reveals nothing an attacker can steer, and the final key comparison only
// reveals how long a prefix the attacker's SHA-256 output shares with a
// stored digest. Controlling that prefix requires preimage work against
// SHA-256, and learning a digest would not yield the key anyway. What must
// never happen is a byte-by-byte comparison of the raw key; that is why the
// index is keyed by digests and raw keys are never held.
//
// # Caveats
//
// Keys are trusted to be high-entropy, so an unsalted SHA-256 is the right
// digest (a password hash would cost milliseconds per request for no gain).
// The digest format is fixed by the snapshot schema (pkg/authsnap).
package authz
