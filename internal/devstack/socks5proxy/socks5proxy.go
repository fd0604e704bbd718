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

// Options configures a Server; see tunnel.Options.
type Options = tunnel.Options

// Server is the proxy: a tunnel.Server running this package's protocol.
// Connections() counts accepted connections, Tunnels() successful CONNECTs.
type Server = tunnel.Server

// New returns a Server that does not listen yet.
func New(opts Options) *Server { return tunnel.NewProxy(opts, handle) }

// Listen listens on addr (use 127.0.0.1:0) and serves in a goroutine owned
// by the Server (stopped by Close). It returns the listening address.
func Listen(addr string, opts Options) (*Server, string, error) {
	return tunnel.ListenProxy(addr, opts, handle)
}

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
func handle(s *Server, o *Options, c net.Conn) {
	c.SetDeadline(time.Now().Add(tunnel.HandshakeTimeout))
	br := bufio.NewReader(c)
	if !negotiate(o, br, c) {
		return
	}
	host, port, ok := readRequest(br, c)
	if !ok {
		return
	}
	if !o.Allowed(host, port) {
		writeReply(c, repNotAllowed, nil)
		return
	}
	target, err := o.Dial(s.Context(), "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		writeReply(c, dialReply(err), nil)
		return
	}
	if err := writeReply(c, repSucceeded, target.LocalAddr()); err != nil {
		target.Close()
		return
	}
	s.Tunnel(c, br, target)
}

// negotiate runs method selection and, if configured, RFC 1929 auth.
func negotiate(o *Options, br *bufio.Reader, c net.Conn) bool {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != version5 {
		return false
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return false
	}
	want := byte(methodNoAuth)
	if o.Username != "" {
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
	if !o.CredentialsMatch(user, pass) {
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
