// Package socks5proxy is a small in-process SOCKS5 server (RFC 1928 CONNECT,
// RFC 1929 username/password) for tests and `make run`. It is a dev/test
// tool: cmd/scootgate, internal/app and non-test egress code never import it.
//
// # Basics
//
// New returns a Server; Serve accepts on a listener until Close. Listen is
// the usual shortcut: listen on addr (use 127.0.0.1:0) and serve in a
// goroutine the Server owns. Close closes the listeners and every client
// and target connection, then waits for all goroutines, so a test that
// defers Close leaks nothing.
//
// Greeting: with Options.Username set only method 0x02 (RFC 1929) is
// accepted, otherwise only 0x00; anything else gets 0xff. Requests: CONNECT
// with IPv4, IPv6 or domain-name addresses (names are resolved by
// Options.Dial, the net.Dialer by default). Replies follow RFC 1928 §6:
//
//	0x02 not allowed by ruleset   Options.Allow returned false
//	0x05 connection refused       the target dial was refused
//	0x04 host unreachable         unreachable host or failed name lookup
//	0x03 network unreachable      unreachable network
//	0x06 TTL expired              the target dial timed out
//	0x01 general failure          any other dial error
//	0x07 / 0x08                   other commands / address types
//
// Connections() counts accepted connections, Tunnels() successful CONNECTs.
// The accept loop, relaying and shutdown are package tunnel's; this package
// is only the protocol.
package socks5proxy

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/tunnel"
)

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = tunnel.ErrServerClosed

// Options configures a Server. The zero value is a no-auth proxy that
// connects anywhere with a net.Dialer.
type Options struct {
	// Username and Password, when Username is set, require RFC 1929 auth.
	Username, Password string
	// Allow, if set, is asked before every CONNECT; false answers 0x02.
	Allow func(host string, port int) bool
	// Dial, if set, opens target connections instead of a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// handshakeTimeout bounds the greeting, auth and request of one client.
const handshakeTimeout = 10 * time.Second

// Server is a SOCKS5 proxy. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	srv  *tunnel.Server
}

// New returns a Server that does not listen yet.
func New(opts Options) *Server {
	if opts.Dial == nil {
		d := &net.Dialer{Timeout: handshakeTimeout}
		opts.Dial = d.DialContext
	}
	s := &Server{opts: opts}
	s.srv = tunnel.New(s.handle)
	return s
}

// Listen listens on addr and serves in a goroutine owned by the Server
// (stopped by Close). It returns the listening address.
func Listen(addr string, opts Options) (*Server, string, error) {
	s := New(opts)
	bound, err := s.srv.Listen(addr)
	if err != nil {
		s.Close()
		return nil, "", err
	}
	return s, bound, nil
}

// Serve accepts connections on l until l fails or Close is called, and then
// returns ErrServerClosed. Serve closes l.
func (s *Server) Serve(l net.Listener) error { return s.srv.Serve(l) }

// Close stops every listener and connection and waits for all goroutines.
func (s *Server) Close() error { return s.srv.Close() }

// Connections returns how many client connections were accepted.
func (s *Server) Connections() int64 { return s.srv.Connections() }

// Tunnels returns how many CONNECTs succeeded.
func (s *Server) Tunnels() int64 { return s.srv.Tunnels() }

// SOCKS5 wire values.
const (
	version5       = 0x05
	methodNoAuth   = 0x00
	methodUserPass = 0x02
	methodNone     = 0xff
	cmdConnect     = 0x01
	atypIPv4       = 0x01
	atypDomain     = 0x03
	atypIPv6       = 0x04

	repSucceeded           = 0x00
	repGeneralFailure      = 0x01
	repNotAllowed          = 0x02
	repNetworkUnreachable  = 0x03
	repHostUnreachable     = 0x04
	repConnectionRefused   = 0x05
	repTTLExpired          = 0x06
	repCommandUnsupported  = 0x07
	repAddrTypeUnsupported = 0x08
)

// handle serves one client; the tunnel.Server closes c when it returns.
func (s *Server) handle(c net.Conn) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReader(c)
	if !s.negotiate(br, c) {
		return
	}
	host, port, ok := readRequest(br, c)
	if !ok {
		return
	}
	if s.opts.Allow != nil && !s.opts.Allow(host, port) {
		writeReply(c, repNotAllowed, nil)
		return
	}
	target, err := s.opts.Dial(s.srv.Context(), "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		writeReply(c, dialReply(err), nil)
		return
	}
	if err := writeReply(c, repSucceeded, target.LocalAddr()); err != nil {
		target.Close()
		return
	}
	s.srv.Tunnel(c, br, target)
}

// negotiate runs method selection and, if configured, RFC 1929 auth.
func (s *Server) negotiate(br *bufio.Reader, c net.Conn) bool {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != version5 {
		return false
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return false
	}
	want := byte(methodNoAuth)
	if s.opts.Username != "" {
		want = methodUserPass
	}
	chosen := byte(methodNone)
	for _, m := range methods {
		if m == want {
			chosen = want
		}
	}
	if _, err := c.Write([]byte{version5, chosen}); err != nil || chosen == methodNone {
		return false
	}
	if chosen != methodUserPass {
		return true
	}
	// RFC 1929: VER=1, ULEN, UNAME, PLEN, PASSWD.
	var b [1]byte
	if _, err := io.ReadFull(br, b[:]); err != nil || b[0] != 0x01 {
		return false
	}
	user, ok := readShortString(br)
	if !ok {
		return false
	}
	pass, ok := readShortString(br)
	if !ok {
		return false
	}
	good := subtle.ConstantTimeCompare([]byte(user), []byte(s.opts.Username)) &
		subtle.ConstantTimeCompare([]byte(pass), []byte(s.opts.Password))
	if good != 1 {
		c.Write([]byte{0x01, 0x01})
		return false
	}
	_, err := c.Write([]byte{0x01, 0x00})
	return err == nil
}

func readShortString(br *bufio.Reader) (string, bool) {
	n, err := br.ReadByte()
	if err != nil {
		return "", false
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", false
	}
	return string(b), true
}

// readRequest reads a request and answers unsupported ones itself.
func readRequest(br *bufio.Reader, c net.Conn) (host string, port int, ok bool) {
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != version5 {
		return "", 0, false
	}
	switch hdr[3] {
	case atypIPv4, atypIPv6:
		ip := make(net.IP, net.IPv4len)
		if hdr[3] == atypIPv6 {
			ip = make(net.IP, net.IPv6len)
		}
		if _, err := io.ReadFull(br, ip); err != nil {
			return "", 0, false
		}
		host = ip.String()
	case atypDomain:
		name, ok := readShortString(br)
		if !ok {
			return "", 0, false
		}
		host = name
	default:
		writeReply(c, repAddrTypeUnsupported, nil)
		return "", 0, false
	}
	var p [2]byte
	if _, err := io.ReadFull(br, p[:]); err != nil {
		return "", 0, false
	}
	if hdr[1] != cmdConnect {
		writeReply(c, repCommandUnsupported, nil)
		return "", 0, false
	}
	return host, int(p[0])<<8 | int(p[1]), true
}

// writeReply sends VER REP RSV ATYP BND.ADDR BND.PORT; bound may be nil.
func writeReply(c net.Conn, rep byte, bound net.Addr) error {
	ip, port := net.IPv4zero.To4(), 0
	if ta, ok := bound.(*net.TCPAddr); ok {
		ip, port = ta.IP, ta.Port
	}
	b := []byte{version5, rep, 0x00}
	if ip4 := ip.To4(); ip4 != nil {
		b = append(b, atypIPv4)
		b = append(b, ip4...)
	} else {
		b = append(b, atypIPv6)
		b = append(b, ip.To16()...)
	}
	b = append(b, byte(port>>8), byte(port))
	_, err := c.Write(b)
	return err
}

// dialReply maps a target dial error to a reply code by type.
func dialReply(err error) byte {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return repConnectionRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.As(err, &dnsErr):
		return repHostUnreachable
	case errors.Is(err, syscall.ENETUNREACH):
		return repNetworkUnreachable
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return repTTLExpired
	}
	return repGeneralFailure
}
