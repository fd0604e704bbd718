package mqttpub

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/outbox"
)

// Benchmarks against the real Mosquitto (scripts/ci-mosquitto.sh), the
// broker production runs. They skip loudly without SCOOTGATE_MOSQUITTO_ADDR
// and fail with SCOOTGATE_REQUIRE_DAEMONS=1. cpu-us/event is this
// process's CPU (publisher, outbox, a concurrent writer if any), not the
// broker's: the cost a node pays for delivery.
//
//	eval "$(cat /tmp/mosq.env)"   # or scripts/ci-mosquitto.sh
//	go test -run '^$' -bench 'Mosquitto' -benchtime 1x -count 6 ./internal/mqttpub

// backlog is the outbox depth BenchmarkDrainMosquitto drains: the default
// usage.max_events, a node that was away from its broker long enough to
// fill its outbox.
const backlog = 100_000

// mosquittoAddr is the real broker's address, or skips (fails when daemons
// are required).
func mosquittoAddr(b *testing.B) string {
	b.Helper()
	addr := os.Getenv("SCOOTGATE_MOSQUITTO_ADDR")
	if addr == "" {
		if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
			b.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but SCOOTGATE_MOSQUITTO_ADDR is unset; run scripts/ci-mosquitto.sh")
		}
		b.Skip("SKIPPED: real Mosquitto not configured; set SCOOTGATE_MOSQUITTO_ADDR (scripts/ci-mosquitto.sh) to run this against it")
	}
	return addr
}

// fillOutbox writes n rows to a fresh outbox file at path and closes it,
// committing in large batches so that filling takes a second, not the
// ~1600 commits of 64 events each a node would have made.
func fillOutbox(b *testing.B, path string, n int) {
	b.Helper()
	s, err := outbox.Open(outbox.Options{Path: path, MaxEvents: 2 * n, MaxBytes: 1 << 30,
		MaxBatch: 8192, MaxUnsynced: 1 << 20, MaxUnsyncedAge: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range payloads("backlog", n, 400) {
		if !s.Append(p) {
			b.Fatal("fill: append refused")
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

// backlogTemplate is a filled outbox file shared by every run of the
// benchmark in this process and copied for each iteration, so that a CPU
// profile shows the drain, not the fill.
var backlogTemplate struct {
	once sync.Once
	dir  string
	err  error
}

func backlogFile(b *testing.B) string {
	b.Helper()
	t := &backlogTemplate
	t.once.Do(func() {
		t.dir, t.err = os.MkdirTemp("", "scootgate-backlog-")
		if t.err == nil {
			fillOutbox(b, filepath.Join(t.dir, "backlog.db"), backlog)
		}
	})
	if t.err != nil {
		b.Fatal(t.err)
	}
	return filepath.Join(t.dir, "backlog.db")
}

// openNodeOutbox opens path with the node's commit options (100 ms
// window, the crash bound) and a commit starting as soon as maxBatch
// events wait, as the node sets it for its publisher's framing
// (CommitBatch); with room for the backlog and what a concurrent writer
// adds.
func openNodeOutbox(b *testing.B, path string, n, maxBatch int) *outbox.Store {
	b.Helper()
	s, err := outbox.Open(outbox.Options{Path: path, MaxEvents: 2 * n, MaxBytes: 1 << 30, MaxBatch: maxBatch})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkDrainMosquitto drains a backlog of 100k committed 400-byte
// events from the real bbolt outbox to the real Mosquitto, from Run to
// the last delete committed to disk. "writer=2000/s" appends new events
// at 2000/s meanwhile, as a node serving traffic does (they queue behind
// the backlog; the timed region ends when the backlog's rows are deleted
// on disk, counting every row deleted by then).
//
// Each iteration drains once per variant, rotating the order, so that
// the variants share the machine's state: "single-64" and "single-1024"
// are the publisher with a window of 64 and of 1024 publishes in flight, one event a message; "batch-100" the
// default window with up to 100 events a message ([mqtt] batch_max) and
// the outbox committing as the node makes it for that framing. CPU per
// event is all of delivery: reading the rows, publishing, the PUBACKs,
// and the deletes' commits (with the writer, its appends too). Metrics are per variant: events/s, this
// process's CPU per event, socket writes and reads per event, and the
// appends the outbox refused (events the node would have dropped).
func BenchmarkDrainMosquitto(b *testing.B) {
	addr := mosquittoAddr(b)
	clients := []string{"single-64", "single-1024", "batch-100"}
	for _, rate := range []int{0, 2000} {
		b.Run(fmt.Sprintf("writer=%d/s", rate), func(b *testing.B) {
			template := backlogFile(b)
			type totals struct{ events, cpu, wall, refused, writes, reads float64 }
			sum := map[string]*totals{}
			for _, c := range clients {
				sum[c] = &totals{}
			}
			for i := 0; i < b.N; i++ {
				for k := range clients {
					client := clients[(k+i)%len(clients)] // rotate which goes first
					t := sum[client]
					b.StopTimer()
					path := filepath.Join(b.TempDir(), fmt.Sprintf("outbox-%d-%s.db", i, client))
					copyFile(b, template, path)
					o := testOptions(addr, uniqueTopic(b))
					if n, ok := strings.CutPrefix(client, "batch-"); ok {
						o.BatchMax, _ = strconv.Atoi(n)
					} else {
						o.Window, _ = strconv.Atoi(strings.TrimPrefix(client, "single-"))
					}
					ob := openNodeOutbox(b, path, backlog, CommitBatch(o.BatchMax, outbox.DefaultMaxUnsynced))
					p := newPublisher(b, ob, o)
					var reads, writes atomic.Int64
					countWith(b, p, &reads, &writes)
					// Each variant pays for its own garbage only: without
					// this, what the one-event-a-message variants left
					// was collected in the next variant's timed run.
					runtime.GC()
					b.StartTimer()

					cpu0 := cpuTime(b)
					begin := time.Now()
					stopWriter := startWriter(b, ob, rate)
					r := start(b, p)
					waitDeleted(b, ob, backlog)
					elapsed := time.Since(begin)
					deleted := ob.Stats().Deleted
					used := cpuTime(b) - cpu0
					t.refused += float64(stopWriter())
					b.StopTimer()

					r.stop(b)
					if err := ob.Close(); err != nil {
						b.Fatal(err)
					}
					t.events += float64(deleted)
					t.cpu += float64(used.Nanoseconds())
					t.wall += elapsed.Seconds()
					t.writes += float64(writes.Load())
					t.reads += float64(reads.Load())
					b.StartTimer()
				}
			}
			for _, c := range clients {
				t := sum[c]
				b.ReportMetric(t.events/t.wall, c+"-events/s")
				b.ReportMetric(t.cpu/t.events/1e3, c+"-cpu-us/event")
				b.ReportMetric(t.writes/t.events, c+"-writes/event")
				b.ReportMetric(t.reads/t.events, c+"-reads/event")
				if rate > 0 {
					b.ReportMetric(t.refused/float64(b.N), c+"-dropped/op")
				}
			}
		})
	}
}

// countWith makes p count socket reads and writes.
func countWith(b *testing.B, p *Publisher, reads, writes *atomic.Int64) {
	b.Helper()
	lc, err := check(&p.o)
	if err != nil {
		b.Fatal(err)
	}
	lc.wrap = func(c net.Conn) net.Conn {
		return &countingConn{Conn: c, reads: reads, writes: writes}
	}
	p.connect = func(ctx context.Context) (link, error) {
		l, err := dialLink(ctx, lc)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// waitDeleted waits until n rows are deleted on disk. It polls: the
// publisher consumes the outbox's Notify.
func waitDeleted(b *testing.B, s *outbox.Store, n int) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for s.Stats().Deleted < uint64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("drain: %d of %d rows deleted after 10 minutes", s.Stats().Deleted, n)
		}
		<-tick.C
	}
}

// startWriter appends 400-byte events to s at about rate per second (in
// bursts every millisecond) until the returned stop is called; rate 0
// starts nothing. stop returns the appends refused: usage events the
// node would have dropped.
func startWriter(b *testing.B, s *outbox.Store, rate int) (stop func() int) {
	if rate == 0 {
		return func() int { return 0 }
	}
	ps := payloads("live", 4096, 400)
	quit := make(chan struct{})
	var (
		wg      sync.WaitGroup
		refused int
	)
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		begin := time.Now()
		sent := 0
		for {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				due := int(now.Sub(begin).Seconds() * float64(rate))
				for ; sent < due; sent++ {
					if !s.Append(ps[sent%len(ps)]) {
						refused++
					}
				}
			}
		}
	})
	return func() int { close(quit); wg.Wait(); return refused }
}

func copyFile(b *testing.B, from, to string) {
	b.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUsageSteady is a node serving 2000 requests/s: one 400-byte
// usage event per request appended to an empty outbox (the node's commit
// options for each framing, CommitBatch), for 5 s per iteration, with the
// publisher connected to the real Mosquitto ("paho": one message per
// event; "batch": batched, at most benchBatchMax events a message) or to
// a closed port ("down", "batch-down": the broker unreachable, the
// outbox absorbing every event). cpu-us/event is this process's CPU per
// event while the events are appended (the wait for the last PUBACKs
// after them is not counted); what delivery costs is a connected
// variant less its own "down" (attached-cpu-us/event); batch-cpu-us/event
// is all of it, the benchmark's own appender included. The variants
// alternate within each iteration. All reconnect with the node's default
// backoff, so the "down" variants try their broker a few times per run,
// as a node would (dials/run); the benchmark fails if they try more often.
func BenchmarkUsageSteady(b *testing.B) { usageSteady(b, 2000, 10_000) }

// BenchmarkUsageSteady500 is BenchmarkUsageSteady at 500 requests/s for
// 2 s per variant: the load harness's rate, where a drain cycle (a
// commit's Notify, a Read, the publishes, their PUBACKs, the deletes)
// carries about 50 events, so its fixed cost shows. allocs/event counts
// every allocation in the process (the broker is out of process).
func BenchmarkUsageSteady500(b *testing.B) { usageSteady(b, 500, 1000) }

// benchBatchMax is the "batch" variant's [mqtt] batch_max.
const benchBatchMax = 100

func usageSteady(b *testing.B, rate, events int) {
	addr := mosquittoAddr(b)
	// "down" and "batch-down" are the two framings' nodes with the broker
	// unreachable: each commits as its framing makes the node commit
	// (CommitBatch), so a connected variant less its own "down" is what
	// delivery costs.
	variants := []string{"paho", "batch", "down", "batch-down"}
	msgs := map[string]float64{}
	cpu := map[string]float64{}
	mallocs := map[string]float64{}
	dropped := map[string]float64{}
	sockReads, sockWrites := map[string]float64{}, map[string]float64{}
	csw, dials := map[string]float64{}, map[string]float64{}
	for i := 0; i < b.N; i++ {
		for k := range variants {
			v := variants[(k+i)%len(variants)] // rotate which goes first
			b.StopTimer()
			var ob *outbox.Store
			labeled(v, func() {
				batchMax := DefaultBatchMax
				if strings.HasPrefix(v, "batch") {
					batchMax = benchBatchMax
				}
				ob = openNodeOutbox(b, filepath.Join(b.TempDir(), fmt.Sprintf("steady-%d-%s.db", i, v)), events, CommitBatch(batchMax, outbox.DefaultMaxUnsynced))
			})
			broker := addr
			if strings.HasSuffix(v, "down") {
				broker = closedPort(b)
			}
			o := testOptions(broker, uniqueTopic(b))
			// The node's reconnect backoff, not the tests' 1–20 ms: with
			// those, "down" redials ~100 times a second, and that work,
			// counted in its CPU, hid the broker's cost.
			o.BackoffMin, o.BackoffMax = DefaultBackoffMin, DefaultBackoffMax
			if strings.HasPrefix(v, "batch") {
				o.BatchMax = benchBatchMax
			}
			p := newPublisher(b, ob, o)
			var reads, writes atomic.Int64
			countWith(b, p, &reads, &writes)
			var r *runner
			labeled(v, func() { r = start(b, p) })
			down := strings.HasSuffix(v, "down")
			if !down {
				eventually(b, "connected", func() bool { return p.Stats().Connected })
			}
			runtime.GC() // each variant pays for its own garbage only
			b.StartTimer()

			cpu0, m0, sw0 := cpuTime(b), mallocCount(), switches(b)
			refused := appendAt(b, ob, rate, events)
			// The counts end with the appends: what the process spends
			// while it serves. The wait for the last PUBACKs is left out;
			// it polls, and its wakeups are the benchmark's own.
			cpu[v] += float64((cpuTime(b) - cpu0).Nanoseconds())
			csw[v] += float64(switches(b) - sw0)
			mallocs[v] += float64(mallocCount() - m0)
			sockReads[v] += float64(reads.Load())
			sockWrites[v] += float64(writes.Load())
			dropped[v] += float64(refused)
			st := p.Stats()
			attempts := st.ConnectFailures + st.Reconnects
			if !down {
				attempts++ // the first connection
			}
			// A node whose broker is away tries about once a second
			// after the first few; more means the baseline does work
			// the node does not.
			if most := 4 + uint64(events/rate); attempts > most {
				b.Fatalf("%s: %d connection attempts in a %d s run, want at most %d", v, attempts, events/rate, most)
			}
			dials[v] += float64(attempts)
			msgs[v] += float64(st.Published)
			if !down {
				eventually(b, "every event acknowledged", func() bool { return p.Stats().Acked >= uint64(events-refused) })
			}
			b.StopTimer()
			r.stop(b)
			if err := ob.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	n := float64(b.N * events)
	for _, v := range variants {
		b.ReportMetric(cpu[v]/n/1e3, v+"-cpu-us/event")
		b.ReportMetric(mallocs[v]/n, v+"-allocs/event")
		b.ReportMetric(dials[v]/float64(b.N), v+"-dials/run")
		if !strings.HasSuffix(v, "down") {
			b.ReportMetric(msgs[v]/n, v+"-msgs/event")
		}
		if dropped[v] > 0 {
			b.ReportMetric(dropped[v]/float64(b.N), v+"-dropped/op")
		}
	}
	// The broker connection's own system calls: what a drain cycle's
	// wakeups are made of.
	b.ReportMetric(sockReads["paho"]/n, "paho-sock-reads/event")
	b.ReportMetric(sockWrites["paho"]/n, "paho-sock-writes/event")
	b.ReportMetric((csw["paho"]-csw["down"])/n, "paho-attached-switches/event")
	b.ReportMetric((cpu["paho"]-cpu["down"])/n/1e3, "paho-attached-cpu-us/event")
	b.ReportMetric((mallocs["paho"]-mallocs["down"])/n, "paho-attached-allocs/event")
	b.ReportMetric((cpu["batch"]-cpu["batch-down"])/n/1e3, "batch-attached-cpu-us/event")
}

// labeled runs f with the pprof label variant=v, which the goroutines it
// starts (the outbox's writer, the publisher and paho's) inherit: with
// -cpuprofile, `go tool pprof -tagfocus variant=paho` shows what delivery
// spends, apart from the benchmark's own appender.
func labeled(v string, f func()) {
	pprof.Do(context.Background(), pprof.Labels("variant", v), func(context.Context) { f() })
}

// mallocCount is the number of heap allocations made by the process so far.
func mallocCount() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// appendAt appends n 400-byte events to s at rate per second and returns
// after the last, with the number the outbox refused (the crash bound,
// when the disk falls behind).
func appendAt(b *testing.B, s *outbox.Store, rate, n int) (refused int) {
	b.Helper()
	ps := payloads("steady", 4096, 400)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	begin := time.Now()
	for sent := 0; sent < n; {
		now := <-tick.C
		due := min(n, int(now.Sub(begin).Seconds()*float64(rate)))
		for ; sent < due; sent++ {
			if !s.Append(ps[sent%len(ps)]) {
				refused++
			}
		}
	}
	return refused
}

// closedPort is a loopback address nothing listens on.
func closedPort(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// BenchmarkUsageSteady200 is BenchmarkUsageSteady500 at the harness's
// 200 streams/s: a drain cycle carries ~20 events, so its fixed cost
// weighs 2.5 times as much per event.
func BenchmarkUsageSteady200(b *testing.B) { usageSteady(b, 200, 1000) }
