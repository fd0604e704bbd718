package snapshot_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/snapshot"
)

// TestHTTPSourceStalls: a request that makes no progress is abandoned
// after HTTPOptions.Stall, not at LongPoll + Timeout: a held poll with no
// answer by the end of its wait, a body that stops, a body trickled a byte
// at a time. Held tells the poller whether it may ask again at once (the
// stalled request was a held one); Hold(false) makes the next request ask
// for no wait, and Hold(true) resumes the long poll. Timeout is far longer than the test waits, so only
// the stall bound can end these requests in time; the control plane's
// handlers end with their requests.
func TestHTTPSourceStalls(t *testing.T) {
	tests := []struct {
		name     string
		longPoll time.Duration
		serve    func(w http.ResponseWriter, r *http.Request)
		wantHeld bool // the poller may ask again at once
	}{
		{"held poll never answered", time.Second, func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, true},
		{"body stops", 0, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"schema":1,`)
			_ = http.NewResponseController(w).Flush()
			<-r.Context().Done()
		}, false},
		{"body trickles", time.Second, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Preference-Applied", "wait=1")
			tick := time.NewTicker(10 * time.Millisecond) // the server's pace, not the test's
			defer tick.Stop()
			rc := http.NewResponseController(w)
			for {
				if _, err := io.WriteString(w, " "); err != nil || rc.Flush() != nil {
					return
				}
				select {
				case <-tick.C:
				case <-r.Context().Done():
					return
				}
			}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := newControlPlane(t)
			cp.publish(1, "doc-1")
			cp.setHandler(tt.serve)
			src := cp.source(t, "/v1/routes", snapshot.HTTPOptions{LongPoll: tt.longPoll, Stall: 200 * time.Millisecond, Timeout: 20 * time.Second})
			src.SetVersion(1)
			start := time.Now()
			_, _, err := src.Fetch(t.Context())
			if !errors.Is(err, snapshot.ErrStalled) {
				t.Fatalf("Fetch after %s: %v, want ErrStalled", time.Since(start).Round(time.Millisecond), err)
			}
			if src.Held() != tt.wantHeld {
				t.Errorf("Held = %v after the stall, want %v", src.Held(), tt.wantHeld)
			}

			// The control plane answers normally again; the poller asks
			// for no wait after a failure.
			cp.setHandler(nil)
			src.Hold(false)
			if _, _, err := src.Fetch(t.Context()); err != nil {
				t.Fatalf("Fetch once the control plane answers: %v", err)
			}
			if r := cp.lastRequest(); strings.Contains(r.URL.RawQuery, "wait=") || r.Header.Get("Prefer") != "" {
				t.Errorf("Hold(false), the request asked for a wait: %s, Prefer %q", r.URL, r.Header.Get("Prefer"))
			}
			src.Hold(true)
			if _, _, err := src.Fetch(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(cp.lastRequest().URL.RawQuery, "wait="); got != (tt.longPoll > 0) {
				t.Errorf("Hold(true), wait= in the query: %v, want %v", got, tt.longPoll > 0)
			}
		})
	}
}

// TestPollerRetriesStalledHold: a held poll that stalls is followed by the
// next poll at once (the interval is an hour here), without a wait, so the
// poller has the document as soon as the control plane answers again.
func TestPollerRetriesStalledHold(t *testing.T) {
	cp := newControlPlane(t)
	cp.publish(1, "doc-1")
	// The first request's handler may still be returning when the next
	// one starts: the source abandons a request without waiting for it.
	var first atomic.Bool
	first.Store(true)
	cp.setHandler(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(true, false) {
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, "doc-2")
	})
	src := cp.source(t, "/v1/routes", snapshot.HTTPOptions{LongPoll: time.Second, Stall: 100 * time.Millisecond, Timeout: 20 * time.Second})
	src.SetVersion(1)
	applied := make(chan string, 1)
	p := snapshot.NewPoller(snapshot.PollerOptions{
		Name: "routes", Source: src, Interval: time.Hour,
		Decode: func(data []byte) (uint64, func() error, error) {
			return 2, func() error { applied <- string(data); return nil }, nil
		},
	})
	if err := p.Poll(t.Context()); !errors.Is(err, snapshot.ErrStalled) {
		t.Fatalf("first poll: %v, want ErrStalled", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { defer close(ran); p.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	select {
	case doc := <-applied:
		if doc != "doc-2" {
			t.Fatalf("applied %q", doc)
		}
	case <-time.After(15 * time.Second): // only when it fails: the interval is an hour
		t.Fatal("the poll after a stalled hold waited the interval")
	}
}
