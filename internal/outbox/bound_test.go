package outbox

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeWall is the writer's clock under test control: alarm settings are
// reported on set, and Advance fires the alarm when it passes its time.
type fakeWall struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer       // the alarm while set; guarded by mu
	set    chan time.Duration // each setting's distance from now
}

type fakeTimer struct {
	w  *fakeWall
	at time.Time
	c  chan time.Time
}

func newFakeWall() *fakeWall {
	return &fakeWall{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), set: make(chan time.Duration, 64)}
}

func (f *fakeWall) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeWall) Alarm() alarm { return &fakeTimer{w: f, c: make(chan time.Time, 1)} }

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Set(at time.Time) {
	f := t.w
	f.mu.Lock()
	t.stopLocked()
	t.at = at
	d := at.Sub(f.now)
	if d <= 0 {
		t.c <- f.now
	} else {
		f.timers = append(f.timers, t)
	}
	f.mu.Unlock()
	select {
	case f.set <- d:
	default: // a test that stopped looking
	}
}

func (t *fakeTimer) Stop() {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	t.stopLocked()
}

// stopLocked unregisters t and drops a value not yet received, as
// time.Timer's Stop and Reset do. f.mu must be held.
func (t *fakeTimer) stopLocked() {
	f := t.w
	for i, x := range f.timers {
		if x == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			break
		}
	}
	select {
	case <-t.c:
	default:
	}
}

// Advance moves the clock and fires every timer now due.
func (f *fakeWall) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.timers[:0]
	for _, t := range f.timers {
		if t.at.After(f.now) {
			kept = append(kept, t)
			continue
		}
		t.c <- f.now
	}
	f.timers = kept
}

// drain forgets the timers set so far.
func (f *fakeWall) drain() {
	for {
		select {
		case <-f.set:
		default:
			return
		}
	}
}

// noTimer fails if the writer set a timer since the last check or drain.
func (f *fakeWall) noTimer(t *testing.T, when string) {
	t.Helper()
	select {
	case d := <-f.set:
		t.Fatalf("%s: the writer set a %v timer; want none", when, d)
	default:
	}
}

// TestCommitWindowFromAppend: a commit is due CommitInterval after the
// oldest waiting event was appended, by the injected clock.
func TestCommitWindowFromAppend(t *testing.T) {
	w := newFakeWall()
	h, commits := commitLog()
	h.wall = w
	s := newStore(t, Options{}, h)
	s.Append(payload(0))
	if d := recv(t, w.set); d != DefaultCommitInterval {
		t.Fatalf("writer timer %v, want the window %v", d, DefaultCommitInterval)
	}
	w.Advance(DefaultCommitInterval - time.Millisecond)
	if got := s.Stats(); got.Committed != 0 || got.Unsynced != 1 {
		t.Fatalf("before the window: Committed %d, Unsynced %d; want 0, 1", got.Committed, got.Unsynced)
	}
	w.Advance(time.Millisecond)
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.Committed != 1 || got.Unsynced != 0 {
		t.Fatalf("after the window: Committed %d, Unsynced %d; want 1, 0", got.Committed, got.Unsynced)
	}
}

// TestCommitDueAfterSlowCommit: events that waited through a slow commit
// are committed as soon as it ends, not one window after the writer got to
// them (which let the unsynced backlog reach hundreds of milliseconds).
func TestCommitDueAfterSlowCommit(t *testing.T) {
	w := newFakeWall()
	st := newStall()
	h, commits := commitLog()
	h.wall = w
	h.beforeCommit = st.hook
	s := newStore(t, Options{MaxUnsyncedAge: time.Hour}, h)
	t.Cleanup(st.unblock)

	s.Append(payload(0))
	recv(t, w.set)
	w.Advance(DefaultCommitInterval)
	recv(t, st.entered) // commit 1 (event 0) is in its slow fsync
	w.drain()
	s.Append(payload(1))
	w.Advance(150 * time.Millisecond) // event 1 is now past its window
	w.noTimer(t, "during the slow commit")
	st.unblock()
	for range 2 {
		if err := recv(t, commits); err != nil {
			t.Fatal(err)
		}
	}
	w.noTimer(t, "with event 1 overdue")
	if got := s.Stats(); got.Committed != 2 || got.Commits != 2 {
		t.Fatalf("Committed %d in %d commits; want 2 in 2", got.Committed, got.Commits)
	}
}

// TestUnsyncedBoundByCount: with the disk stuck in a commit, Append accepts
// at most MaxUnsynced less the definitely-not-sent share of events that are
// not on disk; the rest are dropped and counted, never queued behind the
// disk. The commit after the stall takes every event that waited.
func TestUnsyncedBoundByCount(t *testing.T) {
	const window = 256
	const bound = window - window/notSentShare
	w := newFakeWall()
	st := newStall()
	h, commits := commitLog()
	h.wall = w
	h.beforeCommit = st.hook
	s := newStore(t, Options{MaxUnsynced: window}, h)
	t.Cleanup(st.unblock)

	accepted := 0
	for i := range 1000 {
		if s.Append(payload(i)) {
			accepted++
		}
		if i == DefaultMaxBatch-1 {
			recv(t, st.entered) // the first 64 are in a commit that does not end
		}
		if u := s.Stats().Unsynced; u > bound {
			t.Fatalf("after %d appends: %d unsynced events, bound %d", i+1, u, bound)
		}
	}
	if accepted != bound {
		t.Errorf("accepted %d while the disk was stuck, want %d", accepted, bound)
	}
	if got := s.Stats().Dropped; got != (Dropped{Queue: uint64(1000 - bound)}) {
		t.Errorf("Dropped = %+v, want Queue %d", got, 1000-bound)
	}
	st.unblock()
	for range 2 {
		if err := recv(t, commits); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Stats(); got.Committed != bound || got.Commits != 2 {
		t.Errorf("Committed %d in %d commits, want every accepted event (%d) in 2: the stuck one and one for all that waited", got.Committed, got.Commits, bound)
	}
}

// TestUnsyncedBoundByAge: a slow commit that holds events for
// MaxUnsyncedAge makes Append drop new events, even far below the count
// bound, until the commit has ended.
func TestUnsyncedBoundByAge(t *testing.T) {
	w := newFakeWall()
	st := newStall()
	h, commits := commitLog()
	h.wall = w
	h.beforeCommit = st.hook
	s := newStore(t, Options{}, h)
	t.Cleanup(st.unblock)
	maxAge := DefaultMaxUnsyncedAge

	s.Append(payload(0)) // at 0
	recv(t, w.set)
	w.Advance(DefaultCommitInterval)
	recv(t, st.entered) // event 0 is in a commit that does not end
	steps := []struct {
		at     time.Duration // since event 0
		wantOK bool
	}{
		{DefaultCommitInterval, true},
		{maxAge - time.Nanosecond, true},
		{maxAge, false},
		{maxAge + time.Second, false},
	}
	now := DefaultCommitInterval
	for i, step := range steps {
		w.Advance(step.at - now)
		now = step.at
		if got := s.Append(payload(i + 1)); got != step.wantOK {
			t.Errorf("Append %v after the oldest unsynced event = %v, want %v", step.at, got, step.wantOK)
		}
	}
	if got := s.Stats(); got.Dropped != (Dropped{Queue: 2}) || got.Unsynced != 3 {
		t.Errorf("Dropped %+v, Unsynced %d; want Queue 2, 3", got.Dropped, got.Unsynced)
	}
	st.unblock()
	for s.Stats().Committed < 3 {
		if err := recv(t, commits); err != nil {
			t.Fatal(err)
		}
	}
	if !s.Append(payload(9)) {
		t.Error("Append after the slow commit ended = false")
	}
}

// TestDeleteCommittedWithinWindow: a delete alone reaches the disk one
// window after it was made.
func TestDeleteCommittedWithinWindow(t *testing.T) {
	w := newFakeWall()
	h, commits := commitLog()
	h.wall = w
	s := newStore(t, Options{MaxBatch: 1}, h)
	s.Append(payload(0))
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(1); err != nil {
		t.Fatal(err)
	}
	recv(t, w.set)
	w.Advance(DefaultCommitInterval)
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.Deleted != 1 || got.Depth != 0 {
		t.Errorf("Deleted %d, Depth %d; want 1, 0", got.Deleted, got.Depth)
	}
}

// TestSentAdmittedOverNotSent: with the disk stuck, definitely-not-sent
// events fill their share of the crash window and are then dropped; an
// event that may have reached a provider is still accepted, and stays
// accepted until its own part of the window is full.
func TestSentAdmittedOverNotSent(t *testing.T) {
	const window = 64
	const share = window / notSentShare
	w := newFakeWall()
	st := newStall()
	h := hooks{wall: w, beforeCommit: st.hook}
	s := newStore(t, Options{MaxUnsynced: window, MaxBatch: 1}, h)
	t.Cleanup(st.unblock)

	if !s.AppendNotSent(payload(0)) {
		t.Fatal("first AppendNotSent = false")
	}
	recv(t, st.entered) // the writer holds it and is stuck
	notSent := 1
	for i := 1; i < 1000; i++ {
		if s.AppendNotSent(payload(i)) {
			notSent++
		}
	}
	if notSent != share {
		t.Errorf("accepted %d definitely-not-sent events, want their share %d", notSent, share)
	}
	sent := 0
	for i := range 1000 {
		if s.Append(payload(1000 + i)) {
			sent++
		}
	}
	if sent != window-share {
		t.Errorf("accepted %d events with the not-sent share full, want %d", sent, window-share)
	}
	if got, want := s.Stats().Dropped, (Dropped{NotSent: 1000 - share, Queue: 1000 - (window - share)}); got != want {
		t.Errorf("Dropped = %+v, want %+v", got, want)
	}
	if got := s.Stats().Unsynced; got != window {
		t.Errorf("Unsynced = %d, want the whole window %d", got, window)
	}
	st.unblock()
}

// TestUnsyncedAge: Stats reports how long ago the oldest event not yet on
// disk was accepted, counted through its commit, and 0 once it is on disk.
func TestUnsyncedAge(t *testing.T) {
	w := newFakeWall()
	st := newStall()
	h, commits := commitLog()
	h.wall = w
	h.beforeCommit = st.hook
	s := newStore(t, Options{}, h)
	t.Cleanup(st.unblock)

	if got := s.Stats().UnsyncedAge; got != 0 {
		t.Errorf("empty: UnsyncedAge %v, want 0", got)
	}
	s.Append(payload(0))
	recv(t, w.set)
	w.Advance(DefaultCommitInterval)
	recv(t, st.entered)
	w.Advance(300 * time.Millisecond)
	if got, want := s.Stats().UnsyncedAge, DefaultCommitInterval+300*time.Millisecond; got != want {
		t.Errorf("during a slow commit: UnsyncedAge %v, want %v", got, want)
	}
	st.unblock()
	if err := recv(t, commits); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.UnsyncedAge != 0 || got.Unsynced != 0 {
		t.Errorf("after the commit: UnsyncedAge %v, Unsynced %d; want 0, 0", got.UnsyncedAge, got.Unsynced)
	}
}

// TestDropLogRateLimited: drops because the crash window is full say why
// in one log line per interval, which counts the drops since the last.
func TestDropLogRateLimited(t *testing.T) {
	w := newFakeWall()
	st := newStall()
	var logs bytes.Buffer
	h := hooks{wall: w, beforeCommit: st.hook}
	s := newStore(t, Options{MaxUnsynced: 16, MaxBatch: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, h)
	t.Cleanup(st.unblock)

	s.Append(payload(0))
	recv(t, st.entered)
	lines := func() []string {
		var out []string
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, "crash window full") {
				out = append(out, l)
			}
		}
		return out
	}
	for i := range 100 {
		s.Append(payload(i + 1)) // 13 more fit, 87 are dropped
	}
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "dropped=1 ") {
		t.Fatalf("after the first drops: %d lines %q, want 1 saying dropped=1", len(got), got)
	}
	w.Advance(dropLogInterval - time.Nanosecond)
	s.Append(payload(200))
	if got := lines(); len(got) != 1 {
		t.Fatalf("within the interval: %d lines, want still 1", len(got))
	}
	w.Advance(time.Nanosecond)
	s.Append(payload(201))
	got := lines()
	if len(got) != 2 || !strings.Contains(got[1], "dropped=88 ") || !strings.Contains(got[1], "reason=") {
		t.Fatalf("after the interval: %q, want a second line counting the 88 drops since the first", got)
	}
	st.unblock()
}
