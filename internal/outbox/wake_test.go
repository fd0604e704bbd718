package outbox

import (
	"sync/atomic"
	"testing"
)

// TestWriterWokenOncePerCommit: at a steady rate the writer wakes once per
// commit, at its deadline, and not for each event or delete. The first
// event or delete that finds it idle sets its alarm instead of waking it
// to set one; the events that follow (below a batch) and the deletes of
// delivered rows join the commit it waits for. Only a full batch (and
// Close) kicks it.
func TestWriterWokenOncePerCommit(t *testing.T) {
	w := newFakeWall()
	h, commits := commitLog()
	h.wall = w
	var kicks, wakes atomic.Int64
	h.kicked = func() { kicks.Add(1) }
	h.woke = func() { wakes.Add(1) }
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
	rows := s.readAll()
	recv(t, idle)
	if got := wakes.Load(); got != 1 {
		t.Fatalf("the writer woke %d times for the first commit; want 1 (its deadline)", got)
	}
	if got := kicks.Load(); got != 0 {
		t.Fatalf("%d kicks for an event to an idle writer; want 0 (it sets the alarm)", got)
	}

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
	w.noTimer(t, "after the first event of a window set the alarm")
	w.Advance(DefaultCommitInterval)
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	recv(t, idle)
	if got := wakes.Load(); got != 2 {
		t.Fatalf("the writer woke %d times in two windows of %d events and a delete; want 2 (one a commit)", got, DefaultMaxBatch-1)
	}
	st := s.Stats()
	if st.Commits != 2 || st.Committed != DefaultMaxBatch || st.Deleted != 1 {
		t.Fatalf("Commits %d, Committed %d, Deleted %d; want 2, %d, 1", st.Commits, st.Committed, st.Deleted, DefaultMaxBatch)
	}

	// A delete alone, to an idle writer, sets its alarm too: the row goes
	// with a commit one window later.
	if err := s.Delete(seqs(s.readAll()[:1])...); err != nil {
		t.Fatal(err)
	}
	recv(t, w.set)
	w.Advance(DefaultCommitInterval)
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	recv(t, idle)
	if st := s.Stats(); st.Deleted != 2 {
		t.Fatalf("Deleted %d; want 2", st.Deleted)
	}
	if got := wakes.Load(); got != 3 {
		t.Fatalf("the writer woke %d times; want 3", got)
	}

	// A full batch still starts a commit at once: a kick, without the
	// clock moving.
	for i := range DefaultMaxBatch {
		s.Append(payload(i))
	}
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Commits != 4 || st.Committed != 2*DefaultMaxBatch {
		t.Fatalf("Commits %d, Committed %d; want 4, %d", st.Commits, st.Committed, 2*DefaultMaxBatch)
	}
	if got := kicks.Load(); got != 1 {
		t.Fatalf("%d kicks; want 1 (the full batch)", got)
	}
}
