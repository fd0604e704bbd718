package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/snapshot"
)

// keepaliveHold answers a held request the way proto/control-plane.md
// "Keepalive" says: 200 and Preference-Applied at once, n keepalive
// bytes, each flushed, then doc ("" = unchanged: the body ends).
func keepaliveHold(w http.ResponseWriter, r *http.Request, n int, doc string) {
	w.Header().Set("Preference-Applied", "wait="+r.URL.Query().Get("wait")+", keepalive="+r.URL.Query().Get("keepalive"))
	w.Header().Set("Content-Type", "application/json")
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	for range n {
		_, _ = io.WriteString(w, "\n")
		_ = rc.Flush()
	}
	_, _ = io.WriteString(w, doc)
}

// TestHTTPSourceKeepalive: a control plane that has not announced
// keepalive is asked to hold for at most the silence bound; once it
// answers with "Preference-Applied: keepalive=K", the next held request
// asks for the whole long poll. The keepalive bytes are no part of the
// document, and a held answer of nothing but keepalive is "unchanged".
func TestHTTPSourceKeepalive(t *testing.T) {
	cp := newControlPlane(t)
	var doc atomic.Value
	doc.Store("")
	cp.setHandler(func(w http.ResponseWriter, r *http.Request) { keepaliveHold(w, r, 3, doc.Load().(string)) })
	src := cp.source(t, "/v1/routes", snapshot.HTTPOptions{LongPoll: time.Hour, Silence: 8 * time.Second})
	src.SetVersion(1)

	type step struct {
		Query, Prefer string
		Data          string
		Changed, Held bool
	}
	var got []step
	for _, d := range []string{"", `{"version":2}`, `{"version":2}`, ""} {
		doc.Store(d)
		data, changed, err := src.Fetch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		r := cp.lastRequest()
		got = append(got, step{r.URL.RawQuery, r.Header.Get("Prefer"), string(data), changed, src.Held()})
	}
	want := []step{
		{"wait=8&keepalive=4", "wait=8, keepalive=4", "", false, true},
		{"wait=3600&keepalive=4", "wait=3600, keepalive=4", `{"version":2}`, true, true},
		{"wait=3600&keepalive=4", "wait=3600, keepalive=4", "", false, true}, // the same bytes, after other keepalives
		{"wait=3600&keepalive=4", "wait=3600, keepalive=4", "", false, true},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("fetches (-got +want):\n%s", diff)
	}

	// Nothing but keepalive to an unconditional request is an error, not
	// "unchanged": the node has no document to keep.
	src.Forget()
	doc.Store("")
	if _, _, err := src.Fetch(t.Context()); err == nil || !strings.Contains(err.Error(), "no document") {
		t.Errorf("keepalive only, unconditional: %v, want an error", err)
	}
}

// TestHTTPSourceSilentHold: a held request that shows no byte for the
// silence bound is given up as stalled, whatever the long poll asked for
// (an hour here, and a Timeout far beyond the test): before its headers,
// after some keepalive bytes, and from a control plane that never
// announced keepalive (its wait was capped). The next held request asks
// with the capped wait until keepalive shows again.
func TestHTTPSourceSilentHold(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	tests := []struct {
		name     string
		announce bool // a first held answer announced keepalive
		silent   http.HandlerFunc
		wantWait string
	}{
		{"no headers", true, hang, "wait=3600"},
		{"keepalive stops", true, func(w http.ResponseWriter, r *http.Request) {
			keepaliveHold(w, r, 2, "")
			_ = http.NewResponseController(w).Flush()
			<-r.Context().Done()
		}, "wait=3600"},
		{"no keepalive ever", false, hang, "wait=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := newControlPlane(t)
			src := cp.source(t, "/v1/routes", snapshot.HTTPOptions{
				LongPoll: time.Hour, Silence: time.Second, Stall: 200 * time.Millisecond, Timeout: time.Hour,
			})
			src.SetVersion(1)
			if tt.announce {
				cp.setHandler(func(w http.ResponseWriter, r *http.Request) { keepaliveHold(w, r, 1, "") })
				if _, _, err := src.Fetch(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			cp.setHandler(tt.silent)
			done := make(chan error, 1)
			go func() { _, _, err := src.Fetch(t.Context()); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, snapshot.ErrStalled) || !src.Held() {
					t.Fatalf("Fetch: %v, Held %v; want ErrStalled and held", err, src.Held())
				}
			case <-time.After(30 * time.Second): // only when it fails
				t.Fatal("a silent held request was not given up")
			}
			if q := cp.lastRequest().URL.Query().Get("wait"); "wait="+q != tt.wantWait {
				t.Errorf("the silent request asked wait=%s, want %s", q, tt.wantWait)
			}
			cp.setHandler(hang)
			go func() { _, _, err := src.Fetch(t.Context()); done <- err }()
			<-done
			if q := cp.lastRequest().URL.Query().Get("wait"); q != "1" {
				t.Errorf("after a silent hold the next asked wait=%s, want the capped 1", q)
			}
		})
	}
}

// TestPollerNoticesSilentHold: a ready node whose held request goes
// silent (the control plane hung with it) gives it up within the silence
// bound, counts and logs it once, and asks again at once, so a publish
// made meanwhile (a revocation) is applied within seconds, not after the
// hour-long long poll.
func TestPollerNoticesSilentHold(t *testing.T) {
	cp := newControlPlane(t)
	var held, plain atomic.Int32
	cp.setHandler(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") == "" {
			// Answered at once: version 1 first, then version 3, the
			// publish made while the held request hung.
			if plain.Add(1) == 1 {
				_, _ = io.WriteString(w, "doc-1")
				return
			}
			_, _ = io.WriteString(w, "doc-3")
			return
		}
		switch held.Add(1) {
		case 1: // a held answer that announces keepalive: version 2
			keepaliveHold(w, r, 1, "doc-2")
		default: // the control plane hangs with this one
			<-r.Context().Done()
		}
	})
	src := cp.source(t, "/v1/routes", snapshot.HTTPOptions{
		LongPoll: time.Hour, Silence: time.Second, Stall: 200 * time.Millisecond, Timeout: time.Hour,
	})
	applied := make(chan string, 3)
	var logs bytes.Buffer
	p := snapshot.NewPoller(snapshot.PollerOptions{
		Name: "routes", Source: src, Interval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil)),
		Decode: func(data []byte) (uint64, func() error, error) {
			v, err := strconv.ParseUint(strings.TrimPrefix(string(data), "doc-"), 10, 64)
			return v, func() error { applied <- string(data); return nil }, err
		},
	})
	if err := p.Poll(t.Context()); err != nil { // loaded: ready
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { defer close(ran); p.Run(ctx) }()
	var got []string
	for len(got) < 3 {
		select {
		case doc := <-applied:
			got = append(got, doc)
		case <-time.After(30 * time.Second): // only when it fails: the long poll is an hour
			t.Fatalf("applied %v; a publish behind a silent held request was not applied", got)
		}
	}
	cancel()
	<-ran
	if diff := cmp.Diff(got, []string{"doc-1", "doc-2", "doc-3"}); diff != "" {
		t.Errorf("applied (-got +want):\n%s", diff)
	}
	if n := p.Status().FetchErrors; n != 1 {
		t.Errorf("FetchErrors = %d, want 1 (the silent hold)", n)
	}
	if n := strings.Count(logs.String(), "held request showed no progress"); n != 1 {
		t.Errorf("%d log lines for the silent hold, want 1:\n%s", n, logs.String())
	}
}
