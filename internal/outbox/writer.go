package outbox

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// wall is the writer's time source: it decides when a commit is due and how
// old the unsynced backlog is. Production uses realWall; tests inject a
// fake through hooks so that windows and stalls need no sleeps.
type wall interface {
	Now() time.Time
	// Alarm returns the writer's alarm, stopped.
	Alarm() alarm
}

// alarm wakes the writer at its commit deadline. Set and Stop are called
// with Store.mu held, by the writer and by the Append or Delete that gives
// an idle writer its deadline; C is read by the writer alone.
type alarm interface {
	// Set makes C receive once the clock reaches at (an absolute time,
	// so a fake clock moved between Now and Set cannot make it late),
	// replacing any earlier setting and dropping a value not yet
	// received.
	Set(at time.Time)
	// Stop stops the alarm and drops a value not yet received.
	Stop()
	C() <-chan time.Time
}

type realWall struct{}

func (realWall) Now() time.Time { return time.Now() }

func (realWall) Alarm() alarm {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return realAlarm{t}
}

// realAlarm is a time.Timer: since Go 1.23 Reset and Stop leave no stale
// value in its channel, as alarm requires.
type realAlarm struct{ t *time.Timer }

func (a realAlarm) Set(at time.Time)    { a.t.Reset(time.Until(at)) }
func (a realAlarm) Stop()               { a.t.Stop() }
func (a realAlarm) C() <-chan time.Time { return a.t.C }

// run is the writer goroutine, owned by the Store: it turns queued events
// and pending deletes into group commits until Close. A commit is due when
// MaxBatch events wait, or when the oldest waiting event (or pending
// delete) has waited CommitInterval, counted from its Append, not from
// when the writer got to it: after a slow commit, events that waited
// through it are committed at once. A due commit takes everything queued.
// After Close it commits what is left and returns.
func (s *Store) run() {
	defer close(s.stopped)
	spare := make([]item, 0, s.o.MaxBatch)
	var spareChunks [][]byte
	for {
		s.mu.Lock()
		deadline, due := s.dueLocked(s.wall.Now())
		closed := s.closed
		if !due && !closed {
			idle := deadline.IsZero()
			if idle {
				s.alarm.Stop()
			} else {
				s.alarm.Set(deadline)
			}
			s.idle = idle
			s.mu.Unlock()
			s.sleep(idle)
			continue
		}
		batch, chunks := s.queue, s.chunks
		s.queue, s.chunks = spare[:0], spareChunks[:0]
		s.committing = len(batch)
		s.committingNotSent, s.queuedNotSent = s.queuedNotSent, 0
		if len(batch) > 0 {
			s.committingSince = batch[0].at
		}
		s.mu.Unlock()

		spareChunks = s.commit(batch, chunks) // failures are counted and logged by commit
		spare = reset(batch)
		if closed {
			// Append refuses events and Delete fails once closed is set,
			// so this commit took everything.
			return
		}
	}
}

// dueLocked reports whether a commit is due at now, or else when one will
// be (zero: nothing waits, sleep until kicked). s.mu must be held.
func (s *Store) dueLocked(now time.Time) (time.Time, bool) {
	n := len(s.queue)
	if n >= s.o.MaxBatch {
		return now, true
	}
	var deadline time.Time
	if n > 0 {
		deadline = s.queue[0].at.Add(s.o.CommitInterval)
	}
	if len(s.pending) > 0 {
		if d := s.pendingSince.Add(s.o.CommitInterval); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	if deadline.IsZero() {
		return deadline, false
	}
	return deadline, !now.Before(deadline)
}

// sleep waits for the alarm or a kick. The alarm is set for the writer's
// deadline, by the writer itself, or, while the writer is idle (nothing
// queued or pending, no deadline), by the Append or Delete that gives it
// one (armLocked). Kicks come only from an Append that filled a batch and
// from Close. So at a steady rate the writer wakes once per commit, at its
// deadline, however many events and deletes the commit takes, and an
// event that finds it idle does not wake it to set its deadline.
func (s *Store) sleep(idle bool) {
	if h := s.hooks.idle; idle && h != nil {
		h()
	}
	select {
	case <-s.kick:
	case <-s.alarm.C():
	}
	if h := s.hooks.woke; h != nil {
		h()
	}
}

// armLocked gives an idle writer its deadline: the commit due at at. It
// sets the alarm the writer waits on rather than wake the writer to set
// it. s.mu must be held.
func (s *Store) armLocked(at time.Time) {
	if s.idle {
		s.idle = false
		s.alarm.Set(at)
	}
}

// wakeLocked wakes the writer; kicks coalesce (capacity 1). s.mu must be
// held.
func (s *Store) wakeLocked() {
	select {
	case s.kick <- struct{}{}:
		if h := s.hooks.kicked; h != nil {
			h()
		}
	default:
	}
}

// freeChunksAfter hands the chunks of a finished commit back to
// rowLocked (nothing reads the batch's rows once its transaction has
// ended) and returns the emptied list for reuse.
func (s *Store) freeChunksAfter(chunks [][]byte) [][]byte {
	s.mu.Lock()
	for _, c := range chunks {
		if len(s.freeChunks) < maxFreeChunks {
			s.freeChunks = append(s.freeChunks, c[:0])
		}
	}
	s.mu.Unlock()
	clear(chunks)
	return chunks[:0]
}

// reset empties batch, dropping its references to payloads.
func reset(batch []item) []item {
	clear(batch)
	return batch[:0]
}

// result is what one write transaction did.
type result struct {
	removed      int
	removedBytes int64
	oldest       int64
}

// commit writes batch and the pending deletes in one bbolt transaction: one
// fsync. On failure the batch's events are dropped and counted (docs/usage-events.md:
// drop_newest when not writable), the deletes are kept for the next commit,
// and Append refuses events for failingBackoff.
//
// It returns chunks, emptied, once the chunks in it (the batch's rows)
// are free again.
func (s *Store) commit(batch []item, chunks [][]byte) [][]byte {
	attempted, err := s.commitOnce(batch)
	chunks = s.freeChunksAfter(chunks)
	if h := s.hooks.afterCommit; h != nil && attempted {
		h(err)
	}
	return chunks
}

func (s *Store) commitOnce(batch []item) (attempted bool, err error) {
	var dels []uint64
	s.mu.Lock()
	if len(s.pending) > 0 {
		dels = s.pending
		// The two slices take turns, keeping their arrays.
		s.pending, s.spare = s.spare[:0], nil
		// Sorted here, under mu, because Read reads deleting under mu;
		// nearly sorted already (PUBACK order), which pdqsort finds in
		// one pass.
		slices.Sort(dels)
		s.deleting = dels
		s.deletingMax, s.pendingMax = s.pendingMax, 0
	}
	s.mu.Unlock()
	if len(batch) == 0 && len(dels) == 0 {
		return false, nil
	}
	var added int64
	for _, it := range batch {
		added += int64(len(it.val) - timeLen)
	}

	var r result
	err = guard(s.o.Logger, func() error {
		if h := s.hooks.beforeCommit; h != nil {
			if err := h(); err != nil {
				return err
			}
		}
		return s.db.Update(func(tx *bolt.Tx) error { return write(tx, batch, dels, &r, &s.groupBuf) })
	})

	now := s.o.Clock()
	s.mu.Lock()
	s.deleting = nil
	defer func() {
		// Read copies deleting only under mu and while it is set, so dels
		// is unused now; run last, after a failure has merged it back.
		if dels != nil {
			s.mu.Lock()
			s.spare = dels[:0]
			s.mu.Unlock()
		}
	}()
	deletingMax := s.deletingMax
	s.deletingMax = 0
	s.committing = 0
	s.committingNotSent = 0
	if err != nil {
		if len(dels) > 0 && len(s.pending) == 0 {
			s.pendingSince = s.wall.Now() // try them again one window later
		}
		s.pending = append(s.pending, dels...)
		s.pendingMax = max(s.pendingMax, deletingMax)
		s.resRows -= len(batch)
		s.resBytes -= added
		s.stats.Dropped.Failing += uint64(len(batch))
		wasFailing := s.failing
		s.failing = true
		s.retryAt = now.Add(failingBackoff)
		if s.closed {
			s.flushErr = err // Close reports it
		}
		s.mu.Unlock()
		if !wasFailing {
			s.o.Logger.Error("outbox: commit failed; dropping events until a commit succeeds",
				"path", s.o.Path, "dropped", len(batch), "err", err)
		}
		return true, err
	}
	s.stats.Commits++
	s.stats.Committed += uint64(len(batch))
	s.stats.Deleted += uint64(r.removed)
	s.depth += len(batch) - r.removed
	s.bytes += added - r.removedBytes
	s.resRows -= r.removed
	s.resBytes -= r.removedBytes
	s.oldest = r.oldest
	recovered := s.failing
	s.failing = false
	s.mu.Unlock()
	if recovered {
		s.o.Logger.Info("outbox: commits succeed again", "path", s.o.Path)
	}
	if len(batch) > 0 {
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
	return true, nil
}

// write is the body of one commit transaction: it deletes the delivered
// events dels (sorted), then writes batch as new groups, their values built
// in *buf (the writer's, reused: bbolt keeps a value only until the
// transaction ends).
func write(tx *bolt.Tx, batch []item, dels []uint64, r *result, buf *[]byte) error {
	b := tx.Bucket(bucketName)
	if b == nil {
		return fmt.Errorf("%w: bucket %q is missing", ErrCorrupt, bucketName)
	}
	// Keys only ever grow at the end, so full pages never need room for
	// inserts there (a rewritten group only shrinks).
	b.FillPercent = 1.0
	if err := deleteEvents(b, dels, r); err != nil {
		return err
	}
	if err := putGroups(b, batch, buf); err != nil {
		return err
	}
	if _, v := b.Cursor().First(); v != nil {
		fs := frames{v: v}
		if f, ok := fs.next(); ok {
			r.oldest = f.at
		}
	}
	return nil
}

// deleteEvents removes the events dels (sorted) from their groups: a group
// left empty is deleted, one left with some events is rewritten with them.
// A seq deleted twice, or never written, is skipped.
func deleteEvents(b *bolt.Bucket, dels []uint64, r *result) error {
	type change struct {
		key     []byte // the group's key now
		next    []byte // its rewritten value; nil: the group goes
		nextKey uint64 // the first event kept
	}
	var changes []change
	c := b.Cursor()
	for i := 0; i < len(dels); {
		k, v := groupAt(c, dels[i])
		if k == nil {
			i++ // before the first group: already deleted
			continue
		}
		last := lastSeq(v)
		if dels[i] > last {
			i++ // after its group's last event: already deleted
			continue
		}
		j := i
		for j < len(dels) && dels[j] <= last {
			j++
		}
		// Keep the frames not in dels[i:j] (both sorted).
		ch := change{key: k}
		removed, d := 0, dels[i:j]
		fs := frames{v: v}
		for f, ok := fs.next(); ok; f, ok = fs.next() {
			for len(d) > 0 && d[0] < f.seq {
				d = d[1:]
			}
			if len(d) > 0 && d[0] == f.seq {
				removed++
				r.removed++
				r.removedBytes += int64(len(f.payload))
				continue
			}
			if ch.next == nil {
				ch.nextKey = f.seq
			}
			ch.next = appendFrame(ch.next, f.seq, f.at, f.payload)
		}
		if removed > 0 {
			changes = append(changes, ch)
		}
		i = j
	}
	// The cursor is done: bbolt's keys and values stay valid until the
	// transaction ends, but a cursor must not cross its own deletes.
	for _, ch := range changes {
		if err := b.Delete(ch.key); err != nil {
			return err
		}
		if ch.next != nil {
			if err := b.Put(seqKey(ch.nextKey), ch.next); err != nil {
				return err
			}
		}
	}
	return nil
}

// putGroups writes batch as groups (grouper), numbering its events from
// the bucket's sequence on, their values built in *buf.
func putGroups(b *bolt.Bucket, batch []item, buf *[]byte) error {
	if len(batch) == 0 {
		return nil
	}
	size := 0
	for _, it := range batch {
		size += frameHead + len(it.val) - timeLen
	}
	if cap(*buf) < size {
		*buf = make([]byte, 0, size) // all of the commit's groups, without growing
	}
	g := grouper{b: b, v: (*buf)[:0]}
	seq := b.Sequence()
	for _, it := range batch {
		seq++
		if err := g.add(seq, int64(binary.BigEndian.Uint64(it.val)), it.val[timeLen:]); err != nil {
			return err
		}
	}
	if err := g.flush(); err != nil {
		return err
	}
	*buf = g.v
	return b.SetSequence(seq)
}
