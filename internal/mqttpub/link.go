package mqttpub

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// token is the part of paho's mqtt.Token the drain loop uses.
type token interface {
	Done() <-chan struct{}
	Error() error
}

// link is one broker connection. Publish tokens of a link are only ever
// judged while that link is the current one.
type link interface {
	// publish sends payload with QoS 1, retained false. The packet may be
	// held back until flush, so that a burst of publishes goes out
	// together.
	publish(payload []byte) token
	// flush sends the packets publish held back; the drain loop calls it
	// after each burst of publishes.
	flush()
	// acks receives after publishes completed (coalesced, capacity 1), so
	// that one wakeup judges every publish completed by then; nil if the
	// link has no such signal, and the loop waits on the oldest publish
	// instead.
	acks() <-chan struct{}
	// lost is closed once the network connection has ended.
	lost() <-chan struct{}
	// close disconnects (sending DISCONNECT when the connection is still
	// up) and releases the client. It is idempotent.
	close()
}

// connector opens a link. The link bumps gen whenever a network connection
// opens or ends, before it can complete any publish because of it (see
// genConn); a completed publish is an acknowledgement only if gen did not
// move between its publish and the moment it is judged.
type connector func(ctx context.Context, gen *atomic.Uint64) (link, error)

// quiesce bounds how long close waits for DISCONNECT to be written, and
// how long a genConn's Close waits for its pending bytes.
const quiesce = 250 * time.Millisecond

// linkConfig is what dialLink needs, resolved from Options by New.
type linkConfig struct {
	broker         *url.URL
	clientID       string
	topic          string
	username       string
	password       string
	tls            *tls.Config // nil for tcp://
	keepAlive      time.Duration
	connectTimeout time.Duration
	// autoReconnect is false in production. Only the test that reproduces
	// paho.mqtt.golang#563 turns it on, to prove the generation check catches
	// a token completed across paho's own reconnect.
	autoReconnect bool
	// wrap replaces newGenConn around each dialled connection; nil in
	// production. Benchmarks use it to count system calls and to run the
	// unbuffered baseline.
	wrap func(conn net.Conn, end func()) net.Conn
}

// pahoLink is a link on one paho client that is connected exactly once:
// AutoReconnect and ConnectRetry are off, so paho never reconnects (and
// never resends stored publishes) behind the drain loop's back. A new
// connection is a new client (the paho README also says not to reuse a
// client after Disconnect).
type pahoLink struct {
	client mqtt.Client
	topic  string
	gen    *atomic.Uint64

	dead     chan struct{} // closed when a connection of this client ends
	deadOnce sync.Once
	acked    chan struct{} // capacity 1: a publish completed since the last receive

	// PUBACK bookkeeping (file, pubackRead, watch)
	amu      sync.Mutex
	sent     map[uint16]token    // filed publishes by packet id, until their PUBACK is read; guarded by amu
	early    map[uint16]struct{} // ids whose PUBACK was read before their publish was filed; guarded by amu
	ackable  []token             // PUBACK read, token not yet waited for; guarded by amu
	wake     chan struct{}       // capacity 1: ackable grew
	stop     chan struct{}       // closed by stopWatch: the watcher returns
	watched  sync.WaitGroup
	stopOnce sync.Once

	mu      sync.Mutex
	conns   []net.Conn // every connection dialled; guarded by mu
	aborted bool       // set by abort; no new connection is kept; guarded by mu

	corked bool // publish corked the connection; only the drain loop's goroutine uses it
}

// dialLink connects a fresh paho client and returns it as a link. ctx
// bounds the whole connect (dial, TLS, CONNECT/CONNACK); cancelling it
// closes a half-open connection so the connect ends at once.
func dialLink(ctx context.Context, c *linkConfig, gen *atomic.Uint64) (*pahoLink, error) {
	l := &pahoLink{topic: c.topic, gen: gen, dead: make(chan struct{})}
	l.startWatch()
	o := mqtt.NewClientOptions()
	o.AddBroker(c.broker.String())
	o.SetClientID(c.clientID)
	if c.username != "" {
		o.SetUsername(c.username)
	}
	if c.password != "" {
		o.SetPassword(c.password)
	}
	// CleanSession: redelivery is ours, from the outbox, on every
	// connection (doc.go, "Session, reconnects and identity").
	o.SetCleanSession(true)
	o.SetAutoReconnect(c.autoReconnect)
	o.SetConnectRetry(false)
	o.SetProtocolVersion(4) // MQTT 3.1.1, explicitly: no silent fallback to 3.1
	o.SetKeepAlive(c.keepAlive)
	// paho sends PINGREQ after KeepAlive without traffic (checked every
	// KeepAlive/4, at most 5s) and drops the link when PINGRESP is this
	// late: a half-open link ends within about 1.5×KeepAlive (+5s).
	o.SetPingTimeout(c.keepAlive / 2) // KeepAlive >= 1s (checked by New)
	o.SetConnectTimeout(c.connectTimeout)
	// WriteTimeout bounds each socket write and how long Publish may block
	// handing a packet to a connection that is going away.
	o.SetWriteTimeout(c.connectTimeout)
	o.SetOrderMatters(false) // we never subscribe; nothing to order
	o.SetStore(&ackStore{MemoryStore: mqtt.NewMemoryStore(), l: l})
	o.SetCustomOpenConnectionFn(func(*url.URL, mqtt.ClientOptions) (net.Conn, error) {
		return l.open(ctx, c)
	})
	o.SetConnectionLostHandler(func(mqtt.Client, error) { l.markDead() })
	l.client = mqtt.NewClient(o)

	t := l.client.Connect()
	select {
	case <-t.Done():
	case <-ctx.Done():
		l.abort() // the dial sees ctx; a handshake in progress sees its conn close
		<-t.Done()
	}
	if err := t.Error(); err != nil {
		l.close()
		return nil, fmt.Errorf("mqttpub: connect to %s: %w", c.broker.Redacted(), err)
	}
	return l, nil
}

// open dials the broker for paho. It replaces paho's own dialer, which
// would honour proxy environment variables, so that the connection is
// exactly the configured one and is wrapped to bump the generation.
func (l *pahoLink) open(ctx context.Context, c *linkConfig) (net.Conn, error) {
	d := &net.Dialer{Timeout: c.connectTimeout}
	var (
		conn net.Conn
		err  error
	)
	if c.tls != nil {
		conn, err = (&tls.Dialer{NetDialer: d, Config: c.tls}).DialContext(ctx, "tcp", c.broker.Host)
	} else {
		conn, err = d.DialContext(ctx, "tcp", c.broker.Host)
	}
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.aborted {
		_ = conn.Close()
		return nil, errAborted
	}
	l.gen.Add(1) // a new connection: tokens published before it are stale
	var gc net.Conn
	if c.wrap != nil {
		gc = c.wrap(conn, l.connEnded)
	} else {
		gc = newGenConn(conn, l.connEnded, quiesce)
	}
	l.conns = append(l.conns, gc)
	return gc, nil
}

var errAborted = errors.New("connect aborted")

// connEnded runs once per connection, from the first failed read or write
// or from Close (genConn). paho closes the connection before it fails or
// completes any token because of the loss, so the bump happens first.
func (l *pahoLink) connEnded() {
	l.gen.Add(1)
	l.markDead()
}

func (l *pahoLink) markDead() { l.deadOnce.Do(func() { close(l.dead) }) }

// abort closes every connection this link dialled, without waiting for
// unwritten bytes, and refuses new ones.
func (l *pahoLink) abort() {
	l.mu.Lock()
	l.aborted = true
	conns := l.conns
	l.mu.Unlock()
	for _, c := range conns {
		if g, ok := c.(*genConn); ok {
			g.abort()
		} else {
			_ = c.Close()
		}
	}
}

// publish hands payload to paho and files its token for the PUBACK. The
// first publish after a flush corks the connection: paho writes every
// packet with a write of its own, and the flusher would otherwise send a
// burst in many small writes, as the goroutines take turns.
func (l *pahoLink) publish(payload []byte) token {
	if !l.corked {
		if c := l.burstConn(); c != nil {
			c.cork()
			l.corked = true
		}
	}
	t := l.client.Publish(l.topic, 1, false, payload)
	l.file(t)
	return t
}

// flush uncorks the connection, so that the burst goes out in one write.
// paho may still hold the last one or two packets of the burst in its own
// goroutines; they are written as they arrive.
func (l *pahoLink) flush() {
	if !l.corked {
		return
	}
	l.corked = false
	if c := l.burstConn(); c != nil {
		c.uncork()
	}
}

// burstConn returns the connection paho uses now if it is a genConn,
// which sends a burst together; nil otherwise (a benchmark's baseline).
func (l *pahoLink) burstConn() *genConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) == 0 {
		return nil
	}
	c, _ := l.conns[len(l.conns)-1].(*genConn)
	return c
}

// file records t under its packet identifier, for pubackRead to find.
// paho completes tokens in the order PUBACKs arrive, not in publish order,
// so the drain loop is woken for each completed token (acks) rather than
// waiting on the oldest one, which a withheld PUBACK would hold up.
func (l *pahoLink) file(t token) {
	var id uint16 // 0: paho assigned none; it completed t with an error
	if m, ok := t.(interface{ MessageID() uint16 }); ok {
		id = m.MessageID()
	}
	l.amu.Lock()
	_, read := l.early[id]
	if read || id == 0 {
		// The PUBACK was read before Publish returned, or there is
		// none to wait for: t completes now or at once.
		delete(l.early, id)
		l.ackable = append(l.ackable, t)
	} else {
		l.sent[id] = t
	}
	l.amu.Unlock()
	if read || id == 0 {
		poke(l.wake)
	}
}

// pubackRead runs in paho's incoming goroutine when it has read the PUBACK
// for id and is about to complete its token.
func (l *pahoLink) pubackRead(id uint16) {
	l.amu.Lock()
	if t, ok := l.sent[id]; ok {
		delete(l.sent, id)
		l.ackable = append(l.ackable, t)
	} else {
		l.early[id] = struct{}{} // publish has not filed it yet
	}
	l.amu.Unlock()
	poke(l.wake)
}

// startWatch makes the PUBACK bookkeeping and starts watch; stopWatch
// ends it.
func (l *pahoLink) startWatch() {
	l.acked = make(chan struct{}, 1)
	l.sent = map[uint16]token{}
	l.early = map[uint16]struct{}{}
	l.wake = make(chan struct{}, 1)
	l.stop = make(chan struct{})
	l.watched.Go(l.watch)
}

func (l *pahoLink) stopWatch() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.watched.Wait()
}

// watch waits for the tokens whose PUBACK was read, all that gathered
// since its last round, and then signals acks once. paho completes such
// a token right after pubackRead, so each wait is short.
func (l *pahoLink) watch() {
	var spare []token // ackable's other buffer: the two take turns, so neither regrows
	for {
		select {
		case <-l.wake:
		case <-l.stop:
			return
		}
		l.amu.Lock()
		q := l.ackable
		l.ackable = spare[:0]
		l.amu.Unlock()
		spare = q
		if len(q) == 0 {
			continue // a PUBACK read before its publish was filed; file wakes again
		}
		for _, t := range q {
			select {
			case <-t.Done():
			case <-l.stop:
				return
			}
		}
		clear(q) // the tokens are the drain loop's now
		poke(l.acked)
	}
}

// ackStore is paho's memory store, told of each PUBACK: paho deletes the
// outbound entry "o.<id>" when it has read the PUBACK for id, and then
// completes the publish's token (net.go, startIncomingComms: persistInbound
// before flowComplete, in v1.5.1). paho deletes such entries otherwise
// only when it resumes a session, which the node never does (only the
// AutoReconnect test does); a stray id there would only make watch wait
// for that publish's own PUBACK.
type ackStore struct {
	*mqtt.MemoryStore
	l *pahoLink
}

func (s *ackStore) Del(key string) {
	s.MemoryStore.Del(key)
	if v, ok := strings.CutPrefix(key, "o."); ok {
		if id, err := strconv.ParseUint(v, 10, 16); err == nil {
			s.l.pubackRead(uint16(id))
		}
	}
}

func (l *pahoLink) acks() <-chan struct{} { return l.acked }

func (l *pahoLink) lost() <-chan struct{} { return l.dead }

func (l *pahoLink) close() {
	l.client.Disconnect(uint(quiesce / time.Millisecond))
	l.abort()
	l.markDead()
	l.stopWatch()
}
