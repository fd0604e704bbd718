package snapshot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/snapshot"
)

// scriptedSource returns whatever the test set last, and records Forget
// and SetVersion calls.
type scriptedSource struct {
	mu       sync.Mutex
	data     []byte
	changed  bool
	err      error
	forgot   int
	versions []uint64
	held     bool          // what Held reports (a long-polling server)
	holds    []bool        // what Hold was told before each Fetch
	fetches  chan struct{} // if set, signalled after every Fetch
	clock    *clock.Fake   // if set, advanced by took in every Fetch (a held request)
	took     time.Duration
}

func (s *scriptedSource) Held() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *scriptedSource) Hold(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds = append(s.holds, on)
}

func (s *scriptedSource) setHeld(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = v
}

func (s *scriptedSource) set(data string, changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data, s.changed, s.err = []byte(data), changed, err
	if !changed {
		s.data = nil
	}
}

func (s *scriptedSource) Fetch(ctx context.Context) ([]byte, bool, error) {
	s.mu.Lock()
	data, changed, err, sig := s.data, s.changed, s.err, s.fetches
	clk, took := s.clock, s.took
	s.mu.Unlock()
	if clk != nil {
		clk.Advance(took)
	}
	if sig != nil {
		select {
		case sig <- struct{}{}:
		case <-ctx.Done():
		}
	}
	return data, changed, err
}

func (s *scriptedSource) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgot++
}

func (s *scriptedSource) SetVersion(v uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions = append(s.versions, v)
}

func (s *scriptedSource) String() string { return "scripted:" }

// testDoc is the document format of these tests: {"version":N} plus
// "bad" (decode fails) or "uncompilable" (apply fails).
type testDoc struct {
	Version      uint64 `json:"version"`
	Bad          bool   `json:"bad,omitempty"`
	Uncompilable bool   `json:"uncompilable,omitempty"`
	Tag          string `json:"tag,omitempty"` // distinguishes equal versions
}

func doc(version uint64) string { return fmt.Sprintf(`{"version":%d}`, version) }

// target is what the poller applies documents to.
type target struct {
	mu      sync.Mutex
	applied []testDoc
}

func (tg *target) decode(data []byte) (uint64, func() error, error) {
	var d testDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return 0, nil, fmt.Errorf("decode: %w", err)
	}
	if d.Bad {
		return 0, nil, errors.New("invalid document: backends[0].base_url: link-local address")
	}
	return d.Version, func() error {
		if d.Uncompilable {
			return errors.New("unknown credential \"c9\"")
		}
		tg.mu.Lock()
		defer tg.mu.Unlock()
		tg.applied = append(tg.applied, d)
		return nil
	}, nil
}

func (tg *target) current() testDoc {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if len(tg.applied) == 0 {
		return testDoc{}
	}
	return tg.applied[len(tg.applied)-1]
}

func (tg *target) count() int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return len(tg.applied)
}

type pollerEnv struct {
	src   *scriptedSource
	tg    *target
	clock *clock.Fake
	logs  *bytes.Buffer
	p     *snapshot.Poller
}

func newPollerEnv(t *testing.T, store *snapshot.DiskStore, staleAfter time.Duration) *pollerEnv {
	t.Helper()
	return newPollerEnvAt(t, store, staleAfter, t0)
}

// newPollerEnvAt starts the poller's fake clock at start.
func newPollerEnvAt(t *testing.T, store *snapshot.DiskStore, staleAfter time.Duration, start time.Time) *pollerEnv {
	t.Helper()
	e := &pollerEnv{src: &scriptedSource{}, tg: &target{}, clock: clock.NewFake(start), logs: &bytes.Buffer{}}
	e.p = snapshot.NewPoller(snapshot.PollerOptions{
		Name:       "routes",
		Source:     e.src,
		Decode:     e.tg.decode,
		StaleAfter: staleAfter,
		Store:      store,
		Clock:      e.clock.Now,
		Logger:     slog.New(slog.NewTextHandler(&syncWriter{w: e.logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	return e
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// TestPollerVersionRules: every rejected document
// leaves the applied one in place, is counted, and is visible.
func TestPollerVersionRules(t *testing.T) {
	e := newPollerEnv(t, nil, 0)
	type state struct {
		Version    uint64 // Status().Version
		Applied    int    // documents applied so far
		Rejections uint64
		Forgot     int
		Rejected   bool // Poll returned a *RejectedError
		Rollback   bool // ... wrapping ErrRollback
	}
	steps := []struct {
		name string
		data string
		want state
	}{
		{"version 0 is never valid", doc(0), state{Rejections: 1, Forgot: 1, Rejected: true}},
		{"first document", doc(5), state{Version: 5, Applied: 1, Rejections: 1, Forgot: 1}},
		{"equal version, other bytes: no change", `{"version":5,"tag":"b"}`, state{Version: 5, Applied: 1, Rejections: 1, Forgot: 1}},
		{"lower version: rollback", doc(4), state{Version: 5, Applied: 1, Rejections: 2, Forgot: 2, Rejected: true, Rollback: true}},
		{"+1", doc(6), state{Version: 6, Applied: 2, Rejections: 2, Forgot: 2}},
		{"huge jump", doc(1 << 62), state{Version: 1 << 62, Applied: 3, Rejections: 2, Forgot: 2}},
		{"invalid document", `{"version":9000000000000000000,"bad":true}`, state{Version: 1 << 62, Applied: 3, Rejections: 3, Forgot: 3, Rejected: true}},
		{"same invalid document again: judged again, counted once", `{"version":9000000000000000000,"bad":true}`, state{Version: 1 << 62, Applied: 3, Rejections: 3, Forgot: 4, Rejected: true}},
		{"truncated document (A16)", `{"version":9000000000000000001`, state{Version: 1 << 62, Applied: 3, Rejections: 4, Forgot: 5, Rejected: true}},
		{"compile fails", `{"version":9000000000000000002,"uncompilable":true}`, state{Version: 1 << 62, Applied: 3, Rejections: 5, Forgot: 6, Rejected: true}},
		{"next good version", doc(1<<62 + 1), state{Version: 1<<62 + 1, Applied: 4, Rejections: 5, Forgot: 6}},
	}
	for _, st := range steps {
		e.src.set(st.data, true, nil)
		err := e.p.Poll(t.Context())
		var rej *snapshot.RejectedError
		s := e.p.Status()
		e.src.mu.Lock()
		forgot := e.src.forgot
		e.src.mu.Unlock()
		got := state{
			Version: s.Version, Applied: e.tg.count(), Rejections: s.Rejections, Forgot: forgot,
			Rejected: errors.As(err, &rej), Rollback: errors.Is(err, snapshot.ErrRollback),
		}
		if diff := cmp.Diff(got, st.want); diff != "" {
			t.Fatalf("%s: mismatch (-got +want):\n%s\nerror: %v", st.name, diff, err)
		}
		if err != nil && !got.Rejected {
			t.Fatalf("%s: unexpected error %v", st.name, err)
		}
		if (s.LastError != "") != st.want.Rejected {
			t.Fatalf("%s: LastError = %q", st.name, s.LastError)
		}
	}
	if diff := cmp.Diff(e.tg.current(), testDoc{Version: 1<<62 + 1}); diff != "" {
		t.Errorf("applied document (-got +want):\n%s", diff)
	}
	e.src.mu.Lock()
	defer e.src.mu.Unlock()
	if diff := cmp.Diff(e.src.versions, []uint64{5, 5, 6, 1 << 62, 1<<62 + 1}); diff != "" {
		t.Errorf("SetVersion calls (-got +want):\n%s", diff)
	}
}

// TestPollerRejectsOnce: a bad document that stays published is
// counted and logged once, not at every poll: by its version, or, when it
// has none to read, by its SHA-256; a different bad document counts again.
func TestPollerRejectsOnce(t *testing.T) {
	e := newPollerEnv(t, nil, 0)
	e.src.set(doc(5), true, nil)
	if err := e.p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		data           string
		wantRejections uint64
	}{
		{`{"version":6,"bad":true}`, 1},
		{`{"version":6,"bad":true}`, 1},
		{`{"version":6,"bad":true}`, 1},
		{`{"version":6`, 2},  // no version to read: by content
		{`{"version":6`, 2},  // the same bytes
		{`{"version":6 `, 3}, // other bytes
		{`{"version":6 `, 3},
		{doc(4), 4}, // a rollback
		{doc(4), 4},
	}
	for i, st := range steps {
		e.src.set(st.data, true, nil)
		var rej *snapshot.RejectedError
		if err := e.p.Poll(t.Context()); !errors.As(err, &rej) {
			t.Fatalf("step %d: Poll = %v, want a rejection every time", i, err)
		}
		if got := e.p.Status().Rejections; got != st.wantRejections {
			t.Fatalf("step %d (%s): Rejections = %d, want %d", i, st.data, got, st.wantRejections)
		}
	}
	var errorLines int
	for line := range strings.SplitSeq(e.logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, "snapshot rejected") {
			errorLines++
		}
	}
	if errorLines != 4 {
		t.Errorf("%d error lines for 4 bad documents, want 4:\n%s", errorLines, e.logs)
	}
	e.src.set(doc(7), true, nil)
	if err := e.p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.src.set(`{"version":6,"bad":true}`, true, nil)
	_ = e.p.Poll(t.Context())
	if got := e.p.Status().Rejections; got != 5 {
		t.Errorf("Rejections = %d after a good document and a bad one again, want 5", got)
	}
}

// TestPollerStaleness: no successful contact for longer
// than StaleAfter makes the poller stale (the node unready) while the last
// document keeps serving; the next success clears it.
func TestPollerStaleness(t *testing.T) {
	const staleAfter = 5 * time.Minute
	e := newPollerEnv(t, nil, staleAfter)
	if err := e.p.Ready(); !errors.Is(err, snapshot.ErrNotLoaded) {
		t.Fatalf("Ready before any document = %v, want ErrNotLoaded", err)
	}
	e.src.set(doc(1), true, nil)
	if err := e.p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.src.set("", false, fmt.Errorf("snapshot: GET https://cp/v1/routes: %w", errors.New("connection refused")))
	for range 4 {
		e.clock.Advance(time.Minute)
		if err := e.p.Poll(t.Context()); err == nil {
			t.Fatal("Poll succeeded against a dead source")
		}
	}
	if err := e.p.Ready(); err != nil {
		t.Fatalf("Ready after 4m without contact = %v, want nil", err)
	}
	e.clock.Advance(time.Minute + time.Second)
	err := e.p.Ready()
	if !errors.Is(err, snapshot.ErrStale) {
		t.Fatalf("Ready after 5m1s without contact = %v, want ErrStale", err)
	}
	want := "routes: stale: no successful contact with scripted: for 5m1s (stale_after 5m0s); last error: snapshot: GET https://cp/v1/routes: connection refused"
	if diff := cmp.Diff(err.Error(), want); diff != "" {
		t.Errorf("reason mismatch (-got +want):\n%s", diff)
	}
	if s := e.p.Status(); s.Version != 1 || s.FetchErrors != 4 || !s.LastSuccess.Equal(t0) {
		t.Errorf("Status = %+v; want version 1 kept, 4 fetch errors, last success at t0", s)
	}

	// A 304 is a successful contact: ready again, by itself.
	e.src.set("", false, nil)
	if err := e.p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.p.Ready(); err != nil {
		t.Errorf("Ready after a 304 = %v, want nil", err)
	}
	if s := e.p.Status(); s.LastError != "" || !s.LastSuccess.Equal(e.clock.Now()) {
		t.Errorf("Status after recovery = %+v", s)
	}

	// A rejected document is a successful contact too: a bad publish must
	// not take the whole fleet out of the load balancer.
	e.src.set(`{"version":2,"bad":true}`, true, nil)
	e.clock.Advance(staleAfter + time.Second)
	_ = e.p.Poll(t.Context())
	if err := e.p.Ready(); err != nil {
		t.Errorf("Ready after a rejected document = %v, want nil", err)
	}

	logs := e.logs.String()
	if n := strings.Count(logs, "level=WARN msg=\"snapshot fetch failed"); n != 1 {
		t.Errorf("an outage logged %d warnings, want 1 (repeats at debug):\n%s", n, logs)
	}
	if !strings.Contains(logs, "snapshot source reachable again") {
		t.Errorf("recovery not logged:\n%s", logs)
	}
}

func TestPollerStaleSinceStart(t *testing.T) {
	e := newPollerEnv(t, nil, time.Minute)
	e.clock.Advance(time.Minute + time.Second)
	err := e.p.Ready()
	if !errors.Is(err, snapshot.ErrNotLoaded) {
		t.Fatalf("Ready = %v, want ErrNotLoaded first", err)
	}
	s := e.p.Status()
	if !s.Stale || !strings.Contains(s.StaleReason, "since start, 1m1s ago") {
		t.Errorf("Status = %+v, want stale since start", s)
	}
}

// TestPollerRestore: a restart during an outage serves the persisted
// document, measures staleness from its fetch time, and keeps its version
// as the rollback floor (docs/snapshots.md "Last good copy").
func TestPollerRestore(t *testing.T) {
	store, _ := openStore(t)
	first := newPollerEnv(t, store, 5*time.Minute)
	first.src.set(doc(10), true, nil)
	if err := first.p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}

	// Four minutes later the node restarts; the control plane is down.
	second := newPollerEnvAt(t, store, 5*time.Minute, t0.Add(4*time.Minute))
	if err := second.p.Restore(); err != nil {
		t.Fatal(err)
	}
	if err := second.p.Ready(); err != nil {
		t.Fatalf("Ready after restore = %v, want nil", err)
	}
	if diff := cmp.Diff(second.tg.current(), testDoc{Version: 10}); diff != "" {
		t.Errorf("restored document (-got +want):\n%s", diff)
	}
	second.src.mu.Lock()
	if diff := cmp.Diff(second.src.versions, []uint64{10}); diff != "" {
		t.Errorf("the source was not told the restored version (-got +want):\n%s", diff)
	}
	second.src.mu.Unlock()
	second.src.set("", false, errors.New("connection refused"))
	_ = second.p.Poll(t.Context())
	second.clock.Advance(time.Minute + time.Second)
	if err := second.p.Ready(); !errors.Is(err, snapshot.ErrStale) {
		t.Errorf("Ready 5m1s after the persisted fetch = %v, want ErrStale", err)
	}

	// The control plane comes back with an older version: rollback.
	second.src.set(doc(9), true, nil)
	if err := second.p.Poll(t.Context()); !errors.Is(err, snapshot.ErrRollback) {
		t.Errorf("Poll of version 9 after restoring 10 = %v, want ErrRollback", err)
	}
	second.src.set(doc(10), true, nil)
	if err := second.p.Poll(t.Context()); err != nil || second.tg.count() != 1 {
		t.Errorf("Poll of the restored version = %v (%d applies), want no change", err, second.tg.count())
	}
}

// TestPollerRestoreInvalid: a persisted document that no longer validates
// (say the node's config lost a credential) is not served, but its version
// still guards against rollback, and the same version is applied once it
// validates again.
func TestPollerRestoreInvalid(t *testing.T) {
	store, _ := openStore(t)
	if err := store.Save("routes", []byte(`{"version":10,"bad":true}`), 10, t0); err != nil {
		t.Fatal(err)
	}
	e := newPollerEnv(t, store, 0)
	err := e.p.Restore()
	var rej *snapshot.RejectedError
	if !errors.As(err, &rej) || !strings.Contains(err.Error(), "persisted copy") {
		t.Fatalf("Restore = %v, want a rejection of the persisted copy", err)
	}
	if err := e.p.Ready(); !errors.Is(err, snapshot.ErrNotLoaded) || !strings.Contains(err.Error(), "persisted copy") {
		t.Errorf("Ready = %v, want ErrNotLoaded with the reason", err)
	}
	e.src.mu.Lock()
	if e.src.forgot != 0 {
		t.Error("a persisted rejection made the source forget")
	}
	e.src.mu.Unlock()
	e.src.set(doc(9), true, nil)
	if err := e.p.Poll(t.Context()); !errors.Is(err, snapshot.ErrRollback) {
		t.Errorf("Poll of version 9 = %v, want ErrRollback", err)
	}
	e.src.set(doc(10), true, nil)
	if err := e.p.Poll(t.Context()); err != nil || e.p.Status().Version != 10 {
		t.Errorf("Poll of version 10 = %v, version %d; want it applied", err, e.p.Status().Version)
	}
}

func TestPollerRestoreCorrupt(t *testing.T) {
	store, dir := openStore(t)
	if err := store.Save("routes", []byte(doc(10)), 10, t0); err != nil {
		t.Fatal(err)
	}
	truncateFile(t, dir+"/routes.snapshot", 2)
	e := newPollerEnv(t, store, 0)
	if err := e.p.Restore(); !errors.Is(err, snapshot.ErrCorrupt) {
		t.Fatalf("Restore = %v, want ErrCorrupt", err)
	}
	e.src.set(doc(9), true, nil)
	if err := e.p.Poll(t.Context()); !errors.Is(err, snapshot.ErrRollback) {
		t.Errorf("Poll of version 9 after a corrupt payload with floor 10 = %v, want ErrRollback", err)
	}
}

func TestPollerRestoreFutureFetchTime(t *testing.T) {
	store, _ := openStore(t)
	if err := store.Save("routes", []byte(doc(1)), 1, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	e := newPollerEnv(t, store, time.Minute)
	if err := e.p.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := e.p.Status().LastSuccess; !got.Equal(t0) {
		t.Errorf("LastSuccess = %v, want the clock's now (%v), not a time in the future", got, t0)
	}
}

// TestPollerPersists: every applied document is saved with its fetch
// time; an unchanged one refreshes the saved fetch time, rate-limited.
func TestPollerPersists(t *testing.T) {
	store, _ := openStore(t)
	e := newPollerEnv(t, store, 4*time.Minute) // touch every minute
	e.src.set(doc(3), true, nil)
	if err := e.p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	persisted := func() loaded {
		t.Helper()
		got, err := load(t, store, "routes")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if diff := cmp.Diff(persisted(), loaded{doc(3), t0, 3, true}); diff != "" {
		t.Fatalf("after apply (-got +want):\n%s", diff)
	}
	e.src.set("", false, nil)
	e.clock.Advance(59 * time.Second)
	_ = e.p.Poll(t.Context())
	if got := persisted().Fetched; !got.Equal(t0) {
		t.Errorf("fetch time rewritten after 59s: %v", got)
	}
	e.clock.Advance(time.Second)
	_ = e.p.Poll(t.Context())
	if got := persisted().Fetched; !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("fetch time after 60s = %v, want %v", got, t0.Add(time.Minute))
	}
	if s := e.p.Status(); s.PersistError != "" {
		t.Errorf("PersistError = %q", s.PersistError)
	}
}

// TestPollerTruncatedDocument, end to end: a control plane
// that dies mid-body never gets half a document applied.
func TestPollerTruncatedDocument(t *testing.T) {
	cp := newControlPlane(t)
	tg := &target{}
	logs := &bytes.Buffer{}
	p := snapshot.NewPoller(snapshot.PollerOptions{
		Name:   "routes",
		Source: cp.source(t, "/v1/routes?sig=hunter2", snapshot.HTTPOptions{}),
		Decode: tg.decode,
		Logger: slog.New(slog.NewTextHandler(&syncWriter{w: logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	cp.publish(1, doc(1))
	if err := p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	full := `{"version":2,"tag":"` + strings.Repeat("x", 100) + `"}`
	for name, h := range map[string]http.HandlerFunc{
		"content-length cut": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(full)))
			_, _ = w.Write([]byte(full[:40]))
			panic(http.ErrAbortHandler)
		},
		"chunked cut": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(full[:40]))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		},
	} {
		cp.setHandler(h)
		if err := p.Poll(t.Context()); err == nil {
			t.Fatalf("%s: Poll succeeded", name)
		}
		if got := tg.current(); got.Version != 1 {
			t.Fatalf("%s: applied %+v", name, got)
		}
	}
	cp.setHandler(nil)
	cp.publish(2, full)
	if err := p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.Status(); got.Version != 2 || got.FetchErrors != 2 {
		t.Errorf("Status = %+v, want version 2 after 2 fetch errors", got)
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Errorf("logs carry the token or query:\n%s", logs)
	}
}

// TestPollerRun: Run polls repeatedly and returns when its context ends.
func TestPollerRun(t *testing.T) {
	src := &scriptedSource{fetches: make(chan struct{})}
	src.set(doc(1), true, nil)
	tg := &target{}
	p := snapshot.NewPoller(snapshot.PollerOptions{
		Name: "authz", Source: src, Decode: tg.decode, Interval: time.Millisecond, Jitter: time.Millisecond,
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	for range 3 {
		<-src.fetches
	}
	cancel()
	<-done
	if got := p.Status().Version; got != 1 {
		t.Errorf("version after Run = %d, want 1", got)
	}
}

// TestPollerAgain: the next poll starts at once after a poll the server
// held or one that brought a new document, and waits the interval after
// anything else, errors and rejected documents above all (a bad publish
// must not be fetched in a tight loop).
func TestPollerAgain(t *testing.T) {
	e := newPollerEnv(t, nil, 0)
	e.src.clock = e.clock
	for _, st := range []struct {
		name    string
		data    string
		changed bool
		held    bool
		took    time.Duration
		err     error
		want    bool
	}{
		{"new document", doc(1), true, false, 0, nil, true},
		{"unchanged, not held (static server)", "", false, false, 0, nil, false},
		{"unchanged, held (long poll timed out: 304)", "", false, true, 30 * time.Second, nil, true},
		{"unchanged, 'held' but answered at once", "", false, true, time.Millisecond, nil, false},
		{"new document after a hold (long poll: 200)", doc(2), true, true, time.Millisecond, nil, true},
		{"rejected document, held", doc(1), true, true, 30 * time.Second, nil, false},
		{"invalid document", `{"version":3,"bad":true}`, true, false, 0, nil, false},
		{"fetch error", "", false, true, 30 * time.Second, errors.New("connection refused"), false},
		{"equal version, other bytes", `{"version":2,"tag":"x"}`, true, false, 0, nil, true},
	} {
		e.src.set(st.data, st.changed, st.err)
		e.src.setHeld(st.held)
		e.src.mu.Lock()
		e.src.took = st.took
		e.src.mu.Unlock()
		_ = e.p.Poll(t.Context())
		if got := snapshot.PollAgain(e.p); got != st.want {
			t.Errorf("%s: poll again at once = %v, want %v", st.name, got, st.want)
		}
	}
}

// TestPollerRunLongPoll: with a server that holds every request, Run
// polls again at once after each answer; the hour-long interval never
// comes into play.
func TestPollerRunLongPoll(t *testing.T) {
	clk := clock.NewFake(t0)
	src := &scriptedSource{fetches: make(chan struct{}), held: true, clock: clk, took: 30 * time.Second}
	src.set(doc(1), true, nil)
	tg := &target{}
	p := snapshot.NewPoller(snapshot.PollerOptions{Name: "routes", Source: src, Decode: tg.decode, Interval: time.Hour, Clock: clk.Now})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		<-src.fetches // the synchronous first poll
		for range 3 {
			<-src.fetches // ...and three more, without a pause
			src.set("", false, nil)
		}
		cancel()
	}()
	if err := p.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	<-done
	if got := p.Status().Version; got != 1 {
		t.Errorf("version = %d, want 1", got)
	}
}

// TestPollerJitter: pauses stay within Interval ± Jitter, cover the range,
// and follow the injected random source.
func TestPollerJitter(t *testing.T) {
	const interval, jitter = 10 * time.Second, time.Second
	delays := func(seed uint64) []time.Duration {
		p := snapshot.NewPoller(snapshot.PollerOptions{
			Name: "routes", Source: &scriptedSource{}, Decode: (&target{}).decode,
			Interval: interval, Jitter: jitter, Rand: rand.New(rand.NewPCG(seed, 1)),
		})
		out := make([]time.Duration, 10000)
		for i := range out {
			out[i] = snapshot.NextDelay(p)
		}
		return out
	}
	got := delays(1)
	lo, hi := got[0], got[0]
	for _, d := range got {
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < interval-jitter || hi > interval+jitter {
		t.Errorf("delays span [%v, %v], outside [%v, %v]", lo, hi, interval-jitter, interval+jitter)
	}
	if lo > interval-jitter+jitter/10 || hi < interval+jitter-jitter/10 {
		t.Errorf("delays span only [%v, %v] of [%v, %v]", lo, hi, interval-jitter, interval+jitter)
	}
	if diff := cmp.Diff(delays(1)[:5], got[:5]); diff != "" {
		t.Errorf("same seed, different delays (-got +want):\n%s", diff)
	}
	if cmp.Equal(delays(2)[:5], got[:5]) {
		t.Error("different seeds, same delays")
	}
	noJitter := snapshot.NewPoller(snapshot.PollerOptions{Name: "routes", Source: &scriptedSource{}, Decode: (&target{}).decode})
	if d := snapshot.NextDelay(noJitter); d != snapshot.DefaultInterval {
		t.Errorf("default delay = %v, want %v", d, snapshot.DefaultInterval)
	}
}

func TestNewPollerPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewPoller without a Source did not panic")
		}
	}()
	snapshot.NewPoller(snapshot.PollerOptions{Name: "routes"})
}

// TestPollerVersionJump: a version more than MaxVersionJump above the floor
// (0 on a fresh node) is refused, so that one bad publish of MaxInt64 or
// MaxUint64 cannot raise the persisted floor beyond every later document.
func TestPollerVersionJump(t *testing.T) {
	store, _ := openStore(t)
	e := newPollerEnv(t, store, 0)
	for _, v := range []uint64{1<<63 - 1, 1<<64 - 1, snapshot.MaxVersionJump + 1} {
		e.src.set(doc(v), true, nil)
		if err := e.p.Poll(t.Context()); !errors.Is(err, snapshot.ErrVersionJump) {
			t.Errorf("first document, version %d: Poll = %v, want ErrVersionJump", v, err)
		}
	}
	for _, v := range []uint64{5, 5 + snapshot.MaxVersionJump} {
		e.src.set(doc(v), true, nil)
		if err := e.p.Poll(t.Context()); err != nil {
			t.Fatalf("version %d: Poll = %v", v, err)
		}
	}
	const top = 5 + 2*snapshot.MaxVersionJump
	e.src.set(doc(top), true, nil)
	if err := e.p.Poll(t.Context()); err != nil {
		t.Fatalf("version %d, MaxVersionJump above the floor: Poll = %v", uint64(top), err)
	}
	e.src.set(doc(1<<64-1), true, nil)
	if err := e.p.Poll(t.Context()); !errors.Is(err, snapshot.ErrVersionJump) {
		t.Errorf("version 2^64-1 from %d: Poll = %v, want ErrVersionJump", uint64(top), err)
	}
	if got := e.p.Status().Version; got != top {
		t.Errorf("Version = %d, want %d", got, uint64(top))
	}
	_, _, floor, _, err := store.Load("routes")
	if err != nil || floor != top {
		t.Errorf("persisted floor = %d, %v", floor, err)
	}
}
