package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ConnBounds are the API listener's bounds per client address
// (docs/operations.md "Connection floods"). A zero member is no bound of
// that kind.
type ConnBounds struct {
	// Open bounds the connections open at once (limits.max_conns_per_client).
	Open int
	// Unauthenticated bounds the connections open whose first request
	// has not authenticated yet: those in the TLS handshake, reading
	// headers, or with only refused keys so far
	// (limits.max_unauthenticated_per_client).
	Unauthenticated int
	// Rate bounds the new connections accepted per second
	// (limits.conn_rate_per_client), as a token bucket that holds one
	// second's worth (at least one).
	Rate float64
	// Resets bounds the requests the client abandoned while the node
	// worked on them (an HTTP/2 stream it reset, an HTTP/1.1 connection
	// it closed before the answer) and the connections it gave up before
	// any request on them reached the node's handler (one sent and reset
	// before the node read it, a TLS handshake cut off: the cheapest
	// flood of all), as a token bucket of Resets a second
	// that holds one second's worth, per client address: the connection
	// of a reset over it is closed (limits.resets_per_client), and so is
	// each of the address's connections with a reset until the bucket
	// refills. It counts only on a server whose handler is wrapped in
	// LimitResets.
	Resets float64
	// Penalty is how long an address that went over Rate or Resets has
	// its new connections closed at accept (limits.client_penalty), so
	// that connecting again does not bring a fresh budget: without it an
	// address is refused only until its bucket holds one more. The
	// penalty runs from the moment the bound was passed; connections
	// refused meanwhile do not lengthen it.
	Penalty time.Duration
	// Now is the rate's clock (time.Now when nil).
	Now func() time.Time
}

func (b ConnBounds) off() bool {
	return b.Open <= 0 && b.Unauthenticated <= 0 && b.Rate <= 0 && b.Resets <= 0
}

// ConnLimit is a listener that bounds, per client address, the
// connections open at once, those not yet authenticated, and the rate
// of new ones (ConnBounds). A connection over one of its address's
// bounds is closed as soon as it is accepted, before TLS or HTTP: it
// costs the node one accept and one close, and the listen queue keeps
// draining at full speed, so that one source opening connections faster
// than it finishes them cannot starve the others of the accept loop or
// of the work behind it. The addresses of an IPv6 client count per /64,
// which one host usually has whole.
type ConnLimit struct {
	net.Listener
	b          ConnBounds
	burst      float64 // the rate bucket's capacity
	resetBurst float64 // the reset bucket's capacity

	mu        sync.Mutex
	clients   map[netip.Addr]*client // an address with nothing open and a full bucket is dropped
	nextSweep time.Time
	refused   atomic.Uint64
	// penalties counts the penalties begun (Penalty).
	penalties atomic.Uint64
	// resetClosed counts the connections closed for their resets.
	resetClosed atomic.Uint64
}

// client is one address's counts; guarded by ConnLimit.mu.
type client struct {
	open     int       // connections open
	unauth   int       // of those, not yet authenticated
	tokens   float64   // the rate bucket's level at at
	at       time.Time // when tokens was last brought up to date
	resets   float64   // the reset bucket's level at resetsAt
	resetsAt time.Time
	until    time.Time // new connections are refused before this (Penalty)
}

// LimitConns bounds ln's connections per client address by b; with no
// bound set it returns ln as it is.
func LimitConns(ln net.Listener, b ConnBounds) net.Listener {
	if b.off() {
		return ln
	}
	if b.Now == nil {
		b.Now = time.Now
	}
	return &ConnLimit{Listener: ln, b: b, burst: max(b.Rate, 1), resetBurst: max(b.Resets, 1), clients: make(map[netip.Addr]*client)}
}

// Accept returns the next connection whose address is within its
// bounds, closing those that are not.
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
		ok, prepaid := l.admit(a)
		if !ok {
			l.refused.Add(1)
			_ = c.Close()
			continue
		}
		lc := &limitedConn{Conn: c, l: l, addr: a, prepaid: prepaid}
		lc.unauth.Store(true)
		lc.fresh.Store(l.b.Resets > 0)
		return lc, nil
	}
}

// admit counts a new connection from a, or says it is over a bound.
// prepaid says that the connection took one of its address's resets in
// advance (ConnBounds.Resets): the address gave something up lately, so
// its new connections pay for being given up before they are read, and
// are refunded once a request on them reaches the handler (a flood
// otherwise gets every connection the node accepts before it has read
// the first ones).
func (l *ConnLimit) admit(a netip.Addr) (ok, prepaid bool) {
	now := l.b.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(now)
	cl := l.clients[a]
	if cl == nil {
		cl = &client{tokens: l.burst, at: now, resets: l.resetBurst, resetsAt: now}
		l.clients[a] = cl
	}
	if now.Before(cl.until) {
		return false, false
	}
	if l.b.Open > 0 && cl.open >= l.b.Open || l.b.Unauthenticated > 0 && cl.unauth >= l.b.Unauthenticated {
		return false, false
	}
	if l.b.Resets > 0 {
		l.refillResetsLocked(cl, now)
		if cl.resets < 1 {
			// The address spent its resets: it may connect again once it
			// has one more (and its penalty, begun when it spent them, is
			// over).
			return false, false
		}
	}
	if l.b.Rate > 0 {
		if d := now.Sub(cl.at); d > 0 {
			cl.tokens = min(l.burst, cl.tokens+d.Seconds()*l.b.Rate)
		}
		cl.at = now
		if cl.tokens < 1 {
			l.penalizeLocked(cl, now)
			return false, false
		}
		cl.tokens--
	}
	if l.b.Resets > 0 && cl.resets < l.resetBurst {
		cl.resets--
		prepaid = true
	}
	cl.open++
	cl.unauth++
	return true, prepaid
}

// refillResetsLocked brings cl's reset bucket up to now.
func (l *ConnLimit) refillResetsLocked(cl *client, now time.Time) {
	if d := now.Sub(cl.resetsAt); d > 0 {
		cl.resets = min(l.resetBurst, cl.resets+d.Seconds()*l.b.Resets)
	}
	cl.resetsAt = now
}

// refund gives back the reset a connection from a prepaid at accept.
func (l *ConnLimit) refund(a netip.Addr) {
	now := l.b.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if cl := l.clients[a]; cl != nil {
		l.refillResetsLocked(cl, now)
		cl.resets = min(l.resetBurst, cl.resets+1)
	}
}

// penalizeLocked begins cl's penalty, unless one is running: its new
// connections are refused for Penalty from now.
func (l *ConnLimit) penalizeLocked(cl *client, now time.Time) {
	if l.b.Penalty <= 0 || now.Before(cl.until) {
		return
	}
	cl.until = now.Add(l.b.Penalty)
	l.penalties.Add(1)
}

// penalized says whether a's penalty is running.
func (l *ConnLimit) penalized(a netip.Addr) bool {
	now := l.b.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	cl := l.clients[a]
	return cl != nil && now.Before(cl.until)
}

// sweepLocked drops, at most once a second, the addresses that have
// nothing open, no penalty running and whose buckets have refilled: the
// map holds the addresses seen in the last second or two (or penalized),
// not every one ever seen.
func (l *ConnLimit) sweepLocked(now time.Time) {
	if now.Before(l.nextSweep) {
		return
	}
	l.nextSweep = now.Add(time.Second)
	for a, cl := range l.clients {
		if cl.open == 0 && !now.Before(cl.until) && full(cl.tokens, cl.at, l.b.Rate, now) && full(cl.resets, cl.resetsAt, l.b.Resets, now) {
			delete(l.clients, a)
		}
	}
}

// full says whether a bucket of rate a second, level at at, has refilled
// to its capacity (one second's worth, at least 1) by now.
func full(level float64, at time.Time, rate float64, now time.Time) bool {
	return rate <= 0 || level+now.Sub(at).Seconds()*rate >= max(rate, 1)
}

// Refused returns how many connections were closed for one of their
// address's bounds.
func (l *ConnLimit) Refused() uint64 { return l.refused.Load() }

// ResetClosed returns how many connections were closed for the
// requests abandoned from their address.
func (l *ConnLimit) ResetClosed() uint64 { return l.resetClosed.Load() }

// Penalties returns how many penalties addresses were given (Penalty).
func (l *ConnLimit) Penalties() uint64 { return l.penalties.Load() }

func (l *ConnLimit) done(c *limitedConn) {
	unauth := c.unauth.Swap(false)
	l.mu.Lock()
	if cl := l.clients[c.addr]; cl != nil {
		cl.open--
		if unauth {
			cl.unauth--
		}
	}
	l.mu.Unlock()
}

func (l *ConnLimit) authenticated(c *limitedConn) {
	if !c.unauth.Swap(false) {
		return
	}
	l.mu.Lock()
	if cl := l.clients[c.addr]; cl != nil {
		cl.unauth--
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

// limitedConn gives its counts back once, when it is closed.
type limitedConn struct {
	net.Conn
	l      *ConnLimit
	addr   netip.Addr
	unauth atomic.Bool // no request on it has authenticated yet
	closed atomic.Bool
	// serving is set while an HTTP/1.1 request's handler runs (under
	// LimitResets): a read that fails meanwhile, other than by a
	// deadline, is the client abandoning it.
	serving atomic.Bool
	// fresh is set from the accept until a request on the connection
	// reaches its handler (LimitResets): a read that fails meanwhile,
	// other than by a deadline, is the client giving up a connection
	// before it asked for anything (a request sent and reset before the
	// node could read it, a TLS handshake cut off).
	fresh atomic.Bool
	// prepaid: the connection took its address's reset at accept
	// (admit), given back when a request on it reaches the handler and
	// kept when it is given up before that. Set before Accept returns it.
	prepaid bool
}

// Read counts a reset when the client closes or resets the connection
// while an HTTP/1.1 request on it is being served (net/http reads in the
// background then, to notice exactly that), or before any request on it
// reached its handler.
func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && (c.serving.Load() || c.fresh.Load()) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed) {
		// Swap: the first failed read counts, once, and only if the
		// state it counts was still on.
		if c.serving.Swap(false) || c.fresh.Swap(false) && !c.prepaid {
			c.reset()
		}
	}
	return n, err
}

// reset counts one request the client abandoned against its address;
// the connection is closed when the address's bucket is empty, and the
// address's penalty begins.
func (c *limitedConn) reset() {
	l := c.l
	now := l.b.Now()
	l.mu.Lock()
	over := false
	if cl := l.clients[c.addr]; cl != nil { // it is: c is open
		l.refillResetsLocked(cl, now)
		if over = cl.resets < 1; over {
			l.penalizeLocked(cl, now)
		} else {
			cl.resets--
		}
	}
	l.mu.Unlock()
	if over && !c.closed.Load() {
		l.resetClosed.Add(1)
		_ = c.Close() // every stream on it ends; the client must connect again
	}
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.done(c)
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

// connKey is the context key of a request's *limitedConn.
type connKey struct{}

// ConnContext is the API server's http.Server.ConnContext: it gives a
// connection accepted through a ConnLimit (under TLS or not) to its
// requests, so that the first one to authenticate ends the connection's
// unauthenticated time. Other connections' contexts are left as they are.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// connAuthenticated tells r's connection's ConnLimit, if any, that a
// request on it authenticated.
func connAuthenticated(r *http.Request) {
	if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok && lc.unauth.Load() {
		lc.l.authenticated(lc)
	}
}

// LimitResets wraps the API handler so that a request the client
// abandons while its handler runs (an HTTP/2 stream it reset, an
// HTTP/1.1 connection it closed or reset before the answer ended)
// counts against its address's ConnBounds.Resets, at the moment it
// ends: the connection is closed before the node takes in much more of
// a flood, and the address's penalty begins. Go's HTTP/2 server drops a
// stream reset before its handler started by itself (and closes a
// connection with too many of those queued); this bounds those whose
// handler ran, whatever they cost.
//
// A request on a connection already closed for its resets is dropped
// before any work: the streams an HTTP/2 flood queued on it before the
// close would otherwise each still be authenticated and routed. So is
// the first request of a connection its address opened before its
// penalty began: the connections a flood opened while the node was
// counting its resets would otherwise each still be served once.
func LimitResets(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, ok := r.Context().Value(connKey{}).(*limitedConn)
		if !ok || lc.l.b.Resets <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		if lc.fresh.Swap(false) && lc.prepaid {
			lc.l.refund(lc.addr)
		}
		if lc.closed.Load() {
			return // nobody reads an answer: the connection is gone
		}
		if lc.unauth.Load() && lc.l.penalized(lc.addr) {
			// A connection accepted just before its address's penalty
			// began, whose first request comes after: closed as the
			// penalty would have closed it at accept (the flood's
			// connections queued while the node counted its resets).
			_ = lc.Close()
			return
		}
		if r.ProtoMajor == 1 {
			if r.Header.Get("Upgrade") != "" {
				// A WebSocket session ends with its client's close: not
				// a request abandoned.
				next.ServeHTTP(w, r)
				return
			}
			// HTTP/1.1: the connection's reads count a reset (Read), not
			// the request's context, which net/http also ends when the
			// node's own read deadline (a slow body, a lingering read
			// after an early answer) passes.
			lc.serving.Store(true)
			next.ServeHTTP(w, r)
			lc.serving.Store(false)
			return
		}
		// The stream's context ends after the handler returns, too:
		// only what ended before counts, and a count under way is waited
		// for, so that the request is done when its handler is. A
		// context's Done closes before its AfterFuncs start, so a handler
		// that returned on Done can call stop first: then the reset is
		// counted here, once either way.
		counted := make(chan struct{})
		stop := context.AfterFunc(r.Context(), func() {
			defer close(counted)
			lc.reset()
		})
		next.ServeHTTP(w, r)
		abandoned := r.Context().Err() != nil
		if !stop() {
			<-counted
		} else if abandoned {
			lc.reset()
		}
	})
}
