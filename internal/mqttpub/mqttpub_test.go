package mqttpub

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBrokerDownAtStart: the broker is
// unreachable when the publisher starts; rows accumulate, and once it is
// reachable every row is delivered and deleted.
func TestBrokerDownAtStart(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		topic := uniqueTopic(t)
		sub := subscribe(t, b.addr, topic)
		rl := newRelay(t, b.addr) // down: connections are refused
		src := newFakeSource()
		events := payloads("d1", 200, 300)
		src.add(events[:150]...)

		p := newPublisher(t, src, testOptions(rl.addr, topic))
		start(t, p)
		eventually(t, "three failed connection attempts", func() bool { return p.Stats().ConnectFailures >= 3 })
		if st := p.Stats(); st.Connected || st.Published != 0 || st.LastError == "" {
			t.Fatalf("while the broker is down: Stats = %+v; want not connected, nothing published, LastError set", st)
		}
		src.add(events[150:]...) // appended while down

		rl.up()
		eventually(t, "every row deleted", func() bool { return src.pending() == 0 })
		eventually(t, "every event delivered", func() bool { return sub.gotAll(events) })
		st := p.Stats()
		if !st.Connected || st.Acked != uint64(len(events)) || st.Published < uint64(len(events)) || st.Oversize != 0 || st.InFlight != 0 {
			t.Errorf("Stats = %+v; want connected, Acked = Published = %d, nothing in flight", st, len(events))
		}
	})
}

// TestWithheldAckThenLinkCut (D2, D3): the broker withholds every PUBACK,
// then the link is cut. No row may be deleted until a real PUBACK for it
// was issued on the new connection; every row is republished, same bytes.
//
// It fails if a row is deleted on a publish token that ended with the
// connection (checked by breaking settle to ignore token errors), or on one
// that completed across a reconnect (see also TestStaleAckIsNotAnAck).
func TestWithheldAckThenLinkCut(t *testing.T) {
	h := newAckHook()
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	topic := uniqueTopic(t)
	sub := subscribe(t, addr, topic)
	src := newFakeSource()
	events := payloads("d2", 20, 200)
	seqs := src.add(events...)
	bySeq := map[uint64][]byte{}
	for i, q := range seqs {
		bySeq[q] = events[i]
	}
	var (
		mu         sync.Mutex
		violations []string
	)
	src.onDelete = func(del []uint64) {
		for _, q := range del {
			if on := h.ackedOn(bySeq[q]); len(on) == 0 {
				mu.Lock()
				violations = append(violations, string(bySeq[q][:30]))
				mu.Unlock()
			}
		}
	}

	h.withhold.Store(true)
	p := newPublisher(t, src, testOptions(addr, topic))
	start(t, p)
	eventually(t, "all 20 publishes withheld on connection 1", func() bool {
		var n int
		h.read(func(h *ackHook) { n = h.rejected[1] })
		return n == len(events)
	})
	if n := src.deleteCalls(); n != 0 {
		t.Fatalf("%d Delete calls while every PUBACK was withheld; want 0", n)
	}
	// The drain loop counts what is in flight after the burst has gone
	// out, so the broker can have all 20 a moment before Stats says so.
	eventually(t, "20 publishes in flight", func() bool { return p.Stats().InFlight == len(events) })
	if st := p.Stats(); st.Acked != 0 || st.InFlight != len(events) {
		t.Fatalf("Stats = %+v; want Acked 0, InFlight %d", st, len(events))
	}

	h.withhold.Store(false)
	h.cut()
	eventually(t, "every row deleted after the reconnect", func() bool { return src.pending() == 0 })
	mu.Lock()
	bad := slices.Clone(violations)
	mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("rows deleted without any PUBACK issued for them: %q", bad)
	}
	for _, e := range events {
		if on := h.ackedOn(e); slices.Contains(on, 1) || len(on) == 0 {
			t.Errorf("%.30s acknowledged on connections %v; want only after the cut (>= 2)", e, on)
		}
	}
	eventually(t, "every event delivered", func() bool { return sub.gotAll(events) })
	h.read(func(h *ackHook) {
		if diff := cmp.Diff(h.seen[2], h.seen[1]); diff != "" {
			t.Errorf("republished payloads differ from the first attempt (-conn2 +conn1):\n%s", diff)
		}
	})
	if st := p.Stats(); st.Reconnects < 1 || st.Published < 2*uint64(len(events)) || st.Acked != uint64(len(events)) {
		t.Errorf("Stats = %+v; want Reconnects >= 1, Published >= %d, Acked %d", st, 2*len(events), len(events))
	}
}

// TestRestartReplaysSamePayloads: a publisher stops with rows still in the
// outbox; a new one (a restarted node) publishes them with the same bytes,
// hence the same event_id.
func TestRestartReplaysSamePayloads(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		topic := uniqueTopic(t)
		sub := subscribe(t, b.addr, topic)
		rl := newRelay(t, b.addr)
		src := newFakeSource()
		events := payloads("restart", 30, 250)
		src.add(events...)

		p1 := newPublisher(t, src, testOptions(rl.addr, topic))
		if b.hook != nil {
			// mochi: published, never acknowledged.
			b.hook.withhold.Store(true)
			rl.up()
			r1 := start(t, p1)
			eventually(t, "first run published everything", func() bool {
				var n int
				b.hook.read(func(h *ackHook) { n = h.rejected[1] })
				return n == len(events)
			})
			r1.stop(t)
			// Run sent DISCONNECT before returning; the broker sees it soon.
			eventually(t, "a clean DISCONNECT at the broker", func() bool {
				var n int
				b.hook.read(func(h *ackHook) { n = h.clean })
				return n == 1
			})
			b.hook.withhold.Store(false)
		} else {
			// Mosquitto cannot withhold: the first run never gets through.
			r1 := start(t, p1)
			eventually(t, "first run failing to connect", func() bool { return p1.Stats().ConnectFailures >= 1 })
			r1.stop(t)
			rl.up()
		}
		if n := src.pending(); n != len(events) {
			t.Fatalf("rows left after the first run = %d; want %d", n, len(events))
		}

		p2 := newPublisher(t, src, testOptions(rl.addr, topic))
		start(t, p2)
		eventually(t, "second run drained the outbox", func() bool { return src.pending() == 0 })
		eventually(t, "every event delivered", func() bool { return sub.gotAll(events) })
		if b.hook != nil {
			b.hook.read(func(h *ackHook) {
				if diff := cmp.Diff(h.seen[2], h.seen[1]); diff != "" {
					t.Errorf("replayed payloads differ (-second run +first run):\n%s", diff)
				}
			})
		}
	})
}

// TestOversizeRefused (D5): a row above MaxPayload is deleted before it is
// ever published, and counted; rows at the limit go out.
func TestOversizeRefused(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		topic := uniqueTopic(t)
		sub := subscribe(t, b.addr, topic)
		src := newFakeSource()
		const limit = 1024
		small := payloads("small", 2, 100)
		atLimit := payloads("at-limit", 1, limit)[0]
		big := payloads("big", 1, limit+1)[0]
		src.add(small[0], big, atLimit, small[1])

		o := testOptions(b.addr, topic)
		o.MaxPayload = limit
		p := newPublisher(t, src, o)
		start(t, p)
		want := [][]byte{small[0], atLimit, small[1]}
		eventually(t, "outbox drained", func() bool { return src.pending() == 0 })
		eventually(t, "deliverable events delivered", func() bool { return sub.gotAll(want) })
		if got := sub.got(big); got != 0 {
			t.Errorf("oversize event delivered %d times; want 0", got)
		}
		if b.hook != nil {
			b.hook.read(func(h *ackHook) {
				if slices.Contains(h.seen[1], string(big)) {
					t.Error("oversize event reached the broker; it must be refused before publishing")
				}
			})
		}
		if st := p.Stats(); st.Oversize != 1 || st.Acked != 3 || st.Published != 3 {
			t.Errorf("Stats = %+v; want Oversize 1, Acked 3, Published 3", st)
		}
	})
}

// TestWindowAndAckTimeout: with every PUBACK withheld, exactly Window
// publishes reach the broker per connection; after AckTimeout the publisher
// gives the connection up and replays on a new one; once acks flow, all
// rows go. The broker never holds more than Window unacknowledged
// publishes from one connection.
func TestWindowAndAckTimeout(t *testing.T) {
	h := newAckHook()
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	src := newFakeSource()
	events := payloads("window", 50, 100)
	src.add(events...)
	const window = 8

	h.withhold.Store(true)
	o := testOptions(addr, uniqueTopic(t))
	o.Window = window
	o.AckTimeout = 200 * time.Millisecond
	p := newPublisher(t, src, o)
	start(t, p)
	eventually(t, "a second connection after the ack timeout, with a full window", func() bool {
		var n int
		h.read(func(h *ackHook) { n = h.rejected[2] })
		return n >= window
	})
	if st := p.Stats(); !strings.Contains(st.LastError, ErrAckTimeout.Error()) {
		t.Errorf("LastError = %q; want the ack timeout", st.LastError)
	}
	h.read(func(h *ackHook) {
		if h.received[1] != window {
			t.Errorf("publishes on connection 1 = %d; want exactly the window, %d", h.received[1], window)
		}
		if diff := cmp.Diff(h.seen[2][:window], h.seen[1]); diff != "" {
			t.Errorf("connection 2 did not replay from the first row (-conn2 +conn1):\n%s", diff)
		}
	})

	h.withhold.Store(false)
	eventually(t, "outbox drained", func() bool { return src.pending() == 0 })
	h.read(func(h *ackHook) {
		if h.maxUnack != window {
			t.Errorf("most unacknowledged publishes on one connection = %d; want %d (Window)", h.maxUnack, window)
		}
	})
}

// TestHalfOpenLinkDetected (D7): the link stops carrying bytes without
// closing; keepalive notices within about 1.5×KeepAlive, the publisher
// reconnects, and new rows are delivered.
func TestHalfOpenLinkDetected(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		topic := uniqueTopic(t)
		sub := subscribe(t, b.addr, topic)
		rl := newRelay(t, b.addr)
		rl.up()
		src := newFakeSource()
		o := testOptions(rl.addr, topic)
		o.KeepAlive = time.Second
		p := newPublisher(t, src, o)
		start(t, p)
		first := payloads("halfopen-before", 1, 50)
		src.add(first...)
		eventually(t, "first row delivered", func() bool { return src.pending() == 0 })

		rl.freeze()
		begin := time.Now()
		eventually(t, "a reconnect after keepalive noticed the dead link", func() bool { return p.Stats().Reconnects >= 1 })
		if d := time.Since(begin); d > 4*o.KeepAlive {
			t.Errorf("half-open link noticed after %s; want about 1.5×KeepAlive (%s)", d, o.KeepAlive)
		}
		after := payloads("halfopen-after", 3, 50)
		src.add(after...)
		eventually(t, "rows delivered on the new link", func() bool { return src.pending() == 0 && sub.gotAll(after) })
	})
}

// TestAuthAndSecrets: username/password reach the broker; a wrong password
// fails to connect, and the password appears in no log line, Stats or
// error.
func TestAuthAndSecrets(t *testing.T) {
	const canary = "pw-CANARY-7f3a9c"
	h := newAckHook()
	h.username, h.password = "scootgate", canary
	addr, _ := startMochi(t, "127.0.0.1:0", h)

	var logs syncBuffer
	o := testOptions(addr, uniqueTopic(t))
	o.Username, o.Password = "scootgate", secretOf("wrong-"+canary)
	o.Logger = newTextLogger(&logs)
	src := newFakeSource()
	src.add(payloads("auth", 3, 50)...)
	p := newPublisher(t, src, o)
	r := start(t, p)
	eventually(t, "authentication failures", func() bool { return p.Stats().ConnectFailures >= 2 })
	r.stop(t)
	st := p.Stats()
	for what, s := range map[string]string{"log": logs.String(), "LastError": st.LastError} {
		if strings.Contains(s, canary) {
			t.Errorf("%s contains the password", what)
		}
	}
	if !strings.Contains(logs.String(), "mqtt connect failed") {
		t.Errorf("log lacks the connect failure:\n%s", logs.String())
	}

	o.Password = secretOf(canary)
	p = newPublisher(t, src, o)
	start(t, p)
	eventually(t, "delivery with the right password", func() bool { return src.pending() == 0 })
	if strings.Contains(logs.String(), canary) {
		t.Error("log contains the password")
	}
}

// TestSourceErrors: an outbox read failure ends the connection and is
// retried on the next one; nothing is lost.
func TestSourceErrors(t *testing.T) {
	h := newAckHook()
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	src := newFakeSource()
	events := payloads("srcerr", 10, 80)
	src.add(events...)
	src.readErr = errors.New("disk on fire")
	p := newPublisher(t, src, testOptions(addr, uniqueTopic(t)))
	start(t, p)
	eventually(t, "outbox drained", func() bool { return src.pending() == 0 })
	if st := p.Stats(); !strings.Contains(st.LastError, "disk on fire") || st.Reconnects != 1 || st.Acked != 10 {
		t.Errorf("Stats = %+v; want LastError from the read failure, one reconnect, Acked 10", st)
	}
}

// TestCancelDuringConnect: Run returns promptly when ctx ends while the
// broker accepts TCP but never answers CONNECT.
func TestCancelDuringConnect(t *testing.T) {
	ln := newSilentListener(t)
	o := testOptions(ln.addr, "t")
	o.ConnectTimeout = time.Minute
	p := newPublisher(t, newFakeSource(), o)
	r := start(t, p)
	eventually(t, "the connection attempt to reach the silent broker", func() bool { return ln.accepted.Load() > 0 })
	begin := time.Now()
	r.stop(t)
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("Run took %s to return after cancel during CONNECT; want well under the connect timeout", d)
	}
}

// TestRunTwice: one Publisher runs once at a time.
func TestRunTwice(t *testing.T) {
	h := newAckHook()
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	p := newPublisher(t, newFakeSource(), testOptions(addr, "t"))
	start(t, p)
	eventually(t, "connected", func() bool { return p.Stats().Connected })
	if err := p.Run(t.Context()); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run = %v; want ErrRunning", err)
	}
}

// TestNotifyWakesIdlePublisher: rows added to an idle, connected publisher
// are sent on the Notify signal (well before the idle poll).
func TestNotifyWakesIdlePublisher(t *testing.T) {
	h := newAckHook()
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	src := newFakeSource()
	p := newPublisher(t, src, testOptions(addr, "t"))
	start(t, p)
	eventually(t, "connected", func() bool { return p.Stats().Connected })
	for i := range 3 {
		begin := time.Now()
		src.add(payloads("notify", 1, 40)...)
		eventually(t, "row delivered", func() bool { return p.Stats().Acked == uint64(i+1) })
		if d := time.Since(begin); d >= idlePoll {
			t.Errorf("delivery took %s; the Notify signal should wake the publisher at once", d)
		}
	}
}

func TestTLS(t *testing.T) {
	ca, serverTLS := testCA(t)
	h := newAckHook()
	addr := startMochiTLS(t, h, serverTLS)
	src := newFakeSource()
	src.add(payloads("tls", 5, 100)...)

	o := testOptions(addr, "t")
	o.Broker = "ssl://" + addr
	o.TLS = ca
	p := newPublisher(t, src, o)
	start(t, p)
	eventually(t, "delivered over TLS", func() bool { return src.pending() == 0 })

	o.TLS = nil // system roots do not trust the test CA
	src2 := newFakeSource()
	src2.add(payloads("tls-untrusted", 1, 10)...)
	p2 := newPublisher(t, src2, o)
	start(t, p2)
	eventually(t, "an untrusted certificate refused", func() bool { return p2.Stats().ConnectFailures >= 1 })
	if st := p2.Stats(); st.Published != 0 || !strings.Contains(st.LastError, "certificate") {
		t.Errorf("Stats = %+v; want nothing published and a certificate error", st)
	}
}
