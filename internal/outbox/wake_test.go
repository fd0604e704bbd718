package outbox

import (
	"sync/atomic"
	"testing"
)

// TestWriterWokenOncePerCommit: at a steady rate the writer wakes for its
// deadline and not for each event or delete. Once the first event has
// given the writer its deadline, neither the events that follow (below a
// batch) nor the deletes of delivered rows kick it: they join the commit
// it is waiting for. Only a writer with nothing to wait for is kicked.
func TestWriterWokenOncePerCommit(t *testing.T) {
	w := newFakeWall()
	h, commits := commitLog()
	h.wall = w
	var kicks atomic.Int64
	h.kicked = func() { kicks.Add(1) }
	idle := make(chan struct{}, 16)
	h.idle = func() { idle <- struct{}{} }
	s := newStore(t, Options{}, h)

	// A first commit gives the publisher rows to delete.
	recv(t, idle)
	s.Append(payload(0))
	recv(t, w.set)
	w.Advance(DefaultCommitInterval)
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	if got := kicks.Load(); got != 1 {
		t.Fatalf("%d kicks for the first event; want 1 (the writer was idle)", got)
	}
	rows := s.readAll()
	recv(t, idle)

	// The next window: an event gives the idle writer its deadline, then
	// more events and the deletes of the rows delivered meanwhile.
	s.Append(payload(1))
	recv(t, w.set)
	for i := 2; i < DefaultMaxBatch; i++ {
		s.Append(payload(i))
	}
	if err := s.Delete(seqs(rows)...); err != nil {
		t.Fatal(err)
	}
	if got := kicks.Load(); got != 2 {
		t.Fatalf("%d kicks after %d events and a delete in one window; want 2 (one a window)", got, DefaultMaxBatch-1)
	}
	w.noTimer(t, "while the writer waits for its deadline")
	w.Advance(DefaultCommitInterval)
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Commits != 2 || st.Committed != DefaultMaxBatch || st.Deleted != 1 {
		t.Fatalf("Commits %d, Committed %d, Deleted %d; want 2, %d, 1", st.Commits, st.Committed, st.Deleted, DefaultMaxBatch)
	}

	// A delete alone, to an idle writer, still kicks it: the row goes
	// with a commit one window later.
	recv(t, idle)
	if err := s.Delete(seqs(s.readAll()[:1])...); err != nil {
		t.Fatal(err)
	}
	recv(t, w.set)
	w.Advance(DefaultCommitInterval)
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	if got := kicks.Load(); got != 3 {
		t.Fatalf("%d kicks; want 3", got)
	}
	if st := s.Stats(); st.Deleted != 2 {
		t.Fatalf("Deleted %d; want 2", st.Deleted)
	}

	// A full batch still starts a commit at once.
	recv(t, idle)
	for i := range DefaultMaxBatch {
		s.Append(payload(i))
	}
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Commits != 4 || st.Committed != 2*DefaultMaxBatch {
		t.Fatalf("Commits %d, Committed %d; want 4, %d", st.Commits, st.Committed, 2*DefaultMaxBatch)
	}
}
