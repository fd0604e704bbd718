package mqttpub

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Buffer sizes of a genConn.
const (
	// readBuffer holds a burst of PUBACKs (4 bytes each) for one read(2).
	// paho's packets.ReadPacket reads the fixed header one byte at a time
	// and then the rest of the packet: without the buffer that is three
	// read(2) calls per PUBACK.
	readBuffer = 4 << 10
	// maxPending bounds the bytes Write accepts ahead of the flusher. Write
	// blocks beyond it, which is paho's backpressure; a connection holds at
	// most twice this (the bytes pending and the batch being written).
	maxPending = 256 << 10
)

// errConnClosed is what Write returns after Close. It wraps net.ErrClosed
// so that paho, which matches "use of closed network connection" in the
// text, treats it as the close it asked for rather than as a failure.
var errConnClosed = fmt.Errorf("mqttpub: write: %w", net.ErrClosed)

// genConn is a broker connection that reports its end exactly once, on the
// first failed read or write or on Close, whichever comes first, and that
// cuts paho's system calls: reads go through a small buffer, and writes are
// group-committed by one flusher goroutine.
//
// # Generations
//
// end (pahoLink.connEnded) bumps the connection generation. It runs before
// anyone can learn of the end: before Read returns its error, before a write
// failure is stored where Write returns it, and before Close closes the
// socket. paho fails or completes tokens because of a loss only after one of
// those, so the bump still comes first (doc.go, "Connection generations").
// Buffering changes nothing here: both buffers belong to one connection, so
// a PUBLISH is only ever written on the connection it was handed to, and a
// PUBACK is only ever read from the connection that received it.
//
// # Reads
//
// Read goes through a bufio.Reader. bufio.Reader is not safe for concurrent
// use, and needs none: in paho v1.5.1 only two readers exist and they never
// overlap. verifyCONNACK reads the CONNACK in attemptConnection, and only
// after it returns does startCommsWorkers start startIncoming, the one
// goroutine that reads every later packet (net.go). Bytes read ahead of the
// CONNACK stay in the buffer for startIncoming. Nothing in this package
// reads.
//
// # Writes
//
// Write copies b into a pending buffer and returns; the flusher writes
// everything pending with one write(2) whenever there is something. While
// one write is in the kernel, later packets accumulate and go out together
// in the next one. There is no timer: an idle connection writes a packet as
// soon as it is handed over. Write blocks while maxPending bytes are
// pending. Concurrent Writes (paho's outgoing goroutine and its keepalive
// both write) are serialised, so each one's bytes stay contiguous.
//
// Write deadlines (SetWriteDeadline, SetDeadline) apply to the bytes of the
// Writes made while they are set: each batch is written with the earliest
// deadline of the Writes in it, and a Write that waits for room fails at
// its deadline. So a packet reaches the kernel by the deadline paho set for
// it, or the connection ends, as when paho wrote the socket itself. Read
// deadlines go to the socket unchanged.
//
// The first failed write (the flusher's, or a Write that timed out waiting
// for room) ends the connection: end runs, the socket is closed so that
// paho's reader fails at once, and every later Write returns the error.
// Read returns it too in place of the closed-socket error, which paho's
// reader would otherwise ignore as a close it asked for.
//
// # Corking
//
// paho writes every packet with a Write of its own, from goroutines that
// take turns with the drain loop, so a burst of publishes would reach the
// socket in many small writes. cork holds the pending bytes back while the
// drain loop publishes a burst, and uncork lets the flusher write them at
// once: one write(2) for the burst, plus one or two for the packets paho
// still held when the burst ended. Cork never holds up a Write (a full
// buffer is written regardless) or Close.
//
// # Close
//
// Close writes what is pending first, for at most linger (and within the
// deadlines above), then closes the socket and waits for the flusher to
// return: no goroutine outlives Close. abort closes without waiting.
type genConn struct {
	net.Conn // the socket; Write, Close and the deadlines are overridden

	// immutable
	end    func()        // reports the end; run through ended
	linger time.Duration // how long Close waits for pending bytes
	br     *bufio.Reader // on Conn; used by one reader at a time (see above)
	wake   chan struct{} // cap 1: the flusher has something to do
	room   chan struct{} // cap 1: the flusher took the pending bytes, or ended
	hurry  chan struct{} // closed by abort: Close stops waiting for the flusher
	done   chan struct{} // closed when the flusher has returned

	ended     sync.Once // runs end
	shut      sync.Once // the body of Close
	hurryOnce sync.Once // closes hurry
	connOnce  sync.Once // closes Conn
	closeErr  error     // Conn.Close's result; written in connOnce

	// wmu serialises Write calls; it is taken before mu.
	wmu sync.Mutex

	mu      sync.Mutex
	buf     []byte    // accepted, not yet taken by the flusher; guarded by mu
	bufDL   time.Time // earliest write deadline of buf's Writes, zero if none; guarded by mu
	wdl     time.Time // the write deadline for new Writes; guarded by mu
	err     error     // the first write failure; guarded by mu
	closing bool      // Close was called; guarded by mu
	corked  bool      // hold buf back from the socket (cork); guarded by mu
}

// newGenConn wraps conn and starts its flusher. end runs once, when the
// connection ends; Close waits at most linger for pending bytes.
func newGenConn(conn net.Conn, end func(), linger time.Duration) *genConn {
	c := &genConn{
		Conn:   conn,
		end:    end,
		linger: linger,
		br:     bufio.NewReaderSize(conn, readBuffer),
		wake:   make(chan struct{}, 1),
		room:   make(chan struct{}, 1),
		hurry:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	go c.flush()
	return c
}

// poke signals ch without blocking; a signal already pending suffices, as
// the receiver re-checks the state under mu.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *genConn) Read(b []byte) (int, error) {
	n, err := c.br.Read(b)
	if err != nil {
		c.ended.Do(c.end)
		if errors.Is(err, net.ErrClosed) {
			c.mu.Lock()
			if c.err != nil {
				err = c.err // closed because a write failed: say why
			}
			c.mu.Unlock()
		}
	}
	return n, err
}

// Write hands b to the flusher. It returns once b is copied, and blocks
// only while maxPending bytes are pending.
func (c *genConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var (
		n       int
		timer   *time.Timer
		expired <-chan time.Time
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		c.mu.Lock()
		if err := c.errLocked(); err != nil {
			c.mu.Unlock()
			return n, err
		}
		if room := maxPending - len(c.buf); room > 0 {
			k := min(room, len(b)-n)
			if k > 0 {
				wasReady := c.readyLocked()
				c.buf = append(c.buf, b[n:n+k]...)
				if !wasReady && c.readyLocked() {
					poke(c.wake)
				}
				if !c.wdl.IsZero() && (c.bufDL.IsZero() || c.wdl.Before(c.bufDL)) {
					c.bufDL = c.wdl
				}
				n += k
			}
			if n == len(b) {
				c.mu.Unlock()
				return n, nil
			}
		}
		dl := c.wdl
		c.mu.Unlock()
		if timer == nil && !dl.IsZero() {
			timer = time.NewTimer(time.Until(dl))
			expired = timer.C
		}
		select {
		case <-c.room:
		case <-expired:
			c.fail(fmt.Errorf("mqttpub: write: %w", os.ErrDeadlineExceeded))
		}
	}
}

// errLocked is the error a Write gets now, nil if it may proceed.
func (c *genConn) errLocked() error {
	switch {
	case c.err != nil:
		return c.err
	case c.closing:
		return errConnClosed
	}
	return nil
}

// flush is the flusher: it writes the pending bytes, all of them in one
// Write on the socket, until the connection fails or is closed with
// nothing pending.
func (c *genConn) flush() {
	defer close(c.done)
	defer poke(c.room) // a Write waiting for room sees the end
	var (
		out []byte    // the batch; swapped with buf so both are reused
		dl  time.Time // the write deadline set on the socket
	)
	for {
		c.mu.Lock()
		for !c.readyLocked() && !c.closing && c.err == nil {
			c.mu.Unlock()
			<-c.wake
			c.mu.Lock()
		}
		if c.err != nil || len(c.buf) == 0 { // failed, or closed with nothing left
			c.mu.Unlock()
			return
		}
		out, c.buf = c.buf, out[:0]
		bdl := c.bufDL
		c.bufDL = time.Time{}
		c.mu.Unlock()
		poke(c.room)

		if !bdl.Equal(dl) {
			if err := c.Conn.SetWriteDeadline(bdl); err != nil {
				c.fail(err)
				return
			}
			dl = bdl
		}
		if _, err := c.Conn.Write(out); err != nil {
			c.fail(err)
			return
		}
	}
}

// readyLocked reports whether the flusher should write the pending bytes
// now: there are some, and the connection is not corked, or they fill the
// buffer (a Write waits for room, and cork must never hold it up). c.mu
// must be held.
func (c *genConn) readyLocked() bool {
	return len(c.buf) > 0 && (!c.corked || len(c.buf) >= maxPending)
}

// cork holds the bytes of later Writes back from the socket until uncork,
// so that a burst of packets goes out in one write(2). It never blocks a
// Write: a full buffer is written corked or not. Close writes what is
// pending regardless.
func (c *genConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork lets the flusher write what cork held back, and later Writes go
// out as they come again.
func (c *genConn) uncork() {
	c.mu.Lock()
	c.corked = false
	ready := c.readyLocked()
	c.mu.Unlock()
	if ready {
		poke(c.wake)
	}
}

// fail ends the connection because a write failed: end runs first, then
// the error is stored for every later Write (both under mu), then the
// socket is closed so that paho's reader fails now rather than at the
// next keepalive.
func (c *genConn) fail(err error) {
	// The end is announced before anyone can see err (paho must not
	// complete a token because of a failure its generation does not
	// know of), and both happen under mu: once the end is seen, a Write
	// sees err too, never a connection that still takes bytes. end only
	// bumps a counter; it must not take mu.
	c.mu.Lock()
	c.ended.Do(c.end)
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.closeConn()
	poke(c.wake)
	poke(c.room)
}

func (c *genConn) closeConn() {
	c.connOnce.Do(func() {
		c.closeErr = c.Conn.Close()
	})
}

// SetWriteDeadline sets the deadline for the bytes of later Writes (see
// the type's doc); it does not change a write already in the kernel.
func (c *genConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdl = t
	c.mu.Unlock()
	return nil
}

func (c *genConn) SetDeadline(t time.Time) error {
	_ = c.SetWriteDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

// Close ends the connection: end runs, the pending bytes are written for
// at most linger, then the socket is closed. It returns once the flusher
// has returned. Concurrent and later calls wait for the first one.
func (c *genConn) Close() error {
	c.shut.Do(func() {
		c.ended.Do(c.end)
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		poke(c.wake)
		t := time.NewTimer(c.linger)
		select {
		case <-c.done:
		case <-t.C:
		case <-c.hurry:
		}
		t.Stop()
		c.closeConn() // a write still in the kernel fails now
		<-c.done
	})
	return c.closeErr
}

// abort closes the connection without waiting for pending bytes; it also
// cuts short a Close in progress.
func (c *genConn) abort() {
	c.hurryOnce.Do(func() { close(c.hurry) })
	_ = c.Close()
}
