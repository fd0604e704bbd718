// Package tunnel is the connection plumbing shared by the dev/test proxies
// in internal/devstack (connectproxy, socks5proxy): accept, hand each
// connection to a protocol handler, relay tunnels, and shut everything down
// on Close. It is a dev/test tool: cmd/scootgate, internal/app and non-test
// egress code never import it.
//
// # Basics
//
// New takes the protocol handler. Serve accepts on a listener until Close;
// Listen listens on an address and serves in a goroutine the Server owns.
// Every accepted connection goes to the handler in its own goroutine, and
// the Server closes it when the handler returns.
//
// A handler reads its protocol's request, dials the target with Context()
// (canceled by Close), writes its success answer and then hands client and
// target to Tunnel, which relays bytes both ways until both directions end.
//
// NewProxy and ListenProxy build such a Server from Options (credentials,
// an Allow rule, a dialer) and a Handler; connectproxy and socks5proxy are
// each one Handler on them.
//
// Close closes the listeners and every client and target connection, then
// waits for all goroutines, so a test that defers Close leaks nothing.
//
// # Caveats
//
// Close cuts open tunnels rather than draining them. A handler must not
// block on anything but its connection or Context(), or Close waits for it.
package tunnel

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrServerClosed is returned by Serve and Listen after Close.
var ErrServerClosed = errors.New("tunnel: server closed")

// Server accepts connections and runs a handler on each. Its methods are
// safe for concurrent use.
type Server struct {
	// immutable
	handle func(c net.Conn)
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc

	connections atomic.Int64
	tunnels     atomic.Int64

	mu        sync.Mutex // guards the fields below
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{} // clients and targets, closed by Close
	wg        sync.WaitGroup        // Add only under mu while !closed
}

// New returns a Server that runs handle on every accepted connection. It
// does not listen yet.
func New(handle func(c net.Conn)) *Server {
	// A Server is a root, like http.Server: its context lives from New to Close.
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		handle:    handle,
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
}

// Context is canceled by Close; handlers bound their target dials with it.
func (s *Server) Context() context.Context { return s.ctx }

// Listen listens on addr (use 127.0.0.1:0) and serves in a goroutine the
// Server owns until Close. It returns the listening address.
func (s *Server) Listen(addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	if !s.spawn(func() { s.Serve(l) }) {
		l.Close()
		return "", ErrServerClosed
	}
	return l.Addr().String(), nil
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
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			// Out of descriptors (EMFILE/ENFILE) passes: back off and keep
			// listening, as net/http does, instead of stopping for good.
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-s.ctx.Done():
					t.Stop()
					return ErrServerClosed
				}
				continue
			}
			return err
		}
		backoff = 0
		s.connections.Add(1)
		if !s.track(c) {
			c.Close()
			return ErrServerClosed
		}
		if !s.spawn(func() {
			defer s.release(c)
			s.handle(c)
		}) {
			s.release(c)
			return ErrServerClosed
		}
	}
}

// Close stops every listener and connection, cancels Context and waits for
// all goroutines.
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

// Tunnels returns how many tunnels were opened.
func (s *Server) Tunnels() int64 { return s.tunnels.Load() }

// Tunnel relays between client and target until both directions end. The
// caller has written its protocol's success answer and hands target over:
// Tunnel closes it before returning, also when the Server is already
// closed; client stays the handler's (the Server closes it after the
// handler returns).
//
// Tunnel counts a tunnel, clears client's deadline (a tunnel may idle), and
// copies buffered to target: the bytes the client sent after its request,
// still in the handler's reader, go first. Each direction ends with a
// half-close so the peer sees EOF; a copy error (a reset) closes both ends.
func (s *Server) Tunnel(client net.Conn, buffered io.Reader, target net.Conn) {
	if !s.track(target) {
		target.Close()
		return
	}
	defer s.release(target)
	s.tunnels.Add(1)
	client.SetDeadline(time.Time{})
	done := make(chan struct{})
	if !s.spawn(func() {
		defer close(done)
		pipe(client, target, target)
	}) {
		return
	}
	pipe(target, buffered, client)
	<-done
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

// release undoes track and closes c.
func (s *Server) release(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// pipe copies src to dst, then half-closes dst so the peer sees EOF. A copy
// error (a reset) closes both ends: there is nothing left to relay.
func pipe(dst net.Conn, src io.Reader, srcConn net.Conn) {
	// writerOnly hides *net.TCPConn's ReadFrom: between two TCP conns
	// io.Copy would use splice(2), which holds a pipe (two descriptors) per
	// direction for the life of an idle tunnel.
	if _, err := io.Copy(writerOnly{dst}, src); err != nil {
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

// writerOnly exposes only Write, so io.Copy uses a buffer.
type writerOnly struct{ io.Writer }
