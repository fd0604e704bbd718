package outbox

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/scootgate/scootgate/internal/clock"
)

func TestFIFOAcrossCommitsAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := newStore(t, Options{Path: path}, hooks{})
	t0 := s.clock.Now()
	for i := range 5 {
		if !s.Append(payload(i)) {
			t.Fatalf("Append(%d) = false", i)
		}
	}
	s.waitCommitted(5)
	s.clock.Advance(time.Second)
	for i := 5; i < 10; i++ {
		if !s.Append(payload(i)) {
			t.Fatalf("Append(%d) = false", i)
		}
	}
	s.waitCommitted(10)
	if c := s.Stats().Commits; c < 2 {
		t.Errorf("Commits = %d, want >= 2 (two groups)", c)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := newStore(t, Options{Path: path}, hooks{})
	var want []Record
	for i := range 10 {
		at := t0
		if i >= 5 {
			at = t0.Add(time.Second)
		}
		want = append(want, Record{Seq: uint64(i + 1), Appended: at.UTC(), Payload: payload(i)})
	}
	if diff := cmp.Diff(s2.readAll(), want); diff != "" {
		t.Errorf("Read after reopen (-got +want):\n%s", diff)
	}

	for _, tt := range []struct {
		name     string
		after    uint64
		max      int
		wantSeqs []uint64
	}{
		{name: "page", after: 3, max: 4, wantSeqs: []uint64{4, 5, 6, 7}},
		{name: "tail", after: 8, max: 100, wantSeqs: []uint64{9, 10}},
		{name: "past the end", after: 10, max: 5, wantSeqs: []uint64{}},
		{name: "max 0", after: 0, max: 0, wantSeqs: []uint64{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := s2.Read(tt.after, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(seqs(recs), tt.wantSeqs); diff != "" {
				t.Errorf("Read(%d, %d) seqs (-got +want):\n%s", tt.after, tt.max, diff)
			}
		})
	}

	// Sequence numbers continue after a reopen; they are never reused.
	s2.Append(payload(10))
	s2.waitCommitted(1)
	if recs := s2.readAll(); recs[len(recs)-1].Seq != 11 {
		t.Errorf("seq after reopen = %d, want 11", recs[len(recs)-1].Seq)
	}
}

func TestBounds(t *testing.T) {
	tests := []struct {
		name         string
		o            Options
		sizes        []int
		wantAccepted []bool
		wantFull     uint64
	}{
		{
			name:         "by count",
			o:            Options{MaxEvents: 3},
			sizes:        []int{10, 10, 10, 10, 10},
			wantAccepted: []bool{true, true, true, false, false},
			wantFull:     2,
		},
		{
			name:         "by bytes, drop_newest per event",
			o:            Options{MaxBytes: 100},
			sizes:        []int{30, 30, 30, 30, 10, 1},
			wantAccepted: []bool{true, true, true, false, true, false},
			wantFull:     2,
		},
		{
			name:         "one event over MaxBytes",
			o:            Options{MaxBytes: 100},
			sizes:        []int{101, 100},
			wantAccepted: []bool{false, true},
			wantFull:     1,
		},
		{
			name:         "empty payloads count against MaxEvents",
			o:            Options{MaxEvents: 2},
			sizes:        []int{0, 0, 0},
			wantAccepted: []bool{true, true, false},
			wantFull:     1,
		},
	}
	for _, tt := range tests {
		for _, stalled := range []bool{false, true} {
			name := tt.name
			if stalled {
				name += ", writer stalled"
			}
			t.Run(name, func(t *testing.T) {
				// With the writer stalled nothing is committed while the
				// events arrive: the bounds count queued events.
				st := newStall()
				var h hooks
				if stalled {
					h.beforeCommit = st.hook
				}
				s := newStore(t, tt.o, h)
				t.Cleanup(st.unblock)
				var got []bool
				var kept []string
				for i, n := range tt.sizes {
					p := bytes.Repeat([]byte{byte('a' + i)}, n)
					ok := s.Append(p)
					got = append(got, ok)
					if ok {
						kept = append(kept, string(p))
					}
				}
				if diff := cmp.Diff(got, tt.wantAccepted); diff != "" {
					t.Errorf("Append results (-got +want):\n%s", diff)
				}
				st.unblock()
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(s.Stats().Dropped, Dropped{Full: tt.wantFull}); diff != "" {
					t.Errorf("Dropped (-got +want):\n%s", diff)
				}
				// Rows already stored are never evicted: the first events are the ones kept.
				s2 := newStore(t, Options{Path: s.o.Path}, hooks{})
				if diff := cmp.Diff(payloads(s2.readAll()), kept, cmpEmpty); diff != "" {
					t.Errorf("rows (-got +want):\n%s", diff)
				}
			})
		}
	}
}

// cmpEmpty treats nil and empty slices alike.
var cmpEmpty = cmp.Transformer("", func(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
})

// TestBoundFreedByDelete: a delete frees room once it is committed, and the
// bound is rebuilt from the file at Open.
func TestBoundFreedByDelete(t *testing.T) {
	h, commits := commitLog()
	s := newStore(t, Options{MaxEvents: 2, MaxBytes: 1000}, h)
	s.Append(payload(0))
	s.Append(payload(1))
	if s.Append(payload(2)) {
		t.Fatal("third Append accepted at MaxEvents = 2")
	}
	s.waitCommitted(2)
	recs := s.readAll()
	if err := s.Delete(recs[0].Seq, 12345); err != nil { // an unknown seq is ignored
		t.Fatal(err)
	}
	if diff := cmp.Diff(seqs(s.readAll()), []uint64{2}); diff != "" {
		t.Errorf("Read right after Delete (-got +want):\n%s", diff)
	}
	for err := range commits {
		if err != nil {
			t.Fatal(err)
		}
		if s.Stats().Deleted == 1 {
			break
		}
	}
	if !s.Append(payload(3)) {
		t.Fatal("Append after a committed Delete = false")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.Stats().Dropped, Dropped{Full: 1, Closed: 0}); diff != "" {
		t.Errorf("Dropped (-got +want):\n%s", diff)
	}

	s2 := newStore(t, Options{Path: s.o.Path, MaxEvents: 2, MaxBytes: 1000}, hooks{})
	if got := s2.Stats(); got.Depth != 2 || got.Bytes != int64(2*len(payload(0))) {
		t.Errorf("after reopen Depth, Bytes = %d, %d; want 2, %d", got.Depth, got.Bytes, 2*len(payload(0)))
	}
	if s2.Append(payload(4)) {
		t.Error("Append accepted by a reopened outbox at its bound")
	}
}

// TestAppendNeverBlocks proves that Append returns while the writer is
// stuck: at MaxUnsynced it drops (counted) instead of waiting.
func TestAppendNeverBlocks(t *testing.T) {
	st := newStall()
	// 6: one slot for definitely-not-sent events, five for these.
	s := newStore(t, Options{MaxUnsynced: 6, MaxUnsyncedAge: time.Hour, MaxBatch: 1}, hooks{beforeCommit: st.hook})
	t.Cleanup(st.unblock) // before the harness closes the store
	if !s.Append(payload(0)) {
		t.Fatal("first Append = false")
	}
	recv(t, st.entered) // the writer now holds event 0 and is blocked

	type result struct{ Accepted, Dropped int }
	done := make(chan result, 1)
	go func() {
		var r result
		for i := 1; i <= 1000; i++ {
			if s.Append(payload(i)) {
				r.Accepted++
			} else {
				r.Dropped++
			}
		}
		done <- r
	}()
	r := recv(t, done)
	if diff := cmp.Diff(r, result{Accepted: 4, Dropped: 996}); diff != "" {
		t.Errorf("Appends while stalled (-got +want):\n%s", diff)
	}
	// The rest of the API keeps answering too.
	if _, err := s.Read(0, 10); err != nil {
		t.Errorf("Read while stalled: %v", err)
	}
	if err := s.Delete(1); err != nil {
		t.Errorf("Delete while stalled: %v", err)
	}
	if got := s.Stats().Dropped; got != (Dropped{Queue: 996}) {
		t.Errorf("Dropped = %+v, want Queue 996", got)
	}
	st.unblock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Committed; got != 5 {
		t.Errorf("Committed = %d, want 5", got)
	}
}

// TestCloseFlushes: every accepted event is on disk after Close, in order,
// even with a commit window far longer than the test.
func TestCloseFlushes(t *testing.T) {
	const n = 5000
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := newStore(t, Options{Path: path, CommitInterval: time.Hour, MaxUnsynced: 2 * n, MaxUnsyncedAge: time.Hour}, hooks{})
	var want []string
	for i := range n {
		if !s.Append(payload(i)) {
			t.Fatalf("Append(%d) = false", i)
		}
		want = append(want, string(payload(i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A due commit takes everything queued: at most one per MaxBatch.
	if got := s.Stats(); got.Committed != n || got.Commits == 0 || got.Commits > (n+DefaultMaxBatch-1)/DefaultMaxBatch || got.Unsynced != 0 {
		t.Errorf("Committed, Commits, Unsynced = %d, %d, %d; want %d, 1..%d, 0", got.Committed, got.Commits, got.Unsynced, n, (n+DefaultMaxBatch-1)/DefaultMaxBatch)
	}
	if s.Append(payload(n)) {
		t.Error("Append after Close = true")
	}
	if _, err := s.Read(0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close: %v, want ErrClosed", err)
	}
	if err := s.Store.Delete(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Delete after Close: %v, want ErrClosed", err)
	}
	if got := s.Stats().Dropped; got != (Dropped{Closed: 1}) {
		t.Errorf("Dropped = %+v, want Closed 1", got)
	}

	s2 := newStore(t, Options{Path: path}, hooks{})
	if diff := cmp.Diff(payloads(s2.readAll()), want); diff != "" {
		t.Errorf("rows after Close and reopen (-got +want):\n%s", diff)
	}
}

// TestDeleteAndNotify: deleted rows vanish from Read at once and from disk
// by Close; Notify fires after commits that add rows.
func TestDeleteAndNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := newStore(t, Options{Path: path}, hooks{})
	for i := range 6 {
		s.Append(payload(i))
	}
	s.waitCommitted(6)
	recs := s.readAll()
	// Out of order, repeated, unknown (999) and again in a later call: each
	// row is deleted once, the unknown one ignored.
	if err := s.Delete(recs[4].Seq, recs[0].Seq, recs[2].Seq, recs[0].Seq, 999); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(recs[2].Seq); err != nil {
		t.Fatal(err)
	}
	wantLeft := []uint64{2, 4, 6}
	if diff := cmp.Diff(seqs(s.readAll()), wantLeft); diff != "" {
		t.Errorf("Read after Delete (-got +want):\n%s", diff)
	}
	if recs, _ := s.Read(1, 1); len(recs) != 1 || recs[0].Seq != 2 {
		t.Errorf("Read(1, 1) = %v, want row 2 (deleted rows do not use up max)", seqs(recs))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.Deleted != 3 || got.Depth != 3 {
		t.Errorf("Deleted, Depth = %d, %d; want 3, 3", got.Deleted, got.Depth)
	}
	s2 := newStore(t, Options{Path: path}, hooks{})
	if diff := cmp.Diff(seqs(s2.readAll()), wantLeft); diff != "" {
		t.Errorf("rows after reopen (-got +want):\n%s", diff)
	}
	select {
	case <-s2.Notify():
		t.Error("Notify fired before any commit")
	default:
	}
	s2.Append(payload(9))
	recv(t, s2.Notify())
}

func TestOldestAge(t *testing.T) {
	s := newStore(t, Options{}, hooks{})
	if got := s.Stats().OldestAge; got != 0 {
		t.Errorf("OldestAge of an empty outbox = %v", got)
	}
	s.Append(payload(0))
	s.clock.Advance(2 * time.Second)
	s.Append(payload(1))
	s.waitCommitted(2)
	s.clock.Advance(time.Second)
	if got := s.Stats().OldestAge; got != 3*time.Second {
		t.Errorf("OldestAge = %v, want 3s", got)
	}
}

// TestCommitFailure: a failing disk drops and counts, Append returns false
// for the backoff and never blocks, and the store recovers.
func TestCommitFailure(t *testing.T) {
	errDisk := errors.New("injected: no space left on device")
	var fail atomic.Bool
	fail.Store(true)
	h, commits := commitLog()
	h.beforeCommit = func() error {
		if fail.Load() {
			return errDisk
		}
		return nil
	}
	s := newStore(t, Options{MaxBatch: 1}, h)
	steps := []struct {
		name      string
		advance   time.Duration
		fail      bool
		wantOK    bool
		wantErr   error // of the commit that follows; nil = no commit expected unless wantOK
		wantStats Dropped
	}{
		{name: "accepted, then its commit fails", fail: true, wantOK: true, wantErr: errDisk, wantStats: Dropped{Failing: 1}},
		{name: "refused while failing", fail: true, wantOK: false, wantStats: Dropped{Failing: 2}},
		{name: "just before the backoff ends", advance: failingBackoff - 1, fail: true, wantOK: false, wantStats: Dropped{Failing: 3}},
		{name: "after the backoff: probe, fails again", advance: 1, fail: true, wantOK: true, wantErr: errDisk, wantStats: Dropped{Failing: 4}},
		{name: "disk back, after the backoff", advance: failingBackoff, fail: false, wantOK: true, wantStats: Dropped{Failing: 4}},
		{name: "healthy again", fail: false, wantOK: true, wantStats: Dropped{Failing: 4}},
	}
	for i, st := range steps {
		s.clock.Advance(st.advance)
		fail.Store(st.fail)
		if got := s.Append(payload(i)); got != st.wantOK {
			t.Fatalf("%s: Append = %v, want %v", st.name, got, st.wantOK)
		}
		if st.wantOK {
			if err := recv(t, commits); !errors.Is(err, st.wantErr) {
				t.Fatalf("%s: commit error %v, want %v", st.name, err, st.wantErr)
			}
		}
		if got := s.Stats().Dropped; got != st.wantStats {
			t.Errorf("%s: Dropped = %+v, want %+v", st.name, got, st.wantStats)
		}
	}
	if diff := cmp.Diff(payloads(s.readAll()), []string{string(payload(4)), string(payload(5))}); diff != "" {
		t.Errorf("rows (-got +want):\n%s", diff)
	}
}

// TestCommitFailureAtClose: a flush that fails at Close is reported and
// counted, not lost silently.
func TestCommitFailureAtClose(t *testing.T) {
	errDisk := errors.New("injected: read-only file system")
	s := newStore(t, Options{CommitInterval: time.Hour}, hooks{beforeCommit: func() error { return errDisk }})
	for i := range 3 {
		if !s.Append(payload(i)) {
			t.Fatal("Append = false")
		}
	}
	if err := s.Close(); !errors.Is(err, errDisk) {
		t.Errorf("Close = %v, want %v", err, errDisk)
	}
	if got := s.Stats(); got.Dropped != (Dropped{Failing: 3}) || got.Committed != 0 {
		t.Errorf("Dropped, Committed = %+v, %d; want Failing 3, 0", got.Dropped, got.Committed)
	}
}

// TestCommitFailureClosedDB fails commits for real: the bbolt DB is closed
// under the writer.
func TestCommitFailureClosedDB(t *testing.T) {
	h, commits := commitLog()
	s := newStore(t, Options{}, h)
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	if !s.Append(payload(0)) {
		t.Fatal("Append = false")
	}
	if err := recv(t, commits); !errors.Is(err, berrors.ErrDatabaseNotOpen) {
		t.Fatalf("commit error %v, want ErrDatabaseNotOpen", err)
	}
	if s.Append(payload(1)) {
		t.Error("Append while failing = true")
	}
	if got := s.Stats().Dropped; got != (Dropped{Failing: 2}) {
		t.Errorf("Dropped = %+v, want Failing 2", got)
	}
	if _, err := s.Read(0, 1); err == nil {
		t.Error("Read on a closed DB: nil error")
	}
}

// TestCommitPanic: a panic inside a commit (bbolt on a bad page) is
// recovered, counted, and the writer keeps going.
func TestCommitPanic(t *testing.T) {
	var panicked atomic.Bool
	h, commits := commitLog()
	h.beforeCommit = func() error {
		if panicked.CompareAndSwap(false, true) {
			panic("page 7 already freed")
		}
		return nil
	}
	s := newStore(t, Options{MaxBatch: 1}, h)
	s.Append(payload(0))
	if err := recv(t, commits); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("commit error %v, want ErrCorrupt", err)
	}
	s.clock.Advance(failingBackoff)
	if !s.Append(payload(1)) {
		t.Fatal("Append after the backoff = false")
	}
	if err := recv(t, commits); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	if got := s.Stats(); got.Dropped != (Dropped{Failing: 1}) || got.Committed != 1 {
		t.Errorf("Dropped, Committed = %+v, %d; want Failing 1, 1", got.Dropped, got.Committed)
	}
}

func TestOpenUnwritable(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) string // returns the outbox path
		wantErr error
		root    bool // meaningful as root
	}{
		{
			name: "read-only directory",
			setup: func(t *testing.T, dir string) string {
				d := filepath.Join(dir, "ro")
				mkdir(t, d, 0o500)
				return filepath.Join(d, "outbox.db")
			},
			wantErr: fs.ErrPermission,
		},
		{
			name: "directory missing",
			setup: func(t *testing.T, dir string) string {
				return filepath.Join(dir, "missing", "outbox.db")
			},
			wantErr: fs.ErrNotExist,
			root:    true,
		},
		{
			name: "parent is a file",
			setup: func(t *testing.T, dir string) string {
				f := filepath.Join(dir, "file")
				writeFile(t, f, []byte("x"))
				return filepath.Join(f, "outbox.db")
			},
			wantErr: syscall.ENOTDIR,
			root:    true,
		},
		{
			name: "path is a directory",
			setup: func(t *testing.T, dir string) string {
				d := filepath.Join(dir, "outbox.db")
				mkdir(t, d, 0o700)
				return d
			},
			wantErr: syscall.EISDIR,
			root:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.root && os.Geteuid() == 0 {
				t.Skip("root ignores directory permissions")
			}
			path := tt.setup(t, t.TempDir())
			s, err := Open(Options{Path: path})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Open error %v, want %v", err, tt.wantErr)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), path) {
				t.Errorf("Open error %q does not name %s as a *fs.PathError", err, path)
			}
			if matches, _ := filepath.Glob(path + ".corrupt-*"); len(matches) > 0 {
				t.Errorf("an unwritable path was quarantined: %v", matches)
			}
		})
	}
}

// TestLocked: a second Open of a file in use fails after LockTimeout, with
// an error naming the path.
func TestLocked(t *testing.T) {
	s := newStore(t, Options{}, hooks{})
	const timeout = 100 * time.Millisecond
	start := time.Now()
	s2, err := Open(Options{Path: s.o.Path, LockTimeout: timeout})
	elapsed := time.Since(start)
	if err == nil {
		s2.Close()
		t.Fatal("second Open succeeded")
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), s.o.Path) {
		t.Errorf("second Open error %q, want ErrLocked naming %s", err, s.o.Path)
	}
	if elapsed > timeout+2*time.Second { // bbolt gives up within the timeout
		t.Errorf("second Open took %v, want about %v", elapsed, timeout)
	}
	if q, _ := filepath.Glob(s.o.Path + ".corrupt-*"); len(q) > 0 {
		t.Errorf("a locked file was quarantined: %v", q)
	}
	// The first store is unharmed.
	s.Append(payload(0))
	s.waitCommitted(1)
}

func TestQuarantine(t *testing.T) {
	// goodFile returns the bytes of a valid outbox holding n rows.
	goodFile := func(t *testing.T, n int) []byte {
		t.Helper()
		path := filepath.Join(t.TempDir(), "good.db")
		// No crash bound: a writer that falls behind on a busy machine
		// must not drop rows, or "truncated to half" could cut a file
		// small enough to stay valid.
		s, err := Open(Options{Path: path, MaxUnsynced: 2 * n, MaxUnsyncedAge: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if !s.Append(bytes.Repeat(payload(i), 30)) {
				t.Fatalf("Append %d refused: %+v", i, s.Stats().Dropped)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return readFile(t, path)
	}
	// boltFile returns the bytes of a bbolt file whose bucket (created)
	// fn fills.
	boltFile := func(t *testing.T, bucket []byte, fn func(b *bolt.Bucket) error) []byte {
		t.Helper()
		path := filepath.Join(t.TempDir(), "bolt.db")
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucket)
			if err != nil {
				return err
			}
			return fn(b)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return readFile(t, path)
	}
	// group writes one group row keyed by key, of frames seqs, with the
	// bucket sequence at seqMax.
	group := func(key, seqMax uint64, seqs ...uint64) func(b *bolt.Bucket) error {
		return func(b *bolt.Bucket) error {
			var v []byte
			for _, q := range seqs {
				v = appendFrame(v, q, 1, payload(int(q)))
			}
			if err := b.SetSequence(seqMax); err != nil {
				return err
			}
			return b.Put(seqKey(key), v)
		}
	}
	tests := []struct {
		name string
		file func(t *testing.T) []byte
	}{
		{"garbage", func(t *testing.T) []byte {
			b := make([]byte, 16<<10)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			return b
		}},
		{"shorter than a page", func(t *testing.T) []byte { return goodFile(t, 10)[:100] }},
		{"truncated to half", func(t *testing.T) []byte {
			b := goodFile(t, 2000)
			return b[:len(b)/2]
		}},
		{"meta pages zeroed", func(t *testing.T) []byte {
			b := goodFile(t, 10)
			clear(b[:2*os.Getpagesize()])
			return b
		}},
		{"data pages zeroed", func(t *testing.T) []byte {
			b := goodFile(t, 2000)
			clear(b[2*os.Getpagesize():])
			return b
		}},
		{"malformed key", func(t *testing.T) []byte {
			return boltFile(t, bucketName, func(b *bolt.Bucket) error {
				return b.Put([]byte("abc"), appendFrame(nil, 1, 1, payload(1)))
			})
		}},
		{"row shorter than a frame", func(t *testing.T) []byte {
			return boltFile(t, bucketName, func(b *bolt.Bucket) error {
				if err := b.SetSequence(1); err != nil {
					return err
				}
				return b.Put(seqKey(1), appendFrame(nil, 1, 1, nil)[:frameHead-1])
			})
		}},
		{"payload past the row's end", func(t *testing.T) []byte {
			return boltFile(t, bucketName, func(b *bolt.Bucket) error {
				v := appendFrame(nil, 1, 1, payload(1))
				if err := b.SetSequence(1); err != nil {
					return err
				}
				return b.Put(seqKey(1), v[:len(v)-1])
			})
		}},
		{"empty row", func(t *testing.T) []byte {
			return boltFile(t, bucketName, func(b *bolt.Bucket) error { return b.Put(seqKey(1), []byte{}) })
		}},
		{"event beyond the sequence", func(t *testing.T) []byte { return boltFile(t, bucketName, group(4, 4, 4, 5)) }},
		{"row keyed off its first event", func(t *testing.T) []byte { return boltFile(t, bucketName, group(1, 2, 2)) }},
		{"events out of order", func(t *testing.T) []byte { return boltFile(t, bucketName, group(3, 3, 3, 2)) }},
		{"rows overlapping", func(t *testing.T) []byte {
			return boltFile(t, bucketName, func(b *bolt.Bucket) error {
				if err := group(1, 5, 1, 3)(b); err != nil {
					return err
				}
				return group(2, 5, 2)(b)
			})
		}},
		{"both layouts", func(t *testing.T) []byte {
			return boltFile(t, bucketName, func(b *bolt.Bucket) error {
				_, err := b.Tx().CreateBucket(legacyBucket)
				return err
			})
		}},
		// The layout before groups: its rows are checked before they are
		// converted, and a bad one is quarantined, not converted.
		{"old layout, malformed key", func(t *testing.T) []byte {
			return boltFile(t, legacyBucket, func(b *bolt.Bucket) error { return b.Put([]byte("abc"), make([]byte, 8)) })
		}},
		{"old layout, value without append time", func(t *testing.T) []byte {
			return boltFile(t, legacyBucket, func(b *bolt.Bucket) error {
				if err := b.SetSequence(1); err != nil {
					return err
				}
				return b.Put(seqKey(1), []byte{1, 2, 3})
			})
		}},
		{"old layout, row beyond the sequence", func(t *testing.T) []byte {
			return boltFile(t, legacyBucket, func(b *bolt.Bucket) error { return b.Put(seqKey(5), make([]byte, 8)) })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "outbox.db")
			bad := tt.file(t)
			writeFile(t, path, bad)

			s := newStore(t, Options{Path: path}, hooks{})
			want := path + ".corrupt-20260102T030405Z"
			if got := s.Quarantined(); got != want {
				t.Fatalf("Quarantined() = %q, want %q", got, want)
			}
			if got := s.Stats().Quarantined; got != want {
				t.Errorf("Stats().Quarantined = %q, want %q", got, want)
			}
			if !bytes.Equal(readFile(t, want), bad) {
				t.Error("the quarantined file differs from the corrupt one")
			}
			if s.Stats().Depth != 0 {
				t.Errorf("fresh outbox Depth = %d", s.Stats().Depth)
			}
			s.Append(payload(1))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2 := newStore(t, Options{Path: path}, hooks{})
			if s2.Quarantined() != "" {
				t.Errorf("the fresh file was quarantined too: %s", s2.Quarantined())
			}
			if diff := cmp.Diff(payloads(s2.readAll()), []string{string(payload(1))}); diff != "" {
				t.Errorf("fresh outbox rows (-got +want):\n%s", diff)
			}
		})
	}
}

// TestQuarantineNameTaken: a second corrupt file in the same second gets a
// suffix instead of overwriting the first.
func TestQuarantineNameTaken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	fc := clock.NewFake(time.Time{})
	var got []string
	for i := range 3 {
		writeFile(t, path, bytes.Repeat([]byte{byte(i + 1)}, 8192))
		s := newStore(t, Options{Path: path, Clock: fc.Now}, hooks{})
		got = append(got, strings.TrimPrefix(s.Quarantined(), path))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{".corrupt-20260102T030405Z", ".corrupt-20260102T030405Z-1", ".corrupt-20260102T030405Z-2"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("quarantine names (-got +want):\n%s", diff)
	}
}

func TestOptions(t *testing.T) {
	if _, err := Open(Options{}); err == nil || !strings.Contains(err.Error(), "Path") {
		t.Errorf("Open without Path: %v", err)
	}
	_, err := Open(Options{Path: filepath.Join(t.TempDir(), "x.db"), MaxEvents: -1, MaxUnsynced: -1})
	if err == nil || !strings.Contains(err.Error(), "MaxEvents") || !strings.Contains(err.Error(), "MaxUnsynced") {
		t.Errorf("Open with negative options: %v", err)
	}
	o, err := Options{Path: "p"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	o.Clock, o.Logger = nil, nil
	want := Options{
		Path: "p", MaxEvents: 100000, MaxBytes: 256 << 20, CommitInterval: 100 * time.Millisecond,
		MaxBatch: 64, MaxUnsynced: 4096, MaxUnsyncedAge: 3 * time.Second, LockTimeout: 5 * time.Second,
	}
	if diff := cmp.Diff(o, want); diff != "" {
		t.Errorf("defaults (-got +want):\n%s", diff)
	}
}

// TestConcurrent runs appenders, a reader-deleter (the publisher's part)
// and Stats together under -race; in the end every committed row has been
// read once, in order, and deleted. The harness checks the file.
func TestConcurrent(t *testing.T) {
	s := newStore(t, Options{MaxEvents: 500, MaxUnsynced: 64, MaxBatch: 16, CommitInterval: time.Millisecond}, hooks{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				s.Append(payload(g*1000 + i))
			}
		})
	}
	target := make(chan int, 1) // how many rows the publisher must see
	var (
		pub  sync.WaitGroup
		read []uint64
	)
	pub.Go(func() {
		var after uint64
		want := -1
		for want != len(read) {
			recs, err := s.Read(after, 50)
			if err != nil {
				t.Error(err)
				return
			}
			for _, r := range recs {
				after = r.Seq
				read = append(read, r.Seq)
				if err := s.Delete(r.Seq); err != nil {
					t.Error(err)
					return
				}
			}
			_ = s.Stats()
			if len(recs) == 0 {
				select {
				case want = <-target:
				case <-s.Notify():
				}
			}
		}
	})
	wg.Wait()
	target <- int(s.Stats().Appended) // every accepted event will be committed
	pub.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Committed == 0 || st.Deleted != st.Committed || st.Depth != 0 {
		t.Errorf("Committed %d, Deleted %d, Depth %d; want every committed row deleted", st.Committed, st.Deleted, st.Depth)
	}
	for i, q := range read {
		if q != uint64(i+1) {
			t.Fatalf("read seq %d at position %d: not FIFO or not exactly once", q, i)
		}
	}
}

func mkdir(t *testing.T, dir string, perm fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, perm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) }) // so TempDir can remove it
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadSkipsUncommittedDeletes: rows passed to Delete stay out of Read,
// whatever `after` is, while the delete waits for its commit, while that
// commit runs, and after it failed (the deletes wait for the next one).
// Read only copies the deletes above `after`; this pins that none is
// missed.
func TestReadSkipsUncommittedDeletes(t *testing.T) {
	var gated atomic.Bool
	gate := make(chan error)
	entered := make(chan struct{}, 1)
	h, commits := commitLog()
	h.beforeCommit = func() error {
		if !gated.Load() {
			return nil
		}
		entered <- struct{}{}
		return <-gate
	}
	s := newStore(t, Options{MaxBatch: 1}, h)
	for i := range 6 {
		s.Append(payload(i))
		if err := recv(t, commits); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, after uint64, want []uint64) {
		t.Helper()
		recs, err := s.Read(after, 10)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seqs(recs), want); diff != "" {
			t.Errorf("%s: Read(%d) (-got +want):\n%s", when, after, diff)
		}
	}
	if err := s.Delete(5, 2); err != nil {
		t.Fatal(err)
	}
	check("pending", 0, []uint64{1, 3, 4, 6})
	check("pending", 4, []uint64{6})

	gated.Store(true)
	s.Append(payload(6)) // a commit now, taking the deletes with it
	recv(t, entered)
	check("committing", 0, []uint64{1, 3, 4, 6})
	check("committing", 4, []uint64{6})
	gate <- errors.New("injected: commit fails")
	if err := recv(t, commits); err == nil {
		t.Fatal("the gated commit succeeded")
	}
	check("after a failed commit", 0, []uint64{1, 3, 4, 6})
	check("after a failed commit", 4, []uint64{6})

	gated.Store(false)
	s.clock.Advance(failingBackoff)
	s.Append(payload(7))
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	check("committed", 0, []uint64{1, 3, 4, 6, 7}) // the failed commit dropped its event; its seq was not used
	check("committed", 4, []uint64{6, 7})
	if got := s.Stats().Deleted; got != 2 {
		t.Errorf("Deleted = %d, want 2", got)
	}
}

// TestAppendAllocatesNothing: an accepted event's row is packed into a
// chunk the queue already holds, so Append allocates nothing per event
// (a copy per event was the last allocation between the request path and
// bbolt).
func TestAppendAllocatesNothing(t *testing.T) {
	ts := newStore(t, Options{MaxBatch: 1000, CommitInterval: time.Hour}, hooks{})
	p := bytes.Repeat([]byte("u"), 300)
	if n := testing.AllocsPerRun(100, func() {
		if !ts.Append(p) {
			t.Fatal("Append refused")
		}
	}); n != 0 {
		t.Errorf("Append: %v allocations per event, want 0", n)
	}
}

// TestChunksReusedAfterCommit: the chunk a commit's rows were packed into
// takes the next events' rows once that commit has ended, and the rows
// read back are the events appended (no row was overwritten by a later
// one).
func TestChunksReusedAfterCommit(t *testing.T) {
	h, commits := commitLog()
	ts := newStore(t, Options{MaxBatch: 4, CommitInterval: time.Hour}, h)
	chunk := func() *byte {
		ts.Store.mu.Lock()
		defer ts.Store.mu.Unlock()
		if len(ts.chunks) == 0 {
			return nil
		}
		return unsafe.SliceData(ts.chunks[0])
	}
	// The first rows' chunk, read while the batch is not yet full: the
	// fourth row hands it to the writer, which may take it at once.
	for i := range 3 {
		ts.Append(payload(i))
	}
	first := chunk()
	if first == nil {
		t.Fatal("three queued rows are in no chunk")
	}
	ts.Append(payload(3))
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	for i := 4; i < 7; i++ {
		ts.Append(payload(i))
	}
	if got := chunk(); got != first {
		t.Errorf("the next rows are in chunk %p, want the committed rows' %p", got, first)
	}
	ts.Append(payload(7))
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	got := payloads(ts.readAll())
	want := []string{"event-0000", "event-0001", "event-0002", "event-0003", "event-0004", "event-0005", "event-0006", "event-0007"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("rows (-got +want):\n%s", diff)
	}
}
