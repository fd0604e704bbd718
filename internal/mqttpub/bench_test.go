package mqttpub

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Benchmarks of end-to-end delivery against the embedded broker on
// loopback: from the outbox Read to PUBACK and Delete, reported as
// events/s. Payloads are 400 bytes, about a usage event.

// BenchmarkDrainFakeSource: an in-memory outbox prefilled with b.N rows.
func BenchmarkDrainFakeSource(b *testing.B) {
	for _, window := range []int{64, 256} {
		b.Run(windowName(window), func(b *testing.B) {
			addr, _ := startMochiWith(b, "127.0.0.1:0", &allowHook{}, nil)
			src := newFakeSource()
			src.add(payloads("bench", b.N, 400)...)
			o := testOptions(addr, "bench/usage")
			o.Window = window
			p := newPublisher(b, src, o)
			b.ResetTimer()
			begin := time.Now()
			r := start(b, p)
			eventually(b, "drained", func() bool { return src.pending() == 0 })
			elapsed := time.Since(begin)
			b.StopTimer()
			r.stop(b)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(b.N)/float64(src.deleteCalls()), "rows/delete")
		})
	}
}

// BenchmarkDrainOutbox: the real bbolt outbox prefilled with b.N committed
// rows; done when every delete is committed to disk (Depth 0).
func BenchmarkDrainOutbox(b *testing.B) {
	addr, _ := startMochiWith(b, "127.0.0.1:0", &allowHook{}, nil)
	ob := openOutbox(b, filepath.Join(b.TempDir(), "outbox.db"), b.N+1)
	appendAll(b, ob, payloads("bench", b.N, 400))
	p := newPublisher(b, ob, testOptions(addr, "bench/usage"))
	b.ResetTimer()
	begin := time.Now()
	r := start(b, p)
	eventually(b, "drained", func() bool { return ob.Stats().Depth == 0 })
	elapsed := time.Since(begin)
	b.StopTimer()
	r.stop(b)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// BenchmarkAppendToAck: events appended to the real outbox as fast as it
// accepts them while the publisher drains it; from the first Append to the
// last row deleted on disk.
func BenchmarkAppendToAck(b *testing.B) {
	addr, _ := startMochiWith(b, "127.0.0.1:0", &allowHook{}, nil)
	ob := openOutbox(b, filepath.Join(b.TempDir(), "outbox.db"), b.N+1)
	events := payloads("bench", b.N, 400)
	p := newPublisher(b, ob, testOptions(addr, "bench/usage"))
	r := start(b, p)
	eventually(b, "connected", func() bool { return p.Stats().Connected })
	b.ResetTimer()
	begin := time.Now()
	appendAll(b, ob, events)
	eventually(b, "drained", func() bool { return p.Stats().Acked == uint64(b.N) && ob.Stats().Depth == 0 })
	elapsed := time.Since(begin)
	b.StopTimer()
	r.stop(b)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// allowHook admits every client and records nothing (ackHook's bookkeeping
// would dominate a benchmark).
type allowHook struct{ mqtt.HookBase }

func (h *allowHook) ID() string { return "allow" }
func (h *allowHook) Provides(b byte) bool {
	return b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck
}
func (h *allowHook) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }
func (h *allowHook) OnACLCheck(*mqtt.Client, string, bool) bool              { return true }

func windowName(w int) string { return fmt.Sprintf("window=%d", w) }
