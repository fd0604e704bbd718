package mqttpub

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The two tests below pin down, against a real broker, the paho v1.5.1
// behaviour the design rests on (doc.go, "Why generations").

// TestPahoFailsPendingTokensOnLoss: with AutoReconnect off, a publish whose
// PUBACK never came ends with an error when the connection is lost, and the
// link bumped the generation before that.
func TestPahoFailsPendingTokensOnLoss(t *testing.T) {
	h := newAckHook()
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	p := newPublisher(t, newFakeSource(), testOptions(addr, "t"))
	lc, err := check(&p.o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := dialLink(t.Context(), lc, &p.gen)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()

	h.withhold.Store(true)
	g := p.gen.Load()
	tok := l.publish([]byte("never acknowledged"))
	l.flush()
	eventually(t, "the publish at the broker", func() bool {
		var n int
		h.read(func(h *ackHook) { n = h.rejected[1] })
		return n == 1
	})
	h.cut()
	select {
	case <-tok.Done():
	case <-time.After(waitLimit):
		t.Fatal("publish token still pending after the connection was lost")
	}
	if tok.Error() == nil {
		t.Fatal("publish token completed without error after the connection was lost with its PUBACK withheld")
	}
	t.Logf("observed: token error %q", tok.Error())
	if p.gen.Load() == g {
		t.Error("generation unchanged after the connection was lost")
	}
	select {
	case <-l.lost():
	case <-time.After(waitLimit):
		t.Error("lost() not closed after the connection was lost")
	}
}

// TestPahoIssue563 reproduces paho.mqtt.golang#563 with AutoReconnect on (which
// the Publisher never uses): the broker withholds the PUBACK, the link is
// cut, paho reconnects by itself and completes the old token with a nil
// error although no PUBACK was ever sent. The generation check rejects it.
func TestPahoIssue563(t *testing.T) {
	h := newAckHook()
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	src := newFakeSource()
	p := newPublisher(t, src, testOptions(addr, "t"))
	lc, err := check(&p.o)
	if err != nil {
		t.Fatal(err)
	}
	lc.autoReconnect = true
	l, err := dialLink(t.Context(), lc, &p.gen)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()

	h.withhold.Store(true)
	payload := []byte("paho-563")
	seq := src.add(payload)[0]
	inflight := []pending{{seq: seq, gen: p.gen.Load(), tok: l.publish(payload)}}
	l.flush()
	eventually(t, "the publish at the broker", func() bool {
		var n int
		h.read(func(h *ackHook) { n = h.rejected[1] })
		return n == 1
	})
	h.cut()
	select {
	case <-inflight[0].tok.Done():
	case <-time.After(waitLimit):
		t.Fatal("token still pending; paho did not reconnect")
	}
	if err := inflight[0].tok.Error(); err != nil {
		t.Fatalf("token error %v: paho v1.5.1 no longer shows paho.mqtt.golang#563; revisit doc.go", err)
	}
	if on := h.ackedOn(payload); len(on) != 0 {
		t.Fatalf("broker acknowledged the publish on connections %v; the test meant to withhold it", on)
	}
	t.Log("observed: token completed with nil error across paho's own reconnect, no PUBACK sent (paho.mqtt.golang#563)")

	n, err := p.settle(&inflight)
	if n != 0 || !errors.Is(err, ErrStaleAck) {
		t.Errorf("settle = %d, %v; want 0 rows, ErrStaleAck", n, err)
	}
	if c := src.deleteCalls(); c != 0 {
		t.Errorf("%d Delete calls for a publish that was never acknowledged", c)
	}
}

// fakeLink is a link the test drives by hand.
type fakeLink struct {
	gen    *atomic.Uint64
	pubs   chan *fakeToken
	dead   chan struct{}
	once   sync.Once
	closed atomic.Bool
	ack    bool          // publish returns a completed token: a PUBACK at once
	asked  chan struct{} // if set, receives on every acks call (dropped when full)
}

type fakeToken struct {
	done    chan struct{}
	err     error
	payload []byte
}

func (t *fakeToken) Done() <-chan struct{} { return t.done }
func (t *fakeToken) Error() error          { return t.err }

func (l *fakeLink) publish(payload []byte) token {
	t := &fakeToken{done: make(chan struct{}), payload: payload}
	if l.ack {
		close(t.done)
	}
	l.pubs <- t
	return t
}
func (l *fakeLink) flush() {}

func (l *fakeLink) acks() <-chan struct{} {
	if l.asked != nil {
		select {
		case l.asked <- struct{}{}:
		default:
		}
	}
	return nil
}

func (l *fakeLink) lost() <-chan struct{} { return l.dead }
func (l *fakeLink) close()                { l.closed.Store(true); l.once.Do(func() { close(l.dead) }) }

// TestStaleAckIsNotAnAck drives the paho.mqtt.golang#563 shape deterministically:
// the token completes with a nil error after the connection changed
// underneath (generation moved twice: loss, paho's own reconnect) and
// before any loss signal. The row must stay, and be deleted only after the
// next connection acknowledges its republished copy.
//
// It fails when settle's generation check is removed.
func TestStaleAckIsNotAnAck(t *testing.T) {
	src := newFakeSource()
	payload := []byte(`{"event_id":"stale"}`)
	src.add(payload)

	links := make(chan *fakeLink, 4)
	o := testOptions("127.0.0.1:1", "t")
	p := newPublisher(t, src, o)
	p.connect = func(ctx context.Context, gen *atomic.Uint64) (link, error) {
		gen.Add(1) // a connection opened
		l := &fakeLink{gen: gen, pubs: make(chan *fakeToken, 8), dead: make(chan struct{})}
		links <- l
		return l, nil
	}
	start(t, p)

	first := recv(t, links)
	t1 := recv(t, first.pubs)
	first.gen.Add(2) // the connection ended and paho reconnected by itself …
	close(t1.done)   // … and completed the token without error: no PUBACK

	var second *fakeLink
	eventually(t, "a new connection or a Delete", func() bool {
		select {
		case second = <-links:
			return true
		default:
			return src.deleteCalls() > 0
		}
	})
	if n := src.deleteCalls(); n != 0 {
		t.Fatalf("row deleted on a token that completed across a reconnect (%d Delete calls)", n)
	}
	if !first.closed.Load() {
		t.Error("the connection with the stale completion was not closed")
	}
	if st := p.Stats(); !strings.Contains(st.LastError, ErrStaleAck.Error()) {
		t.Errorf("LastError = %q; want the stale-ack error", st.LastError)
	}
	t2 := recv(t, second.pubs)
	if string(t2.payload) != string(payload) {
		t.Fatalf("republished %q; want %q", t2.payload, payload)
	}
	close(t2.done) // a real PUBACK on the current connection
	eventually(t, "row deleted after the real acknowledgement", func() bool { return src.pending() == 0 })
}

// TestLostBeforePublishing: a connection that is already gone when rows
// are read publishes nothing and is replaced (no busy loop on it).
func TestLostBeforePublishing(t *testing.T) {
	src := newFakeSource()
	src.add([]byte(`{"event_id":"a"}`), []byte(`{"event_id":"b"}`))
	links := make(chan *fakeLink, 4)
	var dials atomic.Int32
	p := newPublisher(t, src, testOptions("127.0.0.1:1", "t"))
	p.connect = func(ctx context.Context, gen *atomic.Uint64) (link, error) {
		gen.Add(1)
		l := &fakeLink{gen: gen, pubs: make(chan *fakeToken, 8), dead: make(chan struct{})}
		if dials.Add(1) == 1 {
			l.close() // the first connection dies before anything is read
		}
		links <- l
		return l, nil
	}
	start(t, p)
	first, second := recv(t, links), recv(t, links)
	for range 2 {
		close(recv(t, second.pubs).done)
	}
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
	p.connect = func(ctx context.Context, gen *atomic.Uint64) (link, error) {
		gen.Add(1)
		l := &fakeLink{gen: gen, pubs: make(chan *fakeToken, 8), dead: make(chan struct{}), asked: make(chan struct{}, 4)}
		links <- l
		return l, nil
	}
	r := start(t, p)
	l := recv(t, links)
	src.add(payloads("stop", 3, 50)...)
	toks := []*fakeToken{recv(t, l.pubs), recv(t, l.pubs), recv(t, l.pubs)}

	r.cancel()
	// The drain asked for the link's acks when it began, and finish asks
	// again: the publisher is stopping. Only then do the PUBACKs arrive.
	recv(t, l.asked)
	recv(t, l.asked)
	for _, tok := range toks {
		close(tok.done)
	}
	r.stop(t)
	if left := src.pending(); left != 0 {
		t.Errorf("%d of 3 acknowledged rows left after stop", left)
	}
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
	p.connect = func(ctx context.Context, gen *atomic.Uint64) (link, error) {
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
		gen.Add(1)
		l := &fakeLink{gen: gen, pubs: make(chan *fakeToken, 8), dead: make(chan struct{})}
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

// idToken is a fakeToken with a packet identifier, as paho's
// *PublishToken has.
type idToken struct {
	fakeToken
	id uint16
}

func (t *idToken) MessageID() uint16 { return t.id }

// TestPubackWakesTheDrain: the paho link signals acks once a token whose
// PUBACK was read has completed, whatever the order: a PUBACK ahead of an
// older withheld one, a PUBACK read before its publish was filed (paho can
// write and be acknowledged before Publish returns), and a publish paho
// completed at once without a packet identifier.
func TestPubackWakesTheDrain(t *testing.T) {
	l := &pahoLink{}
	l.startWatch()
	defer l.stopWatch()
	tok := func(id uint16) *idToken { return &idToken{fakeToken: fakeToken{done: make(chan struct{})}, id: id} }

	withheld, later := tok(1), tok(2)
	l.file(withheld)
	l.file(later)
	l.pubackRead(2)
	close(later.done) // paho completes the token after deleting its store entry
	recv(t, l.acks())

	early := tok(3)
	l.pubackRead(3)
	close(early.done)
	l.file(early)
	recv(t, l.acks())

	refused := &fakeToken{done: make(chan struct{}), err: errors.New("not connected")}
	close(refused.done)
	l.file(refused)
	recv(t, l.acks())

	l.amu.Lock()
	defer l.amu.Unlock()
	if _, ok := l.sent[1]; !ok || len(l.sent) != 1 || len(l.early) != 0 {
		t.Errorf("sent %v, early %v; want only the withheld publish filed", l.sent, l.early)
	}
}
