package egress

import (
	"errors"
	"net/http"
	"strconv"
	"syscall"
)

// Stage says how far a dial got before it failed. Every stage is before the
// first request byte, so every failure carrying one is definitely_not_sent
// (docs/failures.md "Send state"). EgressFault tells the two families
// apart.
type Stage int

// Egress faults: the proxy path is broken; no backend is to blame. The
// caller counts these on the egress metric and must not feed them to any
// backend's breaker (docs/egress.md "Failures").
// The next configured proxy is tried automatically.
const (
	// StageProxyDial: no working session with the proxy. The TCP connect
	// failed or timed out, the proxy went away while we wrote to it, closed
	// without answering, answered something that is not the protocol, or
	// (SOCKS5) did not answer the greeting before the connect timeout.
	StageProxyDial Stage = iota + 1
	// StageProxyAuth: the proxy answered and refused our credentials
	// (CONNECT 407, or 401 as Debian's tinyproxy 1.11 sends; SOCKS5 method
	// or RFC 1929 failure), or a request it does not support (any other
	// non-2xx CONNECT status outside the policy and target families,
	// SOCKS5 "command" or "address type not supported").
	StageProxyAuth
	// StageProxyTLS: the TLS handshake with an https:// proxy failed, its
	// certificate included (fail closed, never retried in plaintext).
	StageProxyTLS
	// StageProxyPolicy: the proxy took our credentials and refused this
	// tunnel by its rules (CONNECT 403; SOCKS5 reply 2, "connection not
	// allowed by ruleset", as dante sends for a port its rules deny). The
	// fix is in the proxy's configuration, not in the password: it has a
	// stage of its own so the two are not confused. Another proxy may
	// allow the target, so it is tried.
	StageProxyPolicy
)

// Backend faults: the egress path works and the proxy says the target does
// not. They count as that backend's transport failure. The next proxy is not
// tried: it would reach the same target.
const (
	// StageTarget: the proxy reported the target unreachable (CONNECT 500
	// "Unable to connect" from tinyproxy, 502, 503, 504; SOCKS5 general
	// failure, network or host unreachable, connection refused, TTL
	// expired), or did not answer the CONNECT request before the connect
	// timeout, which is what a proxy waiting on a black-holed target looks
	// like.
	StageTarget Stage = iota + 5
	// StageProviderTLS: the provider's TLS handshake through the tunnel
	// failed (untrusted certificate, wrong name, protocol version).
	StageProviderTLS
)

// Node faults: the node itself could not open the connection to the
// proxy. Neither the proxy nor the backend is to blame, and another proxy
// would fail the same way, so none is tried; the dialer's OnFailure is not
// called (it says nothing about the proxy). The caller treats it as the
// node's own overload (docs/failures.md "When the node is the
// bottleneck").
const (
	// StageNode: the node is out of file descriptors: its open-file
	// limit (EMFILE) or the system's (ENFILE) was reached when it opened
	// the socket to the proxy; or the dial waited out the connect
	// timeout behind Options.DialsPerProxy (ErrDialsBusy).
	StageNode Stage = iota + 9
)

// String returns the stage as a metric-label-friendly word.
func (s Stage) String() string {
	switch s {
	case StageProxyDial:
		return "proxy_dial"
	case StageProxyAuth:
		return "proxy_auth"
	case StageProxyTLS:
		return "proxy_tls"
	case StageProxyPolicy:
		return "proxy_policy"
	case StageTarget:
		return "target"
	case StageProviderTLS:
		return "provider_tls"
	case StageNode:
		return "node"
	}
	return "stage(" + strconv.Itoa(int(s)) + ")"
}

// NotSentError is returned for every failure before the tunnel (and, for
// DialTLSContext, the provider's TLS session) was established: provably no
// request byte reached the provider, so the caller may re-pick (docs/failures.md).
// Its text names the proxy by Name, never by a URL with credentials, and
// never contains a password.
//
// When the caller's context ended the dial, Err wraps its cause
// (errors.Is(err, context.Canceled)); Stage then only says how far the dial
// got and blames no one: check the context before counting the failure
// against a backend or the egress.
type NotSentError struct {
	Proxy string // Proxy.Name of the proxy that failed (the last one tried)
	Stage Stage
	Err   error
}

func (e *NotSentError) Error() string {
	return "egress: " + e.Stage.String() + " via proxy " + strconv.Quote(e.Proxy) + ": " + e.Err.Error()
}

func (e *NotSentError) Unwrap() error { return e.Err }

// EgressFault reports whether the proxy path failed (StageProxyDial,
// StageProxyAuth, StageProxyTLS, StageProxyPolicy) rather than the backend. An egress fault
// must not open the backend's breaker (docs/egress.md "Failures").
func (e *NotSentError) EgressFault() bool {
	switch e.Stage {
	case StageProxyDial, StageProxyAuth, StageProxyTLS, StageProxyPolicy:
		return true
	}
	return false
}

// NodeFault reports whether the node itself failed (StageNode): it is out
// of file descriptors or of turns to open tunnels. Like an egress fault it must not count against
// the backend; unlike one it is not the proxy's either: the caller sheds
// the request as overloaded (503) rather than blaming the path (502).
func (e *NotSentError) NodeFault() bool { return e.Stage == StageNode }

// outOfDescriptors reports whether err says the process (EMFILE) or the
// system (ENFILE) has no file descriptor left. The errno is matched with
// errors.Is through the *net.OpError and *os.SyscallError that wrap it.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// ErrConnectTimeout is wrapped by a NotSentError when Options.ConnectTimeout
// ran out during that proxy attempt (errors.Is). When the caller's own
// context ended instead, its cause is wrapped.
var ErrConnectTimeout = errors.New("connect timeout")

// connectStatusError is an HTTP proxy's non-2xx answer to CONNECT. The
// proxy's own reason phrase and body are not kept: they are untrusted text.
type connectStatusError struct {
	code int
}

func (e *connectStatusError) Error() string {
	return "proxy answered CONNECT with " + strconv.Itoa(e.code) + " " + http.StatusText(e.code)
}

// socksReplyError is a SOCKS5 proxy's failure reply to CONNECT (RFC 1928 §6).
type socksReplyError struct {
	code byte
}

func (e *socksReplyError) Error() string {
	return "socks5 proxy replied " + strconv.Itoa(int(e.code)) + " (" + socksReplyText(e.code) + ")"
}

func socksReplyText(code byte) string {
	switch code {
	case 0x01:
		return "general failure"
	case 0x02:
		return "connection not allowed by ruleset"
	case 0x03:
		return "network unreachable"
	case 0x04:
		return "host unreachable"
	case 0x05:
		return "connection refused"
	case 0x06:
		return "ttl expired"
	case 0x07:
		return "command not supported"
	case 0x08:
		return "address type not supported"
	}
	return "unassigned code"
}

// Handshake failures that carry no code of their own.
var (
	errProxyClosed        = errors.New("proxy closed the connection before answering")
	errProxyProtocol      = errors.New("proxy answered with something that is not the protocol")
	errSOCKSNoMethod      = errors.New("socks5 proxy accepts none of our authentication methods")
	errSOCKSNeedsAuth     = errors.New("socks5 proxy requires username/password, none configured")
	errSOCKSAuthRejected  = errors.New("socks5 proxy rejected the username/password")
	errSOCKSNoReplyToAuth = errors.New("socks5 proxy did not answer the username/password")
	errNoReply            = errors.New("proxy did not answer in time")
)
