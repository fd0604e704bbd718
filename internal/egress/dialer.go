package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/secret"
)

// DefaultConnectTimeout is used when Options.ConnectTimeout is zero.
const DefaultConnectTimeout = 10 * time.Second

// DefaultIdleConns is used when Options.IdleConns is zero.
const DefaultIdleConns = 4096

// DefaultDialsPerProxy is used when Options.DialsPerProxy is zero.
const DefaultDialsPerProxy = 64

// Proxy is one configured egress proxy.
type Proxy struct {
	// Name identifies the proxy in errors, logs and metrics. Empty means
	// URL.Host.
	Name string
	// URL is socks5://host:port, http://host:port (CONNECT in plaintext,
	// loopback and trusted networks) or https://host:port (CONNECT over TLS
	// to the proxy, certificate verified). The port is required; userinfo
	// is rejected: credentials go in Username and Password.
	URL      *url.URL
	Username string
	Password secret.Secret
	// RootCAs verifies an https:// proxy's certificate; nil = system pool.
	RootCAs *x509.CertPool
}

// Options configures a Dialer.
type Options struct {
	// Proxies are tried in order, starting with the one that last worked,
	// moving on only after an egress fault (nothing was sent). At least one
	// is required: there is no direct connection (docs/egress.md).
	Proxies []Proxy
	// ConnectTimeout bounds one proxy attempt: the wait for a turn
	// (DialsPerProxy), proxy dial, proxy TLS, CONNECT or SOCKS5 handshake
	// and provider TLS. Zero means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// ProviderCAs verifies providers' certificates; nil = system pool. It
	// replaces the system pool: to add a CA to the system roots, start from
	// x509.SystemCertPool.
	ProviderCAs *x509.CertPool
	// OnFailure, when set, is called for every proxy attempt that failed,
	// the ones a later proxy made up for included: a dial that fails over
	// returns only its last error, and a dead first proxy behind a working
	// second one would otherwise never show. It is not called when the
	// caller's context ended the attempt, nor for a node fault (StageNode:
	// the node out of descriptors or of turns): nothing is known about the proxy. It must be safe for concurrent use and must not block.
	OnFailure func(*NotSentError)
	// IdleConns bounds the idle keep-alive connections (each an open
	// tunnel) Transport keeps, per provider host and in all. A connection
	// a finished request hands back beyond it is closed, so the next burst
	// opens a tunnel through the proxy again: set it to the most requests
	// the node runs at once. Zero means DefaultIdleConns.
	IdleConns int
	// DialsPerProxy bounds the tunnels being opened through one proxy at
	// once, each from the proxy dial to the provider's TLS session. A
	// dial beyond it waits its turn within ConnectTimeout: a burst opens
	// tunnels at that pace while the connections its first requests give
	// back serve the requests that wait, instead of opening a tunnel per
	// request at once, which under overload costs the node and the proxy
	// the CPU the requests need (docs/egress.md "Connection reuse"). Zero
	// means DefaultDialsPerProxy.
	DialsPerProxy int
}

type proxyKind int

const (
	kindSOCKS5 proxyKind = iota + 1
	kindConnect
)

// egressProxy is a validated Proxy, immutable after New.
type egressProxy struct {
	name     string
	kind     proxyKind
	addr     string      // host:port of the proxy
	tls      *tls.Config // TLS to the proxy (https://); nil otherwise
	username string
	password secret.Secret
	// authHeader is the Proxy-Authorization value for CONNECT; zero when
	// no username is configured.
	authHeader secret.Secret
	// slots holds a token per tunnel being opened through this proxy
	// (Options.DialsPerProxy; takeTurn, leaveTurn).
	slots chan struct{}
}

// Dialer reaches providers only through the configured proxies. It is safe
// for concurrent use.
type Dialer struct {
	// immutable after New
	proxies     []egressProxy
	timeout     time.Duration
	providerCAs *x509.CertPool
	sessions    tls.ClientSessionCache
	onFailure   func(*NotSentError) // nil = none
	idleConns   int

	// preferred is the index of the proxy that last opened a tunnel; dials
	// start there so a dead first proxy does not cost every dial a timeout.
	preferred atomic.Int32
}

// New validates o and returns a Dialer. Errors name proxies by Name and
// never print a URL or a credential.
func New(o Options) (*Dialer, error) {
	if len(o.Proxies) == 0 {
		return nil, errors.New("egress: no proxy configured (there is no direct connection)")
	}
	if o.ConnectTimeout < 0 {
		return nil, fmt.Errorf("egress: negative connect timeout %s", o.ConnectTimeout)
	}
	if o.IdleConns < 0 {
		return nil, fmt.Errorf("egress: negative idle connection bound %d", o.IdleConns)
	}
	if o.DialsPerProxy < 0 {
		return nil, fmt.Errorf("egress: negative bound on dials per proxy %d", o.DialsPerProxy)
	}
	dials := o.DialsPerProxy
	if dials == 0 {
		dials = DefaultDialsPerProxy
	}
	d := &Dialer{
		timeout:     o.ConnectTimeout,
		providerCAs: o.ProviderCAs,
		sessions:    tls.NewLRUClientSessionCache(256),
		onFailure:   o.OnFailure,
		idleConns:   o.IdleConns,
	}
	if d.timeout == 0 {
		d.timeout = DefaultConnectTimeout
	}
	if d.idleConns == 0 {
		d.idleConns = DefaultIdleConns
	}
	var errs []error
	for i, p := range o.Proxies {
		ep, err := compileProxy(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("egress: proxy %d %q: %w", i, ep.name, err))
			continue
		}
		ep.slots = make(chan struct{}, dials)
		d.proxies = append(d.proxies, ep)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return d, nil
}

func compileProxy(p Proxy) (egressProxy, error) {
	ep := egressProxy{name: p.Name, username: p.Username, password: p.Password}
	u := p.URL
	if u == nil {
		return ep, errors.New("no url")
	}
	if ep.name == "" {
		ep.name = u.Host
	}
	// Never print u: it may carry credentials.
	if u.User != nil {
		return ep, errors.New("url must not carry userinfo; set username and password instead")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return ep, errors.New("url must be scheme://host:port")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return ep, errors.New("url has no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return ep, errors.New("url needs an explicit port 1-65535")
	}
	ep.addr = net.JoinHostPort(host, port)
	if !p.Password.IsZero() && p.Username == "" {
		return ep, errors.New("password set without username")
	}
	switch u.Scheme {
	case "socks5":
		ep.kind = kindSOCKS5
		// RFC 1929 length fields are one byte.
		if len(p.Username) > 255 || len(p.Password.Reveal()) > 255 {
			return ep, errors.New("socks5 username and password are limited to 255 bytes")
		}
	case "http", "https":
		ep.kind = kindConnect
		if strings.Contains(p.Username, ":") {
			return ep, errors.New("username must not contain ':' (RFC 7617)")
		}
		if p.Username != "" {
			cred := base64.StdEncoding.EncodeToString([]byte(p.Username + ":" + p.Password.Reveal()))
			ep.authHeader = secret.New("Basic " + cred)
		}
		if u.Scheme == "https" {
			ep.tls = &tls.Config{
				ServerName: host,
				RootCAs:    p.RootCAs,
				MinVersion: tls.VersionTLS12,
			}
		}
	default:
		return ep, fmt.Errorf("unsupported scheme %q (want socks5, http or https)", u.Scheme)
	}
	return ep, nil
}

// DialContext opens a tunnel to addr (host:port) through a proxy and returns
// it without TLS: for plaintext loopback providers (docs/egress.md) and for
// callers that run their own TLS. The host is passed to the proxy as
// written, so names are resolved by the proxy. network must be tcp, tcp4 or
// tcp6 (the proxy chooses the address family). Any failure before the tunnel
// is open is a *NotSentError.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.dial(ctx, network, addr, false)
}

// DialTLSContext opens a tunnel like DialContext, then a TLS session with the
// provider: ServerName = the target host, roots = Options.ProviderCAs, TLS
// 1.2 or later, ALPN http/1.1 only. The certificate is always verified
// (docs/egress.md). It returns the *tls.Conn, so http.Transport fills
// Response.TLS. A failed provider handshake is a *NotSentError with
// StageProviderTLS.
func (d *Dialer) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.dial(ctx, network, addr, true)
}

func (d *Dialer) dial(ctx context.Context, network, addr string, withTLS bool) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("egress: unsupported network %q", network)
	}
	host, err := checkTarget(addr)
	if err != nil {
		return nil, err
	}
	start := int(d.preferred.Load())
	var last *NotSentError
	for i := range d.proxies {
		k := (start + i) % len(d.proxies)
		conn, nse := d.dialVia(ctx, &d.proxies[k], addr, host, withTLS)
		if nse == nil {
			if k != start {
				d.preferred.Store(int32(k))
			}
			return conn, nil
		}
		last = nse
		if d.onFailure != nil && ctx.Err() == nil && !nse.NodeFault() {
			d.onFailure(nse)
		}
		// Only an egress fault means another proxy might do better; a
		// target or node fault would repeat, and an ended ctx ends the
		// dial.
		if !nse.EgressFault() || ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// dialVia makes one attempt through p under its own connect timeout.
func (d *Dialer) dialVia(ctx context.Context, p *egressProxy, target, host string, withTLS bool) (net.Conn, *NotSentError) {
	ctx, cancel := context.WithTimeoutCause(ctx, d.timeout, ErrConnectTimeout)
	defer cancel()

	if err := d.takeTurn(ctx, p); err != nil {
		// The node's own bound, not the proxy's fault (NodeFault).
		return nil, &NotSentError{Proxy: p.name, Stage: StageNode, Err: fmt.Errorf("%w: %w", ErrDialsBusy, err)}
	}
	defer p.leaveTurn()

	var conn net.Conn
	var stage Stage
	var err error
	switch p.kind {
	case kindSOCKS5:
		conn, stage, err = d.socks5(ctx, p, target)
	default:
		conn, stage, err = d.connect(ctx, p, target)
	}
	if err != nil {
		if outOfDescriptors(err) {
			// The node's socket, not the proxy: whatever stage the
			// exchange had reached, the node is out of descriptors.
			stage = StageNode
		}
		return nil, &NotSentError{Proxy: p.name, Stage: stage, Err: withCause(ctx, err)}
	}
	if !withTLS {
		return conn, nil
	}
	tc := tls.Client(conn, &tls.Config{
		ServerName:         host,
		RootCAs:            d.providerCAs,
		MinVersion:         tls.VersionTLS12,
		NextProtos:         []string{"http/1.1"},
		ClientSessionCache: d.sessions,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, &NotSentError{
			Proxy: p.name,
			Stage: StageProviderTLS,
			Err:   withCause(ctx, fmt.Errorf("tls handshake with provider %s: %w", target, err)),
		}
	}
	return tc, nil
}

// withCause adds why ctx ended (ErrConnectTimeout or the caller's cause) to
// err, so errors.Is works whatever the failing call returned.
func withCause(ctx context.Context, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// Every I/O deadline on these connections is ctx's deadline, so it
		// has passed and ctx's timer is firing; wait for it so the cause is
		// known rather than racing it.
		<-ctx.Done()
	}
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(err, cause) {
		return err
	}
	return fmt.Errorf("%w: %w", cause, err)
}

// checkTarget validates host:port and returns the host. The host goes into
// a CONNECT request line or a SOCKS5 domain field as written, so it must be
// non-empty and free of spaces and control characters.
func checkTarget(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("egress: target address: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("egress: target %q: port must be 1-65535", addr)
	}
	if host == "" || len(host) > 255 || strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", fmt.Errorf("egress: target %q: bad host", addr)
	}
	return host, nil
}

// Transport returns a new *http.Transport that reaches providers only
// through d. Each call returns a transport with its own connection pool:
// build one per node and reuse it.
//
//   - Proxy is nil and both dial functions are d's, so HTTP_PROXY,
//     HTTPS_PROXY and NO_PROXY have no effect and there is no path that
//     dials a provider directly (docs/architecture.md "Go traps"). Plain http://
//     (loopback) providers are tunnelled with CONNECT/SOCKS5 too, never
//     sent as absolute-URI requests to a forward proxy.
//   - HTTP/1.1 only (empty TLSNextProto, Protocols = HTTP1): one request per
//     connection at a time, so "a request byte was written" is a property
//     of one connection and httptrace reports it exactly (docs/failures.md
//     "Send state"); an HTTP/2 stream failure can also take down other
//     streams multiplexed on the same connection.
//   - DisableCompression: the transport never adds Accept-Encoding: gzip on
//     the client's behalf, so bytes (SSE above all) reach the client
//     exactly as the provider sent them, and are never transparently
//     decompressed and buffered.
//   - Up to Options.IdleConns idle connections are kept, per host and in
//     all: every connection a burst opened stays for the next one, which
//     then reuses tunnels instead of opening new ones while overloaded.
//   - ResponseHeaderTimeout and ExpectContinueTimeout are 0: the caller
//     owns first-byte timing (docs/api.md "Timeouts") and never sends
//     Expect: 100-continue.
func (d *Dialer) Transport() *http.Transport {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		DialTLSContext:        d.DialTLSContext,
		ForceAttemptHTTP2:     false,
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{},
		Protocols:             &protocols,
		DisableCompression:    true,
		MaxIdleConns:          d.idleConns,
		MaxIdleConnsPerHost:   d.idleConns,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0,
		ExpectContinueTimeout: 0,
	}
}
