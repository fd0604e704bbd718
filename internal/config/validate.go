package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// Limits enforced at load time (documented in the package doc).
const (
	minBodyBytes  = 1 << 10
	maxBodyBytes  = 1 << 30
	maxAttempts   = 5
	minTimeout    = time.Millisecond
	minKeepalive  = time.Second
	maxSOCKSField = 255 // RFC 1929: username and password are at most 255 bytes

	minServerTimeout      = 100 * time.Millisecond
	maxServerTimeout      = time.Hour
	minSocketLifetime     = time.Minute
	maxSocketLifetime     = 24 * time.Hour
	minHeaderBytes        = 4 << 10
	maxHeaderBytes        = 1 << 20 // net/http's default
	maxConcurrentRequests = 1000000
	// maxConnsPerClient bounds limits.max_conns_per_client,
	// max_unauthenticated_per_client, conn_rate_per_client and
	// resets_per_client (0: unbounded).
	maxConnsPerClient = 1000000
	// maxClientPenalty bounds limits.client_penalty: an address shared by
	// honest clients (a NAT) must not be locked out for long.
	maxClientPenalty = time.Hour
	maxLinger        = time.Minute // a lingering read is short by definition
	// limits.shed_wait and shed_after (docs/failures.md "Shedding"): the
	// node reads its scheduling wait every 100ms, so a shorter wait or
	// interval means nothing, and a wait beyond a few seconds never sheds
	// before the requests run out their limits.
	maxShedWait  = 10 * time.Second
	minShedAfter = 100 * time.Millisecond
	maxShedAfter = time.Minute
	maxQueueWait = time.Minute // longer, and clients' own timeouts decide
	// egress.dials_per_proxy
	maxDialsPerProxy = 100000
	// maxSentinels bounds limits.redis.sentinel_addrs.
	maxSentinels = 16
)

// validator turns the decoded document into a Config, collecting problems.
type validator struct {
	ps       problems
	getenv   func(string) (string, bool)
	readFile func(string) ([]byte, error)
	dir      string // base for relative paths; "" leaves them as written
	// routePaths are the TOML paths of the decoded backends and models.
	routePaths routePaths
	// badHosts are the paths of the credentials whose hosts list has a
	// problem: a backend using one is not reported again.
	badHosts map[string]bool
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
	if id, ok := root.str("node_id", routesnap.IDRule); ok {
		if routesnap.ValidID(id) {
			c.NodeID = id
		} else {
			v.ps.add(root.at("node_id"), "invalid node id; expected %s", routesnap.IDRule)
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
		c.Backends = v.backends(root)
		c.Models = v.models(root)
		v.checkRoutes(c.Backends, c.Models, c.CredentialPolicy())
	}
	if t, ok := root.sub("authz", `an [authz] table with source = "file:<path>"`); ok {
		v.authz(t, &c.Authz)
	}
	v.mqttSection(root, &c.MQTT) // [mqtt]: mqtt.go
	// [usage]: usage.go
	v.usageSection(root, &c.Usage)
	v.tracingSection(root, &c.Tracing)   // [tracing]: tracing.go
	v.realtimeSection(root, &c.Realtime) // [realtime]: realtime.go
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
		v.ps.add(t.at("health"), "must differ from listen.api (the health listener is separate, docs/operations.md)")
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
		// docs/operations.md: plaintext only on loopback, or with an explicit opt-in.
		v.ps.add(t.at("api"), "plaintext API listener on a non-loopback address; set listen.tls_cert_file and listen.tls_key_file, "+
			"or listen.insecure_plaintext = true when TLS is terminated in front of the node (docs/operations.md)")
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
	durationIn(t, "socket_lifetime", minSocketLifetime, maxSocketLifetime, &l.SocketLifetime)
	durationIn(t, "body_read_timeout", minServerTimeout, maxServerTimeout, &l.BodyReadTimeout)
	if n, ok := t.integer("max_header_bytes", "", minHeaderBytes, maxHeaderBytes); ok {
		l.MaxHeaderBytes = int(n)
	}
	if n, ok := t.integer("max_concurrent_requests", "", 1, maxConcurrentRequests); ok {
		l.MaxConcurrentRequests = int(n)
	}
	durationIn(t, "linger_timeout", 0, maxLinger, &l.LingerTimeout)
	durationIn(t, "shed_wait", 0, maxShedWait, &l.ShedWait)
	durationIn(t, "shed_after", minShedAfter, maxShedAfter, &l.ShedAfter)
	durationIn(t, "queue_wait", 0, maxQueueWait, &l.QueueWait)
	if n, ok := t.integer("max_conns_per_client", "", 0, maxConnsPerClient); ok {
		l.MaxConnsPerClient = int(n)
	}
	if n, ok := t.integer("max_unauthenticated_per_client", "", 0, maxConnsPerClient); ok {
		l.MaxUnauthenticatedPerClient = int(n)
	}
	if n, ok := t.integer("conn_rate_per_client", "", 0, maxConnsPerClient); ok {
		l.ConnRatePerClient = int(n)
	}
	if n, ok := t.integer("resets_per_client", "", 0, maxConnsPerClient); ok {
		l.ResetsPerClient = int(n)
	}
	durationIn(t, "client_penalty", 0, maxClientPenalty, &l.ClientPenalty)
	if raw, ok := t.get("local_share", ""); ok {
		r := -1.0
		switch n := raw.(type) {
		case float64:
			r = n
		case int64:
			r = float64(n)
		default:
			t.mismatch("local_share", "a number greater than 0, at most 1", raw)
		}
		switch {
		case r == -1:
		case r <= 0 || r > 1:
			v.ps.add(t.at("local_share"), "%v is out of range; expected a fraction greater than 0, at most 1 (1/N for N nodes)", r)
		default:
			l.LocalShare = r
		}
	}
	v.limitsStore(t, l)
}

// limitsStore reads [limits] store and [limits.redis].
func (v *validator) limitsStore(t *table, l *Limits) {
	if s, ok := t.str("store", ""); ok {
		switch s {
		case StoreLocal, StoreRedis:
			l.Store = s
		default:
			v.ps.add(t.at("store"), "expected %q or %q, got %q", StoreLocal, StoreRedis, s)
		}
	}
	if !t.has("redis") {
		if l.Store == StoreRedis {
			v.ps.add(t.at("redis"), "missing; store = %q needs a [limits.redis] table with address = \"host:port\"", StoreRedis)
		}
		return
	}
	rt, ok := t.sub("redis", "")
	if !ok {
		return
	}
	defer rt.done()
	if l.Store != StoreRedis {
		v.ps.add(t.at("redis"), "only applies with limits.store = %q", StoreRedis)
	}
	r := &l.Redis
	// hosts are the addresses the password goes to: the Redis, or the
	// Sentinels (the primary they name is on their network).
	var hosts []string
	hostPort := func(path, a string) (string, bool) {
		h, port, err := net.SplitHostPort(a)
		if _, portOK := parsePort(port); err != nil || h == "" || !portOK || port == "0" {
			v.ps.add(path, "expected host:port with a host and a numeric port, like \"10.0.0.5:6379\", got %q", a)
			return "", false
		}
		return h, true
	}
	if !rt.has("sentinel_addrs") {
		if a, ok := rt.str("address", "the Redis address, host:port (or sentinel_addrs and master_name)"); ok {
			if h, ok := hostPort(rt.at("address"), a); ok {
				r.Address, hosts = a, []string{h}
			}
		}
	} else {
		if rt.has("address") {
			v.ps.add(rt.at("address"), "not with sentinel_addrs: the Sentinels name the primary")
		}
		if addrs, ok := rt.strs("sentinel_addrs", "a list of Sentinel addresses, host:port"); ok {
			switch {
			case len(addrs) == 0 || len(addrs) > maxSentinels:
				v.ps.add(rt.at("sentinel_addrs"), "expected 1 to %d Sentinel addresses, got %d", maxSentinels, len(addrs))
			default:
				seen := map[string]bool{}
				for i, a := range addrs {
					path := index(rt.at("sentinel_addrs"), i)
					if seen[a] {
						v.ps.add(path, "%q is listed twice", a)
						continue
					}
					seen[a] = true
					if h, ok := hostPort(path, a); ok {
						hosts = append(hosts, h)
					}
				}
				r.SentinelAddrs = addrs
			}
		}
		if m, ok := rt.str("master_name", "the Sentinel master set the node's limits are on, like \"scootgate\""); ok {
			if m == "" || strings.ContainsFunc(m, unicode.IsControl) || strings.ContainsRune(m, ' ') {
				v.ps.add(rt.at("master_name"), "expected a Sentinel master name without spaces or control characters")
			} else {
				r.MasterName = m
			}
		}
	}
	if rt.has("master_name") && !rt.has("sentinel_addrs") {
		v.ps.add(rt.at("master_name"), "only with sentinel_addrs")
	}
	if u, ok := rt.str("username", ""); ok {
		if u == "" || strings.ContainsFunc(u, unicode.IsControl) || strings.ContainsRune(u, ' ') {
			v.ps.add(rt.at("username"), "expected a Redis user name without spaces or control characters")
		} else {
			r.Username = u
		}
	}
	if b, ok := rt.boolean("tls"); ok {
		r.TLS = b
	}
	if raw, ok := rt.get("password", ""); ok {
		r.Password = v.secretRef(rt, "password", raw)
		for _, host := range hosts {
			if !r.TLS && !loopback(host) {
				v.ps.add(rt.at("password"), "would cross the network in cleartext to a non-loopback Redis; set tls = true or use a loopback address")
				break
			}
		}
	}
	if s, ok := rt.str("on_store_failure", ""); ok {
		switch s {
		case OnStoreFailureLocal, OnStoreFailureOpen, OnStoreFailureClosed:
			r.OnStoreFailure = s
		default:
			v.ps.add(rt.at("on_store_failure"), "expected %q, %q or %q, got %q", OnStoreFailureLocal, OnStoreFailureOpen, OnStoreFailureClosed, s)
		}
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
		{"stream_total", &to.StreamTotal},
		{"non_stream_total", &to.NonStreamTotal},
	} {
		if d, ok := t.duration(f.key, minTimeout); ok {
			*f.dst = d
		}
	}
	// Keepalives and pings are no progress (docs/api.md "Timeouts"): by
	// default a stream may send only those for as long as it may be
	// silent, and at least as long as the default.
	to.StreamProgress = max(to.StreamProgress, to.StreamIdle)
	if d, ok := t.duration("stream_progress", minTimeout); ok {
		to.StreamProgress = d
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
	list, ok := t.list("proxies", "at least one [[egress.proxies]] (docs/egress.md: there is no direct connection)")
	if ok && len(list) == 0 {
		v.ps.add(t.at("proxies"), "empty; expected at least one proxy (docs/egress.md: there is no direct connection)")
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
	if b, ok := t.boolean("insecure_plaintext_proxy"); ok {
		e.InsecurePlaintextProxy = b
	}
	if n, ok := t.integer("dials_per_proxy", "", 1, maxDialsPerProxy); ok {
		e.DialsPerProxy = int(n)
	}
	for i, p := range e.Proxies {
		if p.PlaintextRemote() && !e.InsecurePlaintextProxy {
			// docs/egress.md "Which legs are encrypted": the provider TLS
			// inside the tunnel hides the request, but not which provider is
			// asked, and a proxy that is not the one configured sees it all.
			v.ps.add(index(t.at("proxies"), i)+".url", "plaintext %s:// proxy on a non-loopback address: the connection to it is unencrypted; "+
				"use an https:// proxy (TLS to the proxy), a proxy on loopback, or set egress.insecure_plaintext_proxy = true (docs/egress.md)", p.URL.Scheme)
		}
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
	if name, ok := t.str("name", routesnap.IDRule); ok {
		if routesnap.ValidID(name) {
			p.Name = name
		} else {
			v.ps.add(t.at("name"), "invalid proxy name; expected %s", routesnap.IDRule)
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
// nothing else. Whether a plaintext one may be on the network is decided
// for the whole [egress] (egress.insecure_plaintext_proxy).
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

func (v *validator) credentials(root *table) map[string]credential.Credential {
	creds := map[string]credential.Credential{}
	entries, _ := root.entries("credentials", "")
	for _, e := range entries {
		if e.t == nil {
			creds[e.name] = credential.Credential{} // declared; its type is reported
			v.badHosts[join("credentials", e.name)] = true
			continue
		}
		if !routesnap.ValidID(e.name) {
			v.ps.add(e.t.path, "invalid credential name; expected %s", routesnap.IDRule)
		}
		// Declared names resolve even when their value fails to load, so a
		// missing variable is reported once, at the credential.
		hosts := v.credentialHosts(e.t)
		kind, kindOK := v.credentialKind(e.t)
		if kindOK && kind == kindAWS {
			creds[e.name] = credential.Credential{Hosts: hosts, AWS: v.awsKeys(e.t)}
			continue
		}
		if kindOK && kind == kindGCP {
			creds[e.name] = v.gcpServiceAccount(e.name, e.t, hosts)
			continue
		}
		if kindOK && kind == kindEntra {
			creds[e.name] = v.azureEntra(e.name, e.t, hosts)
			continue
		}
		if kindOK && kind == kindAWSWeb {
			creds[e.name] = v.awsWebIdentity(e.name, e.t, hosts)
			continue
		}
		var auth credential.AuthHeader
		if e.t.has("auth_header") {
			if name, ok := e.t.str("auth_header", credential.AuthHeaderNames); ok {
				var err error
				if auth, err = credential.ParseAuthHeader(name); err != nil {
					v.ps.add(e.t.at("auth_header"), "%v", err)
				}
			}
		}
		creds[e.name] = credential.Credential{Secret: v.secretRefTable(e.t), Hosts: hosts, Auth: auth}
	}
	return creds
}

// Credential kinds (docs/egress.md "Credential kinds"): kind = "static"
// (or absent) is a value sent as it is; kind = "aws" is AWS keys that sign.
const (
	kindStatic = "static"
	kindAWS    = "aws"
	kindGCP    = credential.KindGCPServiceAccount
	kindEntra  = credential.KindAzureEntra
	kindAWSWeb = credential.KindAWSWebIdentity
)

// credentialKind reads a credential's kind; ok is false for one the node
// does not know (reported).
func (v *validator) credentialKind(t *table) (string, bool) {
	if !t.has("kind") {
		return kindStatic, true
	}
	kind, ok := t.str("kind", "")
	if !ok {
		return "", false
	}
	switch kind {
	case kindStatic, kindAWS, kindGCP, kindEntra, kindAWSWeb:
		return kind, true
	}
	v.ps.add(t.at("kind"), "unknown credential kind %q; expected %q, %q, %q, %q or %q", kind, kindStatic, kindAWS, kindAWSWeb, kindGCP, kindEntra)
	return "", false
}

// awsKeys reads an aws credential: access_key_id and secret_access_key
// (secret references, required), session_token (a secret reference, for
// temporary keys) and region (optional: the only region the keys sign
// for). A static credential's env, file and auth_header do not apply.
func (v *validator) awsKeys(t *table) *credential.AWS {
	defer t.done()
	keys := &credential.AWS{}
	ref := func(key string, required bool) secret.Secret {
		raw, ok := t.get(key, "")
		if !ok {
			if required {
				v.ps.add(t.at(key), `missing; expected a secret reference { env = "NAME" } or { file = "PATH" }`)
			}
			return secret.Secret{}
		}
		return v.secretRef(t, key, raw)
	}
	keys.AccessKeyID = ref("access_key_id", true)
	keys.SecretAccessKey = ref("secret_access_key", true)
	keys.SessionToken = ref("session_token", false)
	if t.has("region") {
		if r, ok := t.str("region", ""); ok {
			if !routesnap.ValidRegion(r) {
				v.ps.add(t.at("region"), `expected an AWS region like "us-east-1"`)
			}
			keys.Region = r
		}
	}
	for _, k := range []string{"env", "file", "auth_header"} {
		if t.has(k) {
			v.ps.add(t.at(k), "does not apply to kind %q: its keys are access_key_id, secret_access_key and session_token", kindAWS)
		}
	}
	return keys
}

// gcpServiceAccount reads a gcp_service_account credential: the service
// account's JSON key, either key_file = "PATH" (the file as Google
// downloads it, several lines, read as it is) or key = { env = "NAME" } /
// { file = "PATH" } (the key on one line), and scopes (optional: a list,
// default cloud-platform). The key is checked now, and so is its token
// endpoint against hosts (docs/egress.md "Minted-token credentials"); the
// node makes the token source once it has its egress transport (Mint).
func (v *validator) gcpServiceAccount(name string, t *table, hosts []string) credential.Credential {
	defer t.done()
	var key secret.Secret
	at := t.at("key_file")
	switch hasFile, hasRef := t.has("key_file"), t.has("key"); {
	case hasFile && hasRef:
		v.ps.add(t.path, "set exactly one of key_file or key, not both")
	case hasFile:
		f, ok := t.str("key_file", "the path of the service account's JSON key file")
		if !ok {
			break
		}
		if f == "" {
			v.ps.add(at, "expected a file path")
			break
		}
		var err error
		if key, err = secret.FromDocumentFileFunc(v.resolve(f), v.readFile); err != nil {
			v.ps.add(at, "%v", err)
		}
	case hasRef:
		at = t.at("key")
		raw, _ := t.get("key", "")
		key = v.secretRef(t, "key", raw)
	default:
		v.ps.add(t.at("key_file"), `missing; expected key_file = "PATH" (the service account's JSON key file) or key = { env = "NAME" }`)
	}
	var scopes []string
	if t.has("scopes") {
		scopes, _ = t.strs("scopes", `a list of OAuth 2 scopes like ["https://www.googleapis.com/auth/cloud-platform"]`)
	}
	for _, k := range []string{"env", "file", "auth_header"} {
		if t.has(k) {
			v.ps.add(t.at(k), "does not apply to kind %q: its key is key_file or key", kindGCP)
		}
	}
	mint := func(o credential.TokenOptions) (*credential.TokenSource, error) {
		return credential.NewGCPServiceAccount(credential.GCPOptions{TokenOptions: o, Key: key, Scopes: scopes})
	}
	if !key.IsZero() && len(hosts) > 0 {
		// The key and its token endpoint, checked before the node runs.
		if _, err := mint(credential.TokenOptions{Name: name, Hosts: hosts, Transport: noTransport{}}); err != nil {
			v.ps.add(at, "%v", err)
		}
	}
	return credential.Credential{Hosts: hosts, Mint: mint, Kind: kindGCP}
}

// noTransport stands in for the egress transport when a minted-token
// credential is only checked: it is never used.
type noTransport struct{}

func (noTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("config: a credential checked at load time sends nothing")
}

// credentialHosts reads a credential's hosts list: required, at least one
// entry, each a pattern credential.ParseHost accepts, none twice. It is
// required for every credential, static routes included: the list is what
// stops a routing document from sending the credential elsewhere, and in
// the node's own routes it catches a key paired with another provider's
// backend (docs/egress.md "Where a credential may go").
func (v *validator) credentialHosts(t *table) []string {
	before := len(v.ps.list)
	defer func() {
		if len(v.ps.list) > before {
			v.badHosts[t.path] = true
		}
	}()
	list, ok := t.strs("hosts", `a list of host names like ["api.openai.com"]`)
	if !ok {
		if !t.has("hosts") {
			v.ps.add(t.at("hosts"), `missing; expected the hosts this credential may be sent to, like ["api.openai.com", "*.openai.azure.com"] (docs/egress.md)`)
		}
		return nil
	}
	if len(list) == 0 {
		v.ps.add(t.at("hosts"), "empty; expected at least one host this credential may be sent to")
		return nil
	}
	out := make([]string, 0, len(list))
	seen := make(map[string]int, len(list)) // normal form → index in list
	for i, s := range list {
		h, err := credential.ParseHost(s)
		if err != nil {
			v.ps.add(index(t.at("hosts"), i), "%v", err)
			continue
		}
		if j, dup := seen[h]; dup {
			v.ps.add(index(t.at("hosts"), i), "duplicate of hosts[%d]", j)
			continue
		}
		seen[h] = i
		out = append(out, h)
	}
	return out
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

// backends decodes the [backends.<id>] tables into the routing
// document's types, sorted by id; [validator.routes] checks their meaning.
// Only types and missing keys are reported here.
func (v *validator) backends(root *table) []routesnap.Backend {
	entries, _ := root.entries("backends", "at least one [backends.<id>]")
	out := make([]routesnap.Backend, 0, len(entries))
	for _, e := range entries {
		t := e.t
		b := routesnap.Backend{ID: e.name}
		v.routePaths.backends = append(v.routePaths.backends, join(root.at("backends"), e.name))
		if t == nil {
			out = append(out, b) // declared; its type is reported
			continue
		}
		b.Protocol, _ = t.str("protocol", oneOf(routesnap.Protocols()))
		b.BaseURL, _ = t.str("base_url", `an https:// URL like "https://api.openai.com/v1"`)
		b.Credential, _ = t.str("credential", "the name of a [credentials.<name>]")
		if n, ok := t.integer("max_inflight_per_node", "an integer 1..100000", math.MinInt64, math.MaxInt64); ok {
			b.MaxInflightPerNode = clampInt(n)
		}
		if on, ok := t.boolean("include_usage"); ok {
			b.IncludeUsage = &on
		}
		if list, ok := t.strs("endpoints", `a list of endpoint names like ["chat_completions", "responses"]`); ok {
			b.Endpoints = list
		}
		v.backendPlatform(t, &b)
		t.done()
		out = append(out, b)
	}
	return out // sorted by ID: entries are sorted by name
}

// backendPlatform decodes a backend's cloud platform and its coordinates
// (docs/routing.md "Platforms"); routesnap's rules check them.
func (v *validator) backendPlatform(t *table, b *routesnap.Backend) {
	opt := func(key string) string {
		if !t.has(key) {
			return ""
		}
		s, _ := t.str(key, "")
		return s
	}
	b.Platform = opt("platform")
	b.Region = opt("region")
	b.Project = opt("project")
	b.Location = opt("location")
	b.APIVersion = opt("api_version")
}

// models decodes the [models.<name>] tables into the routing document's
// types, sorted by name, targets in file order.
func (v *validator) models(root *table) []routesnap.Model {
	entries, _ := root.entries("models", "at least one [models.<name>]")
	out := make([]routesnap.Model, 0, len(entries))
	for _, e := range entries {
		if e.t == nil {
			continue
		}
		v.routePaths.models = append(v.routePaths.models, e.t.path)
		m := routesnap.Model{Name: e.name}
		if b, ok := e.t.boolean("affinity"); ok {
			m.Affinity = &b
		}
		if b, ok := e.t.boolean("prefix_affinity"); ok {
			m.PrefixAffinity = &b
		}
		if list, ok := e.t.strs("fallbacks", `a list of model names like ["gpt-4o-mini"]`); ok {
			m.Fallbacks = list // docs/routing.md "Fallbacks"
		}
		list, _ := e.t.list("targets", "at least one [[models.<name>.targets]]")
		for _, t := range list {
			m.Targets = append(m.Targets, v.target(t))
		}
		if m.Targets == nil && list != nil {
			m.Targets = []routesnap.Target{}
		}
		e.t.done()
		out = append(out, m)
	}
	return out
}

func (v *validator) target(t *table) routesnap.Target {
	defer t.done()
	var tg routesnap.Target
	tg.Backend, _ = t.str("backend", "the id of a [backends.<id>]")
	tg.Model, _ = t.str("model", "the provider's model name")
	if n, ok := t.integer("weight", "an integer 1..1000000", math.MinInt64, math.MaxInt64); ok {
		tg.Weight = clampInt(n)
	}
	tg.Stream, _ = t.boolean("stream")
	tg.Tools, _ = t.boolean("tools")
	tg.JSONSchema, _ = t.boolean("json_schema")
	if n, ok := t.integer("tier", "", math.MinInt64, math.MaxInt64); ok {
		tg.Tier = clampInt(n)
	}
	// docs/routing.md "Context windows"
	if n, ok := t.integer("context_window", "", math.MinInt64, math.MaxInt64); ok {
		tg.ContextWindow = new(clampInt(n))
	}
	if n, ok := t.integer("max_output_tokens", "", math.MinInt64, math.MaxInt64); ok {
		tg.MaxOutputTokens = new(clampInt(n))
	}
	if pt, ok := t.sub("price", ""); ok {
		tg.Price = price(pt)
	}
	return tg
}

// price decodes a target's price table (docs/routing.md "Prices"); the
// routing snapshot's rules check the decimals.
func price(t *table) *routesnap.Price {
	defer t.done()
	const want = `a price in USD per million tokens as a decimal string, like "3.75"`
	p := &routesnap.Price{}
	p.Input, _ = t.str("input", want)
	p.Output, _ = t.str("output", want)
	p.CacheRead, _ = t.str("cache_read", "")
	p.CacheWrite, _ = t.str("cache_write", "")
	if lt, ok := t.sub("long_context", ""); ok {
		lc := &routesnap.PriceTier{}
		if n, ok := lt.integer("above_input_tokens", "an integer number of input tokens", 1, math.MaxInt64); ok {
			lc.AboveInputTokens = n
		}
		lc.Input, _ = lt.str("input", want)
		lc.Output, _ = lt.str("output", want)
		lc.CacheRead, _ = lt.str("cache_read", "")
		lc.CacheWrite, _ = lt.str("cache_write", "")
		lt.done()
		p.LongContext = lc
	}
	return p
}

// clampInt converts n to an int, saturating, so that an out-of-range
// value stays out of range for validation on any platform.
func clampInt(n int64) int {
	return int(max(min(n, math.MaxInt), math.MinInt))
}

// routePaths maps the routing document's element indices back to TOML key
// paths: backends[i] is backends.<id>, models[i] is models.<name>.
type routePaths struct {
	backends []string
	models   []string
}

// checkRoutes checks the decoded routes with the routing snapshot's own rules
// and the node's credential policy (policy.ValidateRoutes: the same rules,
// messages and limits as a snapshot's) and reports each problem at its TOML
// key path. A problem at or under a path that decoding already reported (a
// missing key, a wrong type, an entry that is not a table), or at a
// backend's credential whose hosts list was reported, is dropped: one
// problem, not a cascade.
func (v *validator) checkRoutes(backends []routesnap.Backend, models []routesnap.Model, policy credential.Policy) {
	err := policy.ValidateRoutes(backends, models)
	var ve *routesnap.ValidationError
	if !errors.As(err, &ve) {
		return
	}
	reported := make([]string, len(v.ps.list), len(v.ps.list)+len(backends))
	for i, p := range v.ps.list {
		reported[i] = p.Path
	}
	for i, b := range backends {
		if v.badHosts[join("credentials", b.Credential)] && i < len(v.routePaths.backends) {
			reported = append(reported, v.routePaths.backends[i]+".credential")
		}
	}
	for _, p := range ve.Problems {
		path := v.routePaths.toml(p.Path)
		if slices.ContainsFunc(reported, func(r string) bool { return under(path, r) }) {
			continue
		}
		v.ps.add(path, "%s", p.Msg)
	}
}

// toml maps a routing document path ("backends[2].base_url",
// "models[0].name", "models[0].targets[1].weight") to the TOML key path of
// the same value ("backends.b2.base_url", "models.m0",
// "models.m0.targets[1].weight"). Ids and names are TOML keys, so
// "backends[i].id" and "models[i].name" are the key itself.
func (rp routePaths) toml(path string) string {
	for _, list := range []struct {
		prefix, key string
		paths       []string
	}{{"backends[", ".id", rp.backends}, {"models[", ".name", rp.models}} {
		rest, ok := strings.CutPrefix(path, list.prefix)
		if !ok {
			continue
		}
		num, rest, ok := strings.Cut(rest, "]")
		i, err := strconv.Atoi(num)
		if !ok || err != nil || i < 0 || i >= len(list.paths) {
			return path
		}
		if rest == list.key {
			rest = ""
		}
		return list.paths[i] + rest
	}
	return path
}

// under reports whether path is p or a value inside p.
func under(path, p string) bool {
	if p == "" {
		return false
	}
	rest, ok := strings.CutPrefix(path, p)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

func (v *validator) authz(t *table, a *Authz) {
	defer t.done()
	src, ok := t.str("source", sourceWant)
	if !ok {
		return
	}
	var valid bool
	if a.Source, valid = v.snapshotSource(t.at("source"), src); valid { // controlplane.go
		a.VerifyKeys = v.verifyKeys(t)
	}
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
// name is resolved: only what the file says counts (docs/egress.md).
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

// oneOf lists the words of a closed set as messages do: each quoted, the
// last after "or" (`"a", "b" or "c"`).
func oneOf(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
