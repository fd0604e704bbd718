package mqttpub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// feedConn is a socket whose peer is the test: feed makes bytes readable,
// and one Read takes everything fed so far, as read(2) takes what the
// kernel holds.
type feedConn struct {
	net.Conn // one end of a pipe, for the methods the tests do not use
	reads    atomic.Int64

	mu     sync.Mutex
	cond   *sync.Cond
	data   []byte // guarded by mu
	closed bool   // guarded by mu
}

func newFeedConn(t *testing.T) *feedConn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	f := &feedConn{Conn: a}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *feedConn) feed(s string) {
	f.mu.Lock()
	f.data = append(f.data, s...)
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (f *feedConn) Read(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.data) == 0 && !f.closed {
		f.cond.Wait()
	}
	if f.closed {
		return 0, net.ErrClosed
	}
	f.reads.Add(1)
	n := copy(b, f.data)
	f.data = f.data[n:]
	return n, nil
}

func (f *feedConn) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cond.Broadcast()
	return f.Conn.Close()
}

// fakePace is a gatherer whose timer the test fires.
type fakePace struct {
	on    atomic.Bool
	asked chan time.Duration // a timer was asked for, for this long
	fire  chan time.Time     // the test fires the timer asked for
}

func newFakePace() *fakePace {
	p := &fakePace{asked: make(chan time.Duration, 1), fire: make(chan time.Time)}
	p.on.Store(true)
	return p
}

func (p *fakePace) gatherer() gatherer {
	return gatherer{
		hold: gatherHold,
		on:   p.on.Load,
		timer: func(d time.Duration) (<-chan time.Time, func() bool) {
			p.asked <- d
			return p.fire, func() bool { return true }
		},
	}
}

// readString runs one g.Read in a goroutine.
func readString(g *genConn) <-chan string {
	out := make(chan string, 1)
	go func() {
		b := make([]byte, 64)
		n, err := g.Read(b)
		if err != nil {
			out <- "error: " + err.Error()
			return
		}
		out <- string(b[:n])
	}()
	return out
}

// TestPacedReadWaitsForTheNextBurst: while pacing is on, a Read that
// would read the socket first waits for the next burst (kick), and then
// takes everything that arrived meanwhile in one socket read. A kick made
// before the wait began (the burst whose PUBACKs are awaited) does not end
// it.
func TestPacedReadWaitsForTheNextBurst(t *testing.T) {
	sock := newFeedConn(t)
	pace := newFakePace()
	g := newPacedConn(sock, func() {}, waitLimit, pace.gatherer())
	defer g.abort()

	g.kick() // the burst whose PUBACKs the read below awaits
	got := readString(g)
	if d := recv(t, pace.asked); d != gatherHold {
		t.Fatalf("the read waits at most %v; want %v", d, gatherHold)
	}
	sock.feed("a") // PUBACKs arriving while the reader waits …
	sock.feed("b")
	select {
	case s := <-got:
		t.Fatalf("Read returned %q before the next burst", s)
	default:
	}
	g.kick() // … are read together when the next burst goes out
	if s := recv(t, got); s != "ab" {
		t.Fatalf("Read = %q; want ab", s)
	}
	if n := sock.reads.Load(); n != 1 {
		t.Errorf("%d socket reads; want 1", n)
	}

	// No burst comes: the hold ends the wait.
	got = readString(g)
	recv(t, pace.asked)
	sock.feed("c")
	pace.fire <- time.Now()
	if s := recv(t, got); s != "c" {
		t.Fatalf("Read = %q; want c", s)
	}
}

// TestPacedReadsOffWhileBehind: with pacing off (the drain has a backlog
// to catch up on), reads are not delayed.
func TestPacedReadsOffWhileBehind(t *testing.T) {
	sock := newFeedConn(t)
	pace := newFakePace()
	pace.on.Store(false)
	g := newPacedConn(sock, func() {}, waitLimit, pace.gatherer())
	defer g.abort()
	for i := range 3 {
		want := fmt.Sprint(i)
		sock.feed(want)
		if got := recv(t, readString(g)); got != want {
			t.Fatalf("Read = %q; want %q", got, want)
		}
	}
	select {
	case d := <-pace.asked:
		t.Fatalf("a read waited %v with pacing off", d)
	default:
	}
}

// TestPacedReadCloseEndsWait: a Close ends a read's wait at once; the read
// fails rather than waiting out its timer.
func TestPacedReadCloseEndsWait(t *testing.T) {
	sock := newFeedConn(t)
	pace := newFakePace()
	g := newPacedConn(sock, func() {}, waitLimit, pace.gatherer())
	got := readString(g)
	recv(t, pace.asked) // waiting; neither a burst nor the timer comes
	if err := closeWithin(t, g); err != nil {
		t.Fatal(err)
	}
	if s := recv(t, got); s == "" || s[:6] != "error:" {
		t.Fatalf("Read after Close = %q; want an error", s)
	}
}

// TestGenConnCorkHolds: Writes made while corked reach the socket in one
// write at uncork, and later Writes go out as they come again.
func TestGenConnCorkHolds(t *testing.T) {
	client, server := tcpPair(t)
	var early atomic.Bool // a socket write happened before uncork
	var uncorked atomic.Bool
	probe := &probeConn{Conn: client, onWrite: func(int64) {
		if !uncorked.Load() {
			early.Store(true)
		}
	}}
	g := newGenConn(probe, func() {}, waitLimit)
	got := readAll(server)

	g.cork()
	var want bytes.Buffer
	for i := range 50 {
		p := fmt.Appendf(nil, "<%d>", i)
		want.Write(p)
		if _, err := g.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	uncorked.Store(true)
	g.uncork()
	if _, err := g.Write([]byte("<after>")); err != nil {
		t.Fatal(err)
	}
	want.WriteString("<after>")
	if err := closeWithin(t, g); err != nil {
		t.Fatal(err)
	}
	if data := recv(t, got); !bytes.Equal(data, want.Bytes()) {
		t.Fatalf("peer read %q; want %q", data, want.Bytes())
	}
	if early.Load() {
		t.Error("the socket was written while corked")
	}
	batches, _ := probe.recorded()
	if len(batches) == 0 || !bytes.HasPrefix(batches[0], []byte("<0><1>")) || !bytes.Contains(batches[0], []byte("<49>")) {
		t.Errorf("first socket write %q; want the 50 corked Writes together", batches[0])
	}
}

// TestGenConnCorkNeverBlocks: a corked connection still writes a full
// buffer (Write must never wait on uncork, or paho's outgoing goroutine
// and the drain loop publishing into it would deadlock), and Close writes
// what a cork held.
func TestGenConnCorkNeverBlocks(t *testing.T) {
	client, server := tcpPair(t)
	g := newGenConn(client, func() {}, waitLimit)
	got := readAll(server)
	g.cork()
	big := bytes.Repeat([]byte("x"), 2*maxPending+5)
	done := make(chan error, 1)
	go func() { _, err := g.Write(big); done <- err }()
	if err := recv(t, done); err != nil {
		t.Fatalf("corked Write of %d bytes: %v", len(big), err)
	}
	if _, err := g.Write([]byte("tail")); err != nil {
		t.Fatal(err)
	}
	if err := closeWithin(t, g); err != nil { // still corked
		t.Fatal(err)
	}
	want := append(big, "tail"...)
	if data := recv(t, got); !bytes.Equal(data, want) {
		t.Fatalf("peer read %d bytes; want %d (the corked bytes written by Close)", len(data), len(want))
	}
	if _, err := g.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close = %v; want net.ErrClosed", err)
	}
}

// TestBurstLeavesTogether: a drain cycle's burst of publishes reaches the
// broker in at most three socket writes: the corked burst, and the one or
// two packets paho's goroutines still held at flush. Without the cork,
// paho's writes and the flusher take turns and the burst leaves in about
// one write per three packets.
func TestBurstLeavesTogether(t *testing.T) {
	addr, _ := startMochi(t, "127.0.0.1:0", newAckHook())
	p := newPublisher(t, newFakeSource(), testOptions(addr, "t"))
	lc, err := check(&p.o)
	if err != nil {
		t.Fatal(err)
	}
	var reads, writes atomic.Int64
	lc.wrap = func(c net.Conn, end func(), pace gatherer) net.Conn {
		return newPacedConn(&countingConn{Conn: c, reads: &reads, writes: &writes}, end, quiesce, pace)
	}
	l, err := dialLink(context.Background(), lc, &p.gen)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()

	const burst = 50
	before := writes.Load() // CONNECT
	toks := make([]token, 0, burst)
	for i := range burst {
		toks = append(toks, l.publish(fmt.Appendf(nil, "event %d", i)))
	}
	l.flush()
	for i, tok := range toks {
		select {
		case <-tok.Done():
		case <-time.After(waitLimit):
			t.Fatalf("no PUBACK for publish %d", i)
		}
		if err := tok.Error(); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.Load() - before; n > 3 {
		t.Errorf("a burst of %d publishes took %d socket writes; want at most 3", burst, n)
	}
}

// TestDrainPaces: the drain loop lets PUBACKs wait for the next burst
// only while its window is at most half full: a read that fills the
// window (a backlog), or a burst that fills more than half of it, turns
// pacing off.
func TestDrainPaces(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rows, window int
	}{
		{"backlog", 5, 2},        // reads fill the window
		{"window filling", 3, 4}, // a short read, but 3 of 4 in flight
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := newFakeSource()
			src.add(payloads("row", tc.rows, 10)...)
			o := testOptions("127.0.0.1:1", "t")
			o.Window = tc.window
			p := newPublisher(t, src, o)
			links := make(chan *fakeLink, 1)
			p.connect = func(ctx context.Context, gen *atomic.Uint64) (link, error) {
				gen.Add(1)
				l := &fakeLink{gen: gen, pubs: make(chan *fakeToken, 8), dead: make(chan struct{}), ack: true, ups: make(chan bool, 64)}
				links <- l
				return l, nil
			}
			start(t, p)
			l := recv(t, links)
			var seen []bool
			for len(seen) == 0 || !seen[len(seen)-1] {
				seen = append(seen, recv(t, l.ups))
			}
			if seen[0] {
				t.Errorf("pace calls %v; want off first (%d rows, window %d)", seen, tc.rows, tc.window)
			}
			eventually(t, "every row acknowledged", func() bool { return p.Stats().Acked == uint64(tc.rows) })
		})
	}
}

// TestGatheringNeedsAwaitedPUBACKs: a link gathers PUBACKs only while the
// drain has caught up and publishes await their PUBACK; with none awaited
// a read blocks for the broker's next packet without a timer first, so an
// idle connection costs no wakeups.
func TestGatheringNeedsAwaitedPUBACKs(t *testing.T) {
	l := &pahoLink{}
	l.startWatch()
	defer l.stopWatch()
	if l.gathering() {
		t.Error("gathering before the drain caught up")
	}
	l.pace(true)
	if l.gathering() {
		t.Error("gathering with no PUBACK awaited")
	}
	l.file(&idToken{fakeToken: fakeToken{done: make(chan struct{})}, id: 7})
	if !l.gathering() {
		t.Error("not gathering with a PUBACK awaited and the drain caught up")
	}
	l.pace(false)
	if l.gathering() {
		t.Error("gathering while a backlog drains")
	}
	l.pace(true)
	l.pubackRead(7)
	if l.gathering() {
		t.Error("gathering after the last awaited PUBACK was read")
	}
}

// TestPaceOffWakesTheReader: a reader waiting for the next burst reads at
// once when pacing turns off (the drain's window is filling): a drain that
// needs its window back must not wait out the hold.
func TestPaceOffWakesTheReader(t *testing.T) {
	l := &pahoLink{}
	l.startWatch()
	defer l.stopWatch()
	sock := newFeedConn(t)
	pace := newFakePace()
	gt := pace.gatherer()
	gt.on = l.gathering
	g := newPacedConn(sock, func() {}, waitLimit, gt)
	defer g.abort()
	l.conns = []net.Conn{g}

	l.pace(true)
	l.file(&idToken{fakeToken: fakeToken{done: make(chan struct{})}, id: 1})
	got := readString(g)
	recv(t, pace.asked) // waiting for the next burst
	sock.feed("puback")
	l.pace(false)
	if s := recv(t, got); s != "puback" {
		t.Fatalf("Read = %q; want puback", s)
	}
}

// TestStopSettlesWaitingPUBACKs: when the publisher stops, PUBACKs that
// wait for a next burst are read (pacing turns off, which wakes the
// reader), and those still on their way get a moment to arrive, so that
// a node that shuts down does not replay what the broker acknowledged.
func TestStopSettlesWaitingPUBACKs(t *testing.T) {
	src := newFakeSource()
	p := newPublisher(t, src, testOptions("127.0.0.1:1", "t"))
	links := make(chan *fakeLink, 1)
	p.connect = func(ctx context.Context, gen *atomic.Uint64) (link, error) {
		gen.Add(1)
		l := &fakeLink{gen: gen, pubs: make(chan *fakeToken, 8), dead: make(chan struct{}), ups: make(chan bool, 64)}
		links <- l
		return l, nil
	}
	r := start(t, p)
	l := recv(t, links)
	src.add(payloads("stop", 3, 50)...)
	toks := []*fakeToken{recv(t, l.pubs), recv(t, l.pubs), recv(t, l.pubs)}

	r.cancel()
	for recv(t, l.ups) { // on while it ran (3 in a window of 1024); off to stop
	}
	for _, tok := range toks { // the PUBACKs the reader held back
		close(tok.done)
	}
	r.stop(t)
	if left := src.pending(); left != 0 {
		t.Errorf("%d of 3 acknowledged rows left after stop", left)
	}
}
