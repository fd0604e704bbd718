package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/snapsign"
)

// cmdCheck validates what a node would load, listing every problem:
//
//	check --config FILE                       the config, then one fetch of each snapshot source it names
//	check --offline --config FILE             the config only
//	check --routes FILE [--previous OLD] [--config FILE]
//	check --authz FILE [--previous OLD]       a snapshot file, for the control plane's CI
//	      ... --verify-key PUBLIC                 and require a valid signature by that key
//
// A pre-start hook (systemd ExecStartPre) must use --offline: the node
// starts on its last good snapshots when the control plane is down or
// publishes a bad document (the node keeps its last good one, docs/snapshots.md "Last good copy"), and the hook must not stop it.
//
// With --previous it also checks the version rule (docs/snapshots.md: a version not
// above the previous one is never applied) and prints the diff. Problems go
// to stderr, results and diffs to stdout; the exit code is 1 on any
// problem, 2 on a usage error.
func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "the node's TOML config")
	routesPath := fs.String("routes", "", "a routing snapshot file to validate")
	authzPath := fs.String("authz", "", "an authorization snapshot file to validate")
	prevPath := fs.String("previous", "", "the snapshot the file replaces: check the version rule and print the diff")
	offline := fs.Bool("offline", false, "with --config alone: check the config only, fetch no snapshot (for pre-start hooks)")
	var keyFiles []string
	fs.Func("verify-key", "with --routes or --authz: a PEM public key file; the file must be signed by it (repeatable: any one of them)", func(s string) error {
		keyFiles = append(keyFiles, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var usageErr string
	switch {
	case fs.NArg() > 0:
		usageErr = fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	case *routesPath != "" && *authzPath != "":
		usageErr = "give --routes or --authz, not both"
	case *authzPath != "" && *cfgPath != "":
		usageErr = "--config is not used with --authz (an authorization snapshot names nothing in the config)"
	case *prevPath != "" && *routesPath == "" && *authzPath == "":
		usageErr = "--previous needs --routes or --authz"
	case *offline && (*routesPath != "" || *authzPath != ""):
		usageErr = "--offline applies to check --config alone"
	case *cfgPath == "" && *routesPath == "" && *authzPath == "":
		usageErr = "--config, --routes or --authz is required"
	case len(keyFiles) > 0 && *routesPath == "" && *authzPath == "":
		usageErr = "--verify-key needs --routes or --authz (with --config, the config's verify_keys apply)"
	}
	if usageErr != "" {
		fmt.Fprintf(stderr, "scootgate check: %s\n", usageErr)
		return 2
	}

	c := &checker{stdout: stdout, stderr: stderr}
	for _, f := range keyFiles {
		keys, err := readPublicKeys(f)
		if err != nil {
			fmt.Fprintf(stderr, "scootgate check: --verify-key %s: %v\n", f, err)
			return 1
		}
		c.keys = append(c.keys, keys...)
	}
	switch {
	case *routesPath != "":
		c.routesFile(*routesPath, *prevPath, *cfgPath)
	case *authzPath != "":
		c.authzFile(*authzPath, *prevPath)
	default:
		c.config(*cfgPath, !*offline)
	}
	if c.failed {
		return 1
	}
	return 0
}

// checker prints what it checks and remembers whether anything failed.
type checker struct {
	stdout, stderr io.Writer
	keys           []ed25519.PublicKey // --verify-key
	failed         bool
}

// problems reports what is wrong with subject.
func (c *checker) problems(subject string, ps ...string) {
	c.failed = true
	fmt.Fprintf(c.stderr, "%s: %d problem(s):\n", subject, len(ps))
	for _, p := range ps {
		fmt.Fprintf(c.stderr, "  %s\n", p)
	}
}

// loadConfig loads the node config as `scootgate run` would.
func (c *checker) loadConfig(path string) (*config.Config, bool) {
	cfg, err := config.Load(path)
	if err == nil {
		return cfg, true
	}
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		c.problems(path, err.Error())
		return nil, false
	}
	ps := make([]string, len(cerr.Problems))
	for i, p := range cerr.Problems {
		ps[i] = p.Path + ": " + p.Msg
	}
	c.problems(path, ps...)
	return nil, false
}

// config checks the node config, then, with fetch, fetches each snapshot
// source it names once and checks the document as the node would at start.
func (c *checker) config(path string, fetch bool) {
	cfg, ok := c.loadConfig(path)
	if !ok {
		return
	}
	fmt.Fprintf(c.stdout, "%s: ok\n", path)
	if !fetch {
		return
	}
	httpOpts, err := snapshot.ConfigHTTPOptions(cfg.ControlPlane, nil)
	if err != nil {
		c.problems(path, err.Error())
		return
	}
	base := filepath.Dir(path)
	c.source("authz", cfg.Authz.Source, base, httpOpts, len(cfg.Authz.VerifyKeys) > 0, func(data []byte) (uint64, error) {
		data, err := snapshot.Payload(data, snapsign.AuthzPayloadType, cfg.Authz.VerifyKeys)
		if err != nil {
			return 0, err
		}
		doc, err := decodeAuthz(data)
		if err != nil {
			return 0, err
		}
		return doc.Version, nil
	})
	if cfg.Routes.Source != config.RoutesStatic {
		c.source("routes", cfg.Routes.Source, base, httpOpts, len(cfg.Routes.VerifyKeys) > 0, func(data []byte) (uint64, error) {
			data, err := snapshot.Payload(data, snapsign.RoutesPayloadType, cfg.Routes.VerifyKeys)
			if err != nil {
				return 0, err
			}
			policy := cfg.CredentialPolicy()
			doc, err := decodeRoutes(data, &policy)
			if err != nil {
				return 0, err
			}
			return doc.Version, nil
		})
	}
}

// source fetches one document from a configured source and checks it;
// signed says that check verified a signature.
func (c *checker) source(kind, s, baseDir string, o snapshot.HTTPOptions, signed bool, check func([]byte) (uint64, error)) {
	src, err := snapshot.ParseSource(s, baseDir, o)
	if err != nil {
		c.problems(kind+".source", err.Error()) // never repeats the source, which may carry credentials
		return
	}
	subject := kind + " snapshot"
	if str, ok := src.(fmt.Stringer); ok {
		subject += " " + str.String() // redacted: no user info or query
	}
	// An HTTPSource bounds its own request (timeout plus long poll).
	data, _, err := src.Fetch(context.Background())
	if err != nil {
		c.problems(subject, "fetch: "+err.Error())
		return
	}
	version, err := check(data)
	if err != nil {
		c.problems(subject, problemList(err)...)
		return
	}
	note := ""
	if signed {
		note = "; signature verified"
	}
	fmt.Fprintf(c.stdout, "%s: ok (version %d%s)\n", subject, version, note)
}

// routesFile checks a routing snapshot file, with the credential names of
// cfgPath's config when given, and compares it with prevPath when given.
func (c *checker) routesFile(path, prevPath, cfgPath string) {
	var policy *credential.Policy
	if cfgPath != "" {
		cfg, ok := c.loadConfig(cfgPath)
		if !ok {
			return
		}
		p := cfg.CredentialPolicy()
		policy = &p
	}
	decode := func(data []byte) (*routesnap.Snapshot, error) { return decodeRoutes(data, policy) }
	// The previous document was accepted already; only its own rules are
	// checked (the credentials it named may be gone from the config).
	decodePrev := func(data []byte) (*routesnap.Snapshot, error) { return decodeRoutes(data, nil) }
	describe := func(d *routesnap.Snapshot) string {
		if cfgPath == "" {
			return fmt.Sprintf("routes version %d; credential names not checked without --config", d.Version)
		}
		return fmt.Sprintf("routes version %d; credentials defined in %s", d.Version, cfgPath)
	}
	compare(c, path, prevPath, document[routesnap.Snapshot]{snapsign.RoutesPayloadType, decode, decodePrev, describe,
		func(d *routesnap.Snapshot) uint64 { return d.Version }, diffRoutes})
}

// authzFile checks an authorization snapshot file and compares it with
// prevPath when given.
func (c *checker) authzFile(path, prevPath string) {
	compare(c, path, prevPath, document[authsnap.Snapshot]{snapsign.AuthzPayloadType, decodeAuthz, decodeAuthz,
		func(d *authsnap.Snapshot) string { return fmt.Sprintf("authz version %d", d.Version) },
		func(d *authsnap.Snapshot) uint64 { return d.Version }, diffAuthz})
}

// document is what compare needs to know about one kind of snapshot.
type document[T any] struct {
	payloadType        string                   // of a signed file (pkg/snapsign)
	decode, decodePrev func([]byte) (*T, error) // decode and check; the previous one may be checked less
	describe           func(*T) string          // for the "ok" line
	version            func(*T) uint64
	diff               func(old, new *T) Diff
}

// compare checks the document at path and, given prevPath, the version
// rule against the previous document, and prints their diff.
func compare[T any](c *checker, path, prevPath string, k document[T]) {
	doc, signature, ps := readDoc(path, k.payloadType, c.keys, k.decode)
	var prev *T
	if prevPath != "" {
		var prevPs []string
		// The previous document was accepted already: its signature,
		// if any, is not checked again.
		if prev, _, prevPs = readDoc(prevPath, k.payloadType, nil, k.decodePrev); len(prevPs) > 0 {
			c.problems(prevPath+" (previous)", prevPs...)
			prev = nil
		}
	}
	var d Diff
	if doc != nil && prev != nil {
		d = k.diff(prev, doc)
		if p := versionRule(k.version(prev), k.version(doc), len(d.Changes) > 0); p != "" {
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		c.problems(path, ps...)
	} else {
		fmt.Fprintf(c.stdout, "%s: ok (%s%s)\n", path, k.describe(doc), signature)
	}
	if doc != nil && prev != nil {
		fmt.Fprint(c.stdout, d.String())
	}
}

// readDoc reads and checks one file, plain or a DSSE envelope of
// payloadType; with keys, it must be an envelope signed by one of them.
// doc is nil unless it is valid; signature describes the signature check
// for the "ok" line.
func readDoc[T any](path, payloadType string, keys []ed25519.PublicKey, decode func([]byte) (*T, error)) (doc *T, signature string, problems []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", []string{err.Error()}
	}
	switch {
	case len(keys) > 0:
		signature = "; signature verified"
	case snapsign.IsEnvelope(data):
		signature = "; signed, signature not checked (no --verify-key)"
	}
	payload, err := snapshot.Payload(data, payloadType, keys)
	if err != nil {
		return nil, "", []string{err.Error()}
	}
	doc, err = decode(payload)
	if err != nil {
		return nil, "", problemList(err)
	}
	return doc, signature, nil
}

// readPublicKeys reads a PEM file of one or more ed25519 public keys.
func readPublicKeys(path string) ([]ed25519.PublicKey, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return snapsign.ParsePublicKeys(text)
}

// versionRule applies docs/snapshots.md "Versions" to a publish: a lower version is rejected
// as a rollback; an equal one is "no change", so different contents under
// the old version would never reach a node that has it.
func versionRule(prev, cur uint64, changed bool) string {
	switch {
	case cur < prev:
		return fmt.Sprintf("version: %d is lower than the previous version %d; nodes that applied the previous one reject it as a rollback", cur, prev)
	case cur == prev && changed:
		return fmt.Sprintf("version: %d equals the previous version but the contents differ; nodes treat an equal version as no change and never apply it (raise the version)", cur)
	}
	return ""
}

// decodeRoutes decodes and checks a routing snapshot as the node does
// before it applies one: its own rules, and, with a policy (the node's
// config), the node's credential policy: every credential defined, each
// sent only to a host it lists, no plaintext backend behind a proxy off
// loopback.
func decodeRoutes(data []byte, policy *credential.Policy) (*routesnap.Snapshot, error) {
	doc, err := routesnap.Decode(data)
	if err != nil {
		return nil, err
	}
	if policy != nil {
		err = policy.Validate(doc)
	} else {
		err = doc.Validate()
	}
	if err != nil {
		return nil, err
	}
	return doc, nil
}

// decodeAuthz decodes and checks an authorization snapshot as the node
// does (internal/app authzDecoder).
func decodeAuthz(data []byte) (*authsnap.Snapshot, error) {
	doc, err := authsnap.Decode(data)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(); err != nil {
		return nil, err
	}
	return doc, nil
}

// problemList lists the problems in a decode or validation error, one per
// line, without the package prefixes. Neither kind ever quotes a digest or
// a base URL.
func problemList(err error) []string {
	var (
		rv *routesnap.ValidationError
		av *authsnap.ValidationError
		rd *routesnap.DecodeError
		ad *authsnap.DecodeError
	)
	switch {
	case errors.As(err, &rv):
		return strs(rv.Problems)
	case errors.As(err, &av):
		return strs(av.Problems)
	case errors.As(err, &rd):
		return []string{located(rd.Line, rd.Column, rd.Path, rd.Msg)}
	case errors.As(err, &ad):
		return []string{located(ad.Line, ad.Column, ad.Path, ad.Msg)}
	}
	return []string{err.Error()}
}

func strs[T fmt.Stringer](ps []T) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func located(line, col int, path, msg string) string {
	s := ""
	if line > 0 {
		s = fmt.Sprintf("line %d, column %d: ", line, col)
	}
	if path != "" {
		s += path + ": "
	}
	return s + msg
}
