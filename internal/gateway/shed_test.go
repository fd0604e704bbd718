package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
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
	release chan struct{} // lets any one go
	pinned  chan struct{} // lets the one named "pinned" go
}

func newHeld(next http.Handler) *held {
	return &held{next: next, entered: make(chan string, 16), release: make(chan struct{}), pinned: make(chan struct{})}
}

func (h *held) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch name := r.Header.Get("X-Test"); name {
	case "":
	case "pinned":
		h.entered <- name
		<-h.pinned
	default:
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

// fill starts n requests through l that the handler holds, and waits
// until all of them are in it.
func fill(ctx context.Context, h *held, l *ConcurrencyLimit, n int) []<-chan int {
	var done []<-chan int
	for i := range n {
		done = append(done, serveOne(ctx, l, fmt.Sprint("held-", i)))
	}
	for range n {
		<-h.entered
	}
	return done
}

// newGated returns a limit of 100 in front of a held handler, whose
// queue waits up to queueWait and whose clock the test moves.
func newGated(queueWait time.Duration) (*held, *ConcurrencyLimit, *clock.Fake) {
	h := newHeld(nil)
	l := LimitConcurrency(h, 100, slog.New(slog.DiscardHandler))
	l.Queue(queueWait)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l.now = clk.Now
	return h, l, clk
}

// TestShedQueuesBeyondBound: while the node sheds (docs/failures.md
// "Shedding"), the requests beyond the bound wait for a slot, first come
// first served, and a slot given back admits the first of them; the
// requests the node held when it began to shed are not counted against
// the bound; once the node no longer sheds and the queue is empty, the
// gate opens.
func TestShedQueuesBeyondBound(t *testing.T) {
	h, l, _ := newGated(time.Hour) // the clock stands still: first come first served
	ctx := t.Context()

	before := serveOne(ctx, l, "pinned")
	<-h.entered
	l.Adapt(true) // nothing finished yet: the least bound
	if !l.gated.Load() || l.gate.bound != admitMin {
		t.Fatalf("gated %t, bound %d; want gated at %d", l.gated.Load(), l.gate.bound, admitMin)
	}
	held := fill(ctx, h, l, admitMin) // the one held before does not count
	c := serveOne(ctx, l, "c")
	untilQueued(t, l, 1)
	d := serveOne(ctx, l, "d")
	untilQueued(t, l, 2)

	h.release <- struct{}{} // one of the admitted ends: c goes in, not d
	if got := <-h.entered; got != "c" {
		t.Fatalf("admitted %q first, want c (first come first served)", got)
	}
	if got := l.Queued(); got != 1 {
		t.Fatalf("%d queued, want 1", got)
	}
	h.release <- struct{}{}
	if got := <-h.entered; got != "d" {
		t.Fatalf("admitted %q, want d", got)
	}
	l.Adapt(false) // no longer shedding, nothing queued: open
	if l.gated.Load() {
		t.Fatal("still gated with an empty queue after shedding ended")
	}
	close(h.release)
	close(h.pinned)
	for _, st := range append(held, before, c, d) {
		if code := <-st; code != http.StatusOK {
			t.Errorf("answered %d, want 200", code)
		}
	}
	if inflight, _, refused := l.Stats(); inflight != 0 || refused != 0 || l.gate.active != 0 {
		t.Errorf("in flight %d, admitted %d, refused %d; want 0, 0 and 0", inflight, l.gate.active, refused)
	}
}

// TestShedBoundFollowsRate: the bound is the rate at which the node has
// been finishing requests times admitTarget, averaged over windows, and
// never below admitMin.
func TestShedBoundFollowsRate(t *testing.T) {
	l := LimitConcurrency(newHeld(nil), 10000, slog.New(slog.DiscardHandler))
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l.now = clk.Now
	l.Adapt(false) // the first window only starts the clock
	l.done.Add(1000)
	clk.Advance(admitRateTau) // 5,000/s for one time constant
	l.Adapt(true)
	rate := 5000 * (1 - math.Exp(-1))
	if want := int64(rate * admitTarget.Seconds()); l.gate.bound != want {
		t.Fatalf("bound %d, want %d (%.0f/s × %v)", l.gate.bound, want, rate, admitTarget)
	}
	clk.Advance(10 * admitRateTau) // nothing finished for ten time constants
	l.Adapt(true)
	if l.gate.bound != admitMin {
		t.Fatalf("bound %d after nothing finished, want the least, %d", l.gate.bound, admitMin)
	}
}

// TestShedKeepsQueueUntilEmpty: a node that no longer sheds keeps its
// gate while requests still wait, so that they are not all handed to the
// scheduler at once, and grows its bound by a quarter a window meanwhile.
func TestShedKeepsQueueUntilEmpty(t *testing.T) {
	h, l, _ := newGated(time.Hour)
	ctx := t.Context()
	l.Adapt(true)
	held := fill(ctx, h, l, admitMin)
	const waiting = 9
	var queued []<-chan int
	for i := range waiting {
		queued = append(queued, serveOne(ctx, l, fmt.Sprint("queued-", i)))
		untilQueued(t, l, int64(i+1))
	}
	l.Adapt(true) // nothing finished: the bound stays the least
	if !l.gated.Load() || l.Queued() != waiting {
		t.Fatalf("gated %t, %d queued; want all %d still waiting", l.gated.Load(), l.Queued(), waiting)
	}
	// No longer shedding, but requests wait: what holds the admitted
	// ones may not be the CPU, so the bound grows instead of following
	// the finishing rate (none finished); the gate stays while one waits.
	left := int64(waiting)
	for _, bound := range []int64{10, 12, 15} {
		l.Adapt(false)
		admitted := min(left, bound-admitMin-(waiting-left))
		for range admitted {
			<-h.entered
		}
		left -= admitted
		if !l.gated.Load() || l.gate.bound != bound || l.Queued() != left {
			t.Fatalf("gated %t at bound %d with %d queued; want gated at %d with %d", l.gated.Load(), l.gate.bound, l.Queued(), bound, left)
		}
	}
	l.Adapt(false) // 18: room for the last 2
	<-h.entered
	<-h.entered
	if l.gated.Load() || l.gate.bound != 18 {
		t.Fatalf("gated %t at bound %d with an empty queue; want the gate open", l.gated.Load(), l.gate.bound)
	}
	close(h.release)
	for _, st := range append(held, queued...) {
		<-st
	}
}

// TestShedNewestFirstWhenOld: the queue is first come first served until
// its oldest request has waited lifoAfter; then the newest is admitted
// first, and the oldest get the spare slots last. A waiter that gave up
// in the middle of the queue is skipped.
func TestShedNewestFirstWhenOld(t *testing.T) {
	h, l, clk := newGated(time.Hour)
	ctx := t.Context()
	l.Adapt(true)
	held := fill(ctx, h, l, admitMin)
	var done []<-chan int
	gone, leave := context.WithCancel(ctx)
	for i, name := range []string{"old", "older-gone", "mid", "new"} {
		c := ctx
		if name == "older-gone" {
			c = gone
		}
		done = append(done, serveOne(c, l, name))
		untilQueued(t, l, int64(i+1))
		clk.Advance(lifoAfter / 3)
	}
	leave()
	if <-done[1]; l.Queued() != 3 {
		t.Fatalf("%d queued after one gave up, want 3", l.Queued())
	}
	// The oldest has waited 4/3 lifoAfter: the newest goes first.
	for _, want := range []string{"new", "mid", "old"} {
		h.release <- struct{}{}
		if got := <-h.entered; got != want {
			t.Fatalf("admitted %q, want %s (newest first, the one that left skipped)", got, want)
		}
	}
	close(h.release)
	for _, st := range append(held, done[0], done[2], done[3]) {
		if code := <-st; code != http.StatusOK {
			t.Errorf("answered %d, want 200", code)
		}
	}
}

// TestShedQueueWait: a request that waited limits.queue_wait for a slot
// gets the node's 503 and was never served; with queue_wait 0 it gets it
// at once; a queued request whose client left is not served either, and
// frees its place.
func TestShedQueueWait(t *testing.T) {
	h, l, _ := newGated(20 * time.Millisecond)
	ctx := t.Context()
	l.Adapt(true)
	held := fill(ctx, h, l, admitMin)

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

	l.Queue(0)
	if code := <-serveOne(ctx, l, "now"); code != http.StatusServiceUnavailable {
		t.Fatalf("queue_wait 0: %d, want 503 at once", code)
	}
	close(h.release)
	for _, st := range held {
		<-st
	}
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
	limited.Adapt(true)
	held := fill(t.Context(), hold, limited, admitMin) // the bound's slots are taken
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
		t.Errorf("the provider got %d requests, want 1 (none refused)", n)
	}
	close(hold.release)
	for _, st := range held {
		<-st
	}
	limited.Adapt(false)
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
		limited.Adapt(true)
		limited.gate.mu.Lock()
		limited.gate.active = admitMin // the bound's slots are taken
		limited.gate.mu.Unlock()
		defer func() {
			limited.gate.mu.Lock()
			limited.gate.active = 0
			limited.gate.mu.Unlock()
			limited.Adapt(false)
		}()
		run(b, srv.URL+p.path, p.body, http.StatusServiceUnavailable)
	})
}
