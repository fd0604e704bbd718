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
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("socks5proxy: server closed")

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
	// immutable
	opts   Options
	ctx    context.Context // canceled by Close; bounds target dials
	cancel context.CancelFunc

	connections atomic.Int64
	tunnels     atomic.Int64

	mu        sync.Mutex // guards the fields below
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup // Add only under mu while !closed
}

// New returns a Server that does not listen yet.
func New(opts Options) *Server {
	if opts.Dial == nil {
		d := &net.Dialer{Timeout: handshakeTimeout}
		opts.Dial = d.DialContext
	}
	// A Server is a root, like http.Server: its context lives from New to Close.
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		opts:      opts,
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
}

// Listen listens on addr and serves in a goroutine owned by the Server
// (stopped by Close). It returns the listening address.
func Listen(addr string, opts Options) (*Server, string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	s := New(opts)
	if !s.spawn(func() { s.Serve(l) }) {
		l.Close()
		return nil, "", ErrServerClosed
	}
	return s, l.Addr().String(), nil
}

// spawn starts f in a goroutine Close waits for; false once closed.
func (s *Server) spawn(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// Serve accepts connections on l until l fails or Close is called, and then
// returns ErrServerClosed. Serve closes l.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			return err
		}
		s.connections.Add(1)
		if !s.track(c) {
			c.Close()
			return ErrServerClosed
		}
		if !s.spawn(func() { s.handle(c) }) {
			s.untrack(c)
			c.Close()
			return ErrServerClosed
		}
	}
}

// Close stops every listener and connection and waits for all goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.cancel()
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Connections returns how many client connections were accepted.
func (s *Server) Connections() int64 { return s.connections.Load() }

// Tunnels returns how many CONNECTs succeeded.
func (s *Server) Tunnels() int64 { return s.tunnels.Load() }

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// track registers c so Close can close it; false once closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
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

func (s *Server) handle(c net.Conn) {
	defer func() {
		s.untrack(c)
		c.Close()
	}()
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
	target, err := s.opts.Dial(s.ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		writeReply(c, dialReply(err), nil)
		return
	}
	if !s.track(target) {
		target.Close()
		return
	}
	defer func() {
		s.untrack(target)
		target.Close()
	}()
	if err := writeReply(c, repSucceeded, target.LocalAddr()); err != nil {
		return
	}
	s.tunnels.Add(1)
	c.SetDeadline(time.Time{})
	s.splice(c, br, target)
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

// splice copies both ways until both directions end. Bytes the client sent
// after its request (already in br) go first.
func (s *Server) splice(c net.Conn, br *bufio.Reader, target net.Conn) {
	done := make(chan struct{})
	if !s.spawn(func() {
		defer close(done)
		pipe(c, target, target)
	}) {
		return
	}
	pipe(target, br, c)
	<-done
}

// pipe copies src to dst, then half-closes dst so the peer sees EOF. A copy
// error (a reset) closes both ends: there is nothing left to relay.
func pipe(dst net.Conn, src io.Reader, srcConn net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		srcConn.Close()
		return
	}
	if cw, ok := dst.(closeWriter); ok {
		cw.CloseWrite()
		return
	}
	dst.Close()
}

// closeWriter is implemented by *net.TCPConn and *tls.Conn.
type closeWriter interface{ CloseWrite() error }
