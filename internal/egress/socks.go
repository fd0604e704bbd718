package egress

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/net/proxy"
)

// socks5 opens a SOCKS5 tunnel to target through p with golang.org/x/net/proxy
// (docs/egress.md). x/net reports every handshake failure as untyped text, so the
// stage is taken from the protocol instead: the forward dialer records
// whether the TCP connection to the proxy opened, and a tap on that
// connection records the proxy's first reply bytes, which classifySOCKS
// reads as RFC 1928/1929 fields.
func (d *Dialer) socks5(ctx context.Context, p *egressProxy, target string) (net.Conn, Stage, error) {
	fwd := &socksForward{d: net.Dialer{Timeout: d.timeout}}
	var auth *proxy.Auth
	if p.username != "" {
		auth = &proxy.Auth{User: p.username, Password: p.password.Reveal()}
	}
	sd, err := proxy.SOCKS5("tcp", p.addr, auth, fwd)
	if err != nil {
		return nil, StageProxyDial, fmt.Errorf("socks5 dialer: %w", err)
	}
	cd, ok := sd.(proxy.ContextDialer)
	if !ok {
		return nil, StageProxyDial, errors.New("socks5 dialer does not take a context")
	}
	_, err = cd.DialContext(ctx, "tcp", target)
	if err == nil {
		// The handshake is over: x/net read exactly its replies, so the
		// proxy connection is now the tunnel itself. Return it bare, so
		// that no wrapper (the tap, x/net's Conn) sits on every read and
		// write of the exchange.
		return fwd.tap.Conn, 0, nil
	}
	if fwd.tap == nil {
		return nil, StageProxyDial, fmt.Errorf("dial proxy: %w", err)
	}
	stage, why := classifySOCKS(fwd.tap.reply(), auth != nil, timedOut(ctx, fwd.tap.readErr))
	return nil, stage, fmt.Errorf("%w: %w", why, err)
}

// socksForward is the forward dialer handed to x/net/proxy: it dials the
// proxy and keeps a tap on the connection.
type socksForward struct {
	d   net.Dialer
	tap *socksTap // set once the TCP connection to the proxy is open
}

// Dial satisfies proxy.Dialer; x/net calls DialContext because
// socksForward is a proxy.ContextDialer, and a dial without a context is
// refused rather than left unbounded.
func (f *socksForward) Dial(network, addr string) (net.Conn, error) {
	return nil, errors.New("socks5 forward dial without a context")
}

func (f *socksForward) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := f.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	f.tap = &socksTap{Conn: c}
	return f.tap, nil
}

// socksTapSize covers what classification needs: method selection (2),
// RFC 1929 status (2), and VER+REP of the CONNECT reply (2).
const socksTapSize = 6

// socksTap records the first bytes read from the proxy and the first read
// error. It is only read by the dialing goroutine after x/net returned, and
// once full it costs one comparison per Read.
type socksTap struct {
	net.Conn
	n       int
	buf     [socksTapSize]byte
	readErr error
}

func (t *socksTap) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if t.n < len(t.buf) {
		t.n += copy(t.buf[t.n:], p[:n])
	}
	if err != nil && t.readErr == nil {
		t.readErr = err
	}
	return n, err
}

func (t *socksTap) reply() []byte { return t.buf[:t.n] }

// SOCKS5 wire values (RFC 1928, RFC 1929).
const (
	socksVersion      = 0x05
	socksNoAuth       = 0x00
	socksUserPass     = 0x02
	socksNoAcceptable = 0xff
	socksAuthVersion  = 0x01
)

// classifySOCKS maps the bytes a SOCKS5 proxy sent before a failed
// handshake to a Stage and a reason (docs/egress.md
// "Failures"). rec holds the proxy's first bytes: method selection,
// then the RFC 1929 status if user/pass was selected, then the CONNECT
// reply. timedOut says the reads ended at the deadline.
//
//	no or bad method selection              StageProxyDial (proxy down or not SOCKS5)
//	no acceptable method, auth rejected     StageProxyAuth
//	CONNECT reply 0x02 (ruleset)            StageProxyPolicy
//	CONNECT reply 0x07, 0x08, unassigned    StageProxyAuth (unsupported)
//	CONNECT reply 0x01, 0x03-0x06           StageTarget (general failure, unreachable,
//	                                        refused, TTL expired: about this target)
//	no CONNECT reply by the deadline        StageTarget (see noReplyStage)
//	closed without a CONNECT reply, or a
//	  success reply x/net then rejected     StageProxyDial
func classifySOCKS(rec []byte, haveAuth, timedOut bool) (Stage, error) {
	if len(rec) < 2 {
		if timedOut {
			return StageProxyDial, errNoReply
		}
		return StageProxyDial, errProxyClosed
	}
	if rec[0] != socksVersion {
		return StageProxyDial, errProxyProtocol
	}
	off := 2
	switch rec[1] {
	case socksNoAuth:
	case socksUserPass:
		if !haveAuth {
			return StageProxyAuth, errSOCKSNeedsAuth
		}
		if len(rec) < 4 {
			return StageProxyAuth, errSOCKSNoReplyToAuth
		}
		if rec[2] != socksAuthVersion || rec[3] != 0 {
			return StageProxyAuth, errSOCKSAuthRejected
		}
		off = 4
	case socksNoAcceptable:
		return StageProxyAuth, errSOCKSNoMethod
	default: // a method we did not offer
		return StageProxyDial, errProxyProtocol
	}
	if len(rec) < off+2 {
		if timedOut {
			return StageTarget, errNoReply
		}
		return StageProxyDial, errProxyClosed
	}
	if rec[off] != socksVersion {
		return StageProxyDial, errProxyProtocol
	}
	switch code := rec[off+1]; code {
	case 0x00:
		// Success reply, yet x/net failed reading the rest of it.
		return StageProxyDial, errProxyProtocol
	case 0x01, 0x03, 0x04, 0x05, 0x06:
		return StageTarget, &socksReplyError{code: code}
	case 0x02:
		return StageProxyPolicy, &socksReplyError{code: code}
	default:
		return StageProxyAuth, &socksReplyError{code: code}
	}
}
