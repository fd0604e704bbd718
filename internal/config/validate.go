package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/scootgate/scootgate/internal/secret"
)

// Limits enforced at load time (documented in the package doc).
const (
	minBodyBytes    = 1 << 10
	maxBodyBytes    = 1 << 30
	maxAttempts     = 5
	maxInflight     = 100000
	maxWeight       = 1000000
	maxTier         = math.MaxInt32
	maxIDLen        = 64
	maxModelNameLen = 256
	minTimeout      = time.Millisecond
	minKeepalive    = time.Second
	maxSOCKSField   = 255 // RFC 1929: username and password are at most 255 bytes

	minServerTimeout      = 100 * time.Millisecond
	maxServerTimeout      = time.Hour
	minHeaderBytes        = 4 << 10
	maxHeaderBytes        = 1 << 20 // net/http's default
	maxConcurrentRequests = 1000000
)

const idRule = "1-64 characters from [A-Za-z0-9._-]"

// validator turns the decoded document into a Config, collecting problems.
type validator struct {
	ps       problems
	getenv   func(string) (string, bool)
	readFile func(string) ([]byte, error)
	dir      string // base for relative paths; "" leaves them as written
}

// resolve makes a relative path relative to the config file's directory.
func (v *validator) resolve(p string) string {
	if v.dir == "" || p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(v.dir, p)
}

func (v *validator) config(root *table) *Config {
	c := Defaults()
	if id, ok := root.str("node_id", idRule); ok {
		if validID(id) {
			c.NodeID = id
		} else {
			v.ps.add(root.at("node_id"), "invalid node id; expected %s", idRule)
		}
	}
	if t, ok := section(root, "listen"); ok {
		v.listen(t, &c.Listen)
	}
	if t, ok := section(root, "limits"); ok {
		v.limits(t, &c.Limits)
	}
	if t, ok := section(root, "timeouts"); ok {
		v.timeouts(t, &c.Timeouts)
	}
	if t, ok := section(root, "drain"); ok {
		v.drain(t, &c.Drain)
	}
	v.balanceSections(root, &c) // [balance], [breaker], [cooldown]: balance.go
	if t, ok := section(root, "egress"); ok {
		v.egress(t, &c.Egress)
	}
	c.Credentials = v.credentials(root)
	if v.controlPlaneSections(root, &c) { // [control_plane], [routes]: controlplane.go; true = static routes
		c.Backends = v.backends(root, c.Credentials)
		c.Models = v.models(root, c.Backends)
	}
	if t, ok := root.sub("authz", `an [authz] table with source = "file:<path>"`); ok {
		v.authz(t, &c.Authz)
	}
	v.mqttSection(root, &c.MQTT) // [mqtt]: mqtt.go
	// [usage]: usage.go
	v.usageSection(root, &c.Usage)
	root.done()
	return &c
}

// section returns the table at key, or an empty one when the key is absent
// (every key inside then keeps its default).
func section(t *table, key string) (*table, bool) {
	if !t.has(key) {
		return newTable(t.ps, t.at(key), nil), true
	}
	return t.sub(key, "")
}

func (v *validator) listen(t *table, l *Listen) {
	defer t.done()
	apiHost, apiPort, apiOK := listenAddr(t, "api", &l.API)
	healthHost, healthPort, healthOK := listenAddr(t, "health", &l.Health)
	if apiOK && healthOK && apiPort == healthPort && apiPort != "0" &&
		(apiHost == healthHost || unspecified(apiHost) || unspecified(healthHost)) {
		v.ps.add(t.at("health"), "must differ from listen.api (the health listener is separate, SPEC §9)")
	}

	cert, _ := t.str("tls_cert_file", "")
	key, _ := t.str("tls_key_file", "")
	insecure, _ := t.boolean("insecure_plaintext")
	switch {
	case cert != "" && key == "":
		v.ps.add(t.at("tls_key_file"), "missing; set together with listen.tls_cert_file")
	case cert == "" && key != "":
		v.ps.add(t.at("tls_cert_file"), "missing; set together with listen.tls_key_file")
	case cert != "" && key != "":
		l.TLSCertFile, l.TLSKeyFile = v.resolve(cert), v.resolve(key)
		v.keyPair(t, l.TLSCertFile, l.TLSKeyFile)
		if insecure {
			v.ps.add(t.at("insecure_plaintext"), "conflicts with listen.tls_cert_file; remove one")
		}
	case apiOK && !insecure && !loopback(apiHost):
		// SPEC §9: plaintext only on loopback, or with an explicit opt-in.
		v.ps.add(t.at("api"), "plaintext API listener on a non-loopback address; set listen.tls_cert_file and listen.tls_key_file, "+
			"or listen.insecure_plaintext = true when TLS is terminated in front of the node (SPEC §9)")
	}
	l.InsecurePlaintext = insecure
}

// listenAddr reads an optional host:port into *dst and splits it.
func listenAddr(t *table, key string, dst *string) (host, port string, ok bool) {
	if s, present := t.str(key, ""); present {
		*dst = s
	} else if t.has(key) {
		return "", "", false // wrong type, already reported
	}
	host, port, err := net.SplitHostPort(*dst)
	if _, portOK := parsePort(port); err != nil || !portOK {
		t.ps.add(t.at(key), "expected host:port with a numeric port, like \"127.0.0.1:8080\" or \":8080\", got %q", *dst)
		return "", "", false
	}
	return host, port, true
}

func (v *validator) keyPair(t *table, certFile, keyFile string) {
	cert, err := v.readFile(certFile)
	if err != nil {
		v.ps.add(t.at("tls_cert_file"), "cannot read: %v", err)
	}
	key, kerr := v.readFile(keyFile)
	if kerr != nil {
		v.ps.add(t.at("tls_key_file"), "cannot read: %v", kerr)
	}
	if err != nil || kerr != nil {
		return
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		v.ps.add(t.at("tls_cert_file"), "not a usable PEM certificate and key pair: %v", err)
	}
}

func (v *validator) limits(t *table, l *Limits) {
	defer t.done()
	if n, ok := t.integer("body_bytes", "", minBodyBytes, maxBodyBytes); ok {
		l.BodyBytes = n
	}
	if n, ok := t.integer("max_attempts", "", 1, maxAttempts); ok {
		l.MaxAttempts = int(n)
	}
	// Server limits: never unbounded (a zero would disable Go's guard).
	durationIn(t, "read_header_timeout", minServerTimeout, maxServerTimeout, &l.ReadHeaderTimeout)
	durationIn(t, "idle_timeout", minServerTimeout, maxServerTimeout, &l.IdleTimeout)
	durationIn(t, "body_read_timeout", minServerTimeout, maxServerTimeout, &l.BodyReadTimeout)
	if n, ok := t.integer("max_header_bytes", "", minHeaderBytes, maxHeaderBytes); ok {
		l.MaxHeaderBytes = int(n)
	}
	if n, ok := t.integer("max_concurrent_requests", "", 1, maxConcurrentRequests); ok {
		l.MaxConcurrentRequests = int(n)
	}
}

func (v *validator) timeouts(t *table, to *Timeouts) {
	defer t.done()
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{
		{"connect", &to.Connect},
		{"first_byte", &to.FirstByte},
		{"stream_idle", &to.StreamIdle},
		{"non_stream_total", &to.NonStreamTotal},
	} {
		if d, ok := t.duration(f.key, minTimeout); ok {
			*f.dst = d
		}
	}
	d, ok := t.duration("stream_keepalive", 0)
	switch {
	case !ok || d == 0:
	case d < minKeepalive:
		v.ps.add(t.at("stream_keepalive"), "%s is too small; expected 0 (off) or at least %s", d, minKeepalive)
	case d >= to.StreamIdle:
		// The idle timeout would end the stream before a keepalive is due.
		v.ps.add(t.at("stream_keepalive"), "%s must be shorter than timeouts.stream_idle (%s)", d, to.StreamIdle)
	default:
		to.StreamKeepalive = d
	}
}

func (v *validator) drain(t *table, d *Drain) {
	defer t.done()
	if x, ok := t.duration("delay", 0); ok {
		d.Delay = x
	}
	if x, ok := t.duration("grace", 0); ok {
		d.Grace = x
	}
}

func (v *validator) egress(t *table, e *Egress) {
	defer t.done()
	list, ok := t.list("proxies", "at least one [[egress.proxies]] (SPEC §3: there is no direct connection)")
	if ok && len(list) == 0 {
		v.ps.add(t.at("proxies"), "empty; expected at least one proxy (SPEC §3: there is no direct connection)")
	}
	names := map[string]string{} // name → path of its first use
	for _, pt := range list {
		p := v.proxy(pt)
		if p.Name != "" {
			if first, dup := names[p.Name]; dup {
				v.ps.add(pt.at("name"), "duplicate proxy name %q (also %s)", p.Name, first)
			}
			names[p.Name] = pt.path
		}
		e.Proxies = append(e.Proxies, p)
	}
	if pt, ok := section(t, "provider_tls"); ok {
		if f, ok := pt.str("ca_file", ""); ok && f != "" {
			e.ProviderCAFile = v.caFile(pt, "ca_file", f)
		}
		pt.done()
	}
}

func (v *validator) proxy(t *table) Proxy {
	defer t.done()
	var p Proxy
	if name, ok := t.str("name", idRule); ok {
		if validID(name) {
			p.Name = name
		} else {
			v.ps.add(t.at("name"), "invalid proxy name; expected %s", idRule)
		}
	}
	if raw, ok := t.str("url", `a proxy URL like "socks5://127.0.0.1:1080"`); ok {
		p.URL = v.proxyURL(t.at("url"), raw)
	}
	username, userOK := t.str("username", "")
	userBad := !userOK && t.has("username") // wrong type, already reported
	p.Username = username
	if p.Username != "" {
		switch {
		case len(p.Username) > maxSOCKSField:
			v.ps.add(t.at("username"), "too long; expected at most %d bytes", maxSOCKSField)
		case strings.ContainsFunc(p.Username, unicode.IsControl):
			v.ps.add(t.at("username"), "must not contain control characters")
		case p.URL != nil && p.URL.Scheme != "socks5" && strings.Contains(p.Username, ":"):
			v.ps.add(t.at("username"), "must not contain ':' (HTTP Basic authentication, RFC 7617)")
		}
	}
	if raw, ok := t.get("password", ""); ok {
		p.Password = v.secretRef(t, "password", raw)
	}
	// Checked whenever a password is configured, even if its value failed
	// to load (that is reported at the reference itself).
	if t.has("password") {
		if p.Username == "" && !userBad {
			v.ps.add(t.at("username"), "missing; a proxy password needs a username")
		}
		if p.URL != nil && p.URL.Scheme == "socks5" && len(p.Password.Reveal()) > maxSOCKSField {
			v.ps.add(t.at("password"), "too long for SOCKS5; expected at most %d bytes (RFC 1929)", maxSOCKSField)
		}
		if p.URL != nil && p.URL.Scheme != "https" && !loopback(p.URL.Hostname()) {
			// HTTP CONNECT Basic auth and SOCKS5 username/password auth both
			// send the password as cleartext on the wire.
			v.ps.add(t.at("password"), "would cross the network in cleartext to a non-loopback proxy; "+
				"use an https:// proxy URL (TLS to the proxy) or a proxy on a loopback address")
		}
	}
	if f, ok := t.str("ca_file", ""); ok && f != "" {
		if p.URL != nil && p.URL.Scheme != "https" {
			v.ps.add(t.at("ca_file"), "only applies to https:// proxies")
		} else {
			p.CAFile = v.caFile(t, "ca_file", f)
		}
	}
	return p
}

// proxyURL checks an egress proxy URL: socks5, http or https, host and port,
// nothing else. A plaintext proxy is fine without a password: the provider
// connection inside the tunnel is still TLS (SPEC §3).
func (v *validator) proxyURL(path, raw string) *url.URL {
	u, ok := v.absURL(path, raw, "a socks5://, http:// or https:// URL", "socks5", "http", "https")
	if !ok {
		return nil
	}
	switch {
	case u.User != nil:
		v.ps.add(path, "must not contain credentials; set username and password instead")
	case u.Path != "" && u.Path != "/":
		v.ps.add(path, "must not have a path; expected scheme://host:port")
	case u.Port() == "":
		v.ps.add(path, "missing port; expected scheme://host:port")
	default:
		u.Path, u.RawPath = "", ""
		return u
	}
	return nil
}

// baseURL checks a backend base URL (SPEC §3: plaintext only for loopback).
func (v *validator) baseURL(path, raw string) *url.URL {
	u, ok := v.absURL(path, raw, "an https:// URL (http:// only for a loopback host)", "http", "https")
	if !ok {
		return nil
	}
	switch {
	case u.User != nil:
		v.ps.add(path, "must not contain credentials; the backend's credential goes in credential")
	case u.Scheme == "http" && !loopback(u.Hostname()):
		v.ps.add(path, "plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https:// (SPEC §3)")
	default:
		// The endpoint path is appended, so "…/v1/" and "…/v1" mean the same.
		u.Path, u.RawPath = strings.TrimRight(u.Path, "/"), strings.TrimRight(u.RawPath, "/")
		return u
	}
	return nil
}

// absURL parses raw as an absolute URL with one of schemes, a host, a valid
// port if any, and no query or fragment. Messages never quote raw: it may
// hold credentials.
func (v *validator) absURL(path, raw, want string, schemes ...string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // ue.Error() quotes the whole URL
		}
		v.ps.add(path, "not a valid URL: %v", err)
		return nil, false
	}
	switch {
	case !slices.Contains(schemes, u.Scheme):
		v.ps.add(path, "expected %s", want)
	case u.Opaque != "" || u.Hostname() == "":
		v.ps.add(path, "expected %s with a host", want)
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "#"):
		v.ps.add(path, "must not have a query or fragment")
	case strings.HasSuffix(u.Host, ":") || (u.Port() != "" && !validPort(u.Port())):
		v.ps.add(path, "invalid port; expected 1..65535")
	default:
		return u, true
	}
	return nil, false
}

// caFile resolves a CA bundle path and checks that it holds PEM certificates.
func (v *validator) caFile(t *table, key, f string) string {
	p := v.resolve(f)
	b, err := v.readFile(p)
	if err != nil {
		v.ps.add(t.at(key), "cannot read: %v", err)
		return ""
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		v.ps.add(t.at(key), "no PEM certificates in %q", p)
		return ""
	}
	return p
}

func (v *validator) credentials(root *table) map[string]secret.Secret {
	creds := map[string]secret.Secret{}
	entries, _ := root.entries("credentials", "")
	for _, e := range entries {
		if e.t == nil {
			creds[e.name] = secret.Secret{} // declared; its type is reported
			continue
		}
		if !validID(e.name) {
			v.ps.add(e.t.path, "invalid credential name; expected %s", idRule)
		}
		// Declared names resolve even when their value fails to load, so a
		// missing variable is reported once, at the credential.
		creds[e.name] = v.secretRefTable(e.t)
	}
	return creds
}

// secretRef reads key of t as a secret reference table.
func (v *validator) secretRef(t *table, key string, raw any) secret.Secret {
	m, ok := raw.(map[string]any)
	if !ok {
		// Never echo the value: a string here is most likely the secret.
		v.ps.add(t.at(key), `expected a secret reference { env = "NAME" } or { file = "PATH" }, got %s`, typeName(raw))
		return secret.Secret{}
	}
	return v.secretRefTable(newTable(t.ps, t.at(key), m))
}

// secretRefTable loads a secret reference: exactly one of env = "NAME" or
// file = "PATH". The file is resolved against the config directory.
func (v *validator) secretRefTable(t *table) secret.Secret {
	defer t.done()
	hasEnv, hasFile := t.has("env"), t.has("file")
	var (
		s   secret.Secret
		err error
		at  string
	)
	switch {
	case hasEnv && hasFile:
		v.ps.add(t.path, "set exactly one of env or file, not both")
		return s
	case hasEnv:
		at = t.at("env")
		name, ok := t.str("env", "")
		if !ok {
			return s
		}
		if name == "" || strings.ContainsAny(name, "=\x00") {
			v.ps.add(at, "expected an environment variable name")
			return s
		}
		s, err = secret.FromEnvFunc(name, v.getenv)
	case hasFile:
		at = t.at("file")
		f, ok := t.str("file", "")
		if !ok {
			return s
		}
		if f == "" {
			v.ps.add(at, "expected a file path")
			return s
		}
		s, err = secret.FromFileFunc(v.resolve(f), v.readFile)
	default:
		v.ps.add(t.path, `missing; expected exactly one of env = "NAME" or file = "PATH"`)
		return s
	}
	if err != nil {
		v.ps.add(at, "%v", err) // secret errors name the variable or path, never the value
	}
	return s
}

func (v *validator) backends(root *table, creds map[string]secret.Secret) []Backend {
	entries, ok := root.entries("backends", "at least one [backends.<id>]")
	if ok && len(entries) == 0 {
		v.ps.add(root.at("backends"), "empty; expected at least one [backends.<id>]")
	}
	out := make([]Backend, 0, len(entries))
	for _, e := range entries {
		t := e.t
		b := Backend{ID: e.name}
		if t == nil {
			out = append(out, b) // declared; its type is reported
			continue
		}
		if !validID(e.name) {
			v.ps.add(t.path, "invalid backend id; expected %s", idRule)
		}
		if p, ok := t.str("protocol", `"openai" or "anthropic"`); ok {
			if p == ProtocolOpenAI || p == ProtocolAnthropic {
				b.Protocol = p
			} else {
				v.ps.add(t.at("protocol"), "unknown protocol %q; expected %q or %q", p, ProtocolOpenAI, ProtocolAnthropic)
			}
		}
		if raw, ok := t.str("base_url", `an https:// URL like "https://api.openai.com/v1"`); ok {
			b.BaseURL = v.baseURL(t.at("base_url"), raw)
		}
		if c, ok := t.str("credential", "the name of a [credentials.<name>]"); ok {
			if _, found := creds[c]; found {
				b.Credential = c
			} else {
				v.ps.add(t.at("credential"), "unknown credential %q; expected the name of a [credentials.<name>]", c)
			}
		}
		if n, ok := t.integer("max_inflight_per_node", "an integer 1..100000", 1, maxInflight); ok {
			b.MaxInflight = int(n)
		}
		if on, ok := t.boolean("include_usage"); ok {
			if b.Protocol == ProtocolAnthropic {
				v.ps.add(t.at("include_usage"), "only applies to protocol %q (stream_options.include_usage); remove it", ProtocolOpenAI)
			} else {
				b.IncludeUsage = &on
			}
		}
		t.done()
		out = append(out, b)
	}
	return out // sorted by ID: entries are sorted by name
}

func (v *validator) models(root *table, backends []Backend) []Model {
	entries, ok := root.entries("models", "at least one [models.<name>]")
	if ok && len(entries) == 0 {
		v.ps.add(root.at("models"), "empty; expected at least one [models.<name>]")
	}
	out := make([]Model, 0, len(entries))
	for _, e := range entries {
		if e.t == nil {
			continue
		}
		if msg := checkModelName(e.name); msg != "" {
			v.ps.add(e.t.path, "invalid model name: %s", msg)
		}
		m := Model{Name: e.name}
		list, ok := e.t.list("targets", "at least one [[models.<name>.targets]]")
		if ok && len(list) == 0 {
			v.ps.add(e.t.at("targets"), "empty; expected at least one target")
		}
		first := map[[2]string]string{} // backend+model → path of its first target
		for _, t := range list {
			tg := v.target(t, backends)
			key := [2]string{tg.Backend, tg.Model}
			if p, dup := first[key]; dup && tg.Backend != "" && tg.Model != "" {
				v.ps.add(t.path, "duplicate of %s (same backend and model); merge their weights", p)
			} else {
				first[key] = t.path
			}
			m.Targets = append(m.Targets, tg)
		}
		e.t.done()
		out = append(out, m)
	}
	return out
}

func (v *validator) target(t *table, backends []Backend) Target {
	defer t.done()
	var tg Target
	if b, ok := t.str("backend", "the id of a [backends.<id>]"); ok {
		if slices.ContainsFunc(backends, func(x Backend) bool { return x.ID == b }) {
			tg.Backend = b
		} else {
			v.ps.add(t.at("backend"), "unknown backend %q; expected the id of a [backends.<id>]", b)
		}
	}
	if m, ok := t.str("model", "the provider's model name"); ok {
		if msg := checkModelName(m); msg != "" {
			v.ps.add(t.at("model"), "invalid model name: %s", msg)
		} else {
			tg.Model = m
		}
	}
	if n, ok := t.integer("weight", "an integer 1..1000000", 1, maxWeight); ok {
		tg.Weight = int(n)
	}
	tg.Stream, _ = t.boolean("stream")
	tg.Tools, _ = t.boolean("tools")
	tg.JSONSchema, _ = t.boolean("json_schema")
	if n, ok := t.integer("tier", "", 0, maxTier); ok {
		tg.Tier = int(n)
	}
	return tg
}

func (v *validator) authz(t *table, a *Authz) {
	defer t.done()
	src, ok := t.str("source", sourceWant)
	if !ok {
		return
	}
	a.Source, _ = v.snapshotSource(t.at("source"), src) // controlplane.go
}

// validID reports whether s is 1-64 characters from [A-Za-z0-9._-].
func validID(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// checkModelName returns what is wrong with a public or provider model name,
// or "".
func checkModelName(s string) string {
	switch {
	case s == "":
		return "empty"
	case utf8.RuneCountInString(s) > maxModelNameLen:
		return "longer than 256 characters"
	case strings.ContainsFunc(s, unicode.IsControl):
		return "contains control characters"
	}
	return ""
}

// parsePort parses a decimal port 0..65535 written without leading zeros.
func parsePort(p string) (uint16, bool) {
	n, err := strconv.ParseUint(p, 10, 16)
	return uint16(n), err == nil && strconv.FormatUint(n, 10) == p
}

// validPort reports whether p is a port a client can connect to.
func validPort(p string) bool {
	n, ok := parsePort(p)
	return ok && n > 0
}

// loopback reports whether host is "localhost" or a loopback IP literal. No
// name is resolved: only what the file says counts (SPEC §3).
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// unspecified reports whether a listen host means "all interfaces".
func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
