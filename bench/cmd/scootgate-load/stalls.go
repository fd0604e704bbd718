package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
)

// Host stalls. On a shared machine other processes now and then hold one
// of the harness's CPUs for milliseconds at a time (on the development VMs
// the VM's own agent does, from the kernel, where nothing can preempt it).
// A stream that waits for an event meanwhile gets a tail latency that says
// nothing about the system under test, and a few such stalls in one run
// decide a p99. With -stalls the harness records the kernel's scheduler
// trace (perf, sched:sched_switch) on its CPUs during every measured run,
// finds the stretches in which a process outside the harness ran for at
// least stallMin at once, and marks the waits and gaps that overlap them
// (loadgen.MarkStalls). The tail targets are read without the marked
// samples; the report says how many there were and what the ratio was
// with them.

// stallMin is how long a process outside the harness must hold one of its
// CPUs in one go to count as a stall.
const stallMin = time.Millisecond

// stallTracer records the scheduler trace around measured runs.
type stallTracer struct {
	perf string // perf's path
	cpus string // perf -C: the harness's CPUs ("" when not pinned: all)
	dir  string // the tracer's own directory: one trace file per run, removed once read
	self int    // the harness's pid: it and its children (but perf) are the harness
	runs int
}

// newStallTracer returns the tracer for -stalls mode (auto, on, off), or
// nil and why there is none. In auto mode a tracer that cannot start (no
// perf, no permission) is none; in on mode that is an error. Trace files
// go to a directory of its own in memory (/dev/shm) where there is one,
// else under dir: on a disk they would share the file system's journal
// with the node's outbox and lengthen its fdatasyncs. close removes it.
func newStallTracer(ctx context.Context, mode string, p pinning, dir string) (*stallTracer, string, error) {
	if mode == "off" {
		return nil, "off (-stalls=off)", nil
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir = "/dev/shm"
	}
	dir, err := os.MkdirTemp(dir, "scootgate-stalls-")
	if err != nil {
		return nil, "", err
	}
	t := &stallTracer{dir: dir, self: os.Getpid()}
	if p.on() {
		t.cpus = fmt.Sprintf("%d,%d", p.sut, p.side)
	}
	if t.perf, err = exec.LookPath("perf"); err == nil {
		// A trial run: perf may be there and still not be allowed to
		// trace (perf_event_paranoid, no root).
		var tr *stallTrace
		if tr, err = t.start(ctx); err == nil {
			_, err = tr.stop()
		}
	}
	if err == nil {
		return t, "", nil
	}
	t.close()
	if mode == "on" {
		return nil, "", fmt.Errorf("-stalls=on: %w", err)
	}
	return nil, fmt.Sprintf("off (%v)", err), nil
}

// close removes the tracer's directory. A nil tracer has none.
func (t *stallTracer) close() {
	if t != nil {
		_ = os.RemoveAll(t.dir)
	}
}

// stallTrace is one recording in progress.
type stallTrace struct {
	t      *stallTracer
	cmd    *exec.Cmd
	pc     *perfControl
	file   string
	stderr bytes.Buffer
	// wall and mono are one instant on the wall clock (with Go's monotonic
	// reading) and on CLOCK_MONOTONIC, perf's clock here.
	wall time.Time
	mono int64
}

// start starts perf with its events disabled, enables them and waits for
// perf's acknowledgement: from then on every context switch on the
// harness's CPUs is in the trace. A nil tracer starts nothing.
func (t *stallTracer) start(ctx context.Context) (*stallTrace, error) {
	if t == nil {
		return nil, nil
	}
	t.runs++
	tr := &stallTrace{t: t, file: filepath.Join(t.dir, fmt.Sprintf("sched-%d.data", t.runs))}
	args := []string{"record", "-q", "-D", "-1", "--control", "fd:3,4", "-e", "sched:sched_switch",
		"-k", "CLOCK_MONOTONIC", "-m", "1024", "-o", tr.file}
	if t.cpus != "" {
		args = append(args, "-C", t.cpus)
	} else {
		args = append(args, "-a")
	}
	tr.cmd = exec.Command(t.perf, args...)
	tr.cmd.Stderr = &tr.stderr
	pc, err := newPerfControl(tr.cmd)
	if err != nil {
		return nil, err
	}
	err = tr.cmd.Start()
	pc.started()
	if err != nil {
		pc.close()
		return nil, fmt.Errorf("perf: %w", err)
	}
	tr.pc = pc
	fail := func(err error) (*stallTrace, error) {
		tr.kill()
		return nil, fmt.Errorf("perf record: %w: %s", err, strings.TrimSpace(tr.stderr.String()))
	}
	if err := pc.command("enable"); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	var ts unix.Timespec
	tr.wall = time.Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return fail(err)
	}
	tr.mono = ts.Nano()
	return tr, nil
}

// kill ends perf without reading its trace.
func (tr *stallTrace) kill() {
	_ = tr.cmd.Process.Kill()
	_ = tr.cmd.Wait()
	tr.pc.close()
	_ = os.Remove(tr.file)
}

// stop ends the recording and returns the stalls in it. A nil trace has
// none.
func (tr *stallTrace) stop() ([]loadgen.Interval, error) {
	if tr == nil {
		return nil, nil
	}
	spans, err := tr.spans()
	if err != nil {
		return nil, err
	}
	stalls := make([]loadgen.Interval, len(spans))
	for i, s := range spans {
		stalls[i] = tr.interval(s)
	}
	return stalls, nil
}

// interval is s on Go's clock.
func (tr *stallTrace) interval(s span) loadgen.Interval {
	return loadgen.Interval{
		From: tr.wall.Add(time.Duration(s.from - tr.mono)),
		To:   tr.wall.Add(time.Duration(s.to - tr.mono)),
	}
}

// spans ends the recording and returns its stalls as spans.
func (tr *stallTrace) spans() ([]span, error) {
	defer os.Remove(tr.file)
	defer tr.pc.close()
	_ = tr.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- tr.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil && !interrupted(err) {
			return nil, fmt.Errorf("perf record: %w: %s", err, strings.TrimSpace(tr.stderr.String()))
		}
	case <-time.After(10 * time.Second):
		_ = tr.cmd.Process.Kill()
		<-done
		return nil, errors.New("perf record did not stop within 10 s of SIGINT")
	}

	script := exec.Command(tr.t.perf, "script", "-i", tr.file, "--ns", "-F", "pid,cpu,time")
	var stderr bytes.Buffer
	script.Stderr = &stderr
	out, err := script.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := script.Start(); err != nil {
		return nil, fmt.Errorf("perf script: %w", err)
	}
	perfPID := tr.cmd.Process.Pid
	ours := harnessPIDs(tr.t.self, perfPID)
	spans, perr := parseSwitches(out, ours, stallMin)
	if perr != nil {
		_, _ = io.Copy(io.Discard, out)
	}
	if err := errors.Join(perr, script.Wait()); err != nil {
		return nil, fmt.Errorf("perf script: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return spans, nil
}

// interrupted reports whether err is the exit of a process that SIGINT
// ended: perf re-raises the signal once it has written its trace.
func interrupted(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGINT
}

// harnessPIDs returns whether a process is the harness's: self or a
// child of it, except perf (whose CPU time disturbs a run like any
// other process's). It reads the parent from /proc when the trace is
// read, so a child that has exited by then counts as another process (the
// harness's children live through the rounds). Answers are cached.
func harnessPIDs(self, perf int) func(pid int) bool {
	known := map[int]bool{self: true, perf: false}
	return func(pid int) bool {
		ours, ok := known[pid]
		if !ok {
			ours = parentPID(pid) == self
			known[pid] = ours
		}
		return ours
	}
}

// parentPID reads a process's parent from /proc (0 when it is gone).
func parentPID(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// span is a stretch of time, in CLOCK_MONOTONIC nanoseconds, in which
// process pid held one CPU.
type span struct {
	from, to int64
	pid      int
}

// parseSwitches reads `perf script -F pid,cpu,time --ns` of sched_switch
// events and returns the spans in which a process other than the idle
// task and the harness's (ours) ran on one CPU for at least min. Each event is a task (pid) leaving a CPU: it ran
// there since the CPU's previous event. The first event of each CPU has
// no known start and yields nothing.
func parseSwitches(r io.Reader, ours func(pid int) bool, min time.Duration) ([]span, error) {
	var (
		out  []span
		last = map[int]int64{} // CPU → its previous switch
		sc   = bufio.NewScanner(r)
		n    int
	)
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: %q: want \"pid [cpu] seconds.nanoseconds:\"", n, line)
		}
		pid, err1 := strconv.Atoi(f[0])
		cpu, err2 := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(f[1], "["), "]"))
		at, err3 := parseNanos(strings.TrimSuffix(f[2], ":"))
		if err := errors.Join(err1, err2, err3); err != nil || !strings.HasPrefix(f[1], "[") {
			return nil, fmt.Errorf("line %d: %q: want \"pid [cpu] seconds.nanoseconds:\"", n, line)
		}
		if from, ok := last[cpu]; ok && at-from >= int64(min) && pid != 0 && !ours(pid) {
			out = append(out, span{from, at, pid})
		}
		last[cpu] = at
	}
	return out, sc.Err()
}

// parseNanos reads "seconds.nanoseconds" (nine digits) as nanoseconds.
func parseNanos(s string) (int64, error) {
	sec, frac, ok := strings.Cut(s, ".")
	if !ok || len(frac) != 9 {
		return 0, fmt.Errorf("%q is not seconds with nine decimals", s)
	}
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt(frac, 10, 64)
	if err := errors.Join(err1, err2); err != nil || a < 0 || b < 0 {
		return 0, fmt.Errorf("%q is not seconds with nine decimals", s)
	}
	return a*1e9 + b, nil
}
