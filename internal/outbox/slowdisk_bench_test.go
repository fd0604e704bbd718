package outbox

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BenchmarkSlowCommit measures what a slow disk costs: events arrive
// open-loop at a fixed rate (as requests end, whatever the disk does) while
// every commit takes at least `commit` longer than the disk needs (a
// beforeCommit hook that sleeps: an fsync queued behind other writes, or a
// disk with few write IOPS), and a consumer reads and deletes rows as the
// MQTT publisher does. b.N is the number of events; run it with a fixed
// count, such as -benchtime=3000x.
//
// Reported: dropped-% (events refused because the crash window was full),
// max-unsynced (the most events that were not yet on disk at once, what a
// kill -9 would have lost), max-age-ms (the age of the oldest of them) and
// events/commit.
//
// window=old is the crash window before it was configurable (256 events,
// commit interval + 1 s); window=default is DefaultMaxUnsynced and
// DefaultMaxUnsyncedAge.
func BenchmarkSlowCommit(b *testing.B) {
	windows := []struct {
		name   string
		events int
		age    time.Duration
	}{
		{"old", 256, DefaultCommitInterval + time.Second},
		{"default", 0, 0},
	}
	for _, w := range windows {
		for _, rate := range []int{1000, 1600} {
			for _, commit := range []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond} {
				name := fmt.Sprintf("window=%s/rate=%d/commit=+%v", w.name, rate, commit)
				b.Run(name, func(b *testing.B) {
					benchSlowCommit(b, rate, commit, Options{MaxUnsynced: w.events, MaxUnsyncedAge: w.age})
				})
			}
		}
	}
}

func benchSlowCommit(b *testing.B, rate int, commit time.Duration, o Options) {
	o.Path = filepath.Join(b.TempDir(), "outbox.db")
	h := hooks{beforeCommit: func() error {
		time.Sleep(commit) // the slow disk this benchmark models
		return nil
	}}
	s, err := open(o, h)
	if err != nil {
		b.Fatal(err)
	}
	p := bytes.Repeat([]byte("u"), 600)
	done := make(chan struct{})
	var consumer sync.WaitGroup
	consumer.Go(func() { consume(s, done) })

	var (
		maxUnsynced int
		maxAge      time.Duration
	)
	interval := time.Second / time.Duration(rate)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if ahead := time.Until(start.Add(time.Duration(i) * interval)); ahead > time.Millisecond {
			time.Sleep(ahead) // open loop: pace the arrivals, never wait for the outbox
		}
		s.Append(p)
		st := s.Stats()
		maxUnsynced = max(maxUnsynced, st.Unsynced)
		maxAge = max(maxAge, st.UnsyncedAge)
	}
	b.StopTimer()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	close(done)
	consumer.Wait()
	st := s.Stats()
	b.ReportMetric(100*float64(st.Dropped.Total())/float64(b.N), "dropped-%")
	b.ReportMetric(float64(maxUnsynced), "max-unsynced")
	b.ReportMetric(float64(maxAge.Milliseconds()), "max-age-ms")
	b.ReportMetric(float64(st.Committed)/float64(max(st.Commits, 1)), "events/commit")
}

// consume reads and deletes committed rows, as the publisher does after
// each PUBACK, until done is closed or the store is.
func consume(s *Store, done <-chan struct{}) {
	var after uint64
	for {
		recs, err := s.Read(after, 1024)
		if err != nil {
			return // closed
		}
		if len(recs) == 0 {
			select {
			case <-s.Notify():
				continue
			case <-done:
				return
			}
		}
		seqs := make([]uint64, len(recs))
		for i, r := range recs {
			seqs[i] = r.Seq
		}
		after = seqs[len(seqs)-1]
		if err := s.Delete(seqs...); err != nil {
			return
		}
	}
}
