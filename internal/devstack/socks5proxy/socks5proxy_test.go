package socks5proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/devstack/tunnel/tunneltest"
)

func start(t *testing.T, o Options) (*Server, string) {
	t.Helper()
	s, addr, err := Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, addr
}

// connectIPv4 is a CONNECT request for a 127.0.0.1 address.
func connectIPv4(t *testing.T, addr string) []byte {
	t.Helper()
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{5, 1, 0, 1}, append(ta.IP.To4(), byte(ta.Port>>8), byte(ta.Port))...)
}

// redirectTo is a Dial hook that records what was asked and connects to addr.
type redirectTo struct {
	addr string
	mu   sync.Mutex
	seen []string
}

func (r *redirectTo) dial(ctx context.Context, network, asked string) (net.Conn, error) {
	r.mu.Lock()
	r.seen = append(r.seen, asked)
	r.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, r.addr)
}

func TestHandshakeFailures(t *testing.T) {
	dead := tunneltest.DeadAddr(t)
	tests := []struct {
		name string
		opts Options
		send func(t *testing.T) []byte // exactly what the server consumes before closing
		want []byte                    // the server's whole answer
	}{
		{
			name: "no-auth server, client offers only user/pass",
			send: func(*testing.T) []byte { return []byte{5, 1, 2} },
			want: []byte{5, 0xff},
		},
		{
			name: "auth server, client offers only no-auth",
			opts: Options{Username: "u", Password: "p"},
			send: func(*testing.T) []byte { return []byte{5, 1, 0} },
			want: []byte{5, 0xff},
		},
		{
			name: "wrong password",
			opts: Options{Username: "u", Password: "p"},
			send: func(*testing.T) []byte { return []byte{5, 1, 2, 1, 1, 'u', 1, 'x'} },
			want: []byte{5, 2, 1, 1},
		},
		{
			name: "ruleset",
			opts: Options{Allow: func(string, int) bool { return false }},
			send: func(t *testing.T) []byte { return append([]byte{5, 1, 0}, connectIPv4(t, dead)...) },
			want: []byte{5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0},
		},
		{
			name: "target refused",
			send: func(t *testing.T) []byte { return append([]byte{5, 1, 0}, connectIPv4(t, dead)...) },
			want: []byte{5, 0, 5, 5, 0, 1, 0, 0, 0, 0, 0, 0},
		},
		{
			name: "bind is not supported",
			send: func(t *testing.T) []byte {
				req := connectIPv4(t, dead)
				req[1] = 2
				return append([]byte{5, 1, 0}, req...)
			},
			want: []byte{5, 0, 5, 7, 0, 1, 0, 0, 0, 0, 0, 0},
		},
		{
			name: "unknown address type",
			send: func(*testing.T) []byte { return []byte{5, 1, 0, 5, 1, 0, 9} },
			want: []byte{5, 0, 5, 8, 0, 1, 0, 0, 0, 0, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, addr := start(t, tt.opts)
			c := tunneltest.Dial(t, addr)
			if _, err := c.Write(tt.send(t)); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("answer (-got +want):\n%s", diff)
			}
			if n := s.Tunnels(); n != 0 {
				t.Errorf("Tunnels() = %d, want 0", n)
			}
		})
	}
}

func TestTunnel(t *testing.T) {
	echo := tunneltest.EchoServer(t)
	tests := []struct {
		name     string
		opts     Options
		auth     []byte // greeting (+ RFC 1929 request)
		authWant []byte
		request  []byte // CONNECT request
		wantSeen string // what the Dial hook was asked for
	}{
		{
			name:     "no auth, ipv4",
			auth:     []byte{5, 1, 0},
			authWant: []byte{5, 0},
			request:  []byte{5, 1, 0, 1, 127, 0, 0, 1, 0x01, 0xbb},
			wantSeen: "127.0.0.1:443",
		},
		{
			name:     "user/pass, domain name",
			opts:     Options{Username: "user", Password: "pw"},
			auth:     []byte{5, 2, 0, 2, 1, 4, 'u', 's', 'e', 'r', 2, 'p', 'w'},
			authWant: []byte{5, 2, 1, 0},
			request:  append(append([]byte{5, 1, 0, 3, 11}, "example.com"...), 0x01, 0xbb),
			wantSeen: "example.com:443",
		},
		{
			name:     "ipv6 literal",
			auth:     []byte{5, 1, 0},
			authWant: []byte{5, 0},
			request:  []byte{5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 80},
			wantSeen: "[::1]:80",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &redirectTo{addr: echo}
			tt.opts.Dial = r.dial
			s, addr := start(t, tt.opts)
			c := tunneltest.Dial(t, addr)
			// "early" is sent before the reply arrives: it must reach the target first.
			hello := append(append(tt.auth, tt.request...), "early"...)
			if _, err := c.Write(hello); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(tt.authWant)+10)
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatal(err)
			}
			// The bound address is the proxy's side of the target
			// connection: 127.0.0.1 and some port.
			got[len(got)-2], got[len(got)-1] = 0, 0
			want := append(tt.authWant, 5, 0, 0, 1, 127, 0, 0, 1, 0, 0)
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("handshake answer (-got +want):\n%s", diff)
			}
			if _, err := io.WriteString(c, "+late"); err != nil {
				t.Fatal(err)
			}
			echoed := make([]byte, len("early+late"))
			if _, err := io.ReadFull(c, echoed); err != nil {
				t.Fatal(err)
			}
			type result struct {
				Echo                 string
				Seen                 []string
				Connections, Tunnels int64
			}
			r.mu.Lock()
			gotR := result{string(echoed), r.seen, s.Connections(), s.Tunnels()}
			r.mu.Unlock()
			if diff := cmp.Diff(gotR, result{"early+late", []string{tt.wantSeen}, 1, 1}); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

// TestCloseEndsTunnels: Close cuts an open tunnel. The rest of the
// lifecycle is package tunnel's and tested there.
func TestCloseEndsTunnels(t *testing.T) {
	echo := tunneltest.EchoServer(t)
	s, addr := start(t, Options{})
	c := tunneltest.Dial(t, addr)
	if _, err := c.Write(append([]byte{5, 1, 0}, connectIPv4(t, echo)...)); err != nil {
		t.Fatal(err)
	}
	answer := make([]byte, 12)
	if _, err := io.ReadFull(c, answer); err != nil {
		t.Fatal(err)
	}
	if answer[3] != repSucceeded {
		t.Fatalf("reply %#x, want success", answer[3])
	}
	s.Close()
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read after Close: %v, want the tunnel cut", err)
	}
}

func TestDialReply(t *testing.T) {
	tests := []struct {
		err  error
		want byte
	}{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, repConnectionRefused},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}, repHostUnreachable},
		{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}, repHostUnreachable},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}, repNetworkUnreachable},
		{fmt.Errorf("dial: %w", os.ErrDeadlineExceeded), repTTLExpired},
		{context.DeadlineExceeded, repTTLExpired},
		{errors.New("something else"), repGeneralFailure},
	}
	for _, tt := range tests {
		if got := dialReply(tt.err); got != tt.want {
			t.Errorf("dialReply(%v) = %#x, want %#x", tt.err, got, tt.want)
		}
	}
}
