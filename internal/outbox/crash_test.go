package outbox

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashChildEnv names the outbox file the crash child writes to; the child
// test does nothing without it.
const crashChildEnv = "SCOOTGATE_OUTBOX_CRASH_CHILD"

// TestCrashDurability kills a writer mid-run, without the broker: a
// child process appends as fast as it can and prints "committed <seq>" after
// each commit it observed; the parent SIGKILLs it mid-run, ten times. After
// each kill the file must open clean (no quarantine), every row the child
// saw committed must be there, and every row must be intact and in order.
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	path := filepath.Join(t.TempDir(), "outbox.db")
	var (
		mustHave  uint64 // highest seq a child saw committed, over all runs
		firstLeft uint64 = 1
	)
	for run := range 10 {
		seen := crashRun(t, path, run, 10+5*(run%4))
		mustHave = max(mustHave, seen)

		s := newStore(t, Options{Path: path, MaxEvents: 1 << 20, MaxBytes: 1 << 30}, hooks{})
		if q := s.Quarantined(); q != "" {
			t.Fatalf("run %d: the file did not open clean; moved to %s", run, q)
		}
		recs := s.readAll()
		if len(recs) == 0 || recs[0].Seq != firstLeft {
			t.Fatalf("run %d: first row %v, want seq %d", run, seqs(recs[:min(1, len(recs))]), firstLeft)
		}
		for i, r := range recs {
			if want := firstLeft + uint64(i); r.Seq != want {
				t.Fatalf("run %d: row %d has seq %d, want %d (rows must be contiguous)", run, i, r.Seq, want)
			}
			if err := checkCrashPayload(r.Payload); err != nil {
				t.Fatalf("run %d: row %d: %v", run, r.Seq, err)
			}
		}
		last := recs[len(recs)-1].Seq
		if last < mustHave {
			t.Fatalf("run %d: last row %d, but the child saw %d committed: committed rows lost", run, last, mustHave)
		}
		t.Logf("run %d: child saw %d committed, file holds %d..%d", run, seen, firstLeft, last)

		// Deliver (delete) the first half, as the publisher would, and close
		// gracefully: the deletes must survive too.
		half := recs[:len(recs)/2]
		if err := s.Delete(seqs(half)...); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if len(half) > 0 {
			firstLeft = half[len(half)-1].Seq + 1
		}
	}
}

// crashRun starts a child appending to path, waits until it has reported
// commits commits, SIGKILLs it, and returns the highest seq it reported.
func crashRun(t *testing.T, path string, run, commits int) uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, "SCOOTGATE_OUTBOX_CRASH_RUN="+strconv.Itoa(run))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	var seen uint64
	sc := bufio.NewScanner(out)
	for n := 0; n < commits && sc.Scan(); {
		rest, ok := strings.CutPrefix(sc.Text(), "committed ")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(rest, 10, 64)
		if err != nil {
			t.Fatalf("child said %q", sc.Text())
		}
		seen = v
		n++
	}
	if seen == 0 {
		t.Fatalf("run %d: the child reported no commits (scan: %v)", run, sc.Err())
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL, mid-burst
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait() // "signal: killed" is the expected outcome
	return seen
}

// TestCrashChild is the child side of TestCrashDurability.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("helper process for TestCrashDurability")
	}
	run := os.Getenv("SCOOTGATE_OUTBOX_CRASH_RUN")
	// A tiny window keeps the writer committing back to back, so the kill
	// lands inside a write transaction or its fsync most of the time.
	s, err := Open(Options{Path: path, MaxEvents: 1 << 20, MaxBytes: 1 << 30, MaxUnsynced: 2048, MaxBatch: 256, CommitInterval: time.Microsecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	go func() {
		for i := 0; ; i++ {
			s.Append(crashPayload(run, i))
		}
	}()
	// After each commit, find the highest committed seq and report it:
	// Read sees only committed (fsynced) rows, so that row and all before
	// it must survive the kill.
	var last uint64
	timer := time.NewTimer(time.Minute) // a child the parent forgot must not run forever
	for {
		select {
		case <-s.Notify():
		case <-timer.C:
			os.Exit(3)
		}
		for {
			recs, err := s.Read(last, 4096)
			if err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				os.Exit(2)
			}
			if len(recs) == 0 {
				break
			}
			last = recs[len(recs)-1].Seq
		}
		fmt.Printf("committed %d\n", last)
	}
}

// crashPayload is a 300-byte payload that carries its own checksum, so a
// torn row is detected.
func crashPayload(run string, i int) []byte {
	body := fmt.Sprintf("run=%s event=%d %s", run, i, strings.Repeat("x", 260))
	return fmt.Appendf(nil, "%08x %s", crc32.ChecksumIEEE([]byte(body)), body)
}

func checkCrashPayload(p []byte) error {
	sum, body, ok := strings.Cut(string(p), " ")
	if !ok || fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(body))) != sum {
		return fmt.Errorf("torn or foreign payload %.40q", p)
	}
	return nil
}
