package limits_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// redisServer is a redis-server the test started on a loopback port,
// with no persistence.
type redisServer struct {
	bin, dir string
	port     int
	cmd      *exec.Cmd
}

// startRedis starts Debian's redis-server for the test and stops it at
// cleanup. Without the binary the test is skipped loudly, unless
// SCOOTGATE_REQUIRE_DAEMONS=1 (CI), where it fails.
func startRedis(tb testing.TB) *redisServer {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not installed (apt-get install redis-server)"
		if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
			tb.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
		}
		tb.Skip("SKIPPING real-Redis test: " + msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	rs := &redisServer{bin: bin, dir: tb.TempDir(), port: port}
	rs.start(tb)
	tb.Cleanup(rs.stop)
	return rs
}

func (rs *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(rs.port) }

func (rs *redisServer) start(tb testing.TB) {
	tb.Helper()
	rs.cmd = exec.Command(rs.bin, "--port", strconv.Itoa(rs.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", rs.dir)
	if err := rs.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	// Wait until it answers: a PING, retried until a deadline.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := rs.do("PING"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatal("redis-server did not answer within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (rs *redisServer) stop() {
	if rs.cmd != nil && rs.cmd.Process != nil {
		rs.cmd.Process.Kill()
		rs.cmd.Wait()
		rs.cmd = nil
	}
}

// do sends one inline command and returns the first line of the answer.
func (rs *redisServer) do(cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", rs.addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "$") && line != "$-1" {
		v, err := r.ReadString('\n')
		return strings.TrimSpace(v), err
	}
	return line, nil
}

// node is one simulated gateway node: a limiter on its own connection to
// the shared Redis.
type node struct {
	l     *limits.Limiter
	store *limits.Redis
	sub   *limits.Subject
	ups   chan bool // each change of the store's state
	stop  func()    // stops the store (a crash: nothing is released)
}

func newNode(t testing.TB, addr string, fc *clock.Fake, onFailure limits.Failure, kl, tl authsnap.Limits) *node {
	n := &node{ups: make(chan bool, 16)}
	n.store = limits.NewRedis(limits.RedisOptions{
		Address: addr, Timeout: 500 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		// Health probes only where a test asks for them
		// (TestStoreDownWhileIdle): here takes alone find an outage.
		HealthInterval: time.Hour,
		OnChange:       func(up bool) { n.ups <- up },
	})
	// Holds are refreshed by hand (RefreshHolds), never behind a test's
	// back.
	n.store.SetHoldRefresh(time.Hour)
	n.l = limits.New(limits.Options{Clock: fc.Now, Fleet: n.store, OnFailure: onFailure})
	b := n.l.Bind()
	n.sub = b.Subject("k1", "t1", kl, tl)
	b.Done()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { n.store.Run(ctx) })
	n.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(n.stop)
	return n
}

// waitUp waits for the store to report up (or down, with want false).
func (n *node) wait(t testing.TB, want bool) {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for n.store.Up() != want {
		select {
		case <-n.ups:
		case <-timer.C:
			t.Fatalf("store up = %v after 10s, want %v", n.store.Up(), want)
		}
	}
}

func (n *node) admit(now time.Time) bool {
	tk, _, ok := n.sub.Admit(now)
	if ok {
		tk.Release()
	}
	return ok
}

// TestFleetRequestsPerMinute: four nodes share one Redis. At one instant
// (no refill) the fleet admits exactly the limit, however requests spread
// over the nodes; over three minutes of greedy clients it admits no more
// than the bucket gives (limit + refill) and loses at most the leases
// stranded on nodes (docs/limits.md "Overshoot").
func TestFleetRequestsPerMinute(t *testing.T) {
	rs := startRedis(t)
	const nodes, limit = 4, 200
	lease := int64(limit / 20)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	var ns []*node
	for range nodes {
		n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{RequestsPerMinute: limit}, authsnap.Limits{})
		n.wait(t, true)
		ns = append(ns, n)
	}
	// drain admits round-robin until a whole round is refused.
	drain := func() int64 {
		var admitted int64
		for {
			round := 0
			for _, n := range ns {
				if n.admit(fc.Now()) {
					round++
				}
			}
			if round == 0 {
				return admitted
			}
			admitted += int64(round)
		}
	}
	if got := drain(); got != limit {
		t.Fatalf("burst: the fleet admitted %d, want exactly %d", got, limit)
	}

	const step, steps = 100 * time.Millisecond, 1800 // three minutes
	var total int64
	for range steps {
		fc.Advance(step)
		total += drain()
	}
	refill := int64(limit * (step * steps) / time.Minute)
	stranded := int64(nodes) * (lease + lease/2 + 1)
	if total > refill {
		t.Errorf("over %v the fleet admitted %d, more than the %d the bucket refilled", step*steps, total, refill)
	}
	if total < refill-stranded-limit/10 {
		t.Errorf("over %v the fleet admitted %d, want at least %d", step*steps, total, refill-stranded-limit/10)
	}
	var takes int64
	for _, n := range ns {
		takes += n.store.Calls()
	}
	t.Logf("admitted %d of %d refilled; %d takes by %d nodes for %d admissions", total, refill, takes, nodes, total+limit)
}

// TestFleetTokensDebt: tokens spent beyond the lease are paid to the
// fleet's bucket with the next take.
func TestFleetTokensDebt(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{TokensPerMinute: 1000}, authsnap.Limits{})
	n.wait(t, true)
	tk, _, ok := n.sub.Admit(fc.Now()) // takes a lease of 50
	if !ok {
		t.Fatal("refused")
	}
	tk.Debit(fc.Now(), 500) // 450 owed: a take in the background pays it
	tk.Release()
	if !n.admit(fc.Now()) { // waits for that take, which leased 50 more
		t.Fatal("refused after the debt was paid")
	}
	// 1000 − 50 (first lease) − 450 (debt) − 50 (second lease).
	if got, err := rs.do("HGET scootgate:limits:k:k1:tokens l"); err != nil || got != "450" {
		t.Fatalf("fleet bucket level %q (%v), want 450", got, err)
	}
}

// TestFleetOutage: Redis killed mid-run → the node keeps admitting by its
// local share and says the store is down; Redis back on the same port →
// the node is back on the fleet's buckets without a restart.
func TestFleetOutage(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	const limit = 100 // a lease of 5
	n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{RequestsPerMinute: limit}, authsnap.Limits{})
	n.wait(t, true)
	n.admitUp(t, fc, 10)
	rs.stop()
	// The next lease take fails: from then on, the local bucket (share
	// 1) admits, and only it. It holds no more than the fleet's bucket
	// held after the last take, 100 less the two or three leases of 5
	// taken (the third in the background), not a fresh minute's 100.
	admitted := 0
	for range 2 * limit {
		if n.admit(fc.Now()) {
			admitted++
		}
	}
	if n.store.Up() {
		t.Fatal("store up with redis-server stopped")
	}
	if admitted < limit-15 || admitted > limit-10 {
		t.Errorf("admitted %d during the outage, want the fleet's level at the last take, %d to %d", admitted, limit-15, limit-10)
	}

	rs.start(t)
	n.wait(t, true)
	// A minute on, what was left of the lease has expired, and the local
	// bucket has refilled.
	fc.Advance(time.Minute + time.Second)
	calls := n.store.Calls()
	if !n.admit(fc.Now()) {
		t.Fatal("refused after redis came back")
	}
	if n.store.Calls() == calls {
		t.Error("no lease taken from redis after it came back")
	}
	// A fresh server: the bucket started full; one lease is out.
	if got, err := rs.do("HGET scootgate:limits:k:k1:requests l"); err != nil || got != "95" {
		t.Errorf("fleet bucket level %q (%v), want 95", got, err)
	}
}

// TestFleetOutageDebt: what the local share admitted while Redis was
// away is paid to the fleet's bucket when it is back.
func TestFleetOutageDebt(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	const limit = 100 // a lease of 5
	n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{RequestsPerMinute: limit}, authsnap.Limits{})
	n.wait(t, true)
	n.admitUp(t, fc, 10)
	rs.stop()
	for i := range 30 {
		if !n.admit(fc.Now()) {
			t.Fatalf("request %d refused by the local share during the outage", i)
		}
	}
	rs.start(t) // a fresh server: the bucket starts full
	n.wait(t, true)
	if !n.admit(fc.Now()) {
		t.Fatal("refused after redis came back")
	}
	// The take paid the outage's 30 (less the lease's 0–5 left before
	// it) and took a lease of 5.
	got, err := rs.do("HGET scootgate:limits:k:k1:requests l")
	if lvl, _ := strconv.Atoi(got); err != nil || lvl < limit-35 || lvl > limit-30 {
		t.Errorf("fleet bucket level %q (%v) after the outage; want %d..%d: the outage's requests paid", got, err, limit-35, limit-30)
	}
}

// TestFleetOutageAtLimit: a key held at its limit falls back to a local
// bucket as empty as the fleet's, not to a fresh minute.
func TestFleetOutageAtLimit(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	const limit = 6000 // 100/s
	// Node b spends the fleet's bucket; node n, quiet until then, has
	// its own share bucket (share 1) full.
	n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{RequestsPerMinute: limit}, authsnap.Limits{})
	b := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{RequestsPerMinute: limit}, authsnap.Limits{})
	n.wait(t, true)
	b.wait(t, true)
	offer := func(n *node, d time.Duration) (admitted int) { // 500 requests a second
		for range int(d / (2 * time.Millisecond)) {
			fc.Advance(2 * time.Millisecond)
			if n.admit(fc.Now()) {
				admitted++
			}
		}
		return admitted
	}
	offer(b, 15*time.Second)
	offer(n, 5*time.Second) // at the limit: n's takes find the fleet empty
	rs.stop()
	// At the limit n asks the fleet once per lease's refill (3 s), and
	// this test has no health probes: its next take finds the outage.
	got := offer(n, 4*time.Second)
	if n.store.Up() {
		t.Fatal("store up with redis-server stopped")
	}
	// Four seconds of refill at 100/s, and what the last take left.
	if got > 4*100+limit/20 {
		t.Errorf("admitted %d in the first 4 s of the outage; want ≤ %d (the refill and at most a lease), not a fresh minute", got, 4*100+limit/20)
	}
}

// TestStoreDown: a store that never answers, by failure mode.
func TestStoreDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	kl := authsnap.Limits{RequestsPerMinute: 2, MaxConcurrent: 5}
	for _, tt := range []struct {
		mode  limits.Failure
		want  []bool
		store bool // the refusal is KindStore
	}{
		{limits.FailLocal, []bool{true, true, false, false}, false},
		{limits.FailOpen, []bool{true, true, true, true}, false},
		{limits.FailClosed, []bool{false, false, false, false}, true},
	} {
		n := newNode(t, addr, fc, tt.mode, kl, authsnap.Limits{})
		for i, want := range tt.want {
			tk, st, ok := n.sub.Admit(fc.Now())
			if ok {
				tk.Release()
			}
			if ok != want {
				t.Errorf("mode %d, request %d: admitted %v, want %v", tt.mode, i+1, ok, want)
			}
			if !ok && (st.Kind == limits.KindStore) != tt.store {
				t.Errorf("mode %d, request %d: refused by %v", tt.mode, i+1, st.Kind)
			}
		}
	}
}

// TestFleetRoundTrips: at a steady high rate a node pays about one round
// trip per lease, far below one per request.
func TestFleetRoundTrips(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	const limit = 6000 // 100/s; a lease of 300
	n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{RequestsPerMinute: limit, TokensPerMinute: 100 * limit}, authsnap.Limits{})
	n.wait(t, true)
	var admitted int64
	for range 1000 { // 10 s at 100 requests per second
		fc.Advance(10 * time.Millisecond)
		tk, _, ok := n.sub.Admit(fc.Now())
		if ok {
			admitted++
			tk.Debit(fc.Now(), 50)
			tk.Release()
		}
	}
	ratio := float64(n.store.Calls()) / float64(admitted)
	t.Logf("%d admitted, %d round trips (%.4f per request)", admitted, n.store.Calls(), ratio)
	if admitted < 990 || ratio > 0.1 {
		t.Errorf("%d admitted, %.4f round trips per request; want ≥ 990 and ≤ 0.1", admitted, ratio)
	}
}

// TestFleetRoundTripsAtLimit offers a key five times its limit for two
// minutes: its lease is empty nearly always, and the node must not pay a
// round trip per refused request, nor ask the empty bucket ten times a
// second, while still admitting the limit.
func TestFleetRoundTripsAtLimit(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	const limit = 6000 // 100/s; a lease of 300, refilled in 3 s
	n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{RequestsPerMinute: limit}, authsnap.Limits{})
	n.wait(t, true)
	var admitted, offered int64
	for range 60000 { // 120 s at 500 requests per second
		fc.Advance(2 * time.Millisecond)
		offered++
		if tk, _, ok := n.sub.Admit(fc.Now()); ok {
			admitted++
			tk.Release()
		}
	}
	calls := n.store.Calls()
	t.Logf("%d of %d admitted, %d round trips (%.4f per offered request)", admitted, offered, calls, float64(calls)/float64(offered))
	// The bucket's initial 6,000 plus 100 a second for 120 s, less what
	// one lease may hold back at the end.
	if want := int64(limit + 100*120); admitted < want-300 || admitted > want {
		t.Errorf("%d admitted; want %d (−300 for the last lease)", admitted, want)
	}
	// About two takes a second: the one that finds what refilled, and the
	// top-up it triggers (less than half a lease), which finds the bucket
	// empty and waits.
	if calls > 300 {
		t.Errorf("%d round trips in 120 s at the limit; want ≤ 300 (about two a second)", calls)
	}
}

// BenchmarkAdmitRedis is BenchmarkAdmit's key+tenant+debit case on the
// redis store at steady state (every lease taken): the hot path must stay
// close to the local store's and pay (almost) no round trips.
func BenchmarkAdmitRedis(b *testing.B) {
	rs := startRedis(b)
	const keys = 10000
	big := authsnap.Limits{RequestsPerMinute: authsnap.MaxLimit, TokensPerMinute: authsnap.MaxLimit, MaxConcurrent: 1 << 20}
	store := runStore(b, rs.addr())
	l := limits.New(limits.Options{Fleet: store})
	bd := l.Bind()
	subs := make([]*limits.Subject, keys)
	for i := range subs {
		subs[i] = bd.Subject("k_"+strconv.Itoa(i), "t_"+strconv.Itoa(i%100), big, big)
	}
	bd.Done()
	now := time.Now()
	for _, sub := range subs { // take every lease
		tk, _, ok := sub.Admit(now)
		if !ok {
			b.Fatal("refused")
		}
		tk.Release()
	}
	calls := store.Calls()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		tk, _, ok := subs[i].Admit(now)
		if !ok {
			b.Fatal("refused")
		}
		tk.Debit(now, 100)
		tk.Release()
		i++
		if i == keys {
			i = 0
		}
	}
	b.ReportMetric(float64(store.Calls()-calls)/float64(b.N), "roundtrips/op")
}

// TestFleetLeaseExpires: what is left of a lease after a window is
// dropped, not spent later: the next request takes a new lease.
func TestFleetLeaseExpires(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{RequestsPerMinute: 100}, authsnap.Limits{})
	n.wait(t, true)
	if !n.admit(fc.Now()) { // a lease of 5; 4 left
		t.Fatal("refused")
	}
	fc.Advance(59 * time.Second)
	calls := n.store.Calls()
	if !n.admit(fc.Now()) || n.store.Calls() != calls {
		t.Fatal("a lease within its window was not spent locally")
	}
	fc.Advance(2 * time.Second)
	if !n.admit(fc.Now()) || n.store.Calls() != calls+1 {
		t.Fatalf("%d takes after the window, want 1", n.store.Calls()-calls)
	}
}

// TestFleetConcurrentAdmit: goroutines on two nodes racing for one
// key's budget at one instant admit exactly the limit, and every lease
// take is waited for, not repeated.
func TestFleetConcurrentAdmit(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	const limit = 500
	var ns [2]*node
	for i := range ns {
		ns[i] = newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{RequestsPerMinute: limit, TokensPerMinute: 1 << 30}, authsnap.Limits{RequestsPerMinute: 1 << 20})
		ns[i].wait(t, true)
	}
	var admitted [8]int
	var wg sync.WaitGroup
	for w := range admitted {
		wg.Go(func() {
			n := ns[w%2]
			for range limit {
				tk, _, ok := n.sub.Admit(fc.Now())
				if ok {
					admitted[w]++
					tk.Debit(fc.Now(), 10)
					tk.Release()
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, a := range admitted {
		total += a
	}
	if total != limit {
		t.Errorf("admitted %d, want exactly %d", total, limit)
	}
}

// runStore starts a redis store on addr for a benchmark, waits until it is
// up, and stops it when the benchmark ends.
func runStore(b testing.TB, addr string) *limits.Redis {
	ups := make(chan bool, 4)
	store := limits.NewRedis(limits.RedisOptions{Address: addr, OnChange: func(up bool) { ups <- up }})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { store.Run(ctx) })
	b.Cleanup(func() { cancel(); wg.Wait() })
	if !<-ups {
		b.Fatal("store not up")
	}
	return store
}

// admitUp admits count requests at the fake clock's time, all of which
// the fleet must take.
func (n *node) admitUp(t *testing.T, fc *clock.Fake, count int) {
	t.Helper()
	for range count {
		if !n.admit(fc.Now()) {
			t.Fatal("refused with the store up")
		}
	}
}

// TestStoreDownWhileIdle: a node that takes nothing from the store (no
// limited request) still notices within a probe that Redis died, so
// /readyz and scootgate_limits_store_up stop claiming it is up, and
// notices that it came back.
func TestStoreDownWhileIdle(t *testing.T) {
	rs := startRedis(t)
	ups := make(chan bool, 16)
	store := limits.NewRedis(limits.RedisOptions{
		Address: rs.addr(), Timeout: 500 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		HealthInterval: 20 * time.Millisecond,
		OnChange:       func(up bool) { ups <- up },
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { store.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	next := func(want bool) {
		t.Helper()
		select {
		case up := <-ups:
			if up != want {
				t.Fatalf("store went up=%v, want %v", up, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("store did not go up=%v within 10s (it took nothing)", want)
		}
	}
	next(true)
	rs.stop()
	next(false)
	rs.start(t)
	next(true)
	if n := store.Calls(); n != 0 {
		t.Errorf("%d round trips counted; health probes are not takes", n)
	}
}

// TestStoreFreshAfterRestart: once a restarted Redis answers the probe,
// the store's takes and refreshes go through, on every connection of its
// client: none is left over from before the restart to fail with EOF on
// its first use and mark the store down again.
func TestStoreFreshAfterRestart(t *testing.T) {
	rs := startRedis(t)
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	n := newNode(t, rs.addr(), fc, limits.FailLocal, authsnap.Limits{MaxConcurrent: 4}, authsnap.Limits{})
	n.wait(t, true)
	use := func() (failed int) {
		for range 40 {
			if tk, _, ok := n.sub.Admit(fc.Now()); ok {
				tk.Release()
			}
			if err := n.l.RefreshHolds(); err != nil {
				failed++
			}
		}
		return failed
	}
	if f := use(); f != 0 { // every pipelined connection of the client in use
		t.Fatalf("%d of 40 refreshes failed before the restart", f)
	}
	rs.stop()
	if err := n.l.RefreshHolds(); err == nil {
		t.Fatal("a refresh succeeded with redis-server stopped")
	}
	n.wait(t, false)
	rs.start(t)
	n.wait(t, true)
	if f := use(); f != 0 || !n.store.Up() {
		t.Errorf("%d of 40 refreshes failed after the restart (store up %v); want 0", f, n.store.Up())
	}
}
