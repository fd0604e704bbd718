package snapshot

import "errors"

// Configuration errors, from ParseSource and NewHTTPSource. The node does
// not start.
var (
	// ErrUnsupportedSource reports a source string that cannot be used:
	// an unknown scheme, a malformed file: URL, user info in an http(s)
	// URL, or plaintext http:// to a host that is not loopback.
	ErrUnsupportedSource = errors.New("snapshot: unsupported source")
)

// Fetch errors. The poller records them, keeps the document it has, and
// tries again at the next interval; a long run of them makes the node
// stale (docs/snapshots.md).
var (
	// ErrTooLarge: the document is larger than the source's limit
	// (HTTPOptions.MaxBytes). Nothing of it is used.
	ErrTooLarge = errors.New("snapshot: document too large")
	// ErrStalled: the source made no progress (HTTPOptions.Stall): no
	// answer by the end of the wait it asked for, or a body that stopped
	// or trickled. A poll that stalled while held is retried at once,
	// asking for no wait.
	ErrStalled = errors.New("snapshot: request stalled")
)

// Document errors. A [*RejectedError] wraps them (or a decoder's own
// error); the poller counts the rejection and keeps serving the previous
// document (docs/snapshots.md).
var (
	// ErrRollback: the document's version is lower than the highest
	// version this node has applied, including in earlier runs (the
	// persisted floor). It looks like a rollback on the publisher's side;
	// if the publisher really restarted its numbering, stop the node and
	// run `scootgate reset-floor` (docs/snapshots.md).
	ErrRollback = errors.New("snapshot: version is lower than the highest applied")
	// ErrVersionJump: the document's version is more than MaxVersionJump
	// above the highest version this node has applied (or above 0 on a
	// node that has applied none). Such a version is far more likely a
	// publisher bug (math.MaxInt64 or a -1 cast to unsigned as "latest")
	// than a real publish, and applying it would raise the persisted
	// floor so far that every later document is a rollback: the node
	// would never take an update again. See docs/snapshots.md for
	// `scootgate reset-floor`.
	ErrVersionJump = errors.New("snapshot: implausible version jump")
	// ErrSignature: the source requires signed documents (verify_keys)
	// and this one is not a DSSE envelope of the right payload type with
	// a valid signature by a trusted key ([Signed]). Counted apart in
	// [Status].SignatureRejections: on a signed fleet it means a bad
	// publish, a key rotation gone wrong, or tampering.
	ErrSignature = errors.New("snapshot: signature check failed")
)

// Persistence errors, from DiskStore. The node keeps running on what it
// fetched; only a restart during an outage is affected.
var (
	// ErrCorrupt: a persisted document failed its integrity check (a
	// torn or damaged file). It is not used; the next successful fetch
	// replaces it.
	ErrCorrupt = errors.New("snapshot: persisted document is corrupt")
)

// Readiness errors, from Poller.Ready. They are the reasons /readyz shows
// (docs/operations.md).
var (
	// ErrNotLoaded: no valid document of this kind is loaded.
	ErrNotLoaded = errors.New("no valid snapshot loaded")
	// ErrStale: no successful contact with the source for longer than
	// stale_after. Traffic keeps flowing on the last document (docs/snapshots.md).
	ErrStale = errors.New("stale")
)

// RejectedError reports a fetched (or persisted) document that was not
// applied: it did not decode or validate, named something the node does
// not have, failed to compile, or its version was below the floor.
type RejectedError struct {
	Err error
}

func (e *RejectedError) Error() string { return "snapshot rejected: " + e.Err.Error() }

func (e *RejectedError) Unwrap() error { return e.Err }
