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
				s.pending[q] = struct{}{}
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

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
