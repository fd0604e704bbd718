package authz

import "errors"

// Errors from Store.Authenticate. The caller answers every one of them with
// 401 in the endpoint's error shape (docs/api.md "Status codes") and must not add
// the key or its digest to the response or the log; it may tell a client
// that its key is missing, malformed or expired. ErrNoSnapshot is also a
// readiness problem: the node should not report ready without a snapshot.
var (
	// ErrNoSnapshot: no valid authorization snapshot has been loaded yet,
	// so every key is rejected (docs/authorization.md).
	ErrNoSnapshot = errors.New("authz: no authorization snapshot loaded")

	// ErrMissingKey: the request carries no usable key. This includes a
	// malformed one (an empty or multi-token Bearer credential, control
	// characters, over MaxKeyLength bytes, repeated headers).
	ErrMissingKey = errors.New("authz: missing or malformed api key")

	// ErrUnknownKey: the key is not in the snapshot, or it is disabled. The
	// two are deliberately indistinguishable to the client.
	ErrUnknownKey = errors.New("authz: unknown api key")

	// ErrExpired: the key is in the snapshot but its expires_at has passed.
	ErrExpired = errors.New("authz: api key expired")
)
