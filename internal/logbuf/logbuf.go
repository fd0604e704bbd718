// Package logbuf batches log output into fewer write system calls.
//
// The node writes one JSON line per request (docs/operations.md "Logs"). Written straight to
// stderr that is one write(2) per request, which the load harness measured
// at ~1.6 % of the node's CPU under load (docs/performance.md). A Writer
// keeps lines in memory and writes them together: when FlushInterval has
// passed since the first unwritten line, when MaxBuffer bytes are waiting,
// on Flush, and on Close.
//
// The cost is that a process killed without Close (SIGKILL, a crash) loses
// the lines of its last FlushInterval. Lines are never split or reordered:
// each Write is one whole line from the slog handler, and lines reach the
// underlying writer in the order they were written.
package logbuf

import (
	"io"
	"sync"
	"time"
)

// Defaults for the zero fields of Options.
const (
	DefaultFlushInterval = 25 * time.Millisecond
	DefaultMaxBuffer     = 64 << 10
)

// Options configure a Writer.
type Options struct {
	FlushInterval time.Duration // longest time a line waits in memory (default 25ms)
	MaxBuffer     int           // bytes that trigger a write at once (default 64 KiB)
}

// Writer is an io.Writer that batches writes to an underlying writer. It is
// safe for concurrent use. Write never fails: an error from the underlying
// writer is kept and returned by the next Flush or Close (a logger has
// nowhere better to report it).
type Writer struct {
	w   io.Writer
	max int
	ivl time.Duration

	mu     sync.Mutex
	buf    []byte
	timer  *time.Timer // created on first use; armed while buf holds lines
	armed  bool
	closed bool // after Close, writes go straight through
	err    error
}

// New returns a Writer that writes to w.
func New(w io.Writer, o Options) *Writer {
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.MaxBuffer <= 0 {
		o.MaxBuffer = DefaultMaxBuffer
	}
	return &Writer{w: w, max: o.MaxBuffer, ivl: o.FlushInterval}
}

// Write queues p (copied) for the next flush. It always reports len(p), nil.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		b.writeLocked(p)
		return len(p), nil
	}
	if len(b.buf)+len(p) > b.max && len(b.buf) > 0 {
		b.flushLocked()
	}
	if len(p) >= b.max {
		b.writeLocked(p) // a line this long gains nothing from a copy
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	if !b.armed {
		b.armed = true
		if b.timer == nil {
			b.timer = time.AfterFunc(b.ivl, b.onTimer)
		} else {
			b.timer.Reset(b.ivl)
		}
	}
	return len(p), nil
}

func (b *Writer) onTimer() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

// Flush writes every queued line now and returns the first error the
// underlying writer returned since the last Flush.
func (b *Writer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	err := b.err
	b.err = nil
	return err
}

// Close flushes and stops batching: later writes go straight to the
// underlying writer (late lines of a shutdown are not lost). It does not
// close the underlying writer.
func (b *Writer) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.Flush()
}

// flushLocked writes the buffer; b.mu is held. Writing under the lock keeps
// lines in order; an unbuffered slog handler holds its own lock across the
// write in the same way.
func (b *Writer) flushLocked() {
	if b.armed {
		b.timer.Stop()
		b.armed = false
	}
	if len(b.buf) == 0 {
		return
	}
	b.writeLocked(b.buf)
	b.buf = b.buf[:0]
}

func (b *Writer) writeLocked(p []byte) {
	if _, err := b.w.Write(p); err != nil && b.err == nil {
		b.err = err
	}
}
