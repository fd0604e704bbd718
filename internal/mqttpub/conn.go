package mqttpub

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// link is one broker connection as the drain loop drives it. Every PUBACK
// it reports was read on this very connection (doc.go, "The connection").
type link interface {
	// publish buffers a QoS 1 PUBLISH of payload (retained false) with
	// packet identifier id. payload may be reused once it returns.
	publish(id uint16, payload []byte) error
	// flush writes what publish and ping buffered; the drain loop calls
	// it once per burst.
	flush() error
	// ping writes a PINGREQ at once.
	ping() error
	// hurry has the reader read PUBACKs as they come until the next
	// burst, when a burst's have not all come within ackHurry.
	hurry()
	// acks receives after PUBACKs were read (coalesced, capacity 1): one
	// wakeup for a burst of them. takeAcks returns their packet
	// identifiers, appended to dst, and forgets them.
	acks() <-chan struct{}
	takeAcks(dst []uint16) []uint16
	// heard is when a packet was last read (the CONNACK at first).
	heard() time.Time
	// lost is closed once the connection has ended; err then says why.
	lost() <-chan struct{}
	err() error
	// close sends DISCONNECT when the connection is still up, closes it
	// and waits for its reader. It is idempotent.
	close()
}

// connector opens a link.
type connector func(ctx context.Context) (link, error)

// quiesce bounds how long close waits for DISCONNECT to be written, and
// how long a stopping Publisher waits for PUBACKs on their way.
const quiesce = 250 * time.Millisecond

// Buffer sizes of a connection.
const (
	// readBuffer holds a burst of PUBACKs (4 bytes each) for one read(2):
	// packets.ReadPacket reads a fixed header a byte at a time.
	readBuffer = 4 << 10
	// writeBuffer holds a burst of publishes for one write(2); a larger
	// burst is written whenever the buffer fills. A backlog's bursts are
	// large (a window of 1,024 events is ~400 KiB): at 64 KiB a batched
	// drain made four times the write(2) calls.
	writeBuffer = 256 << 10
	// pubackSize is the size of a PUBACK packet, the largest packet the
	// broker sends after CONNACK (a PINGRESP is 2 bytes).
	pubackSize = 4
)

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
	// wrap, when set, wraps each dialled connection; benchmarks use it to
	// count system calls. nil in production.
	wrap func(net.Conn) net.Conn
}

// conn is the Publisher's own MQTT 3.1.1 connection: the drain loop's
// goroutine writes every packet through a buffer and flushes once per
// burst, and one reader goroutine reads every packet after CONNACK through
// a buffer, so a burst of PUBACKs costs one read(2) and one wakeup of the
// drain loop. Packets are framed by paho.mqtt.golang's packets package.
type conn struct {
	// immutable after dialLink
	nc    net.Conn
	begun time.Time     // monotonic base of heardAt
	acked chan struct{} // capacity 1: takeAcks has something
	dead  chan struct{} // closed when the reader returns

	// used by the drain loop's goroutine only
	bw           *bufio.Writer
	topic        string        // every PUBLISH goes to it
	writing      bool          // a burst is being written: its deadline is set
	writeTimeout time.Duration // a burst's write deadline; quiesce once closing

	// used by the reader goroutine only (and by dialLink before it starts)
	br *bufio.Reader

	wait *ackWait // the PUBACKs owed, and the reader's low-water mark

	heardAt atomic.Int64 // time.Since(begun) when a packet was last read

	mu    sync.Mutex
	ids   []uint16 // PUBACKs read, not yet taken; guarded by mu
	cause error    // why the connection ended; guarded by mu

	closeOnce sync.Once
}

// dialLink dials the broker, sends CONNECT and waits for its CONNACK. The
// connect timeout bounds the whole connect (dial, TLS, CONNECT/CONNACK),
// and so does ctx: cancelling it closes a half-open connection so that
// the connect ends at once.
func dialLink(ctx context.Context, c *linkConfig) (*conn, error) {
	deadline := time.Now().Add(c.connectTimeout)
	nc, err := dialBroker(ctx, c, deadline)
	if err != nil {
		return nil, fmt.Errorf("mqttpub: connect to %s: %w", c.broker.Redacted(), err)
	}
	wait := newAckWait(nc) // the socket itself, not a benchmark's wrapper
	if c.wrap != nil {
		nc = c.wrap(nc)
	}
	l := &conn{
		wait:         wait,
		nc:           nc,
		writeTimeout: c.connectTimeout,
		begun:        time.Now(),
		acked:        make(chan struct{}, 1),
		dead:         make(chan struct{}),
		bw:           bufio.NewWriterSize(nc, writeBuffer),
		topic:        c.topic,
	}
	l.br = bufio.NewReaderSize(ackReader{l}, readBuffer)
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	err = l.handshake(c, deadline)
	if !stop() {
		err = ctx.Err() // the connect was cut short: nc is closed
	}
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("mqttpub: connect to %s: %w", c.broker.Redacted(), err)
	}
	l.heardAt.Store(int64(time.Since(l.begun)))
	go l.read()
	return l, nil
}

// dialBroker opens the TCP (and for ssl://, TLS) connection. It is the
// configured broker exactly: no proxy from the environment.
func dialBroker(ctx context.Context, c *linkConfig, deadline time.Time) (net.Conn, error) {
	d := &net.Dialer{Deadline: deadline}
	if c.tls != nil {
		return (&tls.Dialer{NetDialer: d, Config: c.tls}).DialContext(ctx, "tcp", c.broker.Host)
	}
	return d.DialContext(ctx, "tcp", c.broker.Host)
}

// handshake sends CONNECT and reads the CONNACK by deadline, the end of
// the connect timeout. The password goes into the CONNECT packet and
// nowhere else.
func (l *conn) handshake(c *linkConfig, deadline time.Time) error {
	if err := l.nc.SetDeadline(deadline); err != nil {
		return err
	}
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion = "MQTT", 4 // MQTT 3.1.1, explicitly
	// CleanSession: redelivery is ours, from the outbox, on every
	// connection (doc.go, "Session, reconnects and identity").
	cp.CleanSession = true
	cp.Keepalive = uint16(c.keepAlive / time.Second) // 1..65535 (checked by New)
	cp.ClientIdentifier = c.clientID
	if c.username != "" {
		cp.UsernameFlag, cp.Username = true, c.username
	}
	if c.password != "" {
		cp.PasswordFlag, cp.Password = true, []byte(c.password)
	}
	if err := cp.Write(l.bw); err != nil {
		return fmt.Errorf("send CONNECT: %w", err)
	}
	if err := l.bw.Flush(); err != nil {
		return fmt.Errorf("send CONNECT: %w", err)
	}
	pk, err := packets.ReadPacket(l.br)
	if err != nil {
		return fmt.Errorf("read CONNACK: %w", err)
	}
	ack, ok := pk.(*packets.ConnackPacket)
	if !ok {
		return fmt.Errorf("%w: %s before CONNACK", ErrProtocol, packetName(pk))
	}
	if ack.ReturnCode != packets.Accepted {
		return &RefusedError{Code: ack.ReturnCode}
	}
	return l.nc.SetDeadline(time.Time{})
}

// read is the connection's reader: it reads every packet after CONNACK
// until the connection fails or is closed, hands the PUBACKs' packet
// identifiers to the drain loop and signals acks once per burst.
func (l *conn) read() {
	var batch []uint16 // PUBACKs of the current burst; reused
	defer close(l.dead)
	for {
		if id, ok, err := l.readPuback(); err != nil {
			l.hand(batch)
			l.fail(fmt.Errorf("read: %w", err))
			return
		} else if ok {
			l.wait.owed.Add(-1)
			batch = append(batch, id)
			if l.br.Buffered() < pubackSize {
				l.heardAt.Store(int64(time.Since(l.begun)))
				batch = l.hand(batch)
			}
			continue
		}
		pk, err := packets.ReadPacket(l.br)
		if err != nil {
			l.hand(batch)
			l.fail(fmt.Errorf("read: %w", err))
			return
		}
		switch pk := pk.(type) {
		case *packets.PubackPacket:
			l.wait.owed.Add(-1)
			batch = append(batch, pk.MessageID)
		case *packets.PingrespPacket:
		default:
			// CleanSession, no subscriptions, QoS 1 publishes only:
			// nothing else may come (MQTT 3.1.1 §3.2-3.14).
			l.hand(batch)
			l.fail(fmt.Errorf("%w: unexpected %s", ErrProtocol, packetName(pk)))
			_ = l.nc.Close()
			return
		}
		// The burst ends when the buffer holds no whole packet more: the
		// next ReadPacket would wait for the socket. (A buffered prefix
		// of 4 bytes or more at a packet boundary is a whole PUBACK or
		// PINGRESP, the only packets that may come.)
		if l.br.Buffered() < pubackSize {
			l.heardAt.Store(int64(time.Since(l.begun)))
			batch = l.hand(batch)
		}
	}
}

// pubackHead is the start of every PUBACK: packet type 4, no flags, a
// remaining length of 2 (MQTT 3.1.1 §3.4.1).
var pubackHead = [2]byte{packets.Puback << 4, 2}

// readPuback waits for the next packet and, when it is a PUBACK whole in
// the read buffer, reads it and returns its packet identifier: what the
// broker sends after CONNACK is nearly always PUBACKs, and paho's
// ReadPacket costs 6 allocations each (BenchmarkFraming). ok is false,
// with nothing read, for anything else (a PINGRESP, a packet split across
// reads, a packet not expected), which ReadPacket then reads.
func (l *conn) readPuback() (id uint16, ok bool, err error) {
	if _, err := l.br.Peek(1); err != nil {
		return 0, false, err
	}
	if l.br.Buffered() < pubackSize {
		return 0, false, nil
	}
	b, _ := l.br.Peek(pubackSize) // buffered: never waits
	if b[0] != pubackHead[0] || b[1] != pubackHead[1] {
		return 0, false, nil
	}
	id = uint16(b[2])<<8 | uint16(b[3])
	_, _ = l.br.Discard(pubackSize)
	return id, true, nil
}

// hand gives the drain loop the PUBACKs in batch and signals acks; it
// returns batch emptied for reuse.
func (l *conn) hand(batch []uint16) []uint16 {
	if len(batch) == 0 {
		return batch
	}
	l.mu.Lock()
	l.ids = append(l.ids, batch...)
	l.mu.Unlock()
	poke(l.acked)
	return batch[:0]
}

func (l *conn) takeAcks(dst []uint16) []uint16 {
	l.mu.Lock()
	dst = append(dst, l.ids...)
	l.ids = l.ids[:0]
	l.mu.Unlock()
	return dst
}

// fail records why the connection ended; the first cause stays.
func (l *conn) fail(err error) {
	l.mu.Lock()
	if l.cause == nil {
		l.cause = err
	}
	l.mu.Unlock()
}

func (l *conn) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cause
}

func (l *conn) acks() <-chan struct{} { return l.acked }

func (l *conn) lost() <-chan struct{} { return l.dead }

func (l *conn) heard() time.Time { return l.begun.Add(time.Duration(l.heardAt.Load())) }

// begin sets the write deadline for a burst, once, before its first
// write: the buffer may write a long burst before flush.
func (l *conn) begin() error {
	if l.writing {
		return nil
	}
	l.writing = true
	return l.nc.SetWriteDeadline(time.Now().Add(l.writeTimeout))
}

func (l *conn) publish(id uint16, payload []byte) error {
	if err := l.begin(); err != nil {
		return err
	}
	l.wait.owed.Add(1)
	return writePublish(l.bw, l.topic, id, payload)
}

// publishHeader is the first byte of every PUBLISH the node sends: packet
// type 3, DUP clear, QoS 1, RETAIN clear (MQTT 3.1.1 §3.3.1).
const publishHeader = packets.Publish<<4 | 1<<1

// writePublish writes a QoS 1 PUBLISH of payload to topic with packet
// identifier id (MQTT 3.1.1 §3.3): the header byte, the remaining length
// (§2.2.3), the topic as a length-prefixed string (§1.5.3), the identifier
// and the payload. It writes the bytes paho's PublishPacket.Write writes
// (TestWritePublishMatchesPaho), without its four buffers and two copies
// of the payload a publish: 5 allocations and ~3 µs an event
// (BenchmarkFraming). New bounds the topic (65,535 bytes) and the
// payload (MaxPayload, within the 268,435,455 a remaining length holds).
func writePublish(w *bufio.Writer, topic string, id uint16, payload []byte) error {
	// Byte by byte: a slice handed to Write escapes (bufio may pass it on
	// to the connection), a byte does not. bufio.Writer keeps its first
	// error, so the last Write returns any.
	_ = w.WriteByte(publishHeader)
	for rest := 2 + len(topic) + 2 + len(payload); ; {
		digit := byte(rest % 128)
		if rest /= 128; rest > 0 {
			digit |= 0x80
		}
		_ = w.WriteByte(digit)
		if rest == 0 {
			break
		}
	}
	_ = w.WriteByte(byte(len(topic) >> 8))
	_ = w.WriteByte(byte(len(topic)))
	_, _ = w.WriteString(topic)
	_ = w.WriteByte(byte(id >> 8))
	_ = w.WriteByte(byte(id))
	_, err := w.Write(payload)
	return err
}

func (l *conn) flush() error {
	if err := l.begin(); err != nil {
		return err
	}
	l.writing = false
	// The mark first: the broker may answer before Flush returns, and a
	// first PUBACK read alone would cost a wakeup of its own.
	l.wait.burst()
	return l.bw.Flush()
}

func (l *conn) ping() error {
	if err := l.begin(); err != nil {
		return err
	}
	if err := packets.NewControlPacket(packets.Pingreq).Write(l.bw); err != nil {
		return err
	}
	err := l.flush()
	l.wait.hurry() // the PINGRESP is 2 bytes
	return err
}

func (l *conn) hurry() { l.wait.hurry() }

// close sends DISCONNECT if the connection is still up (for at most
// quiesce), closes it and waits for the reader to return.
func (l *conn) close() {
	l.closeOnce.Do(func() {
		if !done(l.dead) {
			l.writing = false
			l.writeTimeout = quiesce
			if err := packets.NewControlPacket(packets.Disconnect).Write(l.bw); err == nil {
				_ = l.flush()
			}
		}
		_ = l.nc.Close()
		<-l.dead
	})
}

// packetName names a packet for an error: "PUBLISH" for a
// *packets.PublishPacket.
func packetName(pk packets.ControlPacket) string {
	n := strings.TrimPrefix(fmt.Sprintf("%T", pk), "*packets.")
	return strings.ToUpper(strings.TrimSuffix(n, "Packet"))
}

// poke signals ch without blocking; a signal already pending suffices.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

var _ link = (*conn)(nil)
