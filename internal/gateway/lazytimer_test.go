package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestStreamIdleLazy: the stream_idle timer is not re-armed per event;
// when it fires it cuts the stream only if the provider has been silent
// for the whole limit since its last event, and otherwise waits for the
// rest of the limit from that event. The timer's work runs at chosen
// times (fire), so that nothing depends on the machine's pace.
func TestStreamIdleLazy(t *testing.T) {
	const idle = time.Hour
	tests := []struct {
		name      string
		events    []time.Duration // quiet, after the first event
		stop      bool            // the attempt ended before the timer's work ran
		fireAt    time.Duration   // after the first event
		wantCut   bool
		wantRearm bool
		wantLeft  time.Duration // idleLeft at fireAt, when re-armed
	}{
		{name: "silent for the limit", fireAt: idle, wantCut: true},
		{name: "an event since it was armed", events: []time.Duration{40 * time.Minute}, fireAt: idle, wantRearm: true, wantLeft: 40 * time.Minute},
		{name: "the last event counts", events: []time.Duration{10 * time.Minute, 50 * time.Minute}, fireAt: idle, wantRearm: true, wantLeft: 50 * time.Minute},
		{name: "re-armed, then silent for the limit", events: []time.Duration{40 * time.Minute}, fireAt: 100 * time.Minute, wantCut: true},
		{name: "just short of the limit", events: []time.Duration{40 * time.Minute}, fireAt: 100*time.Minute - time.Millisecond, wantRearm: true, wantLeft: time.Millisecond},
		{name: "attempt ended meanwhile", events: []time.Duration{40 * time.Minute}, stop: true, fireAt: idle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cause error
			cancel := func(err error) { cause = err }
			var x exchangeTimer
			x.start(time.Hour, time.Hour, false, cancel)
			defer x.stop()
			first := x.sent.Add(time.Second)
			x.streamIdle(idle, first)
			for _, at := range tt.events {
				x.quiet(first.Add(at))
			}
			if tt.stop {
				x.stop()
			}
			x.t.Stop() // as if it had fired: not pending unless its work re-arms it
			x.fire(first.Add(tt.fireAt), cancel, errFirstByteTimeout)
			rearmed := x.t.Stop()
			if cut := errors.Is(cause, errIdleTimeout); cut != tt.wantCut || cause != nil && !cut {
				t.Errorf("cancelled with %v, want a cut %v", cause, tt.wantCut)
			}
			if rearmed != tt.wantRearm {
				t.Errorf("re-armed %v, want %v", rearmed, tt.wantRearm)
			}
			if left := x.idleLeft(first.Add(tt.fireAt)); tt.wantRearm && left != tt.wantLeft {
				t.Errorf("left of the limit %v, want %v", left, tt.wantLeft)
			}
		})
	}
}

// TestKeepaliveLazy: the keepalive timer is not re-armed per flush; when
// it fires it pings only if nothing was flushed for the whole interval,
// and otherwise waits for the rest of it from the last flush. The
// timer's work runs at chosen times.
func TestKeepaliveLazy(t *testing.T) {
	const every = time.Hour
	rec := httptest.NewRecorder()
	s := &streamWriter{w: rec, body: rec, rc: *http.NewResponseController(rec), fl: flusherOf(rec), guard: &writeGuard{},
		committed: true, every: every, ping: []byte(": ping\n\n")}
	s.ka = time.AfterFunc(time.Hour, func() {})
	defer s.ka.Stop()
	start := time.Now()
	s.flushed = start
	at := func(d time.Duration) func() time.Time { return func() time.Time { return start.Add(d) } }
	steps := []struct {
		name      string
		event     time.Duration // > 0: an event is sent and flushed then, before the timer fires
		fireAt    time.Duration
		wantBody  string // all the client has read after the step
		wantRearm bool
	}{
		{name: "early: nothing since the start", fireAt: 40 * time.Minute, wantRearm: true},
		{name: "silent for the interval", fireAt: 60 * time.Minute, wantBody: ": ping\n\n", wantRearm: true},
		{name: "an event since", event: 70 * time.Minute, fireAt: 120 * time.Minute, wantBody: ": ping\n\ndata: 1\n\n", wantRearm: true},
		{name: "silent since the event", fireAt: 130 * time.Minute, wantBody: ": ping\n\ndata: 1\n\n: ping\n\n", wantRearm: true},
	}
	for _, st := range steps {
		if st.event > 0 {
			if err := s.send([]byte("data: 1\n\n"), true, start.Add(st.event)); err != nil {
				t.Fatal(err)
			}
		}
		s.ka.Stop() // as if it had fired
		s.keepalive(at(st.fireAt))
		if got := rec.Body.String(); got != st.wantBody {
			t.Errorf("%s: the client read %q, want %q", st.name, got, st.wantBody)
		}
		if rearmed := s.ka.Stop(); rearmed != st.wantRearm {
			t.Errorf("%s: re-armed %v, want %v", st.name, rearmed, st.wantRearm)
		}
	}
	s.close()
	s.keepalive(at(1000 * time.Minute))
	if rec.Body.Len() != len(": ping\n\ndata: 1\n\n: ping\n\n") || s.ka.Stop() {
		t.Errorf("after close: the client read %q and the timer is armed %v, want nothing more", rec.Body.String(), s.ka.Stop())
	}
}

// TestFlusherOf: the flusher found once is what http.ResponseController's
// Flush calls: through an Unwrap chain, FlushError before Flush, and
// ErrNotSupported for a writer that cannot flush.
func TestFlusherOf(t *testing.T) {
	rec := httptest.NewRecorder() // Flush only
	if err := flusherOf(unwrapping{unwrapping{rec}}).FlushError(); err != nil || !rec.Flushed {
		t.Fatalf("err %v, flushed %v: want the recorder flushed through two wrappers", err, rec.Flushed)
	}
	fe := &flushErrWriter{ResponseWriter: httptest.NewRecorder(), err: errors.New("gone")}
	if err := flusherOf(unwrapping{fe}).FlushError(); err != fe.err || fe.calls != 1 {
		t.Fatalf("err %v after %d calls: want FlushError's own error, called once", err, fe.calls)
	}
	if err := flusherOf(bareWriter{}).FlushError(); !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("err %v: want http.ErrNotSupported, as ResponseController.Flush says", err)
	}
}

// unwrapping wraps a writer as the node's middleware does.
type unwrapping struct{ http.ResponseWriter }

func (u unwrapping) Unwrap() http.ResponseWriter { return u.ResponseWriter }

type flushErrWriter struct {
	http.ResponseWriter
	err   error
	calls int
}

func (f *flushErrWriter) FlushError() error { f.calls++; return f.err }

// bareWriter can neither flush nor unwrap.
type bareWriter struct{}

func (bareWriter) Header() http.Header         { return http.Header{} }
func (bareWriter) Write(p []byte) (int, error) { return len(p), nil }
func (bareWriter) WriteHeader(int)             {}

// TestBodyWriter: a stream's events skip the node's header-only wrappers
// (the status writer, the body guard's writer), and stop at any other
// writer, a door's framing one among them.
func TestBodyWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	guarded := &guardedWriter{ResponseWriter: rec}
	if got := bodyWriter(&statusWriter{ResponseWriter: guarded}); got != rec {
		t.Errorf("status writer over guarded writer: events go to %T, want the recorder", got)
	}
	door := unwrapping{guarded}
	if got := bodyWriter(&statusWriter{ResponseWriter: door}); got != door {
		t.Errorf("status writer over another writer: events go to %T, want that writer", got)
	}
}
