package mqttpub

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// wireLink is a link that speaks the few MQTT 3.1.1 packets a publisher
// needs itself: CONNECT/CONNACK, PUBLISH with QoS 1 and its PUBACK,
// PINGREQ/PINGRESP and DISCONNECT. It exists for cost: paho spends about
// three goroutine handoffs, a timer, a store entry and two formatted map
// keys on every publish and on every PUBACK; here the drain goroutine
// encodes each PUBLISH straight into the connection's write buffer
// (genConn), and one reader goroutine completes the publish when its
// PUBACK arrives (docs/performance.md, "Usage delivery").
//
// It keeps the link contract the drain loop relies on (doc.go,
// "Connection generations"): a connection is connected exactly once and
// never resumed; a publish completes with a nil error only when its PUBACK
// was read from the connection that carried it; the generation is bumped
// (by genConn) before a read or write failure is seen, so before any
// publish fails because of the loss.
type wireLink struct {
	conn    net.Conn      // a genConn in production
	br      *bufio.Reader // on conn; only the reader goroutine uses it after CONNACK
	gen     *atomic.Uint64
	topic   string
	timeout time.Duration // each write's deadline

	ackc     chan struct{} // cap 1: publishes completed (see acks)
	dead     chan struct{} // closed when the connection has ended
	deadOnce sync.Once
	quit     chan struct{} // closed by close: stops the keepalive
	quitOnce sync.Once
	wg       sync.WaitGroup // the reader and the keepalive

	lastSent, lastRecv atomic.Int64 // unix nanos of the last write and read

	mu      sync.Mutex
	pending map[uint16]*wireToken // in flight by packet identifier; nil once the connection ended; guarded by mu
	nextID  uint16                // guarded by mu

	wmu sync.Mutex // serialises publish encoding and writes
	buf []byte     // the encoding buffer; guarded by wmu
}

// wireToken is a publish in flight on a wireLink. Its channel is made only
// when someone asks for it before the publish completed: the drain loop
// looks at most publishes only after their PUBACK.
type wireToken struct {
	fin  atomic.Bool // completed; err is set before
	mu   sync.Mutex
	done bool
	err  error
	ch   chan struct{}
}

// completed reports whether the publish completed, without making a
// channel (the drain loop asks this of every publish in flight).
func (t *wireToken) completed() bool { return t.fin.Load() }

// closedChan is the Done of every token that completed before Done was
// called.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (t *wireToken) Done() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return closedChan
	}
	if t.ch == nil {
		t.ch = make(chan struct{})
	}
	return t.ch
}

func (t *wireToken) Error() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *wireToken) complete(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	t.done, t.err = true, err
	t.fin.Store(true)
	if t.ch != nil {
		close(t.ch)
	}
}

func failedToken(err error) *wireToken {
	t := &wireToken{}
	t.complete(err)
	return t
}

// MQTT 3.1.1 control packet types (first byte, flags included).
const (
	pktConnect    = 0x10
	pktConnack    = 0x20
	pktPublishQoS = 0x32 // PUBLISH, QoS 1, not DUP, not RETAIN
	pktPuback     = 0x40
	pktPingreq    = 0xc0
	pktPingresp   = 0xd0
	pktDisconnect = 0xe0
)

// maxIncoming bounds the packets the reader accepts: a publisher expects
// only CONNACK, PUBACK and PINGRESP (4 bytes at most); anything larger is
// a broker this client does not understand.
const maxIncoming = 64

var errProtocol = errors.New("mqttpub: unexpected packet from broker")

// connackReasons are the CONNACK return codes of MQTT 3.1.1 §3.2.2.3.
var connackReasons = map[byte]string{
	1: "unacceptable protocol version",
	2: "identifier rejected",
	3: "server unavailable",
	4: "bad user name or password",
	5: "not authorized",
}

// dialWire connects a wireLink: dial (and TLS), CONNECT, CONNACK, all
// within connectTimeout and ctx. Cancelling ctx closes the half-open
// connection so the connect ends at once.
func dialWire(ctx context.Context, c *linkConfig, gen *atomic.Uint64) (*wireLink, error) {
	fail := func(err error) error {
		return fmt.Errorf("mqttpub: connect to %s: %w", c.broker.Redacted(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	defer cancel()
	raw, err := dialBroker(ctx, c)
	if err != nil {
		return nil, fail(err)
	}
	l := &wireLink{
		gen:     gen,
		topic:   c.topic,
		timeout: c.connectTimeout,
		ackc:    make(chan struct{}, 1),
		dead:    make(chan struct{}),
		quit:    make(chan struct{}),
		pending: make(map[uint16]*wireToken),
	}
	gen.Add(1) // a new connection: tokens published before it are stale
	if c.wrap != nil {
		l.conn = c.wrap(raw, l.connEnded)
	} else {
		l.conn = newGenConn(raw, l.connEnded, quiesce)
	}
	l.br = bufio.NewReaderSize(l.conn, readBuffer)
	stop := context.AfterFunc(ctx, func() { _ = l.conn.Close() })
	err = l.handshake(c)
	if !stop() && err == nil {
		err = ctx.Err() // closed by ctx just after the CONNACK
	}
	if err != nil {
		_ = l.conn.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return nil, fail(err)
	}
	now := time.Now().UnixNano()
	l.lastSent.Store(now)
	l.lastRecv.Store(now)
	l.wg.Add(2)
	go l.read()
	go l.keepalive(c.keepAlive, c.keepAlive/2)
	return l, nil
}

// dialBroker opens the TCP (or TLS) connection. It is the only dialer:
// no proxy environment variables apply.
func dialBroker(ctx context.Context, c *linkConfig) (net.Conn, error) {
	d := &net.Dialer{}
	if c.tls != nil {
		return (&tls.Dialer{NetDialer: d, Config: c.tls}).DialContext(ctx, "tcp", c.broker.Host)
	}
	return d.DialContext(ctx, "tcp", c.broker.Host)
}

// handshake writes CONNECT and reads CONNACK.
func (l *wireLink) handshake(c *linkConfig) error {
	flags := byte(0x02) // clean session: redelivery is ours, from the outbox
	var body []byte
	body = appendString(body, "MQTT")
	body = append(body, 4, 0, 0, 0) // protocol level 4 (3.1.1), flags, keepalive
	if c.username != "" {
		flags |= 0x80
	}
	if c.password != "" {
		flags |= 0x40
	}
	body[len(body)-3] = flags
	binary.BigEndian.PutUint16(body[len(body)-2:], uint16(min(c.keepAlive/time.Second, 65535)))
	body = appendString(body, c.clientID)
	if c.username != "" {
		body = appendString(body, c.username)
	}
	if c.password != "" {
		body = appendString(body, c.password)
	}
	pkt := appendLength([]byte{pktConnect}, len(body))
	pkt = append(pkt, body...)
	deadline := time.Now().Add(c.connectTimeout)
	_ = l.conn.SetDeadline(deadline)
	if _, err := l.conn.Write(pkt); err != nil {
		return err
	}
	clear(pkt) // it held the password
	kind, p, err := l.readPacket()
	if err != nil {
		return err
	}
	if kind != pktConnack || len(p) != 2 {
		return fmt.Errorf("%w: 0x%02x where CONNACK was expected", errProtocol, kind)
	}
	if rc := p[1]; rc != 0 {
		reason := connackReasons[rc]
		if reason == "" {
			reason = "unknown reason"
		}
		return fmt.Errorf("connection refused: %s (CONNACK return code %d)", reason, rc)
	}
	return l.conn.SetDeadline(time.Time{})
}

// readPacket reads one whole packet: its first byte and its body.
func (l *wireLink) readPacket() (byte, []byte, error) {
	kind, err := l.br.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	n, err := readLength(l.br)
	if err != nil {
		return 0, nil, err
	}
	if n > maxIncoming {
		return 0, nil, fmt.Errorf("%w: 0x%02x of %d bytes", errProtocol, kind, n)
	}
	var body [maxIncoming]byte
	if _, err := io.ReadFull(l.br, body[:n]); err != nil {
		return 0, nil, err
	}
	return kind, body[:n], nil
}

// read is the reader goroutine: it completes publishes as their PUBACKs
// arrive and, once the connection ends, fails every one still in flight.
func (l *wireLink) read() {
	defer l.wg.Done()
	var (
		err   error
		batch []*wireToken // acknowledged, not yet completed
	)
	for {
		if len(batch) > 0 && !l.packetBuffered() {
			// Complete the PUBACKs of one read(2) together and signal
			// once: the drain loop wakes once for them all and refills
			// the window in one go instead of one publish per wakeup.
			// Newest first, for a loop that waits on the oldest's Done.
			for i := len(batch) - 1; i >= 0; i-- {
				batch[i].complete(nil)
			}
			clear(batch)
			batch = batch[:0]
			poke(l.ackc)
		}
		var (
			kind byte
			p    []byte
		)
		kind, p, err = l.readPacket() // does not block while a batch waits: its packet is buffered
		if err != nil {
			break
		}
		l.lastRecv.Store(time.Now().UnixNano())
		if kind == pktPingresp && len(p) == 0 {
			continue
		}
		if kind != pktPuback || len(p) != 2 {
			err = fmt.Errorf("%w: 0x%02x", errProtocol, kind)
			break
		}
		id := binary.BigEndian.Uint16(p)
		l.mu.Lock()
		t := l.pending[id]
		delete(l.pending, id)
		l.mu.Unlock()
		if t != nil {
			batch = append(batch, t)
		}
	}
	// genConn bumped the generation before Read returned the error; a
	// protocol error ends the connection here, which bumps it too. The
	// PUBACKs read before it still complete (the drain loop judges them
	// stale by the generation and replays their rows).
	for i := len(batch) - 1; i >= 0; i-- {
		batch[i].complete(nil)
	}
	_ = l.conn.Close()
	l.markDead()
	failed := fmt.Errorf("%w: %w", ErrConnectionLost, err)
	l.mu.Lock()
	ts := l.pending
	l.pending = nil
	l.mu.Unlock()
	for _, t := range ts {
		t.complete(failed)
	}
	poke(l.ackc)
}

// packetBuffered reports whether a whole packet of the kinds the reader
// expects (a one-byte remaining length) is already in the read buffer.
func (l *wireLink) packetBuffered() bool {
	n := l.br.Buffered()
	if n < 2 {
		return false
	}
	h, _ := l.br.Peek(2)
	return h[1]&0x80 == 0 && n >= 2+int(h[1])
}

// keepalive sends PINGREQ when nothing was sent or received for
// keepAlive, and ends the connection when its PINGRESP is pingTimeout
// late (checked every keepAlive/4, at most 5 s): a half-open link ends
// within about 1.5×keepAlive.
func (l *wireLink) keepalive(keepAlive, pingTimeout time.Duration) {
	defer l.wg.Done()
	tick := time.NewTicker(min(keepAlive/4, 5*time.Second))
	defer tick.Stop()
	var pingSent time.Time // zero: no PINGREQ outstanding
	for {
		select {
		case <-l.quit:
			return
		case <-l.dead:
			return
		case now := <-tick.C:
			recv := time.Unix(0, l.lastRecv.Load())
			if !pingSent.IsZero() {
				if recv.After(pingSent) {
					pingSent = time.Time{}
				} else if now.Sub(pingSent) >= pingTimeout {
					_ = l.conn.Close() // the reader fails what is in flight
					return
				}
			}
			sent := time.Unix(0, l.lastSent.Load())
			if pingSent.IsZero() && (now.Sub(sent) >= keepAlive || now.Sub(recv) >= keepAlive) {
				if l.write([]byte{pktPingreq, 0}) != nil {
					return
				}
				pingSent = now
			}
		}
	}
}

// write writes one packet with the write deadline. A failure has already
// ended the connection (genConn), so the reader fails what is in flight.
func (l *wireLink) write(pkt []byte) error {
	_ = l.conn.SetWriteDeadline(time.Now().Add(l.timeout))
	_, err := l.conn.Write(pkt)
	if err == nil {
		l.lastSent.Store(time.Now().UnixNano())
	}
	return err
}

func (l *wireLink) publish(payload []byte) token {
	t := &wireToken{}
	l.mu.Lock()
	if l.pending == nil {
		l.mu.Unlock()
		return failedToken(fmt.Errorf("%w: publish after the connection ended", ErrConnectionLost))
	}
	if len(l.pending) >= MaxWindow {
		l.mu.Unlock()
		return failedToken(errors.New("mqttpub: no packet identifier free"))
	}
	id := l.nextID
	for {
		id++
		if id != 0 && l.pending[id] == nil {
			break
		}
	}
	l.nextID = id
	l.pending[id] = t
	l.mu.Unlock()

	// Encoded into the link's buffer; flush hands the buffer to genConn
	// in one Write, so that the publishes of one window refill leave in
	// one write(2) rather than the first alone and the rest after it.
	l.wmu.Lock()
	b := appendLength(append(l.buf, pktPublishQoS), 2+len(l.topic)+2+len(payload))
	b = appendString(b, l.topic)
	b = binary.BigEndian.AppendUint16(b, id)
	l.buf = append(b, payload...)
	full := len(l.buf) >= flushAt
	l.wmu.Unlock()
	if full {
		l.flush()
	}
	return t
}

// flushAt is how many encoded bytes publish buffers before it flushes by
// itself.
const flushAt = 64 << 10

// flush writes the publishes encoded since the last flush. A failed
// write ends the connection (genConn closes it), and the reader then
// fails every publish in flight, these included.
func (l *wireLink) flush() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if len(l.buf) == 0 {
		return
	}
	if err := l.write(l.buf); err != nil {
		_ = l.conn.Close()
	}
	if cap(l.buf) > 4*flushAt {
		l.buf = nil // one large payload grew it
	} else {
		l.buf = l.buf[:0]
	}
}

func (l *wireLink) acks() <-chan struct{} { return l.ackc }

func (l *wireLink) lost() <-chan struct{} { return l.dead }

func (l *wireLink) markDead() { l.deadOnce.Do(func() { close(l.dead) }) }

// connEnded runs once, from the connection's first failed read or write
// or its Close (genConn), before anyone can see the failure.
func (l *wireLink) connEnded() {
	l.gen.Add(1)
	l.markDead()
}

// close sends DISCONNECT if the connection is still up, closes it
// (genConn writes what is pending for at most quiesce) and waits for the
// reader and the keepalive.
func (l *wireLink) close() {
	l.quitOnce.Do(func() {
		close(l.quit)
		select {
		case <-l.dead:
		default:
			_ = l.write([]byte{pktDisconnect, 0})
		}
		_ = l.conn.Close()
		l.markDead()
		l.wg.Wait()
	})
}

// appendLength appends an MQTT remaining length (1-4 bytes, 7 bits each).
func appendLength(b []byte, n int) []byte {
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

// readLength reads an MQTT remaining length.
func readLength(r io.ByteReader) (int, error) {
	n, mul := 0, 1
	for i := 0; i < 4; i++ {
		d, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		n += int(d&0x7f) * mul
		if d&0x80 == 0 {
			return n, nil
		}
		mul *= 128
	}
	return 0, fmt.Errorf("%w: remaining length over 4 bytes", errProtocol)
}

// appendString appends an MQTT UTF-8 string: a 2-byte length, the bytes.
func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}
