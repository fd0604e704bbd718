package outbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/scootgate/scootgate/internal/clock"
)

// tstore is a Store whose invariants are checked when it is closed (by the
// test, or by t.Cleanup): the file opens clean and passes bbolt's check,
// rows are in strictly increasing Seq (FIFO) order, within MaxEvents and
// MaxBytes, no deleted row survived (no lost acks), the file agrees with
// Stats, and every Append call is accounted for (accepted = committed or
// counted as dropped).
type tstore struct {
	*Store
	t     *testing.T
	clock *clock.Fake // nil when the test passed its own Clock
	start Stats

	trues, falses atomic.Uint64

	mu      sync.Mutex
	deleted map[uint64]bool // every Seq passed to Delete

	closeOnce sync.Once
	closed    atomic.Bool
}

// newStore opens a Store at o.Path (default: outbox.db in a fresh
// t.TempDir()), with a fake clock unless o.Clock is set.
func newStore(t *testing.T, o Options, h hooks) *tstore {
	t.Helper()
	if o.Path == "" {
		o.Path = filepath.Join(t.TempDir(), "outbox.db")
	}
	var fc *clock.Fake
	if o.Clock == nil {
		fc = clock.NewFake(time.Time{})
		o.Clock = fc.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(tlog{t}, nil))
	}
	s, err := open(o, h)
	if err != nil {
		t.Fatalf("open(%s): %v", o.Path, err)
	}
	ts := &tstore{Store: s, t: t, clock: fc, start: s.Stats(), deleted: map[uint64]bool{}}
	t.Cleanup(func() {
		explicit := ts.closed.Load()
		if err := ts.Close(); err != nil && !explicit {
			t.Errorf("Close: %v", err)
		}
	})
	return ts
}

func (ts *tstore) Append(p []byte) bool {
	ok := ts.Store.Append(p)
	if ok {
		ts.trues.Add(1)
	} else {
		ts.falses.Add(1)
	}
	return ok
}

func (ts *tstore) AppendNotSent(p []byte) bool {
	ok := ts.Store.AppendNotSent(p)
	if ok {
		ts.trues.Add(1)
	} else {
		ts.falses.Add(1)
	}
	return ok
}

func (ts *tstore) Delete(seqs ...uint64) error {
	ts.mu.Lock()
	for _, q := range seqs {
		ts.deleted[q] = true
	}
	ts.mu.Unlock()
	return ts.Store.Delete(seqs...)
}

// Close closes the Store and, the first time, checks the invariants.
func (ts *tstore) Close() error {
	ts.closed.Store(true)
	err := ts.Store.Close()
	ts.closeOnce.Do(ts.verify)
	return err
}

func (ts *tstore) verify() {
	t := ts.t
	st := ts.Stats()
	calls := ts.trues.Load() + ts.falses.Load()
	if st.Appended != ts.trues.Load() {
		t.Errorf("invariant: Stats.Appended = %d, Append returned true %d times", st.Appended, ts.trues.Load())
	}
	if got := st.Committed + st.Dropped.Total(); got != calls {
		t.Errorf("invariant: committed %d + dropped %+v = %d, want %d Append calls", st.Committed, st.Dropped, got, calls)
	}
	if want := ts.start.Depth + int(st.Committed) - int(st.Deleted); st.Depth != want {
		t.Errorf("invariant: Depth = %d, want start %d + committed %d - deleted %d", st.Depth, ts.start.Depth, st.Committed, st.Deleted)
	}

	db, err := bolt.Open(ts.o.Path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Errorf("invariant: reopen %s: %v", ts.o.Path, err)
		return
	}
	defer db.Close()
	var (
		rows  int
		bytes int64
		prev  uint64
	)
	err = db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("bbolt check: %w", errors.Join(errs...))
		}
		b := tx.Bucket(bucketName)
		if b == nil {
			return errors.New("no events bucket")
		}
		var lastKey uint64
		return b.ForEach(func(k, v []byte) error {
			if len(k) != keyLen {
				return fmt.Errorf("row key %x: not 8 bytes", k)
			}
			key := binary.BigEndian.Uint64(k)
			if key <= lastKey && lastKey != 0 {
				return fmt.Errorf("row %d after row %d: not FIFO", key, lastKey)
			}
			lastKey = key
			fs := frames{v: v}
			n := 0
			for f, ok := fs.next(); ok; f, ok = fs.next() {
				if n == 0 && f.seq != key {
					return fmt.Errorf("row %d starts with event %d", key, f.seq)
				}
				n++
				if f.seq <= prev {
					return fmt.Errorf("event %d after event %d: not FIFO", f.seq, prev)
				}
				prev = f.seq
				if ts.deleted[f.seq] {
					return fmt.Errorf("event %d was deleted but is still on disk (lost ack)", f.seq)
				}
				rows++
				bytes += int64(len(f.payload))
			}
			if n == 0 {
				return fmt.Errorf("row %d holds no event", key)
			}
			return fs.err
		})
	})
	if err != nil {
		t.Errorf("invariant: %v", err)
		return
	}
	if rows > ts.o.MaxEvents || bytes > ts.o.MaxBytes {
		t.Errorf("invariant: %d rows, %d bytes on disk; bounds are %d rows, %d bytes", rows, bytes, ts.o.MaxEvents, ts.o.MaxBytes)
	}
	if rows != st.Depth || bytes != st.Bytes {
		t.Errorf("invariant: %d rows, %d bytes on disk; Stats says %d, %d", rows, bytes, st.Depth, st.Bytes)
	}
}

// waitCommitted waits until at least n rows have been committed.
func (ts *tstore) waitCommitted(n uint64) {
	ts.t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for ts.Stats().Committed < n {
		select {
		case <-ts.Notify():
		case <-timer.C:
			ts.t.Fatalf("timed out waiting for %d committed rows; stats %+v", n, ts.Stats())
		}
	}
}

// readAll returns every row.
func (ts *tstore) readAll() []Record {
	ts.t.Helper()
	recs, err := ts.Read(0, 1<<30)
	if err != nil {
		ts.t.Fatalf("Read: %v", err)
	}
	return recs
}

// recv receives from ch, failing the test after 10s (a guard against a
// hang, not a synchronisation).
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatal("timed out")
		panic("unreachable")
	}
}

// commitLog returns hooks that report every commit attempt's result.
func commitLog() (hooks, <-chan error) {
	ch := make(chan error, 1024)
	return hooks{afterCommit: func(err error) { ch <- err }}, ch
}

// stall makes the writer block before its next commits until released.
type stall struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// unblock releases the writer, now and for good; calling it again is a no-op.
func (s *stall) unblock() { s.once.Do(func() { close(s.release) }) }

func newStall() *stall {
	return &stall{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (s *stall) hook() error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return nil
}

// tlog sends log lines to t.Log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func payload(i int) []byte { return fmt.Appendf(nil, "event-%04d", i) }

// payloads returns the payloads of recs.
func payloads(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Payload)
	}
	return out
}

// seqs returns the sequence numbers of recs.
func seqs(recs []Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}
