package app

import (
	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// authzDecoder adapts the authorization snapshot to a snapshot.Poller:
// decode and validate the whole document, then (when the poller's version
// rules accept it) compile and swap it into st in one step
// (docs/authorization.md, docs/snapshots.md). Compiling binds the limited
// keys to lim: a key or tenant still listed keeps what it used this
// minute, one left out is forgotten (docs/limits.md). swapped, when set,
// runs after each swap (the open realtime sessions' keys are judged again).
func authzDecoder(st *authz.Store, lim *limits.Limiter, swapped func()) snapshot.DecodeFunc {
	return func(data []byte) (uint64, func() error, error) {
		doc, err := authsnap.Decode(data)
		if err != nil {
			return 0, nil, err
		}
		if err := doc.Validate(); err != nil {
			return 0, nil, err
		}
		return doc.Version, func() error {
			b := lim.Bind()
			ix, err := authz.CompileLimited(doc, b)
			if err != nil {
				b.Abort()
				return err
			}
			b.Done()
			st.Swap(ix)
			if swapped != nil {
				swapped()
			}
			return nil
		}, nil
	}
}
