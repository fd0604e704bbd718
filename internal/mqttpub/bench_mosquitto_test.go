package mqttpub

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

// openNodeOutbox opens path with the node's default commit options (100
// ms window, 64-event batches, the crash bound), room for the backlog and
// what a concurrent writer adds.
func openNodeOutbox(b *testing.B, path string, n int) *outbox.Store {
	b.Helper()
	s, err := outbox.Open(outbox.Options{Path: path, MaxEvents: 2 * n, MaxBytes: 1 << 30})
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
func BenchmarkDrainMosquitto(b *testing.B) {
	addr := mosquittoAddr(b)
	for _, rate := range []int{0, 2000} {
		b.Run(fmt.Sprintf("writer=%d/s", rate), func(b *testing.B) {
			template := backlogFile(b)
			var events, cpu, wall, refused float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				path := filepath.Join(b.TempDir(), fmt.Sprintf("outbox-%d.db", i))
				copyFile(b, template, path)
				ob := openNodeOutbox(b, path, backlog)
				o := testOptions(addr, uniqueTopic(b))
				p := newPublisher(b, ob, o)
				b.StartTimer()

				cpu0 := cpuTime(b)
				begin := time.Now()
				stopWriter := startWriter(b, ob, rate)
				r := start(b, p)
				waitDeleted(b, ob, backlog)
				elapsed := time.Since(begin)
				deleted := ob.Stats().Deleted
				used := cpuTime(b) - cpu0
				refused += float64(stopWriter())
				b.StopTimer()

				r.stop(b)
				if err := ob.Close(); err != nil {
					b.Fatal(err)
				}
				events += float64(deleted)
				cpu += float64(used.Nanoseconds())
				wall += elapsed.Seconds()
				b.StartTimer()
			}
			b.ReportMetric(events/wall, "events/s")
			b.ReportMetric(cpu/events/1e3, "cpu-us/event")
			if rate > 0 {
				// Events the node would have dropped (the outbox's crash
				// bound refusing them while deletes slow its commits).
				b.ReportMetric(refused/float64(b.N), "dropped/op")
			}
		})
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
