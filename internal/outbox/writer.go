package outbox

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// run is the writer goroutine, owned by the Store: it turns queued events
// and pending deletes into group commits until Close closes the queue. The
// queue is read until it is closed and empty, so everything accepted before
// Close reaches a commit.
func (s *Store) run() {
	defer close(s.stopped)
	window := time.NewTimer(s.o.CommitInterval)
	window.Stop()
	batch := make([]item, 0, s.o.MaxBatch)
	for {
		open := true
		select {
		case it, ok := <-s.queue:
			if ok {
				batch = append(batch, it)
			}
			open = ok
		case <-s.wake:
		}
		if open {
			batch, open = s.gather(batch, window)
		}
		s.commit(batch) // failures are counted and logged by commit
		batch = reset(batch)
		if !open {
			return
		}
	}
}

// gather adds queued events to batch until it holds MaxBatch events or the
// commit window has passed. It reports false once the queue is closed and
// empty; after Close it no longer waits for the window.
//
// The window is measured on the real clock: it paces fsyncs (at most about
// one per CommitInterval while events trickle in), it does not decide
// anything a test would check.
func (s *Store) gather(batch []item, window *time.Timer) ([]item, bool) {
	window.Reset(s.o.CommitInterval)
	defer window.Stop()
	for len(batch) < s.o.MaxBatch {
		select {
		case it, ok := <-s.queue:
			if !ok {
				return batch, false
			}
			batch = append(batch, it)
		case <-window.C:
			return batch, true
		}
	}
	return batch, true
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
// fsync. On failure the batch's events are dropped and counted (SPEC §8:
// drop_newest when not writable), the deletes are kept for the next commit,
// and Append refuses events for failingBackoff.
func (s *Store) commit(batch []item) {
	attempted, err := s.commitOnce(batch)
	if h := s.hooks.afterCommit; h != nil && attempted {
		h(err)
	}
}

func (s *Store) commitOnce(batch []item) (attempted bool, err error) {
	var dels map[uint64]struct{}
	s.mu.Lock()
	if len(s.pending) > 0 {
		dels = s.pending
		s.pending = make(map[uint64]struct{})
		s.deleting = dels
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
		return s.db.Update(func(tx *bolt.Tx) error { return write(tx, batch, dels, &r) })
	})

	now := s.o.Clock.Now()
	s.mu.Lock()
	s.deleting = nil
	if err != nil {
		for q := range dels {
			s.pending[q] = struct{}{}
		}
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

// write is the body of one commit transaction.
func write(tx *bolt.Tx, batch []item, dels map[uint64]struct{}, r *result) error {
	b := tx.Bucket(bucketName)
	if b == nil {
		return fmt.Errorf("%w: bucket %q is missing", ErrCorrupt, bucketName)
	}
	// Keys only ever grow, so full pages never need room for inserts.
	b.FillPercent = 1.0
	k := make([]byte, keyLen)
	for seq := range dels {
		binary.BigEndian.PutUint64(k, seq)
		v := b.Get(k)
		if v == nil {
			continue // already deleted, or never existed
		}
		r.removed++
		r.removedBytes += int64(len(v) - timeLen)
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	// Keys must stay valid until the transaction ends: one buffer for all.
	keys := make([]byte, keyLen*len(batch))
	for i, it := range batch {
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		key := keys[i*keyLen : (i+1)*keyLen]
		binary.BigEndian.PutUint64(key, seq)
		if err := b.Put(key, it.val); err != nil {
			return err
		}
	}
	if _, v := b.Cursor().First(); v != nil {
		r.oldest = int64(binary.BigEndian.Uint64(v))
	}
	return nil
}
