package config

import (
	"crypto/ed25519"
	"crypto/tls"
	"net/url"
	"strings"
	"time"

	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/pkg/snapsign"
)

// RoutesStatic is the routes.source value that takes backends and models
// from this file (docs/snapshots.md "Static routes").
const RoutesStatic = "static"

// ControlPlane is how the node pulls snapshots (docs/snapshots.md): the
// credentials and TLS settings of http(s) sources, the polling schedule,
// the staleness deadline and where the last good documents are kept. It
// applies to every snapshot source, file: ones included (they are polled
// too).
type ControlPlane struct {
	// Token is sent as "Authorization: Bearer <token>" to http(s)
	// sources; zero = none.
	Token secret.Secret
	// CAFile is a PEM bundle trusted for https:// sources instead of the
	// system roots; "" = system roots.
	CAFile string
	// ClientCertFile and ClientKeyFile, both or neither, are the client
	// certificate (PEM chain) and key presented to https:// sources.
	ClientCertFile string
	ClientKeyFile  string
	// PollInterval is the pause between polls of each source; each pause
	// varies by ±10 % (jitter), so a fleet does not poll in lockstep.
	PollInterval time.Duration
	// LongPoll, when not 0, asks http(s) sources to hold a request until
	// the document changes, for up to this long (?wait=<seconds>).
	LongPoll time.Duration
	// LongPollSilence bounds how long a held request may show no byte
	// (headers, keepalive or document) before the node gives it up as
	// failed and asks again (docs/snapshots.md "Long-poll: changes within a second"; the keepalive
	// of proto/control-plane.md). A control plane that has not announced
	// keepalive is asked to hold at most this long.
	LongPollSilence time.Duration
	// StaleAfter is how long a source may go without a successful contact
	// (200 or 304, or a successful file read) before /readyz fails.
	// Traffic keeps flowing on the last valid documents (docs/snapshots.md).
	StaleAfter time.Duration
	// StateDir is where the last valid document of each kind, its fetch
	// time and the version floor are kept (docs/snapshots.md "Last good copy"). Load resolves it
	// against the config file's directory.
	StateDir string
}

// Routes says where backends and models come from.
type Routes struct {
	// Source is RoutesStatic ([backends] and [models] in this file,
	// changed by a restart) or the "file:<path>" or http(s) URL of a
	// routing snapshot (pkg/routesnap); then [backends] and [models] must
	// be absent.
	Source string
	// VerifyKeys, when not empty, are the ed25519 public keys one of
	// which must have signed every routing snapshot (a DSSE envelope,
	// pkg/snapsign); several at once, for rotation. Empty: plain
	// documents and unverified envelopes are both read. Only with a
	// snapshot source.
	VerifyKeys []ed25519.PublicKey
}

// Limits and defaults of [control_plane] (documented in the package doc).
const (
	minPollInterval     = time.Second
	defaultPollInterval = 10 * time.Second
	defaultStaleAfter   = 5 * time.Minute
	defaultStateDir     = "scootgate-state"
	// A held request silent for long_poll_silence is given up.
	minLongPollSilence     = 2 * time.Second
	maxLongPollSilence     = time.Minute
	defaultLongPollSilence = 10 * time.Second
	// staleAfterPolls is how many poll intervals (plus the long poll) must
	// fit into stale_after: a node should not turn unready over one or
	// two slow polls.
	staleAfterPolls = 3
)

// sourceWant describes a valid snapshot source in messages.
const sourceWant = `"file:<path>" or an https:// URL (http:// only for a loopback host)`

// controlPlaneSections reads [control_plane] and [routes] and reports
// whether backends and models are to be read from this file. When routes
// come from a snapshot, [backends] and [models] must be absent: two
// sources of routes would disagree sooner or later, and the snapshot
// would silently win.
func (v *validator) controlPlaneSections(root *table, c *Config) (static bool) {
	if t, ok := section(root, "control_plane"); ok {
		v.controlPlane(t, &c.ControlPlane)
	}
	valid := true
	if t, ok := section(root, "routes"); ok {
		valid = v.routes(t, &c.Routes)
	}
	if valid && c.Routes.Source == RoutesStatic {
		return true
	}
	for _, key := range []string{"backends", "models"} {
		if root.has(key) && valid {
			v.ps.add(key, "not allowed when routes.source is a snapshot: backends and models come from the routing snapshot "+
				"(which names credentials defined in [credentials])")
		}
	}
	return false
}

func (v *validator) controlPlane(t *table, cp *ControlPlane) {
	defer t.done()
	if raw, ok := t.get("token", ""); ok {
		cp.Token = v.secretRef(t, "token", raw)
	}
	if f, ok := t.str("ca_file", ""); ok && f != "" {
		cp.CAFile = v.caFile(t, "ca_file", f)
	}
	cert, _ := t.str("client_cert_file", "")
	key, _ := t.str("client_key_file", "")
	switch {
	case cert != "" && key == "":
		v.ps.add(t.at("client_key_file"), "missing; set together with control_plane.client_cert_file")
	case cert == "" && key != "":
		v.ps.add(t.at("client_cert_file"), "missing; set together with control_plane.client_key_file")
	case cert != "":
		cp.ClientCertFile, cp.ClientKeyFile = v.resolve(cert), v.resolve(key)
		v.clientKeyPair(t, cp.ClientCertFile, cp.ClientKeyFile)
	}

	pollOK, longOK, staleOK := true, true, true
	if t.has("poll_interval") {
		var d time.Duration
		if d, pollOK = t.duration("poll_interval", minPollInterval); pollOK {
			cp.PollInterval = d
		}
	}
	if t.has("long_poll") {
		d, ok := t.duration("long_poll", 0)
		switch {
		case !ok:
			longOK = false
		case d != 0 && d%time.Second != 0:
			longOK = false
			v.ps.add(t.at("long_poll"), "%s is not whole seconds; expected 0 (off) or a whole number of seconds (it is sent as ?wait=<seconds>)", d)
		default:
			cp.LongPoll = d
		}
	}
	if t.has("long_poll_silence") {
		d, ok := t.duration("long_poll_silence", minLongPollSilence)
		switch {
		case !ok:
		case d%time.Second != 0 || d > maxLongPollSilence:
			v.ps.add(t.at("long_poll_silence"), "%s is out of range; expected whole seconds from %s to %s", d, minLongPollSilence, maxLongPollSilence)
		default:
			cp.LongPollSilence = d
		}
	}
	if t.has("stale_after") {
		var d time.Duration
		if d, staleOK = t.duration("stale_after", minPollInterval); staleOK {
			cp.StaleAfter = d
		}
	}
	if least := staleAfterPolls*cp.PollInterval + cp.LongPoll; pollOK && longOK && staleOK && cp.StaleAfter < least {
		v.ps.add(t.at("stale_after"), "%s is too small; expected at least %d × poll_interval + long_poll = %s, "+
			"so that a couple of slow polls do not make the node unready", cp.StaleAfter, staleAfterPolls, least)
	}

	if s, ok := t.str("state_dir", ""); ok {
		if s == "" || strings.ContainsRune(s, 0) {
			v.ps.add(t.at("state_dir"), "expected a directory path (the last good snapshots are kept there, docs/snapshots.md)")
		} else {
			cp.StateDir = s
		}
	}
	cp.StateDir = v.resolve(cp.StateDir)
}

// clientKeyPair checks the control-plane client certificate and key.
func (v *validator) clientKeyPair(t *table, certFile, keyFile string) {
	cert, err := v.readFile(certFile)
	if err != nil {
		v.ps.add(t.at("client_cert_file"), "cannot read: %v", err)
	}
	key, kerr := v.readFile(keyFile)
	if kerr != nil {
		v.ps.add(t.at("client_key_file"), "cannot read: %v", kerr)
	}
	if err != nil || kerr != nil {
		return
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		v.ps.add(t.at("client_cert_file"), "not a usable PEM certificate and key pair: %v", err)
	}
}

// routes reads [routes]; it reports false when source is present but
// unusable (the problem is reported).
func (v *validator) routes(t *table, r *Routes) bool {
	defer t.done()
	src, ok := t.str("source", "")
	switch {
	case !ok:
		return !t.has("source") // absent: the default; present: wrong type, reported
	case src == RoutesStatic:
		r.Source = src
		if t.has("verify_keys") {
			v.ps.add(t.at("verify_keys"), "only for a snapshot source; static routes come from this file, which is not signed")
		}
		return true
	}
	s, ok := v.snapshotSource(t.at("source"), src)
	if !ok {
		return false
	}
	r.Source = s
	r.VerifyKeys = v.verifyKeys(t)
	return true
}

// verifyKeys reads a source's verify_keys: a list whose entries are each
// the path of a PEM file (relative to the config file's directory) or the
// PEM text itself, as `openssl pkey -pubout` writes it. A file may hold
// several keys. Public keys are not secret, but messages still quote no
// key text.
func (v *validator) verifyKeys(t *table) []ed25519.PublicKey {
	raw, ok := t.get("verify_keys", "")
	if !ok {
		return nil
	}
	const want = `a list of PEM public key files or inline PEM texts ("-----BEGIN PUBLIC KEY-----...")`
	list, ok := raw.([]any)
	if !ok {
		t.mismatch("verify_keys", want, raw)
		return nil
	}
	if len(list) == 0 {
		v.ps.add(t.at("verify_keys"), "empty; expected %s, or leave verify_keys out to accept unsigned snapshots", want)
		return nil
	}
	var keys []ed25519.PublicKey
	for i, e := range list {
		at := index(t.at("verify_keys"), i)
		s, ok := e.(string)
		if !ok || strings.TrimSpace(s) == "" {
			v.ps.add(at, "expected a PEM file path or inline PEM text, got %s", typeName(e))
			continue
		}
		text, from := []byte(s), "inline PEM"
		if !strings.Contains(s, "-----BEGIN") {
			p := v.resolve(s)
			b, err := v.readFile(p)
			if err != nil {
				v.ps.add(at, "cannot read: %v", err)
				continue
			}
			text, from = b, p
		}
		ks, err := snapsign.ParsePublicKeys(text)
		if err != nil {
			v.ps.add(at, "%s: %v", from, err)
			continue
		}
		keys = append(keys, ks...)
	}
	return keys
}

// snapshotSource checks a snapshot source: "file:<path>", file:///<path>
// (RFC 8089; the host must be empty or localhost), or an http(s) URL. File
// paths are resolved against the config file's directory. Messages never
// quote the source, which could carry credentials.
func (v *validator) snapshotSource(path, src string) (string, bool) {
	lower := strings.ToLower(src)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		return v.httpSource(path, src)
	}
	rest, isFile := strings.CutPrefix(src, "file:")
	switch {
	case !isFile:
		v.ps.add(path, "expected %s", sourceWant)
		return "", false
	case strings.HasPrefix(rest, "//"):
		u, err := url.Parse(src)
		if err != nil || (u.Host != "" && u.Host != "localhost") || u.Path == "" {
			v.ps.add(path, "expected \"file:<path>\" or \"file:///<absolute path>\"")
			return "", false
		}
		rest = u.Path
	}
	if rest == "" {
		v.ps.add(path, "missing path; expected \"file:<path>\"")
		return "", false
	}
	return "file:" + v.resolve(rest), true
}

// httpSource checks an http(s) snapshot source: absolute, with a host, no
// user info, query or fragment (the token goes in control_plane.token),
// plaintext only to a loopback host (the same rule as docs/egress.md for
// providers: the token and the snapshots would cross the network in
// cleartext).
func (v *validator) httpSource(path, raw string) (string, bool) {
	u, ok := v.absURL(path, raw, "an https:// URL (http:// only for a loopback host)", "http", "https")
	switch {
	case !ok:
		return "", false
	case u.User != nil:
		v.ps.add(path, "must not contain credentials; set control_plane.token instead")
		return "", false
	case u.Scheme == "http" && !loopback(u.Hostname()):
		v.ps.add(path, "plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https://")
		return "", false
	}
	return u.String(), true
}
