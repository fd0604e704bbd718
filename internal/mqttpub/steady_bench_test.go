package mqttpub

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkSteadyDelivery is the publisher alone at a node's steady
// rates, against the real Mosquitto (out of process, so the CPU counted is
// the publisher's): an in-memory outbox receives the events due every
// 10 ms (as group commits bring them) and signals Notify; the publisher
// publishes each with QoS 1 and deletes it after its PUBACK. Each
// iteration paces the same ticks once without events ("idle") and once
// with them; cpu-us/event, allocs/event and switches/event are the
// difference, per event: the delivery's own cost, without the outbox's
// commits and fsyncs that BenchmarkEventLife also counts. It uses only
// what the package's tests had before the publisher owned its connection,
// so that one file measures both.
func BenchmarkSteadyDelivery(b *testing.B) {
	addr := mosquittoAddr(b)
	for _, rate := range []int{500, 2000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			events := 2 * rate
			pl := payloads("steady", events, 400)
			src := newFakeSource()
			p := newPublisher(b, src, testOptions(addr, uniqueTopic(b)))
			start(b, p)
			eventually(b, "connected", func() bool { return p.Stats().Connected })
			steadyPace(src, pl[:rate/2], rate) // warm-up
			eventually(b, "warm-up delivered", func() bool { return src.pending() == 0 })
			var cpu, allocs, sw [2]float64 // idle, with events
			for b.Loop() {
				for k, batch := range [][][]byte{nil, pl} {
					runtime.GC()
					c0, m0, s0 := cpuTime(b), mallocCount(), switches(b)
					steadyPace(src, batch, rate)
					eventually(b, "delivered", func() bool { return src.pending() == 0 })
					cpu[k] += float64((cpuTime(b) - c0).Nanoseconds())
					allocs[k] += float64(mallocCount() - m0)
					sw[k] += float64(switches(b) - s0)
				}
			}
			n := float64(b.N * events)
			b.ReportMetric((cpu[1]-cpu[0])/n/1e3, "cpu-us/event")
			b.ReportMetric((allocs[1]-allocs[0])/n, "allocs/event")
			b.ReportMetric((sw[1]-sw[0])/n, "switches/event")
		})
	}
}

// steadyPace adds the events of batch due every 10 ms at rate to src
// (for nil, paces the same ticks without events).
func steadyPace(src *fakeSource, batch [][]byte, rate int) {
	events := 2 * rate
	if batch != nil {
		events = len(batch)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	begin := time.Now()
	for sent := 0; sent < events; {
		now := <-tick.C
		due := min(events, int(now.Sub(begin).Seconds()*float64(rate)))
		if batch != nil && due > sent {
			src.add(batch[sent:due]...)
		}
		sent = due
	}
}
