package app

import (
	"fmt"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// This file adapts the two route sources to the one compiler: the static
// [backends] and [models] of the config file, which config.Parse already
// decoded into routing snapshot types and checked with the snapshot's own
// rules, and routing snapshots from the control plane. Both become a
// routes.Table the same way.

// staticRoutes compiles the config file's routes.
func staticRoutes(cfg *config.Config, reg *upstream.Registry) (*routes.Table, error) {
	t, err := routes.Compile(cfg.Backends, cfg.Models, cfg.Credentials, reg)
	if err != nil {
		return nil, fmt.Errorf("static routes: %w", err)
	}
	return t, nil
}

// routesDecoder returns the [snapshot.DecodeFunc] of the routes poller: it
// decodes and checks a document (routesnap.Decode, then the node's
// credential policy: every credential defined, each sent only to a host it
// lists, no plaintext backend behind a proxy off loopback; no side
// effects), and its apply func compiles the document against reg and
// stores the Table in h. Requests that loaded the previous Table finish
// with it. A document that fails is rejected whole: nothing of it is used.
func routesDecoder(h *routes.Holder, policy credential.Policy, reg *upstream.Registry) snapshot.DecodeFunc {
	return func(data []byte) (uint64, func() error, error) {
		doc, err := routesnap.Decode(data)
		if err != nil {
			return 0, nil, err
		}
		if err := policy.Validate(doc); err != nil {
			return 0, nil, err
		}
		return doc.Version, func() error {
			t, err := routes.Compile(doc.Backends, doc.Models, policy.Credentials, reg)
			if err != nil {
				return err
			}
			t.SetVersion(doc.Version) // the identity of its prices in usage events
			h.Store(t)
			reg.Prune(t.Uses)  // removed backends' state goes once idle
			reg.Enable(t.Uses) // a newer document that still lists a disabled backend re-enables it
			// ... and ends what the providers' rate-limit headers said
			// (docs/routing.md "Headroom"): a far reset lasts no longer
			// than the next publish.
			reg.ForgetHeadroom(t.Uses)
			return nil
		}, nil
	}
}
