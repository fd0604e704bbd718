// Package egress is the node's only way to reach providers: every provider
// connection is a tunnel through a configured SOCKS5 or HTTP CONNECT proxy,
// and every failure before the tunnel and the provider's TLS session exist
// is a typed *NotSentError (docs/egress.md, docs/failures.md "Send state").
//
// # Basics
//
// New validates the proxies once. Dialer.DialContext opens a tunnel to
// host:port; Dialer.DialTLSContext adds a verified TLS session with the
// provider. Dialer.Transport wires both into an HTTP/1.1 *http.Transport
// whose Proxy is nil, so proxy environment variables have no effect and no
// code path dials a provider directly (docs/architecture.md "Go traps": a nil proxy
// would mean direct). There is no direct fallback and no way to skip
// certificate verification (docs/egress.md).
//
// Targets are passed to the proxy as host:port, names unresolved, so DNS
// happens at the proxy. Plain http:// providers (loopback only, enforced by
// config at load time) are tunnelled like the rest, never sent as
// absolute-URI requests to a forward proxy.
//
// SOCKS5 uses golang.org/x/net/proxy (docs/egress.md) with RFC 1929
// username/password. HTTP CONNECT is written by hand (Basic
// Proxy-Authorization, TLS to https:// proxies verified against
// Proxy.RootCAs with ServerName = the proxy host).
//
// # Failure stages
//
// A NotSentError's Stage says how far the dial got; none of them sent a
// request byte, so all are definitely_not_sent. EgressFault splits them
// (docs/egress.md "Failures"):
//
//   - egress faults (StageProxyDial, StageProxyAuth, StageProxyTLS): the
//     proxy is down, refuses our credentials or policy, or fails its own
//     TLS. They are reported on the egress metric, never counted against a
//     backend, and the Dialer moves on to the next proxy;
//   - backend faults (StageTarget, StageProviderTLS): the proxy says the
//     target is unreachable, or the provider's TLS handshake failed. They
//     count as that backend's transport failure; the next proxy is not
//     tried, it would reach the same target.
//
// CONNECT status codes: 2xx opens the tunnel; 401 and 407 are
// StageProxyAuth (Debian's tinyproxy 1.11 answers 401 to a wrong
// password); 500, 502, 503 and 504 are StageTarget (tinyproxy answers a
// refused target with 500 "Unable to connect", squid with 503); any other
// status, 403 included, is the proxy refusing the tunnel by policy or
// capability and counts as StageProxyAuth, an egress fault.
//
// SOCKS5 reply codes (RFC 1928 §6): 0x02 "not allowed by ruleset" and the
// "not supported" codes are StageProxyAuth; 0x01 general failure, 0x03
// network unreachable, 0x04 host unreachable, 0x05 connection refused and
// 0x06 TTL expired are StageTarget. 0x01 counts against the target because
// a proxy that authenticated us and then fails one CONNECT is reporting on
// that destination (microsocks answers a failed name lookup with 0x01).
//
// A proxy still silent at the connect timeout after our CONNECT request is
// StageTarget: that is what a proxy waiting on a black-holed target looks
// like, and blaming the target lets its breaker open; a SOCKS5 proxy silent
// at the greeting is StageProxyDial.
//
// # Classification without error text
//
// Every stage comes from a typed value: a failed TCP dial to the proxy, a
// TLS handshake error, an HTTP status code, or a SOCKS5 reply byte. x/net's
// SOCKS5 client returns untyped errors, so the Dialer does not read them:
// its forward dialer records whether the proxy's TCP connection opened, and
// a small tap on that connection keeps the first six bytes the proxy sent
// (method selection, RFC 1929 status, reply version and code), which
// classifySOCKS reads as protocol fields. x/net's error is kept in the
// chain for humans.
//
// # Failover and timeouts
//
// Options.ConnectTimeout bounds each proxy attempt (proxy dial, proxy TLS,
// CONNECT/SOCKS5 handshake, provider TLS); errors.Is(err,
// ErrConnectTimeout) says it ran out. When the caller's context ends the
// dial instead, its cause is wrapped and the Stage blames no one (see
// NotSentError). After an egress fault the next proxy is tried, in order,
// starting from the proxy that last worked, so a dead first proxy costs one
// failed dial, not one per request. The last attempt's NotSentError is
// returned.
//
// # Caveats
//
// Errors name the proxy by Proxy.Name and never include a proxy URL,
// username:password or the Proxy-Authorization value; a Proxy.URL with
// userinfo is rejected by New. HTTP/2 is off on purpose (see
// Dialer.Transport). The in-process proxies under internal/devstack are
// test tools; this package never imports them outside tests.
package egress
