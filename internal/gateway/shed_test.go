package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/logbuf"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/usage"
)

// held is a handler that blocks each request until the test lets it go,
// telling the test which request (its X-Test header) entered.
type held struct {
	next    http.Handler // nil: answer 200
	entered chan string
	release chan struct{}
}

func newHeld(next http.Handler) *held {
	return &held{next: next, entered: make(chan string, 16), release: make(chan struct{})}
}

func (h *held) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if name := r.Header.Get("X-Test"); name != "" {
		h.entered <- name
		<-h.release
	}
	if h.next != nil {
		h.next.ServeHTTP(w, r)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// serveOne runs one request named name through l on its own goroutine and
// returns where its status will arrive.
func serveOne(ctx context.Context, l *ConcurrencyLimit, name string) <-chan int {
	status := make(chan int, 1)
	go func() {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
		req.Header.Set("X-Test", name)
		rec := httptest.NewRecorder()
		l.ServeHTTP(rec, req)
		status <- rec.Code
	}()
	return status
}

// untilQueued waits until n requests wait in l's queue.
func untilQueued(t *testing.T, l *ConcurrencyLimit, n int64) {
	t.Helper()
	for l.Queued() != n {
		if t.Context().Err() != nil {
			t.Fatalf("queued %d, want %d", l.Queued(), n)
		}
		runtime.Gosched()
	}
}

// TestShedQueuesBeyondBound: while the node sheds (docs/failures.md
// "Shedding"), the requests beyond the bound wait for a slot, first come
// first served, and a slot given back admits the first of them; a short
// window raises the bound, a long one cuts it to three quarters of what
// is served; once the node no longer sheds and the queue is empty, the
// gate opens.
func TestShedQueuesBeyondBound(t *testing.T) {
	h := newHeld(nil)
	l := LimitConcurrency(h, 100, slog.New(slog.DiscardHandler))
	l.Shed(50*time.Millisecond, time.Hour)
	ctx := t.Context()

	first := serveOne(ctx, l, "a")
	second := serveOne(ctx, l, "b")
	for range 2 {
		<-h.entered
	}
	l.Adapt(true, 80*time.Millisecond) // 2 served: the bound is 1
	if !l.gated.Load() || l.gate.bound != 1 {
		t.Fatalf("gated %t, bound %d; want gated at 1", l.gated.Load(), l.gate.bound)
	}
	c := serveOne(ctx, l, "c")
	untilQueued(t, l, 1)
	d := serveOne(ctx, l, "d")
	untilQueued(t, l, 2)

	h.release <- struct{}{} // a or b ends: 1 served, not below the bound
	<-firstOf(first, second)
	if got := l.Queued(); got != 2 {
		t.Fatalf("after one of two ended: %d queued, want 2 (1 served, bound 1)", got)
	}
	h.release <- struct{}{} // the other ends: c is admitted, not d
	<-firstOf(first, second)
	if got := <-h.entered; got != "c" {
		t.Fatalf("admitted %q first, want c (first come first served)", got)
	}
	l.Adapt(true, 10*time.Millisecond) // short: the bound rises to 2, d is admitted
	if got := <-h.entered; got != "d" || l.gate.bound != 2 {
		t.Fatalf("admitted %q at bound %d; want d at 2", got, l.gate.bound)
	}
	l.Adapt(true, 30*time.Millisecond) // between half and the whole: held
	if l.gate.bound != 2 {
		t.Fatalf("bound %d after a window between shed_wait/2 and shed_wait, want 2", l.gate.bound)
	}
	l.Adapt(false, 10*time.Millisecond) // no longer shedding, nothing queued: open
	if l.gated.Load() {
		t.Fatal("still gated with an empty queue after shedding ended")
	}
	close(h.release)
	for _, st := range []<-chan int{c, d} {
		if code := <-st; code != http.StatusOK {
			t.Errorf("queued request answered %d, want 200", code)
		}
	}
	if inflight, _, refused := l.Stats(); inflight != 0 || refused != 0 {
		t.Errorf("in flight %d, refused %d; want 0 and 0", inflight, refused)
	}
}

// firstOf returns whichever of a and b delivers first.
func firstOf(a, b <-chan int) <-chan int {
	out := make(chan int, 1)
	go func() {
		select {
		case v := <-a:
			out <- v
		case v := <-b:
			out <- v
		}
	}()
	return out
}

// TestShedKeepsQueueUntilEmpty: a node that no longer sheds keeps its
// gate while requests still wait, so that they are not all handed to the
// scheduler at once; the bound keeps rising with each short window.
func TestShedKeepsQueueUntilEmpty(t *testing.T) {
	h := newHeld(nil)
	l := LimitConcurrency(h, 100, slog.New(slog.DiscardHandler))
	l.Shed(50*time.Millisecond, time.Hour)
	ctx := t.Context()
	a := serveOne(ctx, l, "a")
	<-h.entered
	l.Adapt(true, time.Second) // bound 1
	b := serveOne(ctx, l, "b")
	untilQueued(t, l, 1)
	l.Adapt(false, 60*time.Millisecond) // not shedding, but long: cut, still gated
	if !l.gated.Load() || l.gate.bound != 1 {
		t.Fatalf("gated %t at bound %d; want still gated at 1 while b waits", l.gated.Load(), l.gate.bound)
	}
	l.Adapt(false, 0) // short: bound 2, b admitted; the queue empties, the gate opens
	if got := <-h.entered; got != "b" || l.gated.Load() {
		t.Fatalf("admitted %q, gated %t; want b admitted and the gate open", got, l.gated.Load())
	}
	close(h.release)
	<-a
	<-b
}

// TestShedNewestFirstWhenOld: the queue is first come first served until
// its oldest request has waited a second; then the newest is admitted
// first, and the oldest get the spare slots last. A waiter that gave up
// in the middle of the queue is skipped.
func TestShedNewestFirstWhenOld(t *testing.T) {
	h := newHeld(nil)
	l := LimitConcurrency(h, 100, slog.New(slog.DiscardHandler))
	l.Shed(50*time.Millisecond, time.Hour)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l.now = clk.Now
	ctx := t.Context()
	a := serveOne(ctx, l, "a")
	<-h.entered
	l.Adapt(true, time.Second) // bound 1, a holds it
	var done []<-chan int
	gone, leave := context.WithCancel(ctx)
	for i, name := range []string{"old", "older-gone", "mid", "new"} {
		c := ctx
		if name == "older-gone" {
			c = gone
		}
		done = append(done, serveOne(c, l, name))
		untilQueued(t, l, int64(i+1))
		clk.Advance(300 * time.Millisecond)
	}
	leave()
	if <-done[1]; l.Queued() != 3 {
		t.Fatalf("%d queued after one gave up, want 3", l.Queued())
	}
	// The oldest has waited 1.2s: the newest goes first.
	h.release <- struct{}{}
	<-a
	if got := <-h.entered; got != "new" {
		t.Fatalf("admitted %q, want new (the oldest waited over a second)", got)
	}
	h.release <- struct{}{}
	if got := <-h.entered; got != "mid" {
		t.Fatalf("admitted %q, want mid (newest first, the one that left skipped)", got)
	}
	h.release <- struct{}{}
	if got := <-h.entered; got != "old" {
		t.Fatalf("admitted %q, want old last", got)
	}
	close(h.release)
	for _, i := range []int{0, 2, 3} {
		if code := <-done[i]; code != http.StatusOK {
			t.Errorf("request %d answered %d, want 200", i, code)
		}
	}
}

// TestShedQueueWait: a request that waited limits.queue_wait for a slot
// gets the node's 503 and was never served; with queue_wait 0 it gets it
// at once; a queued request whose client left is not served either, and
// frees its place.
func TestShedQueueWait(t *testing.T) {
	h := newHeld(nil)
	l := LimitConcurrency(h, 100, slog.New(slog.DiscardHandler))
	l.Shed(50*time.Millisecond, 20*time.Millisecond)
	ctx := t.Context()
	a := serveOne(ctx, l, "a")
	<-h.entered
	l.Adapt(true, time.Second) // bound 1, a holds it

	if code := <-serveOne(ctx, l, "late"); code != http.StatusServiceUnavailable {
		t.Fatalf("after queue_wait: %d, want 503", code)
	}
	gone, leave := context.WithCancel(ctx)
	b := serveOne(gone, l, "gone")
	untilQueued(t, l, 1)
	leave()
	if code := <-b; code != http.StatusServiceUnavailable {
		t.Fatalf("client left while queued: %d, want 503 (written to no one)", code)
	}
	if got := l.Queued(); got != 0 {
		t.Fatalf("%d queued after both gave up, want 0", got)
	}

	l.Shed(50*time.Millisecond, 0)
	if code := <-serveOne(ctx, l, "now"); code != http.StatusServiceUnavailable {
		t.Fatalf("queue_wait 0: %d, want 503 at once", code)
	}
	close(h.release)
	<-a
	select {
	case name := <-h.entered:
		t.Fatalf("%q was served after it gave up", name)
	default:
	}
	if inflight, _, refused := l.Stats(); inflight != 0 || refused != 3 {
		t.Errorf("in flight %d, refused %d; want 0 and 3", inflight, refused)
	}
}

// TestShedRefusesAtOnce: a request the shedding node does not admit gets
// the node's own 503 with Retry-After and x-should-retry before anything
// reaches a provider, and its connection stays open for the next request;
// once the node no longer sheds, the same connection is served as usual.
func TestShedRefusesAtOnce(t *testing.T) {
	h, prov := newHandler(t, Options{})
	hold := newHeld(h)
	limited := LimitConcurrency(hold, 100, slog.New(slog.DiscardHandler))
	limited.Shed(50*time.Millisecond, 0)
	srv := httptest.NewServer(GuardBody(limited, time.Minute, time.Second))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()

	post := func() (*http.Response, string, bool) {
		t.Helper()
		var reused bool
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), reused
	}

	if resp, body, _ := post(); resp.StatusCode != http.StatusOK {
		t.Fatalf("before shedding: %d %s", resp.StatusCode, body)
	}
	held := serveOne(t.Context(), limited, "held") // holds the one slot
	<-hold.entered
	limited.Adapt(true, time.Second)
	resp, body, reused := post()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get("X-Should-Retry") != "true" || !strings.Contains(body, "overloaded") {
		t.Fatalf("while shedding: %d, Retry-After %q, x-should-retry %q, %s; want 503, 1, true and the node's error",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Should-Retry"), body)
	}
	if resp.Close || !reused {
		t.Errorf("shed on a new connection or closing it (reused %t, close %t)", reused, resp.Close)
	}
	if n := prov.RequestCount(); n != 1 {
		t.Errorf("the provider got %d requests, want 1 (none while shedding)", n)
	}
	close(hold.release)
	<-held
	limited.Adapt(false, 0)
	resp, body, reused = post()
	if resp.StatusCode != http.StatusOK || !reused {
		t.Fatalf("after shedding: %d (connection reused %t) %s; want 200 on the same connection", resp.StatusCode, reused, body)
	}
	if _, _, refused := limited.Stats(); refused != 1 {
		t.Errorf("refused %d, want 1", refused)
	}
}

// BenchmarkShed prices a refusal while shedding against a served request,
// both behind the node's middlewares (GuardBody, the concurrency limit)
// with the handler wired as the node wires it, on kept-alive connections:
// "served" is a chat completion through the handler to the fake provider,
// "shed" the same request refused, "direct" the client straight to the
// provider. cpu-ns/op is the whole process (client and provider
// included): a refusal's own CPU is shed − the client's share, a served
// request's is served − direct, as in BenchmarkNonStream.
func BenchmarkShed(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	logOut := logbuf.New(io.Discard, logbuf.Options{})
	defer logOut.Close()
	h, _ := newHandler(b, Options{
		Logger:    slog.New(logline.NewHandler(logOut, nil)),
		Observer:  m,
		Recorders: []Recorder{m, usage.NewRecorder(&discardAppender{}, 0)},
		NodeID:    "bench-node",
	})
	limited := LimitConcurrency(h, 10000, slog.New(slog.DiscardHandler))
	limited.Shed(50*time.Millisecond, 0)
	srv := httptest.NewServer(GuardBody(limited, time.Minute, 5*time.Second))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	p := benchPaths[0]
	run := func(b *testing.B, url, payload string, want int) {
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(payload))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer client-key")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				b.Fatalf("status %d, want %d", resp.StatusCode, want)
			}
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	}
	b.Run("direct", func(b *testing.B) { run(b, provURL(b, h), p.hopBody(), http.StatusOK) })
	b.Run("served", func(b *testing.B) { run(b, srv.URL+p.path, p.body, http.StatusOK) })
	b.Run("shed", func(b *testing.B) {
		limited.hold() // the one slot the shedding node serves is taken
		limited.Adapt(true, time.Second)
		defer func() {
			limited.release()
			limited.Adapt(false, 0)
		}()
		run(b, srv.URL+p.path, p.body, http.StatusServiceUnavailable)
	})
}
