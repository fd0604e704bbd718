package mqttpub

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// BenchmarkFraming is what framing costs a usage event: one PUBLISH
// written the way conn.publish writes it (writePublish, into the write
// buffer) and one PUBACK read the way the reader reads it (readPuback on
// the read buffer); and, for comparison, the same with paho's packets
// package, which builds each packet in fresh bytes.Buffers and reads each
// field into a fresh slice (5 and 6 allocations).
func BenchmarkFraming(b *testing.B) {
	payload := payloads("framing", 1, 400)[0]
	b.Run("publish", func(b *testing.B) {
		bw := bufio.NewWriterSize(io.Discard, writeBuffer)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := writePublish(bw, DefaultTopic, uint16(i%1024+1), payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("publish/paho", func(b *testing.B) {
		bw := bufio.NewWriterSize(io.Discard, writeBuffer)
		pub := packets.PublishPacket{
			FixedHeader: packets.FixedHeader{MessageType: packets.Publish, Qos: 1},
			TopicName:   DefaultTopic,
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			pub.MessageID, pub.Payload = uint16(i%1024+1), payload
			if err := pub.Write(bw); err != nil {
				b.Fatal(err)
			}
		}
	})
	var one bytes.Buffer
	if err := puback(7).Write(&one); err != nil {
		b.Fatal(err)
	}
	burst := bytes.Repeat(one.Bytes(), readBuffer/pubackSize)
	b.Run("puback", func(b *testing.B) {
		r := bytes.NewReader(burst)
		l := &conn{br: bufio.NewReaderSize(r, readBuffer), wait: newAckWait(nil)}
		b.ReportAllocs()
		for b.Loop() {
			if l.br.Buffered() == 0 {
				r.Reset(burst)
			}
			if _, ok, err := l.readPuback(); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("puback/paho", func(b *testing.B) {
		r := bytes.NewReader(burst)
		br := bufio.NewReaderSize(r, readBuffer)
		b.ReportAllocs()
		for b.Loop() {
			if br.Buffered() == 0 {
				r.Reset(burst)
			}
			if _, err := packets.ReadPacket(br); err != nil {
				b.Fatal(err)
			}
		}
	})
}
