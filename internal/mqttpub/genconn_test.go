package mqttpub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pahopackets "github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/google/go-cmp/cmp"
)

// probeConn is a socket that counts and records what genConn does to it.
type probeConn struct {
	net.Conn
	reads, writes atomic.Int64
	// onWrite, if set, runs at the start of every Write with its index
	// (from 0); a test blocks it to hold the flusher inside a write.
	onWrite  func(i int64)
	writeErr error // if set, Write fails with it and writes nothing

	mu        sync.Mutex
	batches   [][]byte    // the bytes of every Write; guarded by mu
	deadlines []time.Time // the write deadline in force at every Write; guarded by mu
	dl        time.Time   // guarded by mu
}

func (p *probeConn) Read(b []byte) (int, error) {
	p.reads.Add(1)
	return p.Conn.Read(b)
}

func (p *probeConn) Write(b []byte) (int, error) {
	i := p.writes.Add(1) - 1
	if p.onWrite != nil {
		p.onWrite(i)
	}
	p.mu.Lock()
	p.batches = append(p.batches, bytes.Clone(b))
	p.deadlines = append(p.deadlines, p.dl)
	p.mu.Unlock()
	if p.writeErr != nil {
		return 0, p.writeErr
	}
	return p.Conn.Write(b)
}

func (p *probeConn) SetWriteDeadline(t time.Time) error {
	p.mu.Lock()
	p.dl = t
	p.mu.Unlock()
	return p.Conn.SetWriteDeadline(t)
}

func (p *probeConn) recorded() (batches [][]byte, deadlines []time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.batches), slices.Clone(p.deadlines)
}

// gate holds the flusher inside its first write until released.
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) onWrite(i int64) {
	if i == 0 {
		close(g.entered)
		<-g.release
	}
}

// endCounter is a genConn's end func that counts its calls.
type endCounter struct {
	n    atomic.Int32
	once sync.Once
	done chan struct{}
}

func newEndCounter() *endCounter { return &endCounter{done: make(chan struct{})} }

func (e *endCounter) end() {
	e.n.Add(1)
	e.once.Do(func() { close(e.done) })
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = recv(t, accepted)
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server
}

// readAll reads from c until EOF or error into the returned channel.
func readAll(c net.Conn) <-chan []byte {
	out := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		out <- b
	}()
	return out
}

// stopped fails unless g's flusher has returned.
func stopped(t *testing.T, g *genConn) {
	t.Helper()
	select {
	case <-g.done:
	default:
		t.Error("the flusher is still running")
	}
}

// closeWithin runs g.Close and fails the test if it has not returned
// within waitLimit.
func closeWithin(t *testing.T, g *genConn) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- g.Close() }()
	return recv(t, errc)
}

// TestGenConnWritesInOrder: many small Writes from several goroutines (as
// paho's outgoing goroutine and its keepalive write) all arrive, each one
// contiguous and each writer's in order, including Writes larger than
// maxPending; then Close stops the flusher.
func TestGenConnWritesInOrder(t *testing.T) {
	client, server := tcpPair(t)
	probe := &probeConn{Conn: client}
	ends := newEndCounter()
	g := newGenConn(probe, ends.end, waitLimit)

	const writers, each = 4, 2000
	big := bytes.Repeat([]byte("B"), 3*maxPending+17)
	var want [writers][]string
	var wg sync.WaitGroup
	for w := range writers {
		for i := range each {
			want[w] = append(want[w], fmt.Sprintf("<%d:%d:%s>", w, i, bytes.Repeat([]byte{'x'}, i%61)))
		}
		wg.Go(func() {
			for i, rec := range want[w] {
				if w == 0 && i == each/2 {
					if _, err := g.Write(append(append([]byte("<big:"), big...), '>')); err != nil {
						t.Errorf("big Write: %v", err)
					}
				}
				if n, err := g.Write([]byte(rec)); n != len(rec) || err != nil {
					t.Errorf("Write = %d, %v; want %d, nil", n, err, len(rec))
					return
				}
			}
		})
	}
	got := readAll(server)
	wg.Wait()
	if err := closeWithin(t, g); err != nil {
		t.Errorf("Close: %v", err)
	}
	stopped(t, g)
	data := recv(t, got)

	// Split the stream into records and check each writer's sequence.
	var gotRecs [writers][]string
	bigSeen := 0
	for len(data) > 0 {
		if data[0] != '<' {
			t.Fatalf("stream out of frame at %q", data[:min(len(data), 40)])
		}
		end := bytes.IndexByte(data, '>')
		rec := string(data[:end+1])
		data = data[end+1:]
		if len(rec) > 5 && rec[:5] == "<big:" {
			if !bytes.Equal([]byte(rec[5:len(rec)-1]), big) {
				t.Error("the big Write arrived damaged or interleaved")
			}
			bigSeen++
			continue
		}
		var w, i int
		if _, err := fmt.Sscanf(rec, "<%d:%d:", &w, &i); err != nil || w < 0 || w >= writers {
			t.Fatalf("bad record %q", rec)
		}
		gotRecs[w] = append(gotRecs[w], rec)
	}
	if bigSeen != 1 {
		t.Errorf("big Write seen %d times; want 1", bigSeen)
	}
	for w := range writers {
		if diff := cmp.Diff(gotRecs[w], want[w]); diff != "" {
			t.Errorf("writer %d records (-got +want):\n%s", w, diff)
		}
	}
	if n := ends.n.Load(); n != 1 {
		t.Errorf("end ran %d times; want 1", n)
	}
	t.Logf("%d Writes went out in %d socket writes", writers*each+1, probe.writes.Load())
}

// TestGenConnCoalesces: Writes made while the flusher is inside a write go
// out together in the next one.
func TestGenConnCoalesces(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	gt := newGate()
	probe := &probeConn{Conn: client, onWrite: gt.onWrite}
	g := newGenConn(probe, func() {}, waitLimit)
	got := readAll(server)

	if _, err := g.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	recv(t, gt.entered) // the flusher is now blocked writing "first"
	var rest []byte
	for i := range 50 {
		p := fmt.Appendf(nil, "[%d]", i)
		rest = append(rest, p...)
		if _, err := g.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	close(gt.release)
	if err := closeWithin(t, g); err != nil {
		t.Errorf("Close: %v", err)
	}
	stopped(t, g)
	if d := recv(t, got); string(d) != "first"+string(rest) {
		t.Errorf("received %q", d)
	}
	batches, _ := probe.recorded()
	want := [][]byte{[]byte("first"), rest}
	if diff := cmp.Diff(batches, want); diff != "" {
		t.Errorf("socket writes (-got +want):\n%s", diff)
	}
}

// TestGenConnWriteError: a failed socket write ends the connection once,
// closes the socket (the peer sees EOF, our Read fails with the write
// error so paho notices), and fails every later Write with that error.
func TestGenConnWriteError(t *testing.T) {
	client, server := tcpPair(t)
	boom := errors.New("boom")
	probe := &probeConn{Conn: client, writeErr: boom}
	ends := newEndCounter()
	g := newGenConn(probe, ends.end, waitLimit)

	if _, err := g.Write([]byte("doomed")); err != nil {
		t.Fatalf("Write before the failure = %v; want nil (it is only buffered)", err)
	}
	recv(t, ends.done)
	<-g.done // the flusher returns after a failure, without Close
	for range 3 {
		if _, err := g.Write([]byte("later")); !errors.Is(err, boom) {
			t.Errorf("Write after the failure = %v; want %v", err, boom)
		}
	}
	if _, err := g.Read(make([]byte, 1)); !errors.Is(err, boom) {
		t.Errorf("Read after the failure = %v; want %v", err, boom)
	}
	if b := recv(t, readAll(server)); len(b) != 0 {
		t.Errorf("peer received %q; want nothing, then EOF", b)
	}
	if err := closeWithin(t, g); err != nil {
		t.Errorf("Close after the failure = %v; want nil", err)
	}
	if n := ends.n.Load(); n != 1 {
		t.Errorf("end ran %d times; want 1", n)
	}
}

// TestGenConnReadErrorEndsOnce: a read error, later write errors and Close
// together run end once.
func TestGenConnReadErrorEndsOnce(t *testing.T) {
	client, server := tcpPair(t)
	ends := newEndCounter()
	g := newGenConn(client, ends.end, waitLimit)
	_ = server.Close()
	if _, err := g.Read(make([]byte, 1)); err == nil {
		t.Fatal("Read from a closed peer succeeded")
	}
	recv(t, ends.done)
	_, _ = g.Read(make([]byte, 1))
	_ = closeWithin(t, g)
	stopped(t, g)
	if _, err := g.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close = %v; want net.ErrClosed", err)
	}
	if n := ends.n.Load(); n != 1 {
		t.Errorf("end ran %d times; want 1", n)
	}
}

// TestGenConnCloseFlushes: Close writes everything pending before it
// closes the socket.
func TestGenConnCloseFlushes(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	gt := newGate()
	g := newGenConn(&probeConn{Conn: client, onWrite: gt.onWrite}, func() {}, waitLimit)
	got := readAll(server)
	if _, err := g.Write([]byte("one,")); err != nil {
		t.Fatal(err)
	}
	recv(t, gt.entered)
	for _, p := range []string{"two,", "three"} {
		if _, err := g.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- g.Close() }()
	// Close has begun when Writes are refused; only then let the flusher go.
	eventually(t, "Close to begin", func() bool {
		_, err := g.Write(nil)
		return errors.Is(err, net.ErrClosed)
	})
	close(gt.release)
	if err := recv(t, errc); err != nil {
		t.Errorf("Close: %v", err)
	}
	stopped(t, g)
	if d := recv(t, got); string(d) != "one,two,three" {
		t.Errorf("peer received %q; want %q", d, "one,two,three")
	}
}

// TestGenConnCloseBounded: Close returns although the peer never reads,
// once linger has passed, and the flusher has returned by then.
func TestGenConnCloseBounded(t *testing.T) {
	client, server := net.Pipe() // nobody reads server: every write blocks
	defer server.Close()
	ends := newEndCounter()
	g := newGenConn(client, ends.end, 20*time.Millisecond)
	if _, err := g.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	_ = closeWithin(t, g)
	stopped(t, g)
	if n := ends.n.Load(); n != 1 {
		t.Errorf("end ran %d times; want 1", n)
	}
}

// TestGenConnAbort: abort does not wait for pending bytes, and cuts short
// a Close that is waiting for them.
func TestGenConnAbort(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	g := newGenConn(client, func() {}, time.Hour)
	if _, err := g.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- g.Close() }() // would wait an hour
	eventually(t, "Close to begin", func() bool {
		_, err := g.Write(nil)
		return errors.Is(err, net.ErrClosed)
	})
	done := make(chan struct{})
	go func() { g.abort(); close(done) }()
	recv(t, done)
	recv(t, errc)
	stopped(t, g)
}

// TestGenConnWriteDeadline: the deadline paho set before a Write applies
// to the socket write that carries its bytes, the earliest one when a
// batch holds several, and none after it is cleared.
func TestGenConnWriteDeadline(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	gt := newGate()
	probe := &probeConn{Conn: client, onWrite: gt.onWrite}
	g := newGenConn(probe, func() {}, waitLimit)
	got := readAll(server)

	base := time.Now().Add(time.Hour)
	d1, d2, d3 := base, base.Add(time.Minute), base.Add(-time.Minute)
	write := func(dl time.Time, p string) {
		t.Helper()
		if err := g.SetWriteDeadline(dl); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	write(d1, "a")
	recv(t, gt.entered)
	write(d2, "b")
	write(d3, "c")
	write(time.Time{}, "d") // no deadline: does not loosen the batch's
	close(gt.release)
	eventually(t, "the batch written", func() bool { return probe.writes.Load() == 2 })
	write(time.Time{}, "e")
	_ = closeWithin(t, g)
	recv(t, got)
	batches, deadlines := probe.recorded()
	if diff := cmp.Diff(batches, [][]byte{[]byte("a"), []byte("bcd"), []byte("e")}); diff != "" {
		t.Errorf("socket writes (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(deadlines, []time.Time{d1, d3, {}}); diff != "" {
		t.Errorf("deadline at each socket write (-got +want):\n%s", diff)
	}
}

// TestGenConnDeadlineEndsConnection: a peer that stops reading makes the
// flusher's write fail at paho's deadline, which ends the connection.
func TestGenConnDeadlineEndsConnection(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	ends := newEndCounter()
	g := newGenConn(client, ends.end, waitLimit)
	if err := g.SetWriteDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	recv(t, ends.done)
	if _, err := g.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Write after the timeout = %v; want os.ErrDeadlineExceeded", err)
	}
	_ = closeWithin(t, g)
	stopped(t, g)
}

// TestGenConnBackpressure: with maxPending bytes pending, Write blocks,
// and fails at its deadline, ending the connection.
func TestGenConnBackpressure(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	gt := newGate()
	ends := newEndCounter()
	g := newGenConn(&probeConn{Conn: client, onWrite: gt.onWrite}, ends.end, waitLimit)
	if _, err := g.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	recv(t, gt.entered)
	if n, err := g.Write(make([]byte, maxPending)); n != maxPending || err != nil {
		t.Fatalf("Write of maxPending = %d, %v", n, err)
	}
	if err := g.SetWriteDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := g.Write([]byte("no room"))
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Write with no room = %d, %v; want 0, os.ErrDeadlineExceeded", n, err)
	}
	recv(t, ends.done)
	close(gt.release)
	_ = closeWithin(t, g)
	stopped(t, g)
	if n := ends.n.Load(); n != 1 {
		t.Errorf("end ran %d times; want 1", n)
	}
}

// TestGenConnBufferedReads: a burst of PUBACKs costs one socket read
// (paho reads each one with three Reads), and nothing is lost or reordered
// between the CONNACK read and the reads after it.
func TestGenConnBufferedReads(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	probe := &probeConn{Conn: client}
	g := newGenConn(probe, func() {}, waitLimit)
	defer g.abort()

	var burst bytes.Buffer
	ca := pahopackets.NewControlPacket(pahopackets.Connack).(*pahopackets.ConnackPacket)
	if err := ca.Write(&burst); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		pa := pahopackets.NewControlPacket(pahopackets.Puback).(*pahopackets.PubackPacket)
		pa.MessageID = uint16(i + 1)
		if err := pa.Write(&burst); err != nil {
			t.Fatal(err)
		}
	}
	if burst.Len() > readBuffer {
		t.Fatalf("burst of %d bytes does not fit the read buffer", burst.Len())
	}
	go func() { _, _ = server.Write(burst.Bytes()) }()

	if cp, err := pahopackets.ReadPacket(g); err != nil {
		t.Fatal(err)
	} else if _, ok := cp.(*pahopackets.ConnackPacket); !ok {
		t.Fatalf("first packet %T; want CONNACK", cp)
	}
	for i := range n {
		cp, err := pahopackets.ReadPacket(g)
		if err != nil {
			t.Fatal(err)
		}
		if pa, ok := cp.(*pahopackets.PubackPacket); !ok || pa.MessageID != uint16(i+1) {
			t.Fatalf("packet %d = %v; want PUBACK %d", i, cp, i+1)
		}
	}
	if r := probe.reads.Load(); r != 1 {
		t.Errorf("%d socket reads for a CONNACK and %d PUBACKs; want 1", r, n)
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
	lc.wrap = func(c net.Conn, end func()) net.Conn {
		return newGenConn(&countingConn{Conn: c, reads: &reads, writes: &writes}, end, quiesce)
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

// TestLinkStopsFlushers: after a link closes, the flusher of every
// connection it dialled has returned.
func TestLinkStopsFlushers(t *testing.T) {
	addr, _ := startMochi(t, "127.0.0.1:0", newAckHook())
	p := newPublisher(t, newFakeSource(), testOptions(addr, "t"))
	lc, err := check(&p.o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := dialLink(t.Context(), lc, &p.gen)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		tok := l.publish(fmt.Appendf(nil, "event %d", i))
		l.flush()
		select {
		case <-tok.Done():
		case <-time.After(waitLimit):
			t.Fatal("no PUBACK")
		}
		if err := tok.Error(); err != nil {
			t.Fatal(err)
		}
	}
	l.close()
	l.mu.Lock()
	conns := l.conns
	l.mu.Unlock()
	if len(conns) != 1 {
		t.Fatalf("%d connections dialled; want 1", len(conns))
	}
	for _, c := range conns {
		stopped(t, c.(*genConn))
	}
}
