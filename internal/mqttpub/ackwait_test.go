package mqttpub

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// TestBurstOfPUBACKsOneRead: a broker that writes each PUBACK of a burst
// as a segment of its own (as one with TCP_NODELAY does) wakes the
// reader once for the burst, not once a PUBACK: the socket's low-water
// mark holds the reader until every PUBACK owed is in.
func TestBurstOfPUBACKsOneRead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the receive low-water mark is set on Linux only")
	}
	const burst = 50
	b := newScriptBroker(t, func(c *scriptConn) {
		c.connect(packets.Accepted)
		for _, p := range c.publishes(burst) {
			// A write each, as the broker gets to each PUBLISH: without
			// the mark, the reader would wake for most of them.
			c.send(puback(p.MessageID))
			time.Sleep(100 * time.Microsecond)
		}
		c.read() // until the publisher disconnects
	})
	l, reads, _ := dialCounting(t, b.addr)

	before := reads.Load() // CONNACK, and maybe the read the reader waits in
	publishBurst(t, l, burst)
	// One read returns the burst; the next is the one the reader waits in.
	if n := reads.Load() - before; n > 2 {
		t.Errorf("%d PUBACKs, each its own segment, took %d socket reads; want at most 2", burst, n)
	}
	if n := l.wait.owed.Load(); n != 0 {
		t.Errorf("%d PUBACKs still owed after all came", n)
	}
}

// TestHeldBackPUBACKsAreRead: a broker that sends a burst's first PUBACK
// and holds the rest back until the node has read it (as Nagle's
// algorithm holds them until the node's ACK) is not waited for: ackHurry
// after the burst the reader takes PUBACKs as they come, and every row is
// deleted on the first connection.
func TestHeldBackPUBACKsAreRead(t *testing.T) {
	events := payloads("held", 20, 60)
	src := newFakeSource()
	src.add(events...)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	var conns atomic.Int32
	b := newScriptBroker(t, func(c *scriptConn) {
		conns.Add(1)
		c.connect(packets.Accepted)
		pubs := c.publishes(len(events))
		if len(pubs) < len(events) {
			return // the publisher gave this connection up (a failure reported below)
		}
		c.send(puback(pubs[0].MessageID))
		<-release
		var rest []packets.ControlPacket
		for _, p := range pubs[1:] {
			rest = append(rest, puback(p.MessageID))
		}
		c.send(rest...)
		c.read()
	})
	t.Cleanup(free) // before the broker's own cleanup waits for the script
	o := testOptions(b.addr, "t")
	o.KeepAlive = time.Minute // its PINGREQ would wake the reader too
	p := newPublisher(t, src, o)
	start(t, p)
	eventually(t, "the first row deleted", func() bool { return src.pending() == len(events)-1 })
	free()
	eventually(t, "every row deleted", func() bool { return src.pending() == 0 })
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections; want every PUBACK read on the first", n)
	}
}

// TestKeepaliveWhilePUBACKsAreOwed: a broker that answers PINGREQ but
// withholds the PUBACKs it owes keeps the connection alive until the ack
// timeout: the reader wakes for the 2-byte PINGRESP, however many
// PUBACK bytes its mark waited for.
func TestKeepaliveWhilePUBACKsAreOwed(t *testing.T) {
	events := payloads("owed", 10, 60)
	src := newFakeSource()
	src.add(events...)
	pings := make(chan struct{}, 16)
	b := newScriptBroker(t, func(c *scriptConn) {
		c.connect(packets.Accepted)
		c.publishes(len(events))
		for {
			switch c.read().(type) {
			case *packets.PingreqPacket:
				c.send(packets.NewControlPacket(packets.Pingresp))
				pings <- struct{}{}
			case nil:
				return
			}
		}
	})
	o := testOptions(b.addr, "t")
	o.KeepAlive = time.Second
	p := newPublisher(t, src, o)
	start(t, p)
	for range 3 { // three keepalive rounds answered: 1.5 intervals would have ended a deaf link
		select {
		case <-pings:
		case <-time.After(waitLimit):
			t.Fatal("no PINGREQ")
		}
	}
	if st := p.Stats(); !st.Connected || st.Reconnects > 0 {
		t.Errorf("stats %+v; want the first connection still up", st)
	}
}
