package authz

import (
	"crypto/sha256"
	"net/http"
	"sync/atomic"
	"time"
)

// Store holds the current Index. The zero value holds none and rejects
// every key with ErrNoSnapshot. A Store must not be copied; it is safe for
// concurrent use.
type Store struct {
	ix atomic.Pointer[Index] // nil until the first Swap
}

// Swap makes ix the current index, unconditionally; the snapshot.Poller
// applies the version rules before calling it. Requests that already loaded the previous index finish
// with it. Swap(nil) unloads: every key is rejected again.
func (s *Store) Swap(ix *Index) { s.ix.Store(ix) }

// Version returns the current index's snapshot version, 0 when none is
// loaded.
func (s *Store) Version() uint64 {
	if ix := s.ix.Load(); ix != nil {
		return ix.version
	}
	return 0
}

// Loaded reports whether an index is loaded (readiness, docs/authorization.md).
func (s *Store) Loaded() bool { return s.ix.Load() != nil }

// Authenticate returns the principal for the key in h or query (the
// values of the API's key query parameter, nil for none; see
// [ExtractKey]), checked against the
// index current at the call and the time now. Errors are the sentinels in
// errors.go; all of them mean 401. Neither the key nor its digest appears
// in an error. The package doc explains why the map lookup is safe against
// timing attacks.
func (s *Store) Authenticate(h http.Header, query []string, now time.Time) (*Principal, error) {
	ix := s.ix.Load() // pinned for this call
	if ix == nil {
		return nil, ErrNoSnapshot
	}
	key, ok := ExtractKey(h, query)
	if !ok {
		return nil, ErrMissingKey
	}
	p := ix.lookup(digest(key))
	switch {
	case p == nil:
		return nil, ErrUnknownKey
	case p.expired(now):
		return nil, ErrExpired
	}
	return p, nil
}

// digest returns the SHA-256 of key without allocating: the copy into a
// stack buffer replaces the heap copy a []byte(key) conversion makes for
// keys over 32 bytes. ExtractKey bounds keys to MaxKeyLength.
func digest(key string) [sha256.Size]byte {
	var buf [MaxKeyLength]byte
	return sha256.Sum256(append(buf[:0], key...))
}
