package mqttpub

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// BenchmarkFraming is what paho's packets package costs a usage event:
// one PUBLISH written the way conn.publish writes it (one reused
// PublishPacket, into the write buffer) and one PUBACK read the way the
// reader reads it (packets.ReadPacket on the read buffer). Its allocations
// are the floor of the delivery's own: the package builds each packet in
// fresh bytes.Buffers and reads each field into a fresh slice.
func BenchmarkFraming(b *testing.B) {
	payload := payloads("framing", 1, 400)[0]
	b.Run("publish", func(b *testing.B) {
		bw := bufio.NewWriterSize(io.Discard, writeBuffer)
		pub := packets.PublishPacket{
			FixedHeader: packets.FixedHeader{MessageType: packets.Publish, Qos: 1},
			TopicName:   "scootgate/usage",
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			pub.MessageID, pub.Payload = uint16(i%1024+1), payload
			if err := pub.Write(bw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("puback", func(b *testing.B) {
		var one bytes.Buffer
		if err := puback(7).Write(&one); err != nil {
			b.Fatal(err)
		}
		burst := bytes.Repeat(one.Bytes(), readBuffer/pubackSize)
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
