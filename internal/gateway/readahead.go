package gateway

import (
	"context"
	"io"
	"sync"
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
)

// readAhead reads a provider's answer on a goroutine of its own into a
// buffer of at most readAheadMax bytes, which the relay reads from at the
// client's pace. When the provider's side ends (its answer read to the
// end, or its connection failed) ended is called on that goroutine: the
// backend's slot goes back then, not when a slow client has read the last
// byte. A client that does not read holds at most readAheadMax bytes of
// the node's memory per attempt, on top of its connection's socket
// buffers; then the provider waits, as it would without a read-ahead.
//
// The relay is the only reader. close stops the goroutine and waits for
// it, so that nothing reads the provider's body after the attempt.
type readAhead struct {
	src    io.Reader
	ended  func()                  // called once, on the reading goroutine, when src returned an error (io.EOF included)
	cancel context.CancelCauseFunc // ends the provider exchange, and so a read of src that waits

	mu     sync.Mutex
	cond   sync.Cond // signalled when buf, err or closed change
	buf    []byte    // read from src, not yet by the relay: buf[off:]
	off    int
	err    error // src's error, once it returned one
	closed bool
	done   chan struct{}
}

// newReadAhead starts reading src.
func newReadAhead(src io.Reader, ended func(), cancel context.CancelCauseFunc) *readAhead {
	r := &readAhead{src: src, ended: ended, cancel: cancel, done: make(chan struct{})}
	r.cond.L = &r.mu
	go r.run()
	return r
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

// Read returns what has been read from the provider, waiting for it when
// there is none yet; src's error once all of it was returned.
func (r *readAhead) Read(p []byte) (int, error) {
	r.mu.Lock()
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

// close stops the reading goroutine and waits until it has returned; a
// read that waits for the provider is ended by cancelling the exchange
// (a no-op when it has ended already).
func (r *readAhead) close() {
	r.mu.Lock()
	r.closed = true
	r.cond.Broadcast()
	r.mu.Unlock()
	r.cancel(nil)
	<-r.done
}
