package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
)

func TestParseSwitches(t *testing.T) {
	// pid 7 is the harness's, 0 the idle task; 40 and 41 are not ours.
	const trace = `
    7 [000] 100.000000000:
   40 [000] 100.000500000:
    0 [001] 100.001000000:
   41 [001] 100.004000000:
    0 [000] 100.006000000:
   40 [000] 100.006999999:
    7 [000] 100.010000000:
   41 [001] 100.010000000:
`
	ours := func(pid int) bool { return pid == 7 }
	got, err := parseSwitches(strings.NewReader(trace), ours, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ns := func(sec, nsec int64) int64 { return sec*1e9 + nsec }
	want := []span{
		// 40 ran on CPU 0 for 0.5 ms (too short), 41 on CPU 1 for 3 ms,
		// the idle task then ran on CPU 0 (not a stall), 40 ran just under
		// 1 ms, the harness 3 ms (ours), 41 again 6 ms.
		{ns(100, 1_000_000), ns(100, 4_000_000), 41},
		{ns(100, 4_000_000), ns(100, 10_000_000), 41},
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(span{})); d != "" {
		t.Errorf("stalls (-want +got):\n%s", d)
	}
}

// TestSpanOnGoClock: a span read on CLOCK_MONOTONIC lands on Go's clock
// by the offset taken when the trace began.
func TestSpanOnGoClock(t *testing.T) {
	wall := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	tr := &stallTrace{wall: wall, mono: 5_000_000_000}
	got := tr.interval(span{from: 5_002_000_000, to: 5_003_500_000, pid: 9})
	want := loadgen.Interval{From: wall.Add(2 * time.Millisecond), To: wall.Add(3500 * time.Microsecond)}
	if !got.From.Equal(want.From) || !got.To.Equal(want.To) {
		t.Errorf("interval = %v…%v, want %v…%v", got.From, got.To, want.From, want.To)
	}
}

func TestParseSwitchesRejects(t *testing.T) {
	for _, line := range []string{
		"7 [000] 100.0000001:",                      // not nine decimals
		"7 000 100.000000000:",                      // CPU without brackets
		"x [000] 100.000000000:",                    // pid
		"7 [000]",                                   // no time
		"7 [000] 100.000000000: sched:sched_switch", // more fields than asked for
		"7 [000] -1.000000000:",
	} {
		_, err := parseSwitches(strings.NewReader("7 [000] 99.000000000:\n"+line+"\n"), func(int) bool { return false }, time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("parseSwitches(%q) = %v, want an error naming line 2", line, err)
		}
	}
}

func TestHarnessPIDs(t *testing.T) {
	child := exec.Command("sleep", "10")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	perf := exec.Command("sleep", "10") // stands in for perf: a child, not the harness's
	if err := perf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = perf.Process.Kill(); _ = perf.Wait() }()
	ours := harnessPIDs(os.Getpid(), perf.Process.Pid)
	for pid, want := range map[int]bool{os.Getpid(): true, child.Process.Pid: true, perf.Process.Pid: false, 1: false, os.Getppid(): false} {
		if got := ours(pid); got != want {
			t.Errorf("ours(%d) = %v, want %v", pid, got, want)
		}
	}
}

// TestStallTracer runs the real tracer (perf, which needs root or a
// permissive perf_event_paranoid) while a process that is not the
// harness's spins, and expects a stall inside the spin.
func TestStallTracer(t *testing.T) {
	const spin = `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done` // ~0.2 s of one CPU
	tracer, why, err := newStallTracer(context.Background(), "auto", pinning{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if tracer == nil {
		t.Skipf("SKIP: perf cannot trace here: %s", why)
	}
	defer func() {
		tracer.close()
		if _, err := os.Stat(tracer.dir); !os.IsNotExist(err) {
			t.Errorf("close left %s: %v", tracer.dir, err)
		}
	}()
	tr, err := tracer.start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The spinner's parent exits at once: it is reparented, so it is not
	// the harness's child.
	out, err := exec.Command("sh", "-c", "sh -c '"+spin+"' >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	spinner, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	// Wait for it to exit: a pidfd turns readable then.
	fd, err := unix.PidfdOpen(spinner, 0)
	if err != nil {
		t.Fatalf("pidfd of the spinner: %v", err)
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 5000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n != 1 {
			t.Fatalf("waiting for the spinner: %d, %v", n, err)
		}
		break
	}
	ended := time.Now()
	spans, err := tr.spans()
	if err != nil {
		t.Fatal(err)
	}
	// The spinner holds a CPU for ~0.2 s, in slices of a scheduler tick
	// or more, inside the spin (on Go's clock): most of it must be stalls.
	var held time.Duration
	for _, s := range spans {
		if s.pid != spinner {
			continue
		}
		held += time.Duration(s.to - s.from)
		if iv := tr.interval(s); iv.From.Before(began.Add(-50*time.Millisecond)) || iv.To.After(ended.Add(50*time.Millisecond)) {
			t.Errorf("a stall of the spinner at %v…%v, outside its spin %v…%v", iv.From, iv.To, began, ended)
		}
	}
	if held < 100*time.Millisecond {
		t.Fatalf("the spinner's stalls add up to %v; want most of its ~0.2 s (%d stalls in all)", held, len(spans))
	}

	// The same spin as the harness's own child is no stall.
	if tr, err = tracer.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// It stays alive, blocked on its stdin, until the trace is read: the
	// tracer tells the harness's processes by their parent then.
	child := exec.Command("sh", "-c", spin+"; echo spun; read x")
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "spun\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	spans, err = tr.spans()
	stdin.Close()
	_ = child.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range spans {
		if s.pid == child.Process.Pid {
			t.Fatalf("a stall of the harness's own child: %+v", s)
		}
	}
}
