package mqttpub

import (
	"context"
	"fmt"
	"time"
)

// drain runs one connection: it replays the Source from its first row,
// keeps at most Window publishes in flight, and deletes each row once its
// PUBACK was read on this connection. It returns when the connection fails
// (error) or ctx ends (nil). progressed reports whether any row was
// acknowledged.
func (p *Publisher) drain(ctx context.Context, l link) (progressed bool, err error) {
	if p.win == nil {
		p.win = newWindow(p.o.Window)
	}
	w := p.win
	w.reset()
	var (
		cursor   uint64 // last Seq read; 0 replays everything still in the outbox
		caughtUp bool   // the last Read returned everything there was
	)
	// ended settles the PUBACKs this connection read before it ended (they
	// are acknowledgements like any other: doc.go, "The connection") and
	// returns err.
	ended := func(err error) (bool, error) {
		if n, serr := p.settle(l); serr == nil && n > 0 {
			progressed = true
		}
		return progressed, err
	}
	// One timer for the loop's four clocks: a select costs the runtime
	// per case on every wakeup, and the loop wakes a few times per
	// commit. Each clock is a deadline; the timer is set for the nearest.
	begin := time.Now()
	var (
		ackAt   time.Time                  // AckTimeout after the last progress while publishes are in flight; zero when none are
		hurryAt time.Time                  // ackHurry after the last burst while its PUBACKs are not all in; zero otherwise
		pollAt  = begin.Add(idlePoll)      // read the outbox again, in case a wakeup was lost
		keepAt  = begin.Add(p.o.KeepAlive) // the keepalive's next check
		timer   = newClocks(pollAt, keepAt)
	)
	defer timer.stop()
	ka := keepalive{every: p.o.KeepAlive, sent: begin}
	notify := p.src.Notify()

	for {
		if !caughtUp && w.n < p.o.Window {
			if done(l.lost()) {
				return ended(lostError(l))
			}
			was := w.n
			// Whole batches, at most maxReadRows rows: the loop reads on
			// until the window is full.
			limit := min(p.o.Window-w.n, max(1, maxReadRows/p.o.BatchMax)) * p.o.BatchMax
			recs, err := p.src.Read(cursor, limit)
			if err != nil {
				return ended(fmt.Errorf("mqttpub: read outbox: %w", err))
			}
			var drop []uint64
			for _, r := range recs {
				if len(r.Payload) > p.o.MaxPayload-p.framing() {
					// Refuse before publishing: the broker could
					// ack and drop it, and it could never be delivered.
					cursor = r.Seq
					drop = append(drop, r.Seq)
					p.log.Warn("usage event larger than mqtt max_payload; dropped unpublished", "seq", r.Seq, "bytes", len(r.Payload), "max_payload", p.o.MaxPayload)
					continue
				}
				if p.o.BatchMax == 1 {
					cursor = r.Seq
					if err := l.publish(w.take(r.Seq, nil), r.Payload); err != nil {
						return ended(writeError(err))
					}
					p.published.Add(1)
					continue
				}
				if p.b.rows == p.o.BatchMax || len(p.b.payload)+len(r.Payload)+1 > p.o.MaxPayload {
					if err := p.publishBatch(l); err != nil {
						return ended(writeError(err))
					}
				}
				if w.n == p.o.Window {
					break // the rest is read again when PUBACKs free the window
				}
				cursor = r.Seq
				p.b.add(r, p.o)
			}
			if p.b.rows > 0 {
				if err := p.publishBatch(l); err != nil {
					return ended(writeError(err))
				}
			}
			// Fewer rows than asked for, all of them taken: the outbox
			// has no more now (outbox.Store.Read), and the next commit's
			// Notify says when it has. Reading on would cost a read
			// transaction per commit that finds nothing.
			caughtUp = len(recs) < limit && (len(recs) == 0 || cursor == recs[len(recs)-1].Seq)
			if w.n > was {
				// One flush a burst: the burst leaves in one write(2).
				if err := l.flush(); err != nil {
					return ended(writeError(err))
				}
				ka.sent = time.Now()
				hurryAt = ka.sent.Add(ackHurry)
			}
			if len(drop) > 0 {
				if err := p.src.Delete(drop...); err != nil {
					return ended(fmt.Errorf("mqttpub: delete oversize rows: %w", err))
				}
				p.oversize.Add(uint64(len(drop)))
			}
			if was == 0 && w.n > 0 {
				ackAt = time.Now().Add(p.o.AckTimeout)
			}
			p.inFlight.Store(int64(w.n))
			if !caughtUp && w.n < p.o.Window {
				continue // read on before waiting
			}
		}

		timer.next(ackAt, hurryAt, pollAt, keepAt)
		select {
		case <-ctx.Done():
			// Delete what is acknowledged or about to be, to replay less
			// later.
			p.finish(l)
			return progressed, nil
		case <-l.lost():
			return ended(lostError(l))
		case <-l.acks():
			n, err := p.settle(l)
			progressed = progressed || n > 0
			if err != nil {
				return progressed, err
			}
			if w.n == 0 {
				ackAt, hurryAt = time.Time{}, time.Time{}
			} else if n > 0 {
				ackAt = time.Now().Add(p.o.AckTimeout) // progress: the clock restarts
			}
		case <-notify:
			caughtUp = false
		case now := <-timer.c():
			timer.fired()
			if !hurryAt.IsZero() && !now.Before(hurryAt) {
				hurryAt = time.Time{}
				l.hurry() // a broker that holds PUBACKs back (ackwait.go)
			}
			if !ackAt.IsZero() && !now.Before(ackAt) {
				return ended(ErrAckTimeout)
			}
			if !now.Before(keepAt) {
				d, err := ka.check(l, now)
				if err != nil {
					return ended(err)
				}
				keepAt = now.Add(d)
			}
			if !now.Before(pollAt) {
				caughtUp = false
				pollAt = now.Add(idlePoll)
			}
		}
	}
}

// lostError is why l ended, as an ErrConnectionLost.
func lostError(l link) error {
	if err := l.err(); err != nil {
		return fmt.Errorf("%w: %w", ErrConnectionLost, err)
	}
	return ErrConnectionLost
}

// writeError is a failed write (or write deadline) as an
// ErrConnectionLost: the connection is no longer usable.
func writeError(err error) error {
	return fmt.Errorf("%w: write: %w", ErrConnectionLost, err)
}

// keepalive is MQTT's keepalive on one connection (MQTT 3.1.1 §3.1.2.10):
// a PINGREQ once nothing was sent or nothing was read for the keepalive
// interval, and the connection given up when nothing is read within half
// an interval after it (paho's default ping timeout). A half-open link so
// ends within about 1.5 intervals of its last packet. Only the drain
// loop's goroutine uses it.
type keepalive struct {
	every  time.Duration
	sent   time.Time // the last flush
	pingAt time.Time // when the unanswered PINGREQ was sent; zero if none
}

// check runs when the keepalive timer fires at now. It pings when due, and
// returns how long until it should run again, or ErrConnectionLost when
// a PINGREQ went unanswered.
func (k *keepalive) check(l link, now time.Time) (time.Duration, error) {
	heard := l.heard()
	if !k.pingAt.IsZero() {
		// Any packet read since the PINGREQ shows the link alive.
		if !heard.After(k.pingAt) {
			if wait := k.pingAt.Add(k.every / 2).Sub(now); wait > 0 {
				return wait, nil
			}
			return 0, fmt.Errorf("%w: no answer to PINGREQ within %s", ErrConnectionLost, k.every/2)
		}
		k.pingAt = time.Time{}
	}
	quiet := k.sent
	if heard.Before(quiet) {
		quiet = heard
	}
	if wait := quiet.Add(k.every).Sub(now); wait > 0 {
		return wait, nil
	}
	if err := l.ping(); err != nil {
		return 0, writeError(err)
	}
	k.sent, k.pingAt = now, now
	return k.every / 2, nil
}

// framing is what a row costs besides its payload in a message: the
// newline that ends each event of a batch.
func (p *Publisher) framing() int {
	if p.o.BatchMax > 1 {
		return 1
	}
	return 0
}

// batch gathers rows into one message: each payload followed by "\n". Its
// buffers are reused: a publish copies the payload into the connection's
// write buffer.
type batch struct {
	payload []byte
	first   uint64
	more    []uint64
	rows    int
}

func (b *batch) add(r Record, o Options) {
	if b.rows == 0 {
		b.first = r.Seq
		if b.payload == nil {
			// Sized from the first row: events of one node are alike,
			// and a larger one only grows it once.
			b.payload = make([]byte, 0, min(o.MaxPayload, o.BatchMax*(len(r.Payload)+1)))
		}
	} else {
		b.more = append(b.more, r.Seq)
	}
	b.payload = append(append(b.payload, r.Payload...), '\n')
	b.rows++
}

// publishBatch publishes p.b and empties it.
func (p *Publisher) publishBatch(l link) error {
	b := &p.b
	err := l.publish(p.win.take(b.first, b.more), b.payload)
	p.published.Add(1)
	b.payload, b.more, b.rows = b.payload[:0], b.more[:0], 0
	return err
}

// finish settles the publishes in flight when Run is stopped: the rows
// whose PUBACK already came are deleted, and those still on their way get
// up to quiesce to arrive, so that a node that stops replays as few
// delivered rows as it can after its restart.
func (p *Publisher) finish(l link) {
	t := time.NewTimer(quiesce)
	defer t.Stop()
	for {
		if _, err := p.settle(l); err != nil || p.win.n == 0 {
			return
		}
		select {
		case <-l.acks():
		case <-l.lost():
			_, _ = p.settle(l)
			return
		case <-t.C:
			_, _ = p.settle(l)
			return
		}
	}
}

// settle deletes the rows of the publishes whose PUBACK l has read since
// the last call, in one Delete, and frees their packet identifiers. A
// PUBACK the broker withholds holds back only its own row. A PUBACK for an
// identifier not in flight (a broker's duplicate) is ignored.
func (p *Publisher) settle(l link) (int, error) {
	p.ids = l.takeAcks(p.ids[:0])
	seqs := p.acks[:0] // Delete copies them: reused, not regrown per burst
	for _, id := range p.ids {
		var ok bool
		if seqs, ok = p.win.ack(id, seqs); !ok {
			p.log.Debug("mqtt PUBACK for a packet identifier not in flight; ignored", "packet_id", id)
		}
	}
	p.acks = seqs
	p.inFlight.Store(int64(p.win.n))
	if len(seqs) == 0 {
		return 0, nil
	}
	if err := p.src.Delete(seqs...); err != nil {
		// The rows stay and are published again on the next connection:
		// a duplicate, never a loss.
		return 0, fmt.Errorf("mqttpub: delete acknowledged rows: %w", err)
	}
	p.acked.Add(uint64(len(seqs)))
	return len(seqs), nil
}

// window is the publishes in flight on one connection, by packet
// identifier: identifier i is slot i-1, so a PUBACK finds its rows at
// once and the identifiers in flight are distinct by construction. Free
// identifiers are taken oldest freed first, and a new connection starts
// after the last identifier the previous one took, so that identifiers
// cycle through the whole window rather than repeat at once. Only the Run
// goroutine uses it.
type window struct {
	slots []slot   // by packet identifier - 1
	free  []uint16 // ring of free identifiers: taken at head, returned at head+nfree
	head  int
	nfree int
	n     int    // publishes in flight
	last  uint16 // the identifier taken last
}

// slot is one publish in flight.
type slot struct {
	seq  uint64   // the row published, or the first row of a batch
	more []uint64 // a batch's other rows; reused
	used bool
}

func newWindow(size int) *window {
	return &window{slots: make([]slot, size), free: make([]uint16, size)}
}

// reset frees every identifier, for a new connection.
func (w *window) reset() {
	size := len(w.slots)
	for i := range w.slots {
		w.slots[i].used = false
	}
	for i := range w.free {
		w.free[i] = uint16((int(w.last)+i)%size + 1)
	}
	w.head, w.nfree, w.n = 0, size, 0
}

// take records a publish of seq (and a batch's more) and returns its
// packet identifier. The caller keeps n below the window's size.
func (w *window) take(seq uint64, more []uint64) uint16 {
	id := w.free[w.head]
	w.head = (w.head + 1) % len(w.free)
	w.nfree--
	s := &w.slots[id-1]
	s.seq, s.more, s.used = seq, append(s.more[:0], more...), true
	w.n++
	w.last = id
	return id
}

// ack frees the publish with identifier id and appends its rows to seqs;
// false if no publish with that identifier is in flight.
func (w *window) ack(id uint16, seqs []uint64) ([]uint64, bool) {
	if id == 0 || int(id) > len(w.slots) || !w.slots[id-1].used {
		return seqs, false
	}
	s := &w.slots[id-1]
	s.used = false
	seqs = append(append(seqs, s.seq), s.more...)
	w.free[(w.head+w.nfree)%len(w.free)] = id
	w.nfree++
	w.n--
	return seqs, true
}

// done reports whether c is closed.
func done(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// clocks is the drain loop's one timer, set for the nearest of its
// deadlines. Only the drain loop's goroutine uses it.
type clocks struct {
	t  *time.Timer
	at time.Time // what t is set for
}

func newClocks(deadlines ...time.Time) *clocks {
	c := &clocks{t: time.NewTimer(time.Hour)}
	c.next(deadlines...)
	return c
}

// next sets the timer for the earliest non-zero deadline, unless it is
// set for that already.
func (c *clocks) next(deadlines ...time.Time) {
	var at time.Time
	for _, d := range deadlines {
		if !d.IsZero() && (at.IsZero() || d.Before(at)) {
			at = d
		}
	}
	if at.Equal(c.at) {
		return
	}
	c.at = at
	c.t.Reset(time.Until(at))
}

func (c *clocks) c() <-chan time.Time { return c.t.C }

// fired records that the timer went off, so that next sets it again.
func (c *clocks) fired() { c.at = time.Time{} }

func (c *clocks) stop() { c.t.Stop() }
