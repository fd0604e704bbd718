package tunnel_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/scootgate/scootgate/internal/devstack/tunnel"
	"github.com/scootgate/scootgate/internal/devstack/tunnel/tunneltest"
)

// lineProxy is a toy protocol: the client sends "host:port\n", the proxy
// dials it and answers "ok\n" (or "fail\n" and closes), then tunnels.
func lineProxy() *tunnel.Server {
	var s *tunnel.Server
	s = tunnel.New(func(c net.Conn) {
		br := bufio.NewReader(c)
		addr, err := br.ReadString('\n')
		if err != nil {
			return
		}
		var d net.Dialer
		target, err := d.DialContext(s.Context(), "tcp", strings.TrimSuffix(addr, "\n"))
		if err != nil {
			io.WriteString(c, "fail\n")
			return
		}
		if _, err := io.WriteString(c, "ok\n"); err != nil {
			target.Close()
			return
		}
		s.Tunnel(c, br, target)
	})
	return s
}

func listen(t *testing.T, s *tunnel.Server) string {
	t.Helper()
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return addr
}

// TestTunnel: bytes sent before the answer (still in the handler's reader)
// reach the target first, and a half-close travels through the tunnel and
// back, ending it.
func TestTunnel(t *testing.T) {
	echo := tunneltest.EchoServer(t)
	s := lineProxy()
	c := tunneltest.Dial(t, listen(t, s)).(*net.TCPConn)
	if _, err := io.WriteString(c, echo+"\nearly"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	answer, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "+late"); err != nil {
		t.Fatal(err)
	}
	// The echo target sees EOF, closes, and that EOF comes back.
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	type result struct {
		Answer, Echo         string
		Err                  error
		Connections, Tunnels int64
	}
	got := result{answer, string(rest), err, s.Connections(), s.Tunnels()}
	want := result{"ok\n", "early+late", nil, 1, 1}
	if diff := cmp.Diff(got, want, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

// TestHandlerReturnCloses: the Server closes a client connection once its
// handler returns, and counts no tunnel.
func TestHandlerReturnCloses(t *testing.T) {
	s := lineProxy()
	c := tunneltest.Dial(t, listen(t, s))
	if _, err := io.WriteString(c, tunneltest.DeadAddr(t)+"\n"); err != nil {
		t.Fatal(err)
	}
	answer, err := io.ReadAll(c)
	type result struct {
		Answer               string
		Err                  error
		Connections, Tunnels int64
	}
	got := result{string(answer), err, s.Connections(), s.Tunnels()}
	if diff := cmp.Diff(got, result{"fail\n", nil, 1, 0}, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

// TestClose: Close cuts open tunnels, cancels Context and waits; Serve then
// reports ErrServerClosed and a closed Server refuses to serve, to listen
// and to tunnel.
func TestClose(t *testing.T) {
	echo := tunneltest.EchoServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := lineProxy()
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	c := tunneltest.Dial(t, l.Addr().String())
	if _, err := io.WriteString(c, echo+"\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if _, err := br.ReadString('\n'); err != nil { // "ok": written before Tunnel runs
		t.Fatal(err)
	}
	// An echo through the tunnel proves Tunnel has started (and counted it)
	// before Close; "ok" alone raced with it.
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("echo through the tunnel = %q, %v", line, err)
	}
	s.Close()
	_, readErr := c.Read(make([]byte, 1))
	cut := readErr != nil && !errors.Is(readErr, os.ErrDeadlineExceeded)

	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, listenErr := s.Listen("127.0.0.1:0")
	target, other := net.Pipe()
	defer other.Close()
	s.Tunnel(other, other, target)
	_, targetErr := target.Write([]byte{0})

	type result struct {
		TunnelCut         bool
		ContextErr        error
		Serve, ServeAgain error
		Listen            error
		LateTarget        error // a write to the target handed to Tunnel after Close
		Tunnels           int64
	}
	got := result{cut, s.Context().Err(), <-served, s.Serve(l2), listenErr, targetErr, s.Tunnels()}
	want := result{true, context.Canceled, tunnel.ErrServerClosed, tunnel.ErrServerClosed, tunnel.ErrServerClosed, io.ErrClosedPipe, 1}
	if diff := cmp.Diff(got, want, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

// TestCloseCancelsDial: a handler blocked on Context() does not hold Close
// up.
func TestCloseCancelsDial(t *testing.T) {
	entered := make(chan struct{})
	var s *tunnel.Server
	s = tunnel.New(func(net.Conn) {
		close(entered)
		<-s.Context().Done()
	})
	tunneltest.Dial(t, listen(t, s))
	<-entered
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestServeListenerError: Serve returns the listener's own error when the
// Server was not closed.
func TestServeListenerError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	s := tunnel.New(func(net.Conn) {})
	defer s.Close()
	err = s.Serve(l)
	if !errors.Is(err, net.ErrClosed) || errors.Is(err, tunnel.ErrServerClosed) {
		t.Errorf("Serve = %v, want net.ErrClosed", err)
	}
}

// emfileOnce fails its first Accept with EMFILE, as a process out of
// descriptors does.
type emfileOnce struct {
	net.Listener
	failed bool
}

func (l *emfileOnce) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeSurvivesEMFILE: running out of descriptors is temporary; the
// server backs off and keeps accepting instead of stopping for good.
func TestServeSurvivesEMFILE(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{}, 1)
	s := tunnel.New(func(net.Conn) { handled <- struct{}{} })
	defer s.Close()
	served := make(chan error, 1)
	go func() { served <- s.Serve(&emfileOnce{Listener: l}) }()
	c := tunneltest.Dial(t, l.Addr().String())
	defer c.Close()
	select {
	case <-handled:
	case err := <-served:
		t.Fatalf("Serve stopped at the EMFILE: %v", err)
	}
}
