// Package connectproxy is a small in-process HTTP CONNECT proxy (RFC 9110
// §9.3.6) for tests and `make run`. It is a dev/test tool: cmd/scootgate,
// internal/app and non-test egress code never import it.
//
// # Basics
//
// New returns a Server; Serve accepts on a listener until Close. Listen is
// the usual shortcut: listen on addr (use 127.0.0.1:0) and serve in a
// goroutine the Server owns. For TLS to the proxy, hand Serve a
// tls.NewListener. Close closes the listeners and every client and target
// connection, then waits for all goroutines.
//
// One CONNECT per client connection; answers:
//
//	200 Connection established   tunnel open
//	405 Method Not Allowed       any method but CONNECT
//	400 Bad Request              authority is not host:port
//	407 + Proxy-Authenticate     Options.Username set and Basic credentials missing or wrong
//	403 Forbidden                Options.Allow returned false
//	502 Bad Gateway              the target dial failed
//
// Connections() counts accepted connections, Tunnels() 200 answers. The
// accept loop, relaying and shutdown are package tunnel's; this package is
// only the protocol.
package connectproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/tunnel"
)

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = tunnel.ErrServerClosed

// Options configures a Server; see tunnel.Options.
type Options = tunnel.Options

// Server is the proxy: a tunnel.Server running this package's protocol.
// Connections() counts accepted connections, Tunnels() 200 answers.
type Server = tunnel.Server

// New returns a Server that does not listen yet.
func New(opts Options) *Server { return tunnel.NewProxy(opts, handle) }

// Listen listens on addr (use 127.0.0.1:0) and serves in a goroutine owned
// by the Server (stopped by Close). It returns the listening address.
func Listen(addr string, opts Options) (*Server, string, error) {
	return tunnel.ListenProxy(addr, opts, handle)
}

// handle serves one client; the tunnel.Server closes c when it returns.
func handle(s *Server, o *Options, c net.Conn) {
	c.SetDeadline(time.Now().Add(tunnel.HandshakeTimeout))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		writeStatus(c, http.StatusMethodNotAllowed, "Allow: CONNECT\r\n")
		return
	}
	if o.Username != "" && !authorized(o, req) {
		writeStatus(c, http.StatusProxyAuthRequired, "Proxy-Authenticate: Basic realm=\"connectproxy\"\r\n")
		return
	}
	// For CONNECT, ReadRequest puts the authority in req.Host.
	host, portStr, err := net.SplitHostPort(req.Host)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || host == "" || port < 1 || port > 65535 {
		writeStatus(c, http.StatusBadRequest, "")
		return
	}
	if !o.Allowed(host, port) {
		writeStatus(c, http.StatusForbidden, "")
		return
	}
	target, err := o.Dial(s.Context(), "tcp", net.JoinHostPort(host, portStr))
	if err != nil {
		writeStatus(c, http.StatusBadGateway, "")
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		target.Close()
		return
	}
	s.Tunnel(c, br, target)
}

// authorized checks Basic Proxy-Authorization in constant time.
func authorized(o *Options, req *http.Request) bool {
	// BasicAuth reads Authorization; reuse it on the proxy header.
	h := http.Header{"Authorization": req.Header.Values("Proxy-Authorization")}
	user, pass, ok := (&http.Request{Header: h}).BasicAuth()
	if !ok {
		return false
	}
	return o.CredentialsMatch(user, pass)
}

// writeStatus answers and leaves closing to the caller; extra is raw header
// lines, each ending in CRLF.
func writeStatus(c net.Conn, code int, extra string) {
	io.WriteString(c, "HTTP/1.1 "+strconv.Itoa(code)+" "+http.StatusText(code)+"\r\n"+
		extra+"Content-Length: 0\r\nConnection: close\r\n\r\n")
}
