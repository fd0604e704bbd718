package authz

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// Principal is an authenticated key. It is shared by every request that
// presents the key and must not be modified.
type Principal struct {
	KeyID    string
	TenantID string
	// Models is the allowlist of public model names: nil allows every
	// model, empty allows none.
	Models []string
	// ExpiresAt is when the key stops working; zero means never.
	ExpiresAt time.Time
	// Limits are the key's own limits and TenantLimits its tenant's
	// (docs/limits.md); the zero value is unlimited. A tenant the
	// snapshot's tenants list does not name has no limits.
	Limits, TenantLimits authsnap.Limits
	// Limit is the key's hold on the node's limiter, nil when nothing
	// limits it or the index was compiled without a limiter.
	Limit *limits.Subject
}

// Limited reports whether any limit applies to the key's requests, its own
// or its tenant's: the request path asks the limiter only then.
func (p *Principal) Limited() bool {
	return !p.Limits.IsZero() || !p.TenantLimits.IsZero()
}

// Allows reports whether the key may use the public model name as asked:
// an entry of the allowlist is that name (case-sensitive), or a pattern
// that matches it ("claude-*", docs/authorization.md). A caller answers
// false with 403 (docs/api.md).
func (p *Principal) Allows(model string) bool {
	if p.Models == nil {
		return true
	}
	for _, m := range p.Models {
		if _, ok := routesnap.Match(m, model); ok {
			return true
		}
	}
	return false
}

// expired reports whether the key has expired at now: expires_at is the
// first instant at which it is rejected.
func (p *Principal) expired(now time.Time) bool {
	return !p.ExpiresAt.IsZero() && !now.Before(p.ExpiresAt)
}

// Index is a compiled authorization snapshot. It is immutable and safe for
// concurrent use.
type Index struct {
	version     uint64
	generatedAt time.Time
	byDigest    map[[sha256.Size]byte]*Principal // disabled keys are left out
}

// Compile validates doc and builds an Index from it. The whole snapshot is
// rejected on any problem (docs/snapshots.md). The Index does not share memory with
// doc. Disabled keys are left out, so that they are rejected exactly like
// unknown ones.
func Compile(doc *authsnap.Snapshot) (*Index, error) {
	return CompileLimited(doc, nil)
}

// CompileLimited is Compile that also binds each limited key to the
// node's limiter (docs/limits.md): b hands out the principals' Limit
// subjects. The caller ends the bind (Done once the index is to be
// swapped in, Abort on an error). A nil b binds nothing: every key is
// unlimited.
func CompileLimited(doc *authsnap.Snapshot, b *limits.Binder) (*Index, error) {
	if err := doc.Validate(); err != nil {
		return nil, fmt.Errorf("authz: compile: %w", err)
	}
	return compile(doc, b)
}

// compile builds an Index from a validated snapshot.
func compile(doc *authsnap.Snapshot, b *limits.Binder) (*Index, error) {
	ix := &Index{
		version:     doc.Version,
		generatedAt: doc.GeneratedAt,
		byDigest:    make(map[[sha256.Size]byte]*Principal, len(doc.Keys)),
	}
	tenants := make(map[string]authsnap.Limits, len(doc.Tenants))
	for _, t := range doc.Tenants {
		tenants[t.TenantID] = t.Limits
	}
	for i, k := range doc.Keys {
		if k.Disabled {
			continue
		}
		var d [sha256.Size]byte
		if n, err := hex.Decode(d[:], []byte(k.Digest)); err != nil || n != len(d) {
			// Unreachable after Validate; kept so that a Validate bug
			// cannot produce a zero digest. The digest is not printed.
			return nil, fmt.Errorf("authz: compile: keys[%d].digest: %w", i, errBadDigest)
		}
		p := &Principal{
			KeyID:    k.KeyID,
			TenantID: k.TenantID,
			Models:   slices.Clone(k.Models), // keeps nil (all) apart from empty (none)

			Limits:       k.Limits,
			TenantLimits: tenants[k.TenantID], // unlisted: zero, no limits
		}
		if k.ExpiresAt != nil {
			p.ExpiresAt = *k.ExpiresAt
		}
		if b != nil {
			p.Limit = b.Subject(k.KeyID, k.TenantID, p.Limits, p.TenantLimits)
		}
		ix.byDigest[d] = p
	}
	return ix, nil
}

var errBadDigest = errors.New("not 64 hex characters")

// Version returns the snapshot version the index was compiled from.
func (ix *Index) Version() uint64 { return ix.version }

// GeneratedAt returns the snapshot's generated_at; zero if it had none.
func (ix *Index) GeneratedAt() time.Time { return ix.generatedAt }

// Len returns the number of keys that can authenticate (disabled keys are
// not counted).
func (ix *Index) Len() int { return len(ix.byDigest) }

// lookup returns the principal whose key hashes to digest, or nil.
func (ix *Index) lookup(digest [sha256.Size]byte) *Principal {
	return ix.byDigest[digest]
}

// Store holds the current Index. The zero value holds none and rejects
// every key with ErrNoSnapshot. A Store must not be copied; it is safe for
// concurrent use.
type Store struct {
	// KeyHeaders are the headers in which a key may come after
	// Authorization: Bearer, in order ([ExtractKey]): the provider APIs'
	// (catalog.KeyHeaders, which the wiring passes in, so that a new API's
	// header needs no change here). Set before the first Authenticate and
	// never changed.
	KeyHeaders []string

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
	key, ok := ExtractKey(h, s.KeyHeaders, query)
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
