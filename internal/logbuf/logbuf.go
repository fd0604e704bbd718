// Package logbuf batches log output into fewer write system calls, and
// keeps a stuck log output from stopping the node.
//
// The node writes one JSON line per request (docs/operations.md "Logs"). Written straight to
// stderr that is one write(2) per request, which the load harness measured
// at ~1.6 % of the node's CPU under load (docs/performance.md). A Writer
// keeps lines in memory and writes them together: when FlushInterval has
// passed since the first unwritten line, when MaxBuffer bytes are waiting,
// on Flush, and on Close.
//
// A write to the output can block: a pipe whose reader (a container
// runtime, journald, a log shipper) stopped reading, a disk throttling
// dirty pages. One batch is written at a time, outside the lock that
// Write takes, so only the goroutine writing it waits: every other Write
// only appends to memory. While that write is stuck, lines are held up to
// MaxHeld bytes; beyond that each new line is dropped and counted
// ([Writer.Dropped]), and the node goes on serving. A request must never
// wait on its log line.
//
// The cost is that a process killed without Close (SIGKILL, a crash) loses
// the lines of its last FlushInterval. Lines are never split or reordered:
// each Write is one whole line from the slog handler, and lines reach the
// underlying writer in the order they were written.
package logbuf

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the zero fields of Options.
const (
	DefaultFlushInterval = 25 * time.Millisecond
	DefaultMaxBuffer     = 64 << 10
	DefaultMaxHeld       = 4 << 20
)

// Options configure a Writer.
type Options struct {
	FlushInterval time.Duration // longest time a line waits in memory (default 25ms)
	MaxBuffer     int           // bytes that trigger a write at once (default 64 KiB)
	MaxHeld       int           // bytes held while a write is stuck; lines beyond are dropped (default 4 MiB)
}

// Writer is an io.Writer that batches writes to an underlying writer. It is
// safe for concurrent use. Write never fails and never waits on the
// underlying writer unless it writes the batch itself: an error from the
// underlying writer is kept and returned by the next Flush or Close (a
// logger has nowhere better to report it).
type Writer struct {
	w    io.Writer
	max  int
	held int
	ivl  time.Duration

	mu      sync.Mutex
	idle    sync.Cond // signalled when a batch's write ends
	buf     []byte
	spare   []byte      // the last written batch's array, for the next
	writing bool        // a batch is being written, outside mu
	timer   *time.Timer // created on first use; armed while buf holds lines
	armed   bool
	closed  bool // after Close, writes go straight through
	err     error

	dropped atomic.Uint64
}

// New returns a Writer that writes to w.
func New(w io.Writer, o Options) *Writer {
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.MaxBuffer <= 0 {
		o.MaxBuffer = DefaultMaxBuffer
	}
	if o.MaxHeld <= 0 {
		o.MaxHeld = DefaultMaxHeld
	}
	b := &Writer{w: w, max: o.MaxBuffer, held: max(o.MaxHeld, o.MaxBuffer), ivl: o.FlushInterval}
	b.idle.L = &b.mu
	return b
}

// Dropped returns the number of lines dropped because the underlying
// writer was stuck while MaxHeld bytes waited.
func (b *Writer) Dropped() uint64 { return b.dropped.Load() }

// Write queues p (copied) for the next flush. It always reports len(p), nil.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.writing {
		// Another goroutine is writing a batch, maybe stuck: hold the
		// line, or drop it, but never wait.
		if len(b.buf)+len(p) > b.held {
			b.dropped.Add(1)
			return len(p), nil
		}
		b.buf = append(b.buf, p...)
		b.armLocked()
		return len(p), nil
	}
	if b.closed {
		b.buf = append(b.buf, p...)
		b.flushLocked()
		return len(p), nil
	}
	if len(b.buf)+len(p) > b.max && len(b.buf) > 0 {
		b.flushLocked()
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= b.max && !b.writing {
		b.flushLocked() // a line this long gains nothing from waiting
		return len(p), nil
	}
	b.armLocked()
	return len(p), nil
}

// armLocked starts the interval timer for the lines in buf; b.mu is held.
func (b *Writer) armLocked() {
	if b.armed || len(b.buf) == 0 {
		return
	}
	b.armed = true
	if b.timer == nil {
		b.timer = time.AfterFunc(b.ivl, b.onTimer)
	} else {
		b.timer.Reset(b.ivl)
	}
}

func (b *Writer) onTimer() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	b.flushLocked()
}

// Flush writes every queued line now, after a batch another goroutine is
// writing, and returns the first error the underlying writer returned
// since the last Flush.
func (b *Writer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for b.writing {
			b.idle.Wait()
		}
		if len(b.buf) == 0 {
			break
		}
		b.flushLocked()
	}
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

// flushLocked writes the buffer as one batch, unless another goroutine is
// writing one (it re-arms the timer for what waits once it is done). b.mu
// is held on entry and on return, and released during the write, so that
// Write never waits on the underlying writer; one batch at a time keeps
// the lines in order.
func (b *Writer) flushLocked() {
	if b.armed {
		b.timer.Stop()
		b.armed = false
	}
	if len(b.buf) == 0 || b.writing {
		return
	}
	p := b.buf
	b.buf, b.spare = b.spare[:0], nil
	b.writing = true
	b.mu.Unlock()
	_, err := b.w.Write(p)
	b.mu.Lock()
	b.writing = false
	if cap(p) <= b.held {
		b.spare = p[:0]
	}
	if err != nil && b.err == nil {
		b.err = err
	}
	b.idle.Broadcast()
	b.armLocked() // lines that came during the write
}
