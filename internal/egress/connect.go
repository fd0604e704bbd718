package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// aLongTimeAgo is a deadline in the past: setting it unblocks pending I/O.
var aLongTimeAgo = time.Unix(1, 0)

// connect opens an HTTP CONNECT tunnel to target through p (RFC 9110
// §9.3.6), over TLS to the proxy for https:// proxies. The request is
// written by hand so that plain http:// targets are tunnelled too, and so
// that every failure maps to a Stage by status code, never by text.
func (d *Dialer) connect(ctx context.Context, p *egressProxy, target string) (net.Conn, Stage, error) {
	nd := net.Dialer{Timeout: d.timeout}
	raw, err := nd.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, StageProxyDial, fmt.Errorf("dial proxy: %w", err)
	}
	conn, stage, err := handshakeConnect(ctx, raw, p, target)
	if err != nil {
		raw.Close()
		return nil, stage, err
	}
	return conn, 0, nil
}

// handshakeConnect runs the proxy TLS (if any) and CONNECT exchange on raw
// under ctx. On success the connection has no deadline left.
func handshakeConnect(ctx context.Context, raw net.Conn, p *egressProxy, target string) (net.Conn, Stage, error) {
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(aLongTimeAgo) })
	conn, stage, err := exchangeConnect(ctx, raw, p, target)
	if !stop() && err == nil {
		// ctx ended as the handshake finished; the deadline may be
		// poisoned, so do not hand the connection out.
		return nil, StageTarget, fmt.Errorf("tunnel: %w", ctx.Err())
	}
	if err != nil {
		return nil, stage, err
	}
	raw.SetDeadline(time.Time{})
	return conn, 0, nil
}

func exchangeConnect(ctx context.Context, raw net.Conn, p *egressProxy, target string) (net.Conn, Stage, error) {
	conn := raw
	if p.tls != nil {
		tc := tls.Client(raw, p.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, StageProxyTLS, fmt.Errorf("tls handshake with proxy: %w", err)
		}
		conn = tc
	}

	req := make([]byte, 0, 128)
	req = append(req, "CONNECT "...)
	req = append(req, target...)
	req = append(req, " HTTP/1.1\r\nHost: "...)
	req = append(req, target...)
	req = append(req, "\r\n"...)
	if !p.authHeader.IsZero() {
		req = append(req, "Proxy-Authorization: "...)
		req = append(req, p.authHeader.Reveal()...)
		req = append(req, "\r\n"...)
	}
	req = append(req, "\r\n"...)
	if _, err := conn.Write(req); err != nil {
		return nil, StageProxyDial, fmt.Errorf("write CONNECT: %w", err)
	}

	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return nil, noReplyStage(ctx, err), fmt.Errorf("read CONNECT response: %w", noReplyErr(ctx, err))
	}
	// A non-2xx body is never read and the connection is closed: the
	// proxy's page is untrusted text and of no use to the caller.
	if stage, ok := connectStatusStage(resp.StatusCode); !ok {
		return nil, stage, &connectStatusError{code: resp.StatusCode}
	}
	// RFC 9110 §9.3.6: after a 2xx the connection is the tunnel; the
	// response has no body. Bytes the proxy sent after the header may
	// already sit in br and must not be lost.
	if n := br.Buffered(); n > 0 {
		rest, _ := br.Peek(n)
		return &prefixConn{Conn: conn, prefix: append([]byte(nil), rest...)}, 0, nil
	}
	return conn, 0, nil
}

// connectStatusStage classifies a proxy's answer to CONNECT (docs/egress.md
// "Failures"). ok is true for 2xx.
//
//	2xx                tunnel open
//	401, 407           StageProxyAuth: our proxy credentials (tinyproxy 1.11 sends 401)
//	403                StageProxyPolicy: the proxy's rules refuse this tunnel
//	500, 502, 503, 504 StageTarget: the proxy could not reach the target
//	                   (tinyproxy answers 500 "Unable to connect", squid 503)
//	anything else      StageProxyAuth: the proxy refuses the tunnel (405/501
//	                   no CONNECT, 400 ...): an egress problem
func connectStatusStage(code int) (stage Stage, ok bool) {
	switch {
	case code >= 200 && code <= 299:
		return 0, true
	case code == http.StatusInternalServerError, code == http.StatusBadGateway,
		code == http.StatusServiceUnavailable, code == http.StatusGatewayTimeout:
		return StageTarget, false
	case code == http.StatusForbidden:
		return StageProxyPolicy, false
	}
	return StageProxyAuth, false
}

// noReplyStage classifies a handshake whose reply never came. A proxy that
// is still silent at the deadline is most likely waiting on a black-holed
// target (StageTarget): calling it a target fault lets that backend's
// breaker open, while the opposite mistake would keep feeding a dead
// backend. A proxy that closed or spoke garbage is broken (StageProxyDial).
func noReplyStage(ctx context.Context, err error) Stage {
	if timedOut(ctx, err) {
		return StageTarget
	}
	return StageProxyDial
}

func noReplyErr(ctx context.Context, err error) error {
	switch {
	case timedOut(ctx, err):
		return fmt.Errorf("%w: %w", errNoReply, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, new(*net.OpError)):
		return fmt.Errorf("%w: %w", errProxyClosed, err)
	}
	return fmt.Errorf("%w: %w", errProxyProtocol, err)
}

func timedOut(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded)
}

// prefixConn replays bytes read past the CONNECT response before reading
// from the connection again.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
