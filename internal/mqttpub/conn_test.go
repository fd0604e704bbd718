package mqttpub

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// scriptBroker is a broker a test scripts packet by packet, over real
// TCP, framed by paho's packets package: each accepted connection runs
// the next script (the last one repeats).
type scriptBroker struct {
	t       *testing.T
	addr    string
	scripts []func(c *scriptConn)
	wg      sync.WaitGroup
}

// scriptConn is one broker-side connection.
type scriptConn struct {
	t   *testing.T
	n   int // 1-based connection number
	nc  net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer
	err error // the first read error
}

func newScriptBroker(t *testing.T, scripts ...func(c *scriptConn)) *scriptBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &scriptBroker{t: t, addr: ln.Addr().String(), scripts: scripts}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	b.wg.Go(func() {
		for n := 1; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			script := b.scripts[min(n, len(b.scripts))-1]
			c := &scriptConn{t: t, n: n, nc: nc, br: bufio.NewReader(nc), bw: bufio.NewWriter(nc)}
			b.wg.Go(func() {
				defer nc.Close()
				script(c)
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		b.wg.Wait()
	})
	return b
}

// read returns the next packet, or nil once the connection has failed
// (c.err says why).
func (c *scriptConn) read() packets.ControlPacket {
	pk, err := packets.ReadPacket(c.br)
	if err != nil {
		c.err = err
		return nil
	}
	return pk
}

// connect reads CONNECT and answers CONNACK with code. A connection
// that ends before its CONNECT is not an error: a publisher being
// stopped gives up the dial it had under way (the test checks what it
// expects of the connections that did connect).
func (c *scriptConn) connect(code byte) *packets.ConnectPacket {
	pk, ok := c.read().(*packets.ConnectPacket)
	if !ok {
		if !errors.Is(c.err, io.EOF) && !errors.Is(c.err, net.ErrClosed) {
			c.t.Errorf("connection %d: first packet is not CONNECT (%v)", c.n, c.err)
		}
		return nil
	}
	ack := packets.NewControlPacket(packets.Connack).(*packets.ConnackPacket)
	ack.ReturnCode = code
	c.send(ack)
	return pk
}

// publishes reads n PUBLISH packets.
func (c *scriptConn) publishes(n int) []*packets.PublishPacket {
	var out []*packets.PublishPacket
	for len(out) < n {
		switch pk := c.read().(type) {
		case *packets.PublishPacket:
			out = append(out, pk)
		case nil:
			c.t.Errorf("connection %d: %d of %d publishes, then %v", c.n, len(out), n, c.err)
			return out
		default:
			c.t.Errorf("connection %d: unexpected %v", c.n, pk)
		}
	}
	return out
}

// send writes packets in one write. A connection the script broker's
// own teardown closed meanwhile (net.ErrClosed: the test is over, and the
// publisher's reconnects may still be talking to it) is not an error.
func (c *scriptConn) send(pks ...packets.ControlPacket) {
	for _, pk := range pks {
		if err := pk.Write(c.bw); err != nil {
			c.t.Error(err)
		}
	}
	if err := c.bw.Flush(); err != nil && !errors.Is(err, net.ErrClosed) {
		c.t.Errorf("connection %d: %v", c.n, err)
	}
}

func puback(id uint16) packets.ControlPacket {
	pk := packets.NewControlPacket(packets.Puback).(*packets.PubackPacket)
	pk.MessageID = id
	return pk
}

// TestOnlyThisConnectionsPUBACKsCount: a connection lost with publishes
// in flight deletes nothing; on the next connection, PUBACKs for the
// packet identifiers the lost connection used (a broker replaying stale
// acknowledgements) delete nothing either; every row is deleted only
// after a PUBACK for its publish on the connection that carried it, and
// the rows are replayed with the same bytes.
func TestOnlyThisConnectionsPUBACKsCount(t *testing.T) {
	events := payloads("conn", 5, 60)
	src := newFakeSource()
	seqs := src.add(events...)
	type ackRec struct {
		conn int
		id   uint16
	}
	var (
		mu      sync.Mutex
		ackedOn = map[string]ackRec{} // payload → the connection and identifier its PUBACK went out on
		first   []*packets.PublishPacket
	)
	bySeq := map[uint64]string{}
	for i, q := range seqs {
		bySeq[q] = string(events[i])
	}
	var bad []string
	src.onDelete = func(del []uint64) {
		mu.Lock()
		defer mu.Unlock()
		for _, q := range del {
			if a, ok := ackedOn[bySeq[q]]; !ok || a.conn != 2 {
				bad = append(bad, fmt.Sprintf("seq %d deleted, acknowledged %+v", q, a))
			}
		}
	}
	secondHasAll := make(chan struct{})
	release := make(chan struct{})
	b := newScriptBroker(t,
		func(c *scriptConn) { // connection 1: takes every publish, acknowledges none, drops
			c.connect(packets.Accepted)
			pubs := c.publishes(len(events))
			mu.Lock()
			first = pubs
			mu.Unlock()
		},
		func(c *scriptConn) { // connection 2: stale PUBACKs first, then real ones
			c.connect(packets.Accepted)
			mu.Lock()
			var stale []packets.ControlPacket
			for _, p := range first {
				stale = append(stale, puback(p.MessageID))
			}
			mu.Unlock()
			c.send(stale...)
			pubs := c.publishes(len(events))
			close(secondHasAll)
			<-release
			for _, p := range pubs {
				if slices.ContainsFunc(first, func(f *packets.PublishPacket) bool { return f.MessageID == p.MessageID }) {
					t.Errorf("identifier %d reused on the next connection at once", p.MessageID)
				}
				mu.Lock()
				ackedOn[string(p.Payload)] = ackRec{conn: 2, id: p.MessageID}
				mu.Unlock()
				c.send(puback(p.MessageID))
			}
			c.read() // until the publisher closes
		},
	)
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the broker's cleanup, which waits for the script
	p := newPublisher(t, src, testOptions(b.addr, "t"))
	start(t, p)
	recv(t, secondHasAll)
	if n := src.deleteCalls(); n != 0 {
		t.Fatalf("%d Delete calls before any PUBACK on the connection that carried the publishes", n)
	}
	releaseOnce()
	eventually(t, "every row deleted", func() bool { return src.pending() == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("rows deleted without a PUBACK on their own connection: %q", bad)
	}
	if st := p.Stats(); st.Acked != uint64(len(events)) || st.Reconnects != 1 {
		t.Errorf("Stats = %+v; want Acked %d, one reconnect", st, len(events))
	}
}

// TestPUBACKsReadBeforeALossCount: PUBACKs the broker sent just before
// it dropped the connection were read on the connection that carried the
// publishes: their rows are deleted, and only the rest are replayed.
func TestPUBACKsReadBeforeALossCount(t *testing.T) {
	events := payloads("loss", 4, 60)
	src := newFakeSource()
	src.add(events...)
	var replayed atomic.Int32
	b := newScriptBroker(t,
		func(c *scriptConn) {
			c.connect(packets.Accepted)
			pubs := c.publishes(len(events))
			c.send(puback(pubs[0].MessageID), puback(pubs[2].MessageID)) // and drop
		},
		func(c *scriptConn) {
			c.connect(packets.Accepted)
			for _, p := range c.publishes(2) {
				replayed.Add(1)
				c.send(puback(p.MessageID))
			}
			c.read()
		},
	)
	p := newPublisher(t, src, testOptions(b.addr, "t"))
	start(t, p)
	eventually(t, "every row deleted", func() bool { return src.pending() == 0 })
	if n := replayed.Load(); n != 2 {
		t.Errorf("%d rows replayed; want the 2 without a PUBACK", n)
	}
}

// TestConnackRefused: a CONNACK refusal fails the connect with a
// RefusedError that names the return code, in the log and in
// Stats.LastError, without the password.
func TestConnackRefused(t *testing.T) {
	const canary = "pw-CANARY-c0ffee"
	b := newScriptBroker(t, func(c *scriptConn) {
		if pk := c.connect(5); pk != nil && (pk.Username != "u" || string(pk.Password) != canary || !pk.CleanSession || pk.ProtocolVersion != 4 || pk.Keepalive != 5) {
			t.Errorf("CONNECT: user %q, clean %t, version %d, keepalive %d; want u, true, 4, 5", pk.Username, pk.CleanSession, pk.ProtocolVersion, pk.Keepalive)
		}
	})
	o := testOptions(b.addr, "t")
	o.Username, o.Password = "u", secretOf(canary)
	var logs syncBuffer
	o.Logger = newTextLogger(&logs)
	p := newPublisher(t, newFakeSource(), o)
	lc, err := check(&p.o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dialLink(t.Context(), lc)
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Code != 5 {
		t.Fatalf("dialLink = %v; want a RefusedError with code 5", err)
	}
	r := start(t, p)
	eventually(t, "a refused connect", func() bool { return p.Stats().ConnectFailures >= 1 })
	r.stop(t)
	const want = "broker refused the connection: not authorized (CONNACK return code 5)"
	if st := p.Stats(); !strings.Contains(st.LastError, want) {
		t.Errorf("LastError = %q; want it to say %q", st.LastError, want)
	}
	if !strings.Contains(logs.String(), "CONNACK return code 5") || strings.Contains(logs.String(), canary) {
		t.Errorf("log lacks the refusal or contains the password:\n%s", logs.String())
	}
}

// TestKeepalive: an idle connection sends PINGREQ each keepalive
// interval and stays up while PINGRESP comes; when a PINGREQ goes
// unanswered, the publisher gives the connection up and connects again.
func TestKeepalive(t *testing.T) {
	pings := make(chan time.Time, 8)
	b := newScriptBroker(t,
		func(c *scriptConn) {
			c.connect(packets.Accepted)
			for range 2 {
				if _, ok := c.read().(*packets.PingreqPacket); !ok {
					t.Errorf("want PINGREQ, got an error or another packet (%v)", c.err)
					return
				}
				pings <- time.Now()
				c.send(packets.NewControlPacket(packets.Pingresp))
			}
			c.read() // the third PINGREQ goes unanswered
			pings <- time.Now()
			c.read()
		},
		func(c *scriptConn) {
			c.connect(packets.Accepted)
			c.read()
		},
	)
	o := testOptions(b.addr, "t")
	o.KeepAlive = time.Second
	p := newPublisher(t, newFakeSource(), o)
	start(t, p)
	begin := time.Now()
	for i := range 3 {
		at := recv(t, pings)
		if d := at.Sub(begin); d < 900*time.Millisecond || d > 3*time.Second {
			t.Errorf("PINGREQ %d came %s after the last packet; want about the keepalive, 1s", i+1, d)
		}
		begin = at
	}
	if st := p.Stats(); st.Reconnects != 0 {
		t.Errorf("%d reconnects while PINGRESP came", st.Reconnects)
	}
	eventually(t, "a reconnect after the unanswered PINGREQ", func() bool { return p.Stats().Reconnects == 1 })
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("unanswered PINGREQ noticed after %s; want about half the keepalive", d)
	}
	if st := p.Stats(); !strings.Contains(st.LastError, "no answer to PINGREQ") {
		t.Errorf("LastError = %q; want the unanswered PINGREQ", st.LastError)
	}
}

// TestBurstLeavesTogether: a burst of publishes reaches the broker in one
// socket write, and its PUBACKs cost the reader a few reads.
func TestBurstLeavesTogether(t *testing.T) {
	addr, _ := startMochi(t, "127.0.0.1:0", newAckHook())
	l, reads, writes := dialCounting(t, addr)

	const burst = 50
	before := writes.Load() // CONNECT
	publishBurst(t, l, burst)
	if n := writes.Load() - before; n != 1 {
		t.Errorf("a burst of %d publishes took %d socket writes; want 1", burst, n)
	}
	t.Logf("%d socket reads for CONNACK and %d PUBACKs", reads.Load(), burst)
}

// dialCounting dials a link to the broker at addr whose socket reads
// and writes are counted; the link is closed at cleanup.
func dialCounting(t *testing.T, addr string) (l *conn, reads, writes *atomic.Int64) {
	t.Helper()
	p := newPublisher(t, newFakeSource(), testOptions(addr, "t"))
	lc, err := check(&p.o)
	if err != nil {
		t.Fatal(err)
	}
	reads, writes = new(atomic.Int64), new(atomic.Int64)
	lc.wrap = func(c net.Conn) net.Conn { return &countingConn{Conn: c, reads: reads, writes: writes} }
	l, err = dialLink(context.Background(), lc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.close)
	return l, reads, writes
}

// publishBurst publishes n events on l with packet identifiers 1..n in
// one flush, waits for their PUBACKs and checks that each came once.
func publishBurst(t *testing.T, l *conn, n int) {
	t.Helper()
	for i := range n {
		if err := l.publish(uint16(i+1), fmt.Appendf(nil, "event %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.flush(); err != nil {
		t.Fatal(err)
	}
	var got []uint16
	for len(got) < n {
		select {
		case <-l.acks():
			got = l.takeAcks(got)
		case <-l.lost():
			t.Fatalf("connection lost: %v", l.err())
		case <-time.After(waitLimit):
			t.Fatalf("%d of %d PUBACKs", len(got), n)
		}
	}
	slices.Sort(got)
	if got[0] != 1 || got[n-1] != uint16(n) || len(slices.Compact(got)) != n {
		t.Errorf("PUBACK identifiers %v; want 1..%d once each", got, n)
	}
}

// TestUnexpectedPacketEndsTheConnection: a packet the publisher never
// asks for (here a PUBLISH to a client that subscribed to nothing) ends
// the connection with ErrProtocol, and the rows are delivered on the next.
func TestUnexpectedPacketEndsTheConnection(t *testing.T) {
	src := newFakeSource()
	src.add(payloads("proto", 2, 40)...)
	b := newScriptBroker(t,
		func(c *scriptConn) {
			c.connect(packets.Accepted)
			c.publishes(2)
			pub := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
			pub.TopicName, pub.Payload = "t", []byte("unasked")
			c.send(pub)
			c.read()
		},
		func(c *scriptConn) {
			c.connect(packets.Accepted)
			for _, p := range c.publishes(2) {
				c.send(puback(p.MessageID))
			}
			c.read()
		},
	)
	p := newPublisher(t, src, testOptions(b.addr, "t"))
	start(t, p)
	eventually(t, "rows delivered on the next connection", func() bool { return src.pending() == 0 })
	const want = "protocol violation by the broker: unexpected PUBLISH"
	if st := p.Stats(); st.Reconnects != 1 || !strings.Contains(st.LastError, want) {
		t.Errorf("Stats = %+v; want one reconnect and LastError with %q", st, want)
	}
}

// TestConnectTimeout: a broker that accepts TCP and never answers CONNECT
// fails the connect after the connect timeout, which bounds the whole
// connect, and the publisher tries again.
func TestConnectTimeout(t *testing.T) {
	ln := newSilentListener(t)
	o := testOptions(ln.addr, "t")
	o.ConnectTimeout = 100 * time.Millisecond
	p := newPublisher(t, newFakeSource(), o)
	begin := time.Now()
	start(t, p)
	eventually(t, "two connects timed out", func() bool { return p.Stats().ConnectFailures >= 2 })
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("two connects took %s with a 100ms connect timeout", d)
	}
	if st := p.Stats(); !strings.Contains(st.LastError, "read CONNACK") || !strings.Contains(st.LastError, "timeout") {
		t.Errorf("LastError = %q; want a timeout reading CONNACK", st.LastError)
	}
}
