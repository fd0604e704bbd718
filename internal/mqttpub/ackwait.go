package mqttpub

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ackHurry is how long after a burst of publishes the reader waits for
// its PUBACKs to be in whole before it reads them as they come. A broker
// on the same network answers a burst well within it; one that holds
// its PUBACKs back (Nagle's algorithm, as Mosquitto's default socket
// does, sends one and keeps the rest until the node's delayed ACK, ~40
// ms) is read after it, as without the low-water mark.
const ackHurry = 2 * time.Millisecond

// ackWait keeps the connection's reader asleep until the PUBACKs the
// broker owes are all in, so that a burst of them costs one wakeup of the
// process, not one per TCP segment: it sets the socket's receive
// low-water mark (SO_RCVLOWAT) to the bytes still to come. A broker that
// sends each PUBACK as a segment of its own (one that sets TCP_NODELAY,
// as Go's net package does by default) otherwise wakes the node once an
// event: 0.9 reads a request at 2,000 requests/s under load
// (docs/performance.md "Usage delivery").
//
// The mark never asks for more than will come: a PUBACK is 4 bytes, and
// when the reader's buffer holds part of the PUBACKs owed, less that.
// Whatever else arrives (a PINGRESP, a packet not expected, the
// connection's end) only adds bytes or wakes the reader anyway. After
// ackHurry, or when a PINGRESP is awaited, the reader wakes for any byte
// (hurry). The option is set through the socket's RawConn: no read or
// write bypasses the runtime's poller.
type ackWait struct {
	owed atomic.Int64 // PUBLISHes written or buffered whose PUBACK the reader has not parsed

	set func(n int) error // sets the mark; nil: not a socket that has one

	mu     sync.Mutex
	mark   int  // the mark set; 1 is the socket's default
	parked bool // the reader is in a read with an empty buffer
	eager  bool // wake for any byte, until the next burst
}

// newAckWait returns the wait for nc, the connection as dialled: only a
// plain TCP connection gets the mark (a TLS record is larger than the
// PUBACK in it, and the records' bytes still to come are not known).
func newAckWait(nc net.Conn) *ackWait {
	w := &ackWait{mark: 1}
	if tc, ok := nc.(*net.TCPConn); ok {
		w.set = lowWater(tc)
	}
	return w
}

// reading runs on the reader before each read from the socket; buffered
// is what its buffer already holds. The bytes still to come are at least
// the PUBACKs owed less those bytes.
func (w *ackWait) reading(buffered int) {
	if w.set == nil {
		return
	}
	w.mu.Lock()
	if w.eager {
		w.setLocked(1)
	} else {
		w.setLocked(pubackSize*int(w.owed.Load()) - buffered)
	}
	w.parked = buffered == 0
	w.mu.Unlock()
}

// read runs on the reader after each read from the socket.
func (w *ackWait) read() {
	if w.set == nil {
		return
	}
	w.mu.Lock()
	w.parked = false
	w.mu.Unlock()
}

// burst runs after a burst of publishes was written: the reader waits for
// all of their PUBACKs again. A reader asleep with an empty buffer now
// waits for every PUBACK owed; otherwise the mark is set before its next
// read.
func (w *ackWait) burst() {
	if w.set == nil {
		return
	}
	w.mu.Lock()
	w.eager = false
	if w.parked {
		w.setLocked(pubackSize * int(w.owed.Load()))
	}
	w.mu.Unlock()
}

// hurry makes the reader wake for any byte until the next burst; a
// reader asleep wakes now when bytes wait.
func (w *ackWait) hurry() {
	if w.set == nil {
		return
	}
	w.mu.Lock()
	w.eager = true
	w.setLocked(1)
	w.mu.Unlock()
}

// setLocked sets the mark to n bytes, within 1 and the reader's buffer,
// unless it is set so. A socket that refuses it is left at 1 for good.
// w.mu must be held.
func (w *ackWait) setLocked(n int) {
	n = max(1, min(n, readBuffer))
	if n == w.mark || w.set == nil {
		return
	}
	if w.set(n) != nil {
		if w.mark != 1 {
			_ = w.set(1)
		}
		w.set, w.mark = nil, 1
		return
	}
	w.mark = n
}

// ackReader is the connection's reader's source: the socket, with the
// mark set before each read.
type ackReader struct{ l *conn }

func (r ackReader) Read(p []byte) (int, error) {
	r.l.wait.reading(r.l.br.Buffered())
	n, err := r.l.nc.Read(p)
	r.l.wait.read()
	return n, err
}
