package gateway

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// ConnLimit is a listener that bounds the connections open at once from
// one client address (docs/operations.md "Connection floods"). A
// connection over its address's bound is closed as soon as it is
// accepted, before TLS or HTTP: it costs the node one accept and one
// close, and the listen queue keeps draining at full speed, so that one
// source opening connections faster than it finishes them cannot starve
// the others of the accept loop. The addresses of an IPv6 client count
// per /64, which one host usually has whole.
type ConnLimit struct {
	net.Listener
	per int

	mu      sync.Mutex
	open    map[netip.Addr]int // connections open per client address; an address at 0 is dropped
	refused atomic.Uint64
}

// LimitConns bounds ln's connections to per open at once per client
// address; per <= 0 leaves ln unbounded (and returns it as it is).
func LimitConns(ln net.Listener, per int) net.Listener {
	if per <= 0 {
		return ln
	}
	return &ConnLimit{Listener: ln, per: per, open: make(map[netip.Addr]int)}
}

// Accept returns the next connection whose address is within its bound,
// closing those that are not.
func (l *ConnLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		a, ok := clientAddr(c.RemoteAddr())
		if !ok {
			return c, nil // not TCP (a test's pipe): nothing to count by
		}
		l.mu.Lock()
		n := l.open[a]
		if n >= l.per {
			l.mu.Unlock()
			l.refused.Add(1)
			_ = c.Close()
			continue
		}
		l.open[a] = n + 1
		l.mu.Unlock()
		return &limitedConn{Conn: c, l: l, addr: a}, nil
	}
}

// Refused returns how many connections were closed for their address's
// bound.
func (l *ConnLimit) Refused() uint64 { return l.refused.Load() }

func (l *ConnLimit) done(a netip.Addr) {
	l.mu.Lock()
	if n := l.open[a] - 1; n > 0 {
		l.open[a] = n
	} else {
		delete(l.open, a)
	}
	l.mu.Unlock()
}

// clientAddr is the address a connection counts against: the IP, an
// IPv6 one as its /64.
func clientAddr(a net.Addr) (netip.Addr, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Addr{}, false
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		ip = p.Addr()
	}
	return ip, true
}

// limitedConn gives its slot back once, when it is closed.
type limitedConn struct {
	net.Conn
	l      *ConnLimit
	addr   netip.Addr
	closed atomic.Bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.done(c.addr)
	}
	return err
}

// CloseWrite half-closes the connection when the underlying one can (a
// TCP connection): net/http uses it to let an error answer reach the
// client before the close, which a wrapper must not hide.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
