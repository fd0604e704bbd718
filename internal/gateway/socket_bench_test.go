package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkSocketEvents is what a socket pays per relayed event beyond the
// frame write: reading the event's type and data out of the SSE bytes the
// relay writes, and telling an in-band error apart.
func BenchmarkSocketEvents(b *testing.B) {
	var sb strings.Builder
	for i := range 20 {
		fmt.Fprintf(&sb, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"word \"}\n\n", i)
	}
	stream := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		n := 0
		for typ, data := range eventData(stream) {
			if streamError(typ, data) {
				b.Fatal("not an error")
			}
			n += len(data)
		}
		if n == 0 {
			b.Fatal("no data")
		}
	}
}
