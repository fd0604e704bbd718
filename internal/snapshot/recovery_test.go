package snapshot_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/snapshot"
)

// TestPollerHolds: a poll asks to be held only when a document is loaded
// and the previous poll reached the source; the first poll after a start,
// any poll after a failure, and every poll while nothing is loaded ask for
// no wait (docs/snapshots.md "Recovery").
func TestPollerHolds(t *testing.T) {
	e := newPollerEnv(t, nil, 5*time.Minute)
	refused := errors.New("connection refused")
	for _, st := range []struct {
		data    string
		changed bool
		err     error
	}{
		{"", false, refused},     // nothing loaded
		{doc(1), true, nil},      // nothing loaded: the source answers
		{"", false, nil},         // loaded, last poll answered
		{"", false, refused},     // the same
		{"", false, refused},     // after a failure
		{"", false, nil},         // after a failure
		{doc(2), true, nil},      // answered again
		{`{"bad":1}`, true, nil}, // held: rejected below, but the source answered
		{"", false, nil},         // a rejection is contact: still held
	} {
		e.src.set(st.data, st.changed, st.err)
		_ = e.p.Poll(t.Context())
	}
	want := []bool{false, false, true, true, false, false, true, true, true}
	if diff := cmp.Diff(e.src.holds, want); diff != "" {
		t.Errorf("Hold before each poll (-got +want):\n%s", diff)
	}

	// A restart with a last good copy: the first poll is not held, so a
	// start is not delayed by a long poll, and a stale copy is not
	// refreshed one long poll late.
	store, _ := openStore(t)
	if err := store.Save("routes", []byte(doc(1)), 1, t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	r := newPollerEnv(t, store, 5*time.Minute)
	if err := r.p.Restore(); err != nil {
		t.Fatal(err)
	}
	r.src.set("", false, nil)
	for range 2 {
		if err := r.p.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(r.src.holds, []bool{false, true}); diff != "" {
		t.Errorf("Hold after a restore (-got +want):\n%s", diff)
	}
}

// TestPollerRetryDelay: while the node is unready, failed polls are
// retried after a backoff from 250 ms up to MaxRetry, counted from the
// start of the failed poll; while it is ready they wait the interval, but
// never past the moment it turns stale. The interval is long, so only the
// backoff can explain a short pause.
func TestPollerRetryDelay(t *testing.T) {
	refused := errors.New("connection refused")
	tests := []struct {
		name     string
		loaded   bool          // a document was applied before the failures
		idle     time.Duration // time passing after that poll
		failures int
		took     time.Duration // how long each failed poll took
		interval time.Duration
		lo, hi   time.Duration
	}{
		{"unloaded, first failure", false, 0, 1, 0, time.Hour, 125 * time.Millisecond, 250 * time.Millisecond},
		{"unloaded, second failure", false, 0, 2, 0, time.Hour, 250 * time.Millisecond, 500 * time.Millisecond},
		{"unloaded, fourth failure", false, 0, 4, 0, time.Hour, time.Second, 2 * time.Second},
		{"unloaded, 100th failure", false, 0, 100, 0, time.Hour, time.Second, snapshot.MaxRetry},
		{"unloaded, poll took part of the pause", false, 0, 4, 900 * time.Millisecond, time.Hour, 100 * time.Millisecond, 1100 * time.Millisecond},
		{"unloaded, stalled poll: at once", false, 0, 4, 3 * time.Second, time.Hour, 0, 0},
		{"unloaded, short interval caps the backoff", false, 0, 10, 0, 100 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond},
		{"ready: the interval", true, 0, 1, 0, 10 * time.Second, 10 * time.Second, 10 * time.Second},
		{"ready, stale in 4s: until then", true, 5*time.Minute - 4*time.Second, 1, 0, 10 * time.Second, 4 * time.Second, 4*time.Second + time.Nanosecond},
		{"stale: the backoff", true, 5*time.Minute + time.Second, 4, 0, time.Hour, time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPollerEnv(t, nil, 5*time.Minute)
			e.p = snapshot.NewPoller(snapshot.PollerOptions{
				Name: "routes", Source: e.src, Decode: e.tg.decode, Clock: e.clock.Now,
				StaleAfter: 5 * time.Minute, Interval: tt.interval,
			})
			if tt.loaded {
				e.src.set(doc(1), true, nil)
				if err := e.p.Poll(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			e.clock.Advance(tt.idle)
			e.src.clock, e.src.took = e.clock, tt.took
			e.src.set("", false, refused)
			for range tt.failures {
				_ = e.p.Poll(t.Context())
			}
			for range 50 { // the backoff is random: every draw stays in bounds
				if d := snapshot.Delay(e.p); d < tt.lo || d > tt.hi {
					t.Fatalf("delay = %v, want within [%v, %v]", d, tt.lo, tt.hi)
				}
			}
		})
	}
}

// TestPollerRecoversFromHungControlPlane: a control plane that accepted
// a request and never answers it, then answers normally again. An unready
// node (nothing loaded, or a stale last good copy) is ready within 5 s of
// that, however long the long poll: it asked for no wait, so its request
// in flight is abandoned after one Stall (3 s, the default) and the next
// one is answered. The hung request stays hung: the control plane that
// recovered is not the one that accepted it.
func TestPollerRecoversFromHungControlPlane(t *testing.T) {
	const bound = 5 * time.Second
	for _, restored := range []bool{false, true} {
		name := "nothing loaded"
		if restored {
			name = "stale last good copy"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cp := newControlPlane(t)
			cp.publish(1, doc(1))
			// Down at first: the synchronous first poll fails at once.
			cp.setHandler(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "starting", http.StatusServiceUnavailable)
			})
			src := cp.source(t, "/v1/routes", snapshot.HTTPOptions{LongPoll: time.Hour})
			reachable := make(chan struct{}, 1)
			o := snapshot.PollerOptions{
				Name: "routes", Source: src, Decode: (&target{}).decode, StaleAfter: 5 * time.Minute,
				Logger: slog.New(&onMessage{msg: "snapshot source reachable again", c: reachable}),
			}
			if restored {
				store, _ := openStore(t)
				if err := store.Save("routes", []byte(doc(1)), 1, time.Now().Add(-time.Hour)); err != nil {
					t.Fatal(err)
				}
				o.Store = store
			}
			p := snapshot.NewPoller(o)
			if err := p.Restore(); err != nil {
				t.Fatal(err)
			}
			if err := p.Poll(t.Context()); err == nil {
				t.Fatal("first poll succeeded against a control plane that is down")
			}
			if err := p.Ready(); err == nil {
				t.Fatal("ready before any contact")
			}
			// Then it accepts requests and never answers them.
			arrived := make(chan struct{}, 1)
			cp.setHandler(func(_ http.ResponseWriter, r *http.Request) {
				select {
				case arrived <- struct{}{}:
				default:
				}
				<-r.Context().Done()
			})

			ctx, cancel := context.WithCancel(t.Context())
			ran := make(chan struct{})
			go func() { defer close(ran); p.Run(ctx) }()
			defer func() { cancel(); <-ran }()
			<-arrived
			cp.setHandler(nil) // the control plane answers normally from now on
			recovered := time.Now()
			deadline := time.NewTimer(bound)
			defer deadline.Stop()
			select {
			case <-reachable: // logged once the poll that reached it is recorded
			case <-deadline.C:
				t.Fatalf("not ready %s after the control plane answered again: %v", bound, p.Ready())
			}
			if err := p.Ready(); err != nil {
				t.Fatalf("once the control plane answered: %v", err)
			}
			t.Logf("ready %s after the control plane answered again", time.Since(recovered).Round(time.Millisecond))
		})
	}
}

// onMessage is a slog handler that signals c whenever msg is logged.
type onMessage struct {
	msg string
	c   chan struct{}
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *onMessage) WithGroup(string) slog.Handler            { return h }

func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.c <- struct{}{}:
		default:
		}
	}
	return nil
}
