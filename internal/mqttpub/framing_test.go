package mqttpub

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/google/go-cmp/cmp"
)

// TestWritePublishMatchesPaho holds the node's PUBLISH framing to paho's
// PublishPacket.Write, byte for byte, across the remaining length's
// boundaries (one to four bytes), and checks that paho reads it back.
func TestWritePublishMatchesPaho(t *testing.T) {
	topics := []string{"scootgate/usage", "t", strings.Repeat("é", 200)}
	// Remaining length = 2 + len(topic) + 2 + len(payload).
	var sizes []int
	for _, rest := range []int{127, 128, 16383, 16384, 2097151, 2097152} {
		sizes = append(sizes, rest-4-len(topics[0])) // the boundary with the default topic
	}
	sizes = append(sizes, 0, 1, 400)
	for _, topic := range topics {
		for _, size := range sizes {
			for _, id := range []uint16{1, 255, 256, 65535} {
				if size > 16384 && (id != 1 || topic != topics[0]) {
					continue // the other bytes do not depend on the size
				}
				payload := bytes.Repeat([]byte{'x'}, max(0, size))
				var got bytes.Buffer
				w := bufio.NewWriterSize(&got, writeBuffer)
				if err := writePublish(w, topic, id, payload); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				pub := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
				pub.Qos, pub.TopicName, pub.MessageID, pub.Payload = 1, topic, id, payload
				var want bytes.Buffer
				if err := pub.Write(&want); err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("topic %d bytes, payload %d, id %d", len(topic), len(payload), id)
				if !bytes.Equal(got.Bytes(), want.Bytes()) {
					n := min(16, got.Len(), want.Len())
					t.Fatalf("%s: %d bytes starting % x; paho writes %d starting % x", name, got.Len(), got.Bytes()[:n], want.Len(), want.Bytes()[:n])
				}
				pk, err := packets.ReadPacket(&got)
				if err != nil {
					t.Fatalf("%s: paho cannot read it: %v", name, err)
				}
				back, ok := pk.(*packets.PublishPacket)
				if !ok || back.Qos != 1 || back.Dup || back.Retain || back.TopicName != topic || back.MessageID != id || !bytes.Equal(back.Payload, payload) {
					t.Fatalf("%s: paho reads it back as %v", name, pk)
				}
			}
		}
	}
}

// TestReaderTakesEveryPacket runs a connection's reader over what a
// broker sends after CONNACK, one byte a read (every packet split across
// reads) and all at once: every PUBACK's identifier reaches takeAcks in
// order, a PINGRESP between them is read, and a packet the publisher
// never asks for ends the connection with ErrProtocol.
func TestReaderTakesEveryPacket(t *testing.T) {
	var stream bytes.Buffer
	var want []uint16
	for i, id := range []uint16{7, 513, 1, 65535, 1024} {
		if err := puback(id).Write(&stream); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
		if i == 2 {
			if err := packets.NewControlPacket(packets.Pingresp).Write(&stream); err != nil {
				t.Fatal(err)
			}
		}
	}
	good := stream.Len()
	if err := packets.NewControlPacket(packets.Pubrec).Write(&stream); err != nil {
		t.Fatal(err)
	}
	for _, split := range []bool{true, false} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			for _, n := range []int{good, stream.Len()} {
				client, broker := net.Pipe()
				l := &conn{nc: client, br: bufio.NewReaderSize(iotestReader(client, split), readBuffer), acked: make(chan struct{}, 1), dead: make(chan struct{}), wait: newAckWait(nil)}
				go l.read()
				go func() {
					_, _ = broker.Write(stream.Bytes()[:n])
					if n == good {
						broker.Close()
					}
				}()
				<-l.dead
				broker.Close()
				if diff := cmp.Diff(l.takeAcks(nil), want); diff != "" {
					t.Errorf("%d bytes: PUBACK identifiers (-got +want):\n%s", n, diff)
				}
				if gotProto := strings.Contains(fmt.Sprint(l.err()), "unexpected PUBREC"); gotProto != (n > good) {
					t.Errorf("%d bytes: the reader ended with %v", n, l.err())
				}
			}
		})
	}
}

// iotestReader reads r one byte a read when split is set.
func iotestReader(r net.Conn, split bool) io.Reader {
	if split {
		return iotest.OneByteReader(r)
	}
	return r
}

// TestFramingAllocatesNothing: a publish written and a PUBACK read cost no
// allocation (paho's packets package: 5 and 6).
func TestFramingAllocatesNothing(t *testing.T) {
	payload := payloads("framing", 1, 400)[0]
	bw := bufio.NewWriterSize(io.Discard, writeBuffer)
	var one bytes.Buffer
	if err := puback(7).Write(&one); err != nil {
		t.Fatal(err)
	}
	burst := bytes.Repeat(one.Bytes(), readBuffer/pubackSize)
	r := bytes.NewReader(burst)
	l := &conn{br: bufio.NewReaderSize(r, readBuffer), wait: newAckWait(nil)}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := writePublish(bw, DefaultTopic, 7, payload); err != nil {
			t.Fatal(err)
		}
		if l.br.Buffered() == 0 {
			r.Reset(burst)
		}
		if id, ok, err := l.readPuback(); err != nil || !ok || id != 7 {
			t.Fatalf("readPuback = %d, %v, %v", id, ok, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations a publish and its PUBACK; want 0", allocs)
	}
}
