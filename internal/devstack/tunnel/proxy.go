package tunnel

import (
	"context"
	"crypto/subtle"
	"net"
	"time"
)

// HandshakeTimeout bounds one client's proxy handshake (greeting, auth,
// request) and the default target dial.
const HandshakeTimeout = 10 * time.Second

// Options configure a proxy protocol built on a Server (connectproxy,
// socks5proxy). The zero value is an open proxy that connects anywhere with
// a net.Dialer.
type Options struct {
	// Username and Password, when Username is set, are the credentials
	// the protocol requires (Basic Proxy-Authorization, RFC 1929).
	Username, Password string
	// Allow, if set, is asked before every CONNECT; false is refused with
	// the protocol's "not allowed" answer.
	Allow func(host string, port int) bool
	// Dial, if set, opens target connections instead of a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Allowed reports whether Allow permits host:port (true without Allow).
func (o *Options) Allowed(host string, port int) bool {
	return o.Allow == nil || o.Allow(host, port)
}

// CredentialsMatch compares user and pass with the configured credentials
// in constant time.
func (o *Options) CredentialsMatch(user, pass string) bool {
	return subtle.ConstantTimeCompare([]byte(user), []byte(o.Username))&
		subtle.ConstantTimeCompare([]byte(pass), []byte(o.Password)) == 1
}

// Handler serves one client connection of s for a proxy protocol; s closes
// c when it returns.
type Handler func(s *Server, o *Options, c net.Conn)

// NewProxy returns a Server that runs handle with o on every accepted
// connection (o.Dial defaults to a net.Dialer bounded by HandshakeTimeout).
// It does not listen yet.
func NewProxy(o Options, handle Handler) *Server {
	if o.Dial == nil {
		d := &net.Dialer{Timeout: HandshakeTimeout}
		o.Dial = d.DialContext
	}
	var s *Server
	s = New(func(c net.Conn) { handle(s, &o, c) })
	return s
}

// ListenProxy is NewProxy, then Listen on addr (use 127.0.0.1:0). It
// returns the listening address.
func ListenProxy(addr string, o Options, handle Handler) (*Server, string, error) {
	s := NewProxy(o, handle)
	bound, err := s.Listen(addr)
	if err != nil {
		s.Close()
		return nil, "", err
	}
	return s, bound, nil
}
