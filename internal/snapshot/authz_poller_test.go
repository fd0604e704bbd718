package snapshot_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// authzDecoder is the DecodeFunc an authorization poller uses: decode and
// validate (no side effects), then compile and swap in apply.
func authzDecoder(st *authz.Store) snapshot.DecodeFunc {
	return func(data []byte) (uint64, func() error, error) {
		doc, err := authsnap.Decode(data)
		if err != nil {
			return 0, nil, err
		}
		if err := doc.Validate(); err != nil {
			return 0, nil, err
		}
		return doc.Version, func() error {
			ix, err := authz.Compile(doc)
			if err != nil {
				return err
			}
			st.Swap(ix)
			return nil
		}, nil
	}
}

// TestAuthzPoller drives authorization snapshots through the poller: no snapshot
// means every key is rejected and the poller is not ready; a key removed
// by a newer snapshot stops working; a snapshot with a malformed digest is
// rejected whole and the previous keys keep working.
func TestAuthzPoller(t *testing.T) {
	const keyA, keyB = "sk-test-alpha-0123456789abcdef", "sk-test-bravo-fedcba9876543210"
	snap := func(version uint64, keys ...authsnap.Key) string {
		b, err := json.Marshal(authsnap.Snapshot{Schema: 1, Version: version, Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	key := func(raw string) authsnap.Key {
		return authsnap.Key{KeyID: "k_" + raw[8:13], TenantID: "t", Digest: authsnap.Digest(raw)}
	}
	st := &authz.Store{}
	src := &scriptedSource{}
	p := snapshot.NewPoller(snapshot.PollerOptions{Name: "authz", Source: src, Decode: authzDecoder(st), StaleAfter: time.Minute})
	works := func(raw string) bool {
		_, err := st.Authenticate(http.Header{"Authorization": {"Bearer " + raw}}, nil, t0)
		return err == nil
	}

	if err := p.Ready(); !errors.Is(err, snapshot.ErrNotLoaded) || works(keyA) {
		t.Fatalf("before any snapshot: Ready = %v, key A works = %v", err, works(keyA))
	}
	src.set(snap(1, key(keyA), key(keyB)), true, nil)
	if err := p.Poll(t.Context()); err != nil || !works(keyA) || !works(keyB) {
		t.Fatalf("v1: %v, A %v, B %v", err, works(keyA), works(keyB))
	}
	src.set(snap(2, key(keyA)), true, nil)
	if err := p.Poll(t.Context()); err != nil || !works(keyA) || works(keyB) {
		t.Fatalf("v2 removes B: %v, A %v, B %v", err, works(keyA), works(keyB))
	}
	bad := key(keyB)
	bad.Digest = bad.Digest[:63] + "G"
	src.set(snap(3, key(keyA), bad), true, nil)
	var ve *authsnap.ValidationError
	if err := p.Poll(t.Context()); !errors.As(err, &ve) {
		t.Fatalf("v3 with a malformed digest: %v, want a validation error", err)
	}
	if !works(keyA) || works(keyB) || st.Version() != 2 || p.Status().Rejections != 1 {
		t.Errorf("after the rejected v3: A %v, B %v, version %d, %+v", works(keyA), works(keyB), st.Version(), p.Status())
	}
	if err := p.Ready(); err != nil {
		t.Errorf("Ready after a rejected snapshot = %v, want nil (contact was made)", err)
	}
}
