package mqttpub

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeLink is a link the test drives by hand: it records what the drain
// loop publishes and reports the PUBACKs the test gives it.
type fakeLink struct {
	pubs   chan fakePub
	dead   chan struct{}
	once   sync.Once
	closed atomic.Bool
	ack    bool          // publish is acknowledged at once
	taken  chan struct{} // if set, receives on every takeAcks (dropped when full)
	born   time.Time

	acked chan struct{}
	mu    sync.Mutex
	ids   []uint16 // guarded by mu
}

type fakePub struct {
	id      uint16
	payload []byte
}

func newFakeLink() *fakeLink {
	return &fakeLink{pubs: make(chan fakePub, 64), dead: make(chan struct{}), acked: make(chan struct{}, 1), born: time.Now()}
}

func (l *fakeLink) publish(id uint16, payload []byte) error {
	l.pubs <- fakePub{id: id, payload: slices.Clone(payload)}
	if l.ack {
		l.puback(id)
	}
	return nil
}

// puback reports PUBACKs for ids, as the reader does for a burst.
func (l *fakeLink) puback(ids ...uint16) {
	l.mu.Lock()
	l.ids = append(l.ids, ids...)
	l.mu.Unlock()
	poke(l.acked)
}

func (l *fakeLink) flush() error          { return nil }
func (l *fakeLink) ping() error           { return nil }
func (l *fakeLink) hurry()                {}
func (l *fakeLink) acks() <-chan struct{} { return l.acked }
func (l *fakeLink) heard() time.Time      { return l.born }
func (l *fakeLink) lost() <-chan struct{} { return l.dead }
func (l *fakeLink) err() error            { return nil }
func (l *fakeLink) close()                { l.closed.Store(true); l.once.Do(func() { close(l.dead) }) }
func (l *fakeLink) takeAcks(dst []uint16) []uint16 {
	if l.taken != nil {
		select {
		case l.taken <- struct{}{}:
		default:
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	dst = append(dst, l.ids...)
	l.ids = l.ids[:0]
	return dst
}

// recv receives from ch, failing the test after waitLimit.
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("nothing received within %s", waitLimit)
		panic("unreachable")
	}
}

// TestLostBeforePublishing: a connection that is already gone when rows
// are read publishes nothing and is replaced (no busy loop on it).
func TestLostBeforePublishing(t *testing.T) {
	src := newFakeSource()
	src.add([]byte(`{"event_id":"a"}`), []byte(`{"event_id":"b"}`))
	links := make(chan *fakeLink, 4)
	var dials atomic.Int32
	p := newPublisher(t, src, testOptions("127.0.0.1:1", "t"))
	p.connect = func(ctx context.Context) (link, error) {
		l := newFakeLink()
		if dials.Add(1) == 1 {
			l.close() // the first connection dies before anything is read
		}
		links <- l
		return l, nil
	}
	start(t, p)
	first, second := recv(t, links), recv(t, links)
	second.puback(recv(t, second.pubs).id, recv(t, second.pubs).id)
	eventually(t, "rows delivered on the second connection", func() bool { return src.pending() == 0 })
	if n := len(first.pubs); n != 0 {
		t.Errorf("%d publishes on a connection that was already lost", n)
	}
}

// TestStopSettlesWaitingPUBACKs: when the publisher stops, PUBACKs still
// on their way get a moment to arrive, and their rows are deleted, so that
// a node that shuts down does not replay what the broker acknowledged.
func TestStopSettlesWaitingPUBACKs(t *testing.T) {
	src := newFakeSource()
	p := newPublisher(t, src, testOptions("127.0.0.1:1", "t"))
	links := make(chan *fakeLink, 1)
	p.connect = func(ctx context.Context) (link, error) {
		l := newFakeLink()
		l.taken = make(chan struct{}, 4)
		links <- l
		return l, nil
	}
	r := start(t, p)
	l := recv(t, links)
	src.add(payloads("stop", 3, 50)...)
	ids := []uint16{recv(t, l.pubs).id, recv(t, l.pubs).id, recv(t, l.pubs).id}

	r.cancel()
	// Nothing was acknowledged before: the first look for PUBACKs is
	// finish's, so the publisher is stopping. Only then do they arrive.
	recv(t, l.taken)
	l.puback(ids...)
	r.stop(t)
	if left := src.pending(); left != 0 {
		t.Errorf("%d of 3 acknowledged rows left after stop", left)
	}
}

// TestBackoffSequence: consecutive failures double the (jittered) wait up
// to BackoffMax; a connection that acknowledged a row resets it, one the
// broker drops at once does not.
func TestBackoffSequence(t *testing.T) {
	src := newFakeSource()
	o := testOptions("127.0.0.1:1", "t")
	o.BackoffMin, o.BackoffMax = 100*time.Millisecond, time.Second
	o.Rand = func() float64 { return 0.5 }
	p := newPublisher(t, src, o)

	// The script of connection attempts: "fail" to connect, "drop" at once
	// after connecting, or "ack" one row and then drop.
	script := []string{"fail", "fail", "fail", "ack", "drop", "drop", "fail", "fail", "fail", "fail", "fail"}
	var (
		mu    sync.Mutex
		waits []time.Duration
		step  int
	)
	finished := make(chan struct{})
	p.wait = func(ctx context.Context, d time.Duration) bool {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return ctx.Err() == nil
	}
	p.connect = func(ctx context.Context) (link, error) {
		mu.Lock()
		i := step
		step++
		mu.Unlock()
		if i >= len(script) {
			close(finished)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if script[i] == "fail" {
			return nil, errors.New("refused")
		}
		l := newFakeLink()
		if script[i] == "ack" {
			l.ack = true
			src.onDelete = func([]uint64) { l.close() } // drop right after the ack
			src.add([]byte("row"))
		} else {
			l.close()
		}
		return l, nil
	}
	start(t, p)
	recv(t, finished)

	ms := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, x := range n {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	// After: fail fail fail | ack (resets, then counts 1) | drop drop | fail×5 (capped at 1s × 0.5)
	want := ms(50, 100, 200, 50, 100, 200, 400, 500, 500, 500, 500)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(waits, want); diff != "" {
		t.Errorf("backoff waits (-got +want):\n%s", diff)
	}
}

// TestWindowIdentifiers: packet identifiers in flight are distinct, a
// PUBACK frees exactly its own, identifiers cycle through the window
// (oldest freed first), a new connection starts after the last one
// taken, and a PUBACK for an identifier not in flight frees nothing.
func TestWindowIdentifiers(t *testing.T) {
	w := newWindow(4)
	w.reset()
	var got []uint16
	for seq := range uint64(4) {
		got = append(got, w.take(seq+10, nil))
	}
	if diff := cmp.Diff(got, []uint16{1, 2, 3, 4}); diff != "" {
		t.Fatalf("identifiers (-got +want):\n%s", diff)
	}
	seqs, ok := w.ack(3, nil)
	if !ok || !slices.Equal(seqs, []uint64{12}) || w.n != 3 {
		t.Fatalf("ack(3) = %v, %v, n %d; want [12], true, 3", seqs, ok, w.n)
	}
	for _, id := range []uint16{3, 0, 5, 65535} {
		if seqs, ok := w.ack(id, nil); ok || len(seqs) != 0 {
			t.Errorf("ack(%d) of an identifier not in flight = %v, %v; want nothing", id, seqs, ok)
		}
	}
	if id := w.take(20, []uint64{21, 22}); id != 3 {
		t.Errorf("next identifier %d, want 3 (the one freed)", id)
	}
	if seqs, _ := w.ack(3, nil); !slices.Equal(seqs, []uint64{20, 21, 22}) {
		t.Errorf("a batch's PUBACK gave rows %v, want [20 21 22]", seqs)
	}
	w.reset() // a new connection: every identifier free, starting after 3
	got = got[:0]
	for seq := range uint64(4) {
		got = append(got, w.take(seq, nil))
	}
	if diff := cmp.Diff(got, []uint16{4, 1, 2, 3}); diff != "" {
		t.Errorf("identifiers on a new connection (-got +want):\n%s", diff)
	}
}

// TestClocksNearest: the drain loop's one timer is set for the nearest of
// its deadlines, a zero deadline (no publish in flight) counting as none,
// and fires then.
func TestClocksNearest(t *testing.T) {
	now := time.Now()
	c := newClocks(now.Add(time.Hour), now.Add(2*time.Hour))
	defer c.stop()
	if !c.at.Equal(now.Add(time.Hour)) {
		t.Fatalf("set for %v, want the nearer deadline %v", c.at, now.Add(time.Hour))
	}
	c.next(time.Time{}, now.Add(time.Hour), now.Add(2*time.Hour))
	if !c.at.Equal(now.Add(time.Hour)) {
		t.Fatalf("a zero deadline moved the timer to %v", c.at)
	}
	soon := now.Add(10 * time.Millisecond)
	c.next(soon, now.Add(time.Hour), now.Add(2*time.Hour))
	if !c.at.Equal(soon) {
		t.Fatalf("set for %v, want %v", c.at, soon)
	}
	fired := <-c.c()
	if fired.Before(soon) {
		t.Fatalf("fired at %v, before its deadline %v", fired, soon)
	}
	c.fired()
	c.next(time.Time{}, now.Add(time.Hour), now.Add(2*time.Hour))
	if !c.at.Equal(now.Add(time.Hour)) {
		t.Fatalf("after firing, set for %v, want %v", c.at, now.Add(time.Hour))
	}
}
