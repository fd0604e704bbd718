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
// Connections() counts accepted connections, Tunnels() 200 answers.
package connectproxy

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("connectproxy: server closed")

// Options configures a Server. The zero value is an open proxy that
// connects anywhere with a net.Dialer.
type Options struct {
	// Username and Password, when Username is set, require Basic
	// Proxy-Authorization.
	Username, Password string
	// Allow, if set, is asked before every CONNECT; false answers 403.
	Allow func(host string, port int) bool
	// Dial, if set, opens target connections instead of a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// handshakeTimeout bounds reading one client's CONNECT request.
const handshakeTimeout = 10 * time.Second

// Server is an HTTP CONNECT proxy. Its methods are safe for concurrent use.
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

// Tunnels returns how many CONNECTs were answered 200.
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

func (s *Server) handle(c net.Conn) {
	defer func() {
		s.untrack(c)
		c.Close()
	}()
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		writeStatus(c, http.StatusMethodNotAllowed, "Allow: CONNECT\r\n")
		return
	}
	if s.opts.Username != "" && !s.authorized(req) {
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
	if s.opts.Allow != nil && !s.opts.Allow(host, port) {
		writeStatus(c, http.StatusForbidden, "")
		return
	}
	target, err := s.opts.Dial(s.ctx, "tcp", net.JoinHostPort(host, portStr))
	if err != nil {
		writeStatus(c, http.StatusBadGateway, "")
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
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	s.tunnels.Add(1)
	c.SetDeadline(time.Time{})
	s.splice(c, br, target)
}

// authorized checks Basic Proxy-Authorization in constant time.
func (s *Server) authorized(req *http.Request) bool {
	// BasicAuth reads Authorization; reuse it on the proxy header.
	h := http.Header{"Authorization": req.Header.Values("Proxy-Authorization")}
	user, pass, ok := (&http.Request{Header: h}).BasicAuth()
	if !ok {
		return false
	}
	good := subtle.ConstantTimeCompare([]byte(user), []byte(s.opts.Username)) &
		subtle.ConstantTimeCompare([]byte(pass), []byte(s.opts.Password))
	return good == 1
}

// writeStatus answers and leaves closing to the caller; extra is raw header
// lines, each ending in CRLF.
func writeStatus(c net.Conn, code int, extra string) {
	io.WriteString(c, "HTTP/1.1 "+strconv.Itoa(code)+" "+http.StatusText(code)+"\r\n"+
		extra+"Content-Length: 0\r\nConnection: close\r\n\r\n")
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
