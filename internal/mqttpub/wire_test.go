package mqttpub

import (
	"bytes"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	pahopackets "github.com/eclipse/paho.mqtt.golang/packets"
)

// dialWireTest dials a wireLink to addr with the test options.
func dialWireTest(t *testing.T, addr string, edit func(*Options)) (*Publisher, *wireLink) {
	t.Helper()
	o := testOptions(addr, "scootgate-test/wire")
	if edit != nil {
		edit(&o)
	}
	p := newPublisher(t, newFakeSource(), o)
	lc, err := check(&p.o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := dialWire(t.Context(), lc, &p.gen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.close)
	return p, l
}

// wait waits for tok, failing the test after waitLimit.
func wait(t *testing.T, tok token) error {
	t.Helper()
	select {
	case <-tok.Done():
		return tok.Error()
	case <-time.After(waitLimit):
		t.Fatal("publish still in flight")
		return nil
	}
}

// TestWireFailsPendingOnLoss: a publish whose PUBACK never came fails
// when the broker drops the connection, after the generation moved, and
// lost() closes.
func TestWireFailsPendingOnLoss(t *testing.T) {
	h := newAckHook()
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	p, l := dialWireTest(t, addr, nil)
	h.withhold.Store(true)
	g := p.gen.Load()
	tok := l.publish([]byte("never acknowledged"))
	l.flush()
	eventually(t, "the publish at the broker", func() bool {
		var n int
		h.read(func(h *ackHook) { n = h.rejected[1] })
		return n == 1
	})
	gAtFailure := make(chan uint64, 1)
	go func() { <-tok.Done(); gAtFailure <- p.gen.Load() }()
	h.cut()
	if err := wait(t, tok); err == nil {
		t.Fatal("publish completed without error after the connection was lost with its PUBACK withheld")
	}
	if got := recv(t, gAtFailure); got == g {
		t.Error("generation unchanged when the publish failed")
	}
	recv(t, l.lost())
	if err := wait(t, l.publish([]byte("after the loss"))); err == nil {
		t.Error("a publish on a lost connection did not fail")
	}
}

// TestWireAcks: the publisher's PUBLISH packets, read by paho's decoder
// on a scripted broker, carry the topic, QoS 1 and the payload unchanged;
// PUBACKs sent back in reverse order in one write complete exactly their
// own publishes, and a PUBACK for an identifier not in flight is ignored.
func TestWireAcks(t *testing.T) {
	const n = 5
	sb := newScriptedBroker(t)
	got := make(chan []*pahopackets.PublishPacket, 1)
	sb.serve(func(c net.Conn) {
		var pubs []*pahopackets.PublishPacket
		for len(pubs) < n {
			cp, err := pahopackets.ReadPacket(c)
			if err != nil {
				t.Error(err)
				return
			}
			pubs = append(pubs, cp.(*pahopackets.PublishPacket))
		}
		var acks []byte
		acks = append(acks, pktPuback, 2, 0xff, 0xfe) // not in flight
		for i := n - 1; i >= 1; i-- {                 // the first stays unacknowledged
			acks = append(acks, pktPuback, 2)
			acks = binary.BigEndian.AppendUint16(acks, pubs[i].MessageID)
		}
		if _, err := c.Write(acks); err != nil {
			t.Error(err)
		}
		got <- pubs
		<-sb.done
	})
	_, l := dialWireTest(t, sb.addr, nil)
	var toks []token
	for i := range n {
		toks = append(toks, l.publish(bytes.Repeat([]byte{byte('a' + i)}, 300)))
	}
	l.flush()
	pubs := recv(t, got)
	ids := map[uint16]bool{}
	for i, pp := range pubs {
		if pp.TopicName != "scootgate-test/wire" || pp.Qos != 1 || pp.Retain || pp.Dup ||
			!bytes.Equal(pp.Payload, bytes.Repeat([]byte{byte('a' + i)}, 300)) {
			t.Errorf("publish %d: topic %q qos %d retain %v dup %v payload %q", i, pp.TopicName, pp.Qos, pp.Retain, pp.Dup, pp.Payload[:8])
		}
		if pp.MessageID == 0 || ids[pp.MessageID] {
			t.Errorf("publish %d: packet identifier %d is zero or reused", i, pp.MessageID)
		}
		ids[pp.MessageID] = true
	}
	for i := 1; i < n; i++ {
		if err := wait(t, toks[i]); err != nil {
			t.Errorf("publish %d: %v", i, err)
		}
	}
	recv(t, l.acks())
	if finished(toks[0]) {
		t.Error("the publish without a PUBACK completed")
	}
}

// TestWireProtocolErrors: a CONNACK refusal names the reason, and a packet
// a publisher never expects ends the connection, failing what is in
// flight with an error naming the packet.
func TestWireProtocolErrors(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		sb := newScriptedBroker(t)
		sb.connack = []byte{pktConnack, 2, 0, 5}
		sb.serve(func(net.Conn) {})
		p := newPublisher(t, newFakeSource(), testOptions(sb.addr, "t"))
		lc, err := check(&p.o)
		if err != nil {
			t.Fatal(err)
		}
		_, err = dialWire(t.Context(), lc, &p.gen)
		if err == nil || !strings.Contains(err.Error(), "connection refused: not authorized (CONNACK return code 5)") {
			t.Errorf("dial error %v; want the CONNACK reason", err)
		}
	})
	t.Run("unexpected packet", func(t *testing.T) {
		sb := newScriptedBroker(t)
		sb.serve(func(c net.Conn) {
			if _, err := pahopackets.ReadPacket(c); err != nil {
				t.Error(err)
				return
			}
			_, _ = c.Write([]byte{0x30, 3, 0, 1, 'x'}) // a PUBLISH to a client that never subscribed
			<-sb.done
		})
		_, l := dialWireTest(t, sb.addr, nil)
		tok := l.publish([]byte("in flight"))
		l.flush()
		err := wait(t, tok)
		if err == nil || !strings.Contains(err.Error(), "unexpected packet from broker: 0x30") {
			t.Errorf("publish error %v; want the unexpected packet named", err)
		}
		recv(t, l.lost())
	})
}

// scriptedBroker accepts one connection, reads CONNECT, answers connack
// and hands the connection to the script.
type scriptedBroker struct {
	t       *testing.T
	ln      net.Listener
	addr    string
	connack []byte
	done    chan struct{} // closed at cleanup: scripts waiting on it return
}

func newScriptedBroker(t *testing.T) *scriptedBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sb := &scriptedBroker{t: t, ln: ln, addr: ln.Addr().String(), connack: []byte{pktConnack, 2, 0, 0}, done: make(chan struct{})}
	return sb
}

func (sb *scriptedBroker) serve(script func(c net.Conn)) {
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		c, err := sb.ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		cp, err := pahopackets.ReadPacket(c)
		if err != nil {
			sb.t.Error(err)
			return
		}
		if _, ok := cp.(*pahopackets.ConnectPacket); !ok {
			sb.t.Errorf("first packet %T; want CONNECT", cp)
			return
		}
		if _, err := c.Write(sb.connack); err != nil {
			return
		}
		script(c)
	}()
	sb.t.Cleanup(func() {
		close(sb.done)
		sb.ln.Close()
		<-finished
	})
}
