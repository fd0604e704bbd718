package gateway

import (
	"context"
	"io"
	"sync"
	"time"
)

// Bounds of the read-ahead of a provider's answer.
const (
	// readAheadMax bounds what an attempt holds of its provider's answer
	// that the client has not taken yet (docs/failures.md "Slots"). A
	// whole chat stream is usually far smaller: it then ends on the
	// provider's side at once, whatever the client's pace.
	readAheadMax = 256 << 10
	// readAheadChunk is the most one read from the provider takes.
	readAheadChunk = 8 << 10
	// readAheadCheck is how often a relay's progress is looked at while
	// it reads the provider's answer itself. A relay found away from the
	// answer (in a write to the client) with no read since the previous
	// look has fallen behind, and the read-ahead starts: one to two
	// checks after the client stopped taking the answer.
	readAheadCheck = 100 * time.Millisecond
)

// readAhead relays a provider's answer, read ahead of the client once the
// client falls behind. While the relay keeps up it reads the provider
// directly, on its own goroutine, into its own buffer. Once it has stayed
// away from the answer from one look to the next (a write to the client
// that waits for the client; looks are readAheadCheck apart), a goroutine
// of the read-ahead's own reads the provider into a buffer of at most
// readAheadMax bytes, which the relay then reads from at the client's
// pace. When the provider's side ends (its answer read to the end, or
// its connection failed) ended is called, on whichever goroutine read it:
// the backend's slot goes back then, not when a slow client has read the
// last byte. A client that does not read
// holds at most readAheadMax bytes of the node's memory per attempt, on
// top of its connection's socket buffers; then the provider waits, as it
// would without a read-ahead.
//
// The look is one timer per attempt, armed when the relay returns from a
// read and it is not armed, and re-armed by itself only while the relay
// keeps coming back: a relay that keeps up costs a timer operation per
// readAheadCheck, not one per read (which woke the scheduler's idle
// loop on every event), and one that waits for the provider costs none.
//
// The relay is the only reader. close stops the goroutine, if it was
// started, and waits for it, so that nothing reads the provider's body
// after the attempt.
type readAhead struct {
	src    io.Reader
	ended  func()                  // called once, when src returned an error (io.EOF included)
	cancel context.CancelCauseFunc // ends the provider exchange, and so a read of src that waits
	every  time.Duration           // readAheadCheck; other values in tests

	mu      sync.Mutex
	cond    sync.Cond   // signalled when buf, err or closed change
	check   *time.Timer // runs look; nil until the relay's first read returned
	armed   bool        // check will fire
	reads   uint64      // reads of src by the relay that returned
	mark    uint64      // reads when check was armed
	reading bool        // the relay is in Read: it is not behind
	started bool        // the goroutine reads src; the relay reads buf only
	buf     []byte      // read from src, not yet by the relay: buf[off:]
	off     int
	err     error // src's error, once it returned one
	closed  bool
	done    chan struct{} // closed when the goroutine has returned
}

// newReadAhead relays src.
func newReadAhead(src io.Reader, ended func(), cancel context.CancelCauseFunc) *readAhead {
	r := &readAhead{src: src, ended: ended, cancel: cancel, every: readAheadCheck}
	r.cond.L = &r.mu
	return r
}

// look is the check timer's work: it starts the goroutine if the relay is
// away from the answer and has not read since the timer was armed. A relay
// that read meanwhile is looked at again one check later; one that waits
// in Read is not behind, and its next read's return arms the timer again.
func (r *readAhead) look() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed || r.started || r.err != nil || r.reading:
		r.armed = false
	case r.reads != r.mark:
		r.mark = r.reads
		r.check.Reset(r.every)
	default:
		r.armed = false
		r.started = true
		r.done = make(chan struct{})
		go r.run()
	}
}

// arm arms the check timer unless it is armed; the relay has just
// returned from a read. r.mu must be held.
func (r *readAhead) arm() {
	r.reads++
	if r.armed || r.closed {
		return
	}
	r.armed, r.mark = true, r.reads
	if r.check == nil {
		r.check = time.AfterFunc(r.every, r.look)
	} else {
		r.check.Reset(r.every)
	}
}

func (r *readAhead) run() {
	defer close(r.done)
	chunk := make([]byte, readAheadChunk)
	for {
		r.mu.Lock()
		for len(r.buf)-r.off >= readAheadMax && !r.closed {
			r.cond.Wait()
		}
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return
		}
		n, err := r.src.Read(chunk)
		r.mu.Lock()
		if n > 0 {
			if r.off > 0 && len(r.buf)+n > cap(r.buf) {
				// Move the unread bytes down rather than grow: the
				// buffer stays within twice the bound.
				r.buf, r.off = r.buf[:copy(r.buf, r.buf[r.off:])], 0
			}
			r.buf = append(r.buf, chunk[:n]...)
		}
		if err != nil {
			r.err = err
		}
		r.cond.Broadcast()
		r.mu.Unlock()
		if err != nil {
			r.ended()
			return
		}
	}
}

// Read returns what the provider sent next, waiting for it when there is
// none yet; src's error once all of it was returned.
func (r *readAhead) Read(p []byte) (int, error) {
	r.mu.Lock()
	if !r.started {
		// The relay keeps up: it reads src itself. The check, if it
		// fires meanwhile, finds it reading and does nothing.
		err := r.err
		r.reading = true
		r.mu.Unlock()
		if err != nil {
			return 0, err
		}
		n, err := r.src.Read(p)
		r.mu.Lock()
		r.reading = false
		if err != nil {
			r.err = err
			r.mu.Unlock()
			r.ended()
			if n > 0 {
				err = nil // returned by the next Read, after these bytes
			}
			return n, err
		}
		r.arm()
		r.mu.Unlock()
		return n, nil
	}
	defer r.mu.Unlock()
	for r.off == len(r.buf) && r.err == nil {
		r.cond.Wait()
	}
	if r.off == len(r.buf) {
		return 0, r.err
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	if r.off == len(r.buf) {
		r.buf, r.off = r.buf[:0], 0
	}
	r.cond.Broadcast()
	return n, nil
}

// close stops the reading goroutine, if it was started, and waits until
// it has returned; a read that waits for the provider is ended by
// cancelling the exchange (a no-op when it has ended already).
func (r *readAhead) close() {
	r.mu.Lock()
	r.closed = true
	started := r.started
	if r.check != nil {
		r.check.Stop()
	}
	r.cond.Broadcast()
	r.mu.Unlock()
	r.cancel(nil)
	if started {
		<-r.done
	}
}
