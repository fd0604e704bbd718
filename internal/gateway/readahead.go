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
// The looks are one ticker's for the whole node (lookout), not a timer per
// attempt: a relay joins the lookout when it returns from a read and is
// not in it, and leaves when a look finds it waiting for the provider (or
// behind, or closed). A timer per attempt fired about once per chat
// stream, each fire waking the process from idle: two of the ~4 context
// switches a stream the node made beyond a bare hop's. A look that finds a
// relay that joined since the previous tick only marks it, so a relay is
// found behind after it stayed away from one tick to the next: one to two
// readAheadCheck periods after the client stopped taking the answer.
//
// The relay is the only reader. close stops the goroutine, if it was
// started, and waits for it, so that nothing reads the provider's body
// after the attempt.
type readAhead struct {
	src    io.Reader
	ended  func()                  // called once, when src returned an error (io.EOF included)
	cancel context.CancelCauseFunc // ends the provider exchange, and so a read of src that waits
	watch  *lookout                // looks at the relay; nil: never (tests)

	mu      sync.Mutex
	cond    sync.Cond // signalled when buf, err or closed change
	armed   bool      // in watch: the next tick looks at it
	fresh   bool      // armed since the last tick: its next look only marks
	reads   uint64    // reads of src by the relay that returned
	mark    uint64    // reads at the previous look
	reading bool      // the relay is in Read: it is not behind
	started bool      // the goroutine reads src; the relay reads buf only
	buf     []byte    // read from src, not yet by the relay: buf[off:]
	off     int
	err     error // src's error, once it returned one
	closed  bool
	done    chan struct{} // closed when the goroutine has returned
}

// newReadAhead relays src.
func newReadAhead(src io.Reader, ended func(), cancel context.CancelCauseFunc) *readAhead {
	r := &readAhead{src: src, ended: ended, cancel: cancel, watch: relayLooks}
	r.cond.L = &r.mu
	return r
}

// look is a tick's work for one armed relay: it starts the goroutine if
// the relay is away from the answer and has not read since the previous
// look. A relay that read meanwhile, or joined since the previous tick, is
// looked at again at the next tick; one that waits in Read is not behind,
// and leaves the lookout until its next read returns.
func (r *readAhead) look() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed || r.started || r.err != nil || r.reading:
		r.disarm()
	case r.fresh:
		r.fresh, r.mark = false, r.reads
	case r.reads != r.mark:
		r.mark = r.reads
	default:
		r.disarm()
		r.started = true
		r.done = make(chan struct{})
		go r.run()
	}
}

// arm counts a read of the relay's and puts the relay in the lookout
// unless it is there; the relay has just returned from a read. r.mu must
// be held.
func (r *readAhead) arm() {
	r.reads++
	if r.armed || r.closed || r.watch == nil {
		return
	}
	r.armed, r.fresh = true, true
	r.watch.add(r)
}

// disarm takes the relay out of the lookout. r.mu must be held.
func (r *readAhead) disarm() {
	if r.armed {
		r.armed = false
		r.watch.remove(r)
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
	r.disarm()
	r.cond.Broadcast()
	r.mu.Unlock()
	r.cancel(nil)
	if started {
		<-r.done
	}
}

// relayLooks is the node's lookout: a ticker shared by every relay, like
// the runtime's own timers a resource of the process rather than of one
// Handler.
var relayLooks = &lookout{every: readAheadCheck}

// lookout looks at the relays in it every tick (readAhead.look). Its
// goroutine runs while it holds a relay: the first add starts it, the
// remove that empties it stops it, so an idle node has no ticker.
type lookout struct {
	every time.Duration

	mu     sync.Mutex
	relays map[*readAhead]struct{}
	stop   chan struct{} // closed to stop the running goroutine; nil when none runs
}

// add puts r in the lookout. Called with r.mu held (lock order: a
// relay's mu, then the lookout's).
func (l *lookout) add(r *readAhead) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.relays == nil {
		l.relays = make(map[*readAhead]struct{})
	}
	l.relays[r] = struct{}{}
	if l.stop == nil {
		l.stop = make(chan struct{})
		go l.run(l.stop)
	}
}

// remove takes r out of the lookout, stopping the goroutine when it was
// the last. Called with r.mu held.
func (l *lookout) remove(r *readAhead) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.relays, r)
	if len(l.relays) == 0 && l.stop != nil {
		close(l.stop)
		l.stop = nil
	}
}

// run ticks until stop is closed, looking at each relay in the lookout
// outside l.mu (a look takes the relay's mu, and may remove it).
func (l *lookout) run(stop <-chan struct{}) {
	t := time.NewTicker(l.every)
	defer t.Stop()
	var relays []*readAhead
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		if l.stop != stop { // stopped, and maybe started again, meanwhile
			l.mu.Unlock()
			return
		}
		relays = relays[:0]
		for r := range l.relays {
			relays = append(relays, r)
		}
		l.mu.Unlock()
		for _, r := range relays {
			r.look()
		}
		clear(relays)
	}
}
