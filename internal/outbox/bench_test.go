package outbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAppend measures sustained throughput with group commit: parallel
// appenders, 300-byte payloads, default options (100ms window, 1024 events per
// batch). An appender whose event is dropped because the writer is behind
// yields and tries again, so the rate measured is the writer's, to disk:
// the timed region ends when Close has committed every event. Reported:
// events/s, fsyncs/s (one per commit transaction), events per fsync.
//
// "deliver" adds a consumer that reads and deletes rows as the MQTT
// publisher does after each PUBACK, so the file stays small (steady state);
// without it the file grows by every event (an outage).
func BenchmarkAppend(b *testing.B) {
	for _, deliver := range []bool{false, true} {
		for _, par := range []int{1, 8} {
			name := fmt.Sprintf("appenders=%dxGOMAXPROCS", par)
			if deliver {
				name += "/deliver"
			}
			b.Run(name, func(b *testing.B) { benchAppend(b, par, deliver) })
		}
	}
}

func benchAppend(b *testing.B, par int, deliver bool) {
	s, err := Open(Options{
		Path:      filepath.Join(b.TempDir(), "outbox.db"),
		MaxEvents: 1 << 30,
		MaxBytes:  1 << 40,
	})
	if err != nil {
		b.Fatal(err)
	}
	p := bytes.Repeat([]byte("u"), 300)
	var (
		retries  atomic.Uint64
		consumer sync.WaitGroup
	)
	b.ReportAllocs()
	b.SetParallelism(par)
	start := time.Now()
	b.ResetTimer()
	if deliver {
		consumer.Go(func() {
			var after uint64
			for n := 0; n < b.N; {
				recs, err := s.Read(after, 1024)
				if err != nil {
					b.Error(err)
					return
				}
				if len(recs) == 0 {
					<-s.Notify()
					continue
				}
				seqs := make([]uint64, len(recs))
				for i, r := range recs {
					seqs[i] = r.Seq
				}
				after = seqs[len(seqs)-1]
				n += len(recs)
				if err := s.Delete(seqs...); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			for !s.Append(p) {
				retries.Add(1)
				runtime.Gosched()
			}
		}
	})
	consumer.Wait()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	elapsed := time.Since(start).Seconds()
	st := s.Stats()
	if st.Committed != uint64(b.N) {
		b.Fatalf("committed %d of %d events", st.Committed, b.N)
	}
	if deliver && st.Deleted != uint64(b.N) {
		b.Fatalf("deleted %d of %d events", st.Deleted, b.N)
	}
	b.ReportMetric(float64(st.Committed)/elapsed, "events/s")
	b.ReportMetric(float64(st.Commits)/elapsed, "fsyncs/s")
	b.ReportMetric(float64(st.Committed)/float64(max(st.Commits, 1)), "events/fsync")
	b.ReportMetric(float64(retries.Load())/float64(b.N), "retries/op")
}

// BenchmarkDrainBacklog is the outbox's share of delivering a backlog: a
// file of 100k committed 400-byte rows, reopened with the default
// options, read and deleted as the MQTT publisher does with a window of
// 64 publishes in flight, until Close has committed the last delete.
// acks=N: the PUBACKs arrive N at a time; the publisher deletes those
// rows and reads N more (acks=1 is a publisher woken at every PUBACK). No
// network: cpu-us/row is the outbox's own cost per delivered row (reads,
// delete bookkeeping, the delete commits).
func BenchmarkDrainBacklog(b *testing.B) {
	for _, acks := range []int{1, 64} {
		b.Run(fmt.Sprintf("acks=%d", acks), func(b *testing.B) { benchDrainBacklog(b, acks) })
	}
}

func benchDrainBacklog(b *testing.B, acks int) {
	const rows, window = 100_000, 64
	template := filepath.Join(b.TempDir(), "backlog.db")
	fill, err := Open(Options{Path: template, MaxEvents: 2 * rows, MaxBytes: 1 << 30,
		MaxBatch: 8192, MaxUnsynced: 1 << 20, MaxUnsyncedAge: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	p := bytes.Repeat([]byte("u"), 400)
	for range rows {
		if !fill.Append(p) {
			b.Fatal("fill: append refused")
		}
	}
	if err := fill.Close(); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(template)
	if err != nil {
		b.Fatal(err)
	}
	var cpu, wall time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), fmt.Sprintf("drain-%d.db", i))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			b.Fatal(err)
		}
		s, err := Open(Options{Path: path, MaxEvents: 2 * rows, MaxBytes: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpu0, begin := cpuTime(), time.Now()
		var (
			after    uint64
			inflight []uint64 // read, not yet "acknowledged"
		)
		for {
			recs, err := s.Read(after, window-len(inflight))
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range recs {
				inflight = append(inflight, r.Seq)
				after = r.Seq
			}
			if len(inflight) == 0 {
				break
			}
			n := min(acks, len(inflight))
			if err := s.Delete(inflight[:n]...); err != nil {
				b.Fatal(err)
			}
			inflight = inflight[n:]
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - cpu0
		wall += time.Since(begin)
		if st := s.Stats(); st.Deleted != rows {
			b.Fatalf("deleted %d of %d rows", st.Deleted, rows)
		}
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N*rows), "cpu-us/row")
	b.ReportMetric(float64(b.N*rows)/wall.Seconds(), "rows/s")
}
