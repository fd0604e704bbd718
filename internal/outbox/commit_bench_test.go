package outbox

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCommitSmall is one group commit as the node makes it at a few
// hundred requests per second: 12 new events and the deletes of the 12
// delivered before them. It reports the CPU time (user + system) each
// commit costs the process, which is what the load harness charges to
// requests; wall time is mostly the disk's fdatasync.
func BenchmarkCommitSmall(b *testing.B) {
	s, err := Open(Options{Path: filepath.Join(b.TempDir(), "outbox.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const perCommit = 12
	payload := bytes.Repeat([]byte("u"), 600)
	batch := make([]item, perCommit)
	next := uint64(1)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		for i := range batch {
			val := make([]byte, timeLen+len(payload))
			binary.BigEndian.PutUint64(val, uint64(time.Now().UnixNano()))
			copy(val[timeLen:], payload)
			batch[i] = item{val: val}
		}
		s.mu.Lock()
		s.resRows += perCommit
		if next > perCommit {
			for q := next - perCommit; q < next; q++ {
				s.pending = append(s.pending, q)
			}
		}
		s.mu.Unlock()
		if _, err := s.commitOnce(batch); err != nil {
			b.Fatal(err)
		}
		next += perCommit
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkCommitPaced is the outbox as the load harness's node uses it:
// 500 events a second, so a commit every CommitInterval (100 ms) carries
// about 50 events and the deletes of the 50 before, the process idle in
// between. It reports the CPU each commit and each event cost the
// process, less what the pacing loop costs alone in the same iteration.
// Run with -cpu 1 for the node's GOMAXPROCS under the harness: there an
// isolated commit costs several times BenchmarkCommitSmall's back-to-back
// commit, in the runtime's and the kernel's work around its two blocking
// fdatasync calls (docs/performance.md "Known limits of the machine").
func BenchmarkCommitPaced(b *testing.B) {
	const rate, ticks = 500, 200 // 2 s per iteration, 5 events per 10 ms tick
	payload := bytes.Repeat([]byte("u"), 400)
	s, err := Open(Options{Path: filepath.Join(b.TempDir(), "outbox.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var next uint64 = 1
	pace := func(s *Store) time.Duration {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		cpu0 := cpuTime()
		for range ticks {
			<-tick.C
			if s == nil {
				continue
			}
			for range rate / 100 {
				s.Append(payload)
			}
			// Deliver what the last commit wrote, as the publisher does
			// after each PUBACK: the file keeps its steady size. Rows
			// are numbered from 1 in commit order, so the committed
			// count is the last row's sequence number.
			if st := s.Stats(); st.Committed >= next {
				seqs := make([]uint64, 0, st.Committed-next+1)
				for ; next <= st.Committed; next++ {
					seqs = append(seqs, next)
				}
				if err := s.Delete(seqs...); err != nil {
					b.Fatal(err)
				}
			}
		}
		return cpuTime() - cpu0
	}
	pace(s) // the file grows to its steady size
	var cpu, idle time.Duration
	var commits uint64
	for b.Loop() {
		idle += pace(nil)
		c0 := s.Stats().Commits
		cpu += pace(s)
		commits += s.Stats().Commits - c0
	}
	net := float64((cpu - idle).Microseconds())
	b.ReportMetric(net/float64(commits), "cpu-µs/commit")
	b.ReportMetric(net/float64(b.N*ticks*rate/100), "cpu-µs/event")
	b.ReportMetric(float64(commits)/float64(b.N)/(ticks/100), "commits/s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
