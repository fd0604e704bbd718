package logbuf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an underlying writer that keeps every write call separately
// and signals each one.
type recorder struct {
	mu     sync.Mutex
	writes [][]byte
	err    error
	wrote  chan struct{}
}

func newRecorder() *recorder { return &recorder{wrote: make(chan struct{}, 1000)} }

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.writes = append(r.writes, bytes.Clone(p))
	err := r.err
	r.mu.Unlock()
	select {
	case r.wrote <- struct{}{}:
	default:
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.writes)
}

func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(bytes.Join(r.writes, nil))
}

// hour keeps the timer out of tests that check explicit flushes.
var hour = Options{FlushInterval: time.Hour}

func TestLinesWaitForFlush(t *testing.T) {
	rec := newRecorder()
	w := New(rec, hour)
	for i := range 100 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if n := rec.calls(); n != 0 {
		t.Fatalf("underlying writes before Flush = %d, want 0", n)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := rec.calls(); n != 1 {
		t.Fatalf("underlying writes after Flush = %d, want 1 (one batch)", n)
	}
	var want strings.Builder
	for i := range 100 {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if got := rec.all(); got != want.String() {
		t.Fatalf("flushed output differs:\n%s", got)
	}
	if err := w.Flush(); err != nil || rec.calls() != 1 {
		t.Fatalf("empty Flush wrote: calls %d, err %v", rec.calls(), err)
	}
}

func TestMaxBufferWritesAtOnce(t *testing.T) {
	rec := newRecorder()
	w := New(rec, Options{FlushInterval: time.Hour, MaxBuffer: 100})
	line := strings.Repeat("x", 39) + "\n" // 40 bytes
	w.Write([]byte(line))
	w.Write([]byte(line))
	if rec.calls() != 0 {
		t.Fatalf("80 of 100 bytes written early")
	}
	w.Write([]byte(line)) // 120 > 100: the first two go out, the third waits
	if rec.calls() != 1 || rec.all() != line+line {
		t.Fatalf("after overflow: %d calls, %q", rec.calls(), rec.all())
	}
	long := strings.Repeat("y", 150) + "\n"
	w.Write([]byte(long)) // longer than MaxBuffer: queued line first, then it, straight through
	if got, want := rec.all(), line+line+line+long; got != want {
		t.Fatalf("long line out of order: %q", got)
	}
}

func TestIntervalFlushes(t *testing.T) {
	rec := newRecorder()
	w := New(rec, Options{FlushInterval: time.Millisecond})
	w.Write([]byte("a\n"))
	select {
	case <-rec.wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("line not written by the interval timer")
	}
	if rec.all() != "a\n" {
		t.Fatalf("got %q", rec.all())
	}
	// The timer re-arms for the next line.
	w.Write([]byte("b\n"))
	select {
	case <-rec.wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("second line not written by the re-armed timer")
	}
	if rec.all() != "a\nb\n" {
		t.Fatalf("got %q", rec.all())
	}
}

func TestCloseFlushesAndWritesThrough(t *testing.T) {
	rec := newRecorder()
	w := New(rec, hour)
	w.Write([]byte("before\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rec.all() != "before\n" {
		t.Fatalf("Close did not flush: %q", rec.all())
	}
	w.Write([]byte("after\n"))
	if rec.all() != "before\nafter\n" {
		t.Fatalf("write after Close not passed through: %q", rec.all())
	}
}

func TestErrorReportedByFlush(t *testing.T) {
	rec := newRecorder()
	rec.err = errors.New("disk gone")
	w := New(rec, hour)
	if n, err := w.Write([]byte("x\n")); n != 2 || err != nil {
		t.Fatalf("Write = %d, %v; want 2, nil", n, err)
	}
	if err := w.Flush(); err == nil || err.Error() != "disk gone" {
		t.Fatalf("Flush error = %v, want the underlying error", err)
	}
	rec.err = nil
	if err := w.Flush(); err != nil {
		t.Fatalf("error reported twice: %v", err)
	}
}

// Concurrent slog records come out whole and each exactly once.
func TestConcurrentSlogLines(t *testing.T) {
	rec := newRecorder()
	w := New(rec, Options{FlushInterval: time.Microsecond, MaxBuffer: 4096})
	log := slog.New(slog.NewJSONHandler(w, nil))
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range each {
				log.Info("request", "worker", g, "i", i)
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for line := range strings.SplitSeq(strings.TrimSuffix(rec.all(), "\n"), "\n") {
		if !strings.HasPrefix(line, `{"time":`) || !strings.HasSuffix(line, "}") {
			t.Fatalf("torn line %q", line)
		}
		key := line[strings.Index(line, `"worker"`):]
		if seen[key] {
			t.Fatalf("line twice: %s", key)
		}
		seen[key] = true
	}
	if len(seen) != workers*each {
		t.Fatalf("%d distinct lines, want %d", len(seen), workers*each)
	}
}

// BenchmarkSlogLine compares one request line written straight to a file
// (one write(2) each, as an unbuffered handler does) with the same line
// through a Writer.
func BenchmarkSlogLine(b *testing.B) {
	for _, buffered := range []bool{false, true} {
		name := "direct"
		if buffered {
			name = "logbuf"
		}
		b.Run(name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "log"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var w io.Writer = f
			if buffered {
				lb := New(f, Options{})
				defer lb.Close()
				w = lb
			}
			log := slog.New(slog.NewJSONHandler(w, nil))
			b.ReportAllocs()
			for b.Loop() {
				log.Info("request", "request_id", "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "status", 200)
			}
		})
	}
}

// stuck is an underlying writer whose writes block until release is
// closed, as a pipe whose reader stopped reading does.
type stuck struct {
	entered chan struct{} // one value per write that started
	release chan struct{}
	mu      sync.Mutex
	out     bytes.Buffer
}

func (s *stuck) Write(p []byte) (int, error) {
	s.entered <- struct{}{}
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

// TestStuckOutputDoesNotStopWriters: while one batch's write is stuck,
// every other Write returns at once, holding lines up to MaxHeld and
// dropping (and counting) the rest; once the output moves again, the held
// lines follow the stuck batch, in order.
func TestStuckOutputDoesNotStopWriters(t *testing.T) {
	out := &stuck{entered: make(chan struct{}, 16), release: make(chan struct{})}
	w := New(out, Options{FlushInterval: time.Hour, MaxBuffer: 10, MaxHeld: 40})
	flushed := make(chan error, 1)
	w.Write([]byte("first\n"))
	go func() { flushed <- w.Flush() }()
	<-out.entered // the batch "first\n" is being written, and blocks

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 {
			fmt.Fprintf(w, "line %d\n", i) // 7 bytes each: 5 fit in 40
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Write waited on a stuck output")
	}
	if got := w.Dropped(); got != 5 {
		t.Errorf("Dropped() = %d, want 5", got)
	}
	close(out.release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "first\nline 0\nline 1\nline 2\nline 3\nline 4\n"
	out.mu.Lock()
	got := out.out.String()
	out.mu.Unlock()
	if got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// BenchmarkWrite is one request's log line through the Writer, its share
// of the batch's write included.
func BenchmarkWrite(b *testing.B) {
	w := New(io.Discard, Options{})
	line := []byte(strings.Repeat("x", 400) + "\n")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Write(line)
		}
	})
}
