package mqttpub

import (
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"syscall"
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

// BenchmarkDrainConn: BenchmarkDrainFakeSource with the socket calls
// counted. reads/event and writes/event count Read and Write calls on the
// TCP socket: a Write is one write(2) unless the kernel takes only part
// of it; a Read is one read(2) that returned data (Go's netpoller adds an
// EAGAIN read(2) before each wait).
func BenchmarkDrainConn(b *testing.B) {
	// window=1: one publish at a time, nothing to coalesce.
	for _, window := range []int{1, 64, 256} {
		b.Run(windowName(window), func(b *testing.B) {
			addr, _ := startMochiWith(b, "127.0.0.1:0", &allowHook{}, nil)
			src := newFakeSource()
			src.add(payloads("bench", b.N, 400)...)
			o := testOptions(addr, "bench/usage")
			o.Window = window
			p := newPublisher(b, src, o)
			var reads, writes atomic.Int64
			countWith(b, p, &reads, &writes)
			b.ResetTimer()
			cpu0 := cpuTime(b)
			begin := time.Now()
			r := start(b, p)
			eventually(b, "drained", func() bool { return src.pending() == 0 })
			elapsed := time.Since(begin)
			cpu := cpuTime(b) - cpu0
			b.StopTimer()
			r.stop(b)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/event")
			b.ReportMetric(float64(reads.Load())/float64(b.N), "reads/event")
			b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/event")
		})
	}
}

// cpuTime is the user and system CPU time of the process so far: the
// publisher and the embedded broker, whose TCP receive path a loopback
// write also runs.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// switches is the process's context switches so far (voluntary and
// involuntary): how often its threads slept and were woken.
func switches(b *testing.B) int64 {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Nvcsw + ru.Nivcsw
}

// countingConn counts the Read and Write calls on a socket.
type countingConn struct {
	net.Conn
	reads, writes *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(b)
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
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
