package routes

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// CheckSnapshot checks a routing snapshot as this node would apply it:
// doc.Validate, plus every credential it names must be defined in creds
// (the node's [credentials]; snapshots carry names only, SPEC §7). Every
// problem is listed in one [*routesnap.ValidationError]; credential
// problems come after the document's own. Values in creds are not read.
func CheckSnapshot(doc *routesnap.Snapshot, creds map[string]secret.Secret) error {
	err := doc.Validate()
	var ve *routesnap.ValidationError
	switch {
	case doc == nil:
		return err
	case err != nil && !errors.As(err, &ve):
		return err
	case err == nil:
		ve = &routesnap.ValidationError{}
	}
	bad := make(map[string]bool, len(ve.Problems))
	for _, p := range ve.Problems {
		bad[p.Path] = true
	}
	for i, b := range doc.Backends {
		path := "backends[" + strconv.Itoa(i) + "].credential"
		if _, ok := creds[b.Credential]; !ok && !bad[path] {
			// Validate accepted the name, so it is a short id, safe to quote.
			ve.Problems = append(ve.Problems, routesnap.Problem{
				Path: path,
				Msg:  fmt.Sprintf("unknown credential %q; this node's [credentials] does not define it", b.Credential),
			})
		}
	}
	if len(ve.Problems) > 0 {
		return ve
	}
	return nil
}

// CompileSnapshot builds a Table from a routing snapshot: the same Table
// that [Compile] builds from the equivalent static configuration, with
// hot state from reg. The whole document is rejected on any problem, and
// the error lists them all ([CheckSnapshot]).
//
// A backend keeps its hot state (in-flight count, EWMA, breaker, disabled)
// across snapshots as long as its identity is unchanged: id, protocol,
// base URL (without trailing "/"), credential name and
// max_inflight_per_node (SPEC §7, [upstream.Identity]); include_usage is
// not part of it.
func CompileSnapshot(doc *routesnap.Snapshot, creds map[string]secret.Secret, reg *upstream.Registry) (*Table, error) {
	if err := CheckSnapshot(doc, creds); err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	return compileChecked(doc, creds, reg)
}

// compileChecked compiles a document that passed CheckSnapshot, by way of
// the static configuration it is equivalent to, so that both route sources
// share one compiler.
func compileChecked(doc *routesnap.Snapshot, creds map[string]secret.Secret, reg *upstream.Registry) (*Table, error) {
	cfg := &config.Config{
		Credentials: creds,
		Backends:    make([]config.Backend, len(doc.Backends)),
		Models:      make([]config.Model, len(doc.Models)),
	}
	for i, b := range doc.Backends {
		u, err := url.Parse(b.BaseURL)
		if err != nil {
			// Unreachable after CheckSnapshot; the URL is not quoted.
			return nil, fmt.Errorf("routes: backends[%d].base_url: not a valid URL", i)
		}
		cfg.Backends[i] = config.Backend{
			ID: b.ID, Protocol: b.Protocol, BaseURL: u, Credential: b.Credential, MaxInflight: b.MaxInflightPerNode,
			IncludeUsage: b.IncludeUsage,
		}
	}
	for i, m := range doc.Models {
		targets := make([]config.Target, len(m.Targets))
		for j, t := range m.Targets {
			targets[j] = config.Target{
				Backend: t.Backend, Model: t.Model, Weight: t.Weight,
				Stream: t.Stream, Tools: t.Tools, JSONSchema: t.JSONSchema, Tier: t.Tier,
			}
		}
		cfg.Models[i] = config.Model{Name: m.Name, Targets: targets}
	}
	return Compile(cfg, reg)
}

// SnapshotDecoder returns the [snapshot.DecodeFunc] of the routes poller:
// it decodes and checks a document ([routesnap.Decode], [CheckSnapshot];
// no side effects), and its apply func compiles the document against reg
// and stores the Table in h. Requests that loaded the previous Table
// finish with it (SPEC §7).
func SnapshotDecoder(h *Holder, creds map[string]secret.Secret, reg *upstream.Registry) snapshot.DecodeFunc {
	return func(data []byte) (uint64, func() error, error) {
		doc, err := routesnap.Decode(data)
		if err != nil {
			return 0, nil, err
		}
		if err := CheckSnapshot(doc, creds); err != nil {
			return 0, nil, err
		}
		return doc.Version, func() error {
			t, err := compileChecked(doc, creds, reg)
			if err != nil {
				return err
			}
			h.Store(t)
			reg.Prune(t.Uses) // removed backends' state goes once idle
			return nil
		}, nil
	}
}
