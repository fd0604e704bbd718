package authz

import (
	"context"
	"fmt"

	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// Load fetches the authorization snapshot from src and, if it is new,
// applies it to st: fetch → decode → validate → version gate → compile →
// swap (SPEC §7). changed reports whether st now holds a different index.
//
// The version gate: a version greater than the loaded one is applied; an
// equal version is "no change" (false, nil) even if the bytes differ; a
// lower one is rejected with [ErrOlderVersion]. On any error st keeps the
// index it had, and src is told to forget the document (when it implements
// [snapshot.Forgetter]) so that the next Load reports the problem again
// rather than calling the bad document unchanged.
//
// Errors wrap the fetch error, [*authsnap.DecodeError],
// [*authsnap.ValidationError] or [ErrOlderVersion]. None contains a raw key
// or a digest.
func Load(ctx context.Context, src snapshot.Source, st *Store) (changed bool, err error) {
	data, changed, err := src.Fetch(ctx)
	if err != nil {
		return false, fmt.Errorf("authz: load: %w", err)
	}
	if !changed {
		return false, nil
	}
	defer func() {
		if f, ok := src.(snapshot.Forgetter); ok && err != nil {
			f.Forget()
		}
	}()

	doc, err := authsnap.Decode(data)
	if err != nil {
		return false, fmt.Errorf("authz: load: %w", err)
	}
	if err := doc.Validate(); err != nil {
		return false, fmt.Errorf("authz: load: %w", err)
	}
	// Check before compiling, so that an unchanged version costs no
	// compile; swapIfNewer checks again against concurrent loads.
	if cur := st.Version(); cur != 0 {
		if ok, err := newer(doc.Version, cur); !ok {
			return false, err
		}
	}
	ix, err := compile(doc)
	if err != nil {
		return false, err
	}
	return st.swapIfNewer(ix)
}

// newer reports whether a snapshot with version got replaces one with
// version cur: yes when greater, no when equal ("no change", SPEC §7), and
// ErrOlderVersion when lower.
func newer(got, cur uint64) (bool, error) {
	switch {
	case got > cur:
		return true, nil
	case got == cur:
		return false, nil
	default:
		return false, fmt.Errorf("%w: got version %d, have %d", ErrOlderVersion, got, cur)
	}
}
