package mqttpub

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/outbox"
)

// openOutbox opens a real bbolt outbox at path, closed at cleanup.
func openOutbox(t testing.TB, path string, maxEvents int) *outbox.Store {
	t.Helper()
	s, err := outbox.Open(outbox.Options{Path: path, MaxEvents: maxEvents, MaxBytes: 1 << 30, MaxUnsynced: 1 << 16, MaxUnsyncedAge: time.Hour})
	if err != nil {
		t.Fatalf("outbox.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// appendAll appends every payload and waits until all are committed.
func appendAll(t testing.TB, s *outbox.Store, ps [][]byte) {
	t.Helper()
	before := s.Stats().Committed
	for _, p := range ps {
		for !s.Append(p) {
			// The queue to the writer is full (the bounds are set above
			// what tests append); it drains within a commit interval.
			// Notify cannot be used here: the publisher consumes it.
			time.Sleep(time.Millisecond)
		}
	}
	eventually(t, "appended events committed", func() bool { return s.Stats().Committed-before >= uint64(len(ps)) })
}

// TestEndToEndWithOutbox: the real outbox across a node restart. The first
// run publishes with every PUBACK withheld and stops; the outbox is closed
// and reopened (a restarted node); the second run replays the same bytes,
// and after the real PUBACKs the rows are gone from disk.
func TestEndToEndWithOutbox(t *testing.T) {
	h := newAckHook()
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	topic := uniqueTopic(t)
	sub := subscribe(t, addr, topic)
	path := filepath.Join(t.TempDir(), "outbox.db")
	events := payloads("e2e", 100, 400)

	ob := openOutbox(t, path, 1000)
	appendAll(t, ob, events)
	h.withhold.Store(true)
	o := testOptions(addr, topic)
	o.Window = 2 * len(events) // all of them in flight at once
	r1 := start(t, newPublisher(t, ob, o))
	eventually(t, "every row published once, unacknowledged", func() bool {
		var n int
		h.read(func(h *ackHook) { n = h.rejected[1] })
		return n == len(events)
	})
	r1.stop(t)
	if err := ob.Close(); err != nil {
		t.Fatalf("outbox Close: %v", err)
	}

	h.withhold.Store(false)
	ob = openOutbox(t, path, 1000)
	if d := ob.Stats().Depth; d != len(events) {
		t.Fatalf("rows after restart = %d; want %d (nothing acknowledged)", d, len(events))
	}
	p2 := newPublisher(t, ob, o)
	start(t, p2)
	eventually(t, "outbox empty on disk", func() bool { return ob.Stats().Depth == 0 })
	eventually(t, "every event delivered", func() bool { return sub.gotAll(events) })
	h.read(func(h *ackHook) {
		if diff := cmp.Diff(h.seen[2], h.seen[1]); diff != "" {
			t.Errorf("replay after restart differs (-second run +first run):\n%s", diff)
		}
		want := make([]string, len(events))
		for i, e := range events {
			want[i] = string(e)
		}
		if !slices.Equal(h.seen[1], want) {
			t.Error("first run did not publish the rows in outbox order")
		}
	})
	if st := p2.Stats(); st.Acked != uint64(len(events)) {
		t.Errorf("second run Acked = %d; want %d", st.Acked, len(events))
	}
}

// TestPartialAcksLeaveExactlyTheUnacked: a broker that acknowledges only
// some publishes (every third withheld, the very first among them) leaves
// exactly the unacknowledged rows in the real outbox, on disk after
// Close, and every acknowledged row is gone. A withheld PUBACK holds back
// only its own row, not the acknowledged ones published after it.
func TestPartialAcksLeaveExactlyTheUnacked(t *testing.T) {
	events := payloads("partial", 300, 200)
	withheld := map[string]bool{}
	var want []string
	for i, e := range events {
		if i%3 == 0 {
			withheld[string(e)] = true
			want = append(want, string(e))
		}
	}
	h := newAckHook()
	h.withholdIf = func(p []byte) bool { return withheld[string(p)] }
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	path := filepath.Join(t.TempDir(), "outbox.db")
	ob := openOutbox(t, path, 1000)
	appendAll(t, ob, events)

	o := testOptions(addr, uniqueTopic(t))
	o.Window = 2 * len(events) // everything in flight at once
	p := newPublisher(t, ob, o)
	r := start(t, p)
	left := func(s *outbox.Store) []string {
		recs, err := s.Read(0, 10*len(events))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, rec := range recs {
			out = append(out, string(rec.Payload))
		}
		return out
	}
	eventually(t, "every publish at the broker and every acknowledged row deleted", func() bool {
		var n int
		h.read(func(h *ackHook) { n = h.received[1] })
		return n == len(events) && len(left(ob)) == len(want)
	})
	r.stop(t)
	if st := p.Stats(); st.Reconnects != 0 || st.Acked != uint64(len(events)-len(want)) {
		t.Errorf("Reconnects, Acked = %d, %d; want 0, %d", st.Reconnects, st.Acked, len(events)-len(want))
	}
	if err := ob.Close(); err != nil {
		t.Fatal(err)
	}
	ob = openOutbox(t, path, 1000)
	if diff := cmp.Diff(left(ob), want); diff != "" {
		t.Errorf("rows on disk after Close (-got +want):\n%s", diff)
	}
}

// TestOneReadPerCommit: a commit's rows cost the publisher one Read. A
// Read that returns fewer rows than asked for has found everything there
// is; reading again until one came back empty cost a read transaction per
// commit that found nothing.
func TestOneReadPerCommit(t *testing.T) {
	addr, _ := startMochiWith(t, "127.0.0.1:0", &allowHook{}, nil)
	src := newFakeSource()
	p := newPublisher(t, src, testOptions(addr, uniqueTopic(t)))
	start(t, p)
	reads := func() int {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.reads
	}
	eventually(t, "the first read on connecting", func() bool { return reads() >= 1 })
	const commits = 3
	for i := range commits {
		src.add(payloads(fmt.Sprintf("commit%d", i), 10, 100)...)
		eventually(t, "every row acknowledged", func() bool { return src.pending() == 0 })
	}
	if got, want := reads(), 1+commits; got != want {
		t.Errorf("%d outbox reads for %d commits, want %d (one on connecting, one a commit)", got, commits, want)
	}
}
