package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// The crash loop: the real node binary under open-loop load, killed with
// SIGKILL at random moments and restarted on the same outbox, round after
// round, publishing to a real Mosquitto. It checks the crash bound of
// docs/usage-events.md from the outside:
//
//   - every event committed before a kill (a row in the outbox file the
//     dead node left) is delivered at least once, with the same event_id;
//   - of the responses the generator saw answered by a node, at most the
//     documented bound (outbox.DefaultMaxUnsynced events) have no event
//     delivered, not counting events the node reported dropped;
//   - every request has at most one event_id however often it is replayed.
//
// It runs only with SCOOTGATE_CRASHLOOP=1 (make crash-loop, which .ci/run
// calls): it takes about a minute and loads both cores.
// SCOOTGATE_CRASHLOOP_ROUNDS (default 12), SCOOTGATE_CRASHLOOP_RATE
// (requests/s, default 1500) and SCOOTGATE_CRASHLOOP_SEED (default: from
// the clock, printed) tune it. Without SCOOTGATE_MOSQUITTO_ADDR it fails
// under SCOOTGATE_REQUIRE_DAEMONS=1 and skips otherwise.

const (
	crashKey         = "sk-crashloop-client"
	crashProviderKey = "pk-canary-crashloop-51c0"
	crashModel       = "crash-gpt"
)

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func TestCrashLoop(t *testing.T) {
	if os.Getenv("SCOOTGATE_CRASHLOOP") != "1" {
		t.Skip("set SCOOTGATE_CRASHLOOP=1 (make crash-loop) to run the kill -9 loop")
	}
	broker := os.Getenv("SCOOTGATE_MOSQUITTO_ADDR")
	if broker == "" {
		if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
			t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but SCOOTGATE_MOSQUITTO_ADDR is unset; run scripts/ci-mosquitto.sh")
		}
		t.Skip("SKIPPED: the crash loop needs a real Mosquitto; set SCOOTGATE_MOSQUITTO_ADDR (scripts/ci-mosquitto.sh)")
	}
	rounds := envInt(t, "SCOOTGATE_CRASHLOOP_ROUNDS", 12)
	rate := envInt(t, "SCOOTGATE_CRASHLOOP_RATE", 1500)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SCOOTGATE_CRASHLOOP_SEED"); s != "" {
		seed = uint64(envInt(t, "SCOOTGATE_CRASHLOOP_SEED", 1))
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("crash loop: %d rounds at %d requests/s, seed %d, broker %s", rounds, rate, seed, broker)

	exe := buildBinary(t)
	prov := fakeprovider.New(fakeprovider.Options{OpenAIKey: crashProviderKey})
	provURL, socksAddr := startProviderAndProxy(t, prov)

	topic := fmt.Sprintf("scootgate-crashloop/%d-%d/usage", os.Getpid(), time.Now().UnixNano())
	sub := subscribeEvents(t, broker, topic)
	dir := t.TempDir()
	api, health := freePort(t), freePort(t)
	writeCrashConfig(t, dir, crashConfig{api: api, health: health, provider: provURL, egress: "socks5://" + socksAddr,
		broker: "tcp://" + broker, topic: topic, delay: "0s"})

	gen := newGenerator("http://"+api, rate)
	genCtx, stopGen := context.WithCancel(t.Context())
	var genDone sync.WaitGroup
	genDone.Go(func() { gen.run(genCtx) })
	t.Cleanup(func() { stopGen(); genDone.Wait() })

	type roundFigures struct {
		ran          time.Duration
		answered     int
		committed    int // rows left in the file at the kill
		dropped      uint64
		lost         int
		lostUndocked int // lost minus reported drops
		reasons      string
	}
	var (
		figs      []roundFigures
		nodes     []*crashNode
		committed = map[string]string{} // event_id -> request_id, rows found after kills
	)
	for r := range rounds + 1 {
		n := startCrashNode(t, exe, dir, health, r)
		nodes = append(nodes, n)
		n.waitReady(t, 20*time.Second)
		gen.setRound(r)
		if r == rounds {
			break // the last node drains everything below
		}
		ran := time.Duration(1000+rng.IntN(2500)) * time.Millisecond
		sc := n.scrapeUntil(ran)
		n.kill(t)
		gen.setRound(-1) // answers from now on belong to no round
		rows := outboxRows(t, filepath.Join(dir, "outbox.db"))
		for id, rid := range rows {
			committed[id] = rid
		}
		figs = append(figs, roundFigures{ran: ran, committed: len(rows), dropped: sc.dropped, reasons: sc.reasons})
	}

	// Drain: the last node serves a while, the generator stops, the node
	// delivers every row (its own and those the kills left), then stops
	// gracefully; its outbox must be empty after that.
	last := nodes[len(nodes)-1]
	last.scrapeUntil(time.Second)
	stopGen()
	genDone.Wait()
	deadline := time.Now().Add(60 * time.Second)
	var final nodeMetrics
	for drained := 0; drained < 2; {
		st := last.metrics()
		final = st
		if st.ok && st.depth == 0 && st.appended == st.committed {
			drained++
		} else {
			drained = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outbox did not drain within 60s: %+v", st)
		}
		time.Sleep(200 * time.Millisecond) // polling an external process's metrics
	}
	last.term(t)
	if left := outboxRows(t, filepath.Join(dir, "outbox.db")); len(left) > 0 {
		t.Errorf("%d rows left in the outbox after the drain and a graceful stop", len(left))
	}
	sub.quiesce(2 * time.Second)

	delivered := sub.snapshot()
	byRID := map[string]string{} // request_id -> event_id
	for id, ev := range delivered {
		if prev, ok := byRID[ev.rid]; ok && prev != id {
			t.Errorf("request %s has two event_ids: %s and %s", ev.rid, prev, id)
		}
		byRID[ev.rid] = id
	}
	missingCommitted := 0
	for id, rid := range committed {
		if _, ok := delivered[id]; !ok {
			missingCommitted++
			if missingCommitted <= 5 {
				t.Errorf("event %s (request %s) was committed before a kill but never delivered", id, rid)
			}
		}
	}
	answered := gen.answeredByRound()
	bound := outbox.DefaultMaxUnsynced
	t.Logf("%-5s %7s %8s %9s %7s %5s %9s", "round", "ran", "answered", "committed", "dropped", "lost", "lost-drop")
	totalAnswered, totalLost, worst := 0, 0, 0
	for r := range figs {
		f := &figs[r]
		f.answered = len(answered[r])
		for _, rid := range answered[r] {
			if _, ok := byRID[rid]; !ok {
				f.lost++
			}
		}
		f.lostUndocked = f.lost - int(min(f.dropped, uint64(f.lost)))
		totalAnswered += f.answered
		totalLost += f.lost
		worst = max(worst, f.lostUndocked)
		t.Logf("%-5d %7v %8d %9d %7d %5d %9d  %s", r+1, f.ran, f.answered, f.committed, f.dropped, f.lost, f.lostUndocked, f.reasons)
		if f.answered == 0 {
			t.Errorf("round %d: no request was answered; the load did not reach the node", r+1)
		}
		if f.lostUndocked > bound {
			t.Errorf("round %d: the kill lost %d events of answered responses (%d reported dropped); the documented bound is %d", r+1, f.lost, f.dropped, bound)
		}
	}
	lastAnswered := answered[rounds]
	lostAfter := 0
	for _, rid := range lastAnswered {
		if _, ok := byRID[rid]; !ok {
			lostAfter++
		}
	}
	t.Logf("final node (SIGTERM): answered %d, lost %d, dropped %d %s", len(lastAnswered), lostAfter, final.dropped, final.reasons)
	t.Logf("total: %d kills, %d answered, %d lost, worst kill %d (bound %d); %d committed rows replayed, %d never delivered; %d generator errors",
		len(figs), totalAnswered, totalLost, worst, bound, len(committed), missingCommitted, gen.errors.Load())
	if lostAfter > int(final.dropped) {
		t.Errorf("the graceful stop lost %d events (%d reported dropped); SIGTERM must flush them all", lostAfter, final.dropped)
	}
	for _, n := range nodes {
		if strings.Contains(n.output(), crashProviderKey) || strings.Contains(n.output(), crashKey) {
			t.Errorf("round %d: a key appeared in the node's log", n.round)
		}
	}
}

// crashConfig is what writeCrashConfig varies.
type crashConfig struct {
	api, health      string // listen addresses
	provider, egress string // the fake provider's base URL, the egress proxy URL
	broker, topic    string // "" broker: no [mqtt], events stay in the outbox
	delay            string // drain.delay
	extra            string // more TOML, appended
}

// writeCrashConfig writes the node config and authorization snapshot.
func writeCrashConfig(t *testing.T, dir string, c crashConfig) {
	t.Helper()
	doc := authsnap.Snapshot{Schema: authsnap.Schema, Version: 1, Keys: []authsnap.Key{
		{KeyID: "k-crash", TenantID: "t-crash", Digest: authsnap.Digest(crashKey)},
	}}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authz.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	mqtt := ""
	if c.broker != "" {
		mqtt = fmt.Sprintf("[mqtt]\nbroker = %q\ntopic = %q\n", c.broker, c.topic)
	}
	cfg := fmt.Sprintf(`node_id = "crashloop"
[listen]
api = %q
health = %q
[drain]
delay = %q
grace = "5s"
[[egress.proxies]]
name = "socks"
url = %q
[credentials.c]
env = "SG_CRASHLOOP_PROVIDER_KEY"
hosts = ["127.0.0.1"]
[backends.b]
protocol = "openai"
base_url = %q
credential = "c"
max_inflight_per_node = 10000
[models.%s]
[[models.%s.targets]]
backend = "b"
model = "fake-gpt-1"
weight = 1
stream = true
[authz]
source = "file:authz.json"
[control_plane]
state_dir = "state"
[usage]
outbox_path = "outbox.db"
%s%s`, c.api, c.health, c.delay, c.egress, c.provider, crashModel, crashModel, mqtt, c.extra)
	if err := os.WriteFile(filepath.Join(dir, "scootgate.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// crashNode is one node process of the loop.
type crashNode struct {
	round  int
	cmd    *exec.Cmd
	health string
	exited chan struct{}

	mu  sync.Mutex
	log bytes.Buffer // guarded by mu
}

func startCrashNode(t *testing.T, exe, dir, health string, round int) *crashNode {
	t.Helper()
	n := &crashNode{round: round, health: health, exited: make(chan struct{})}
	n.cmd = exec.Command(exe, "run", "--config", filepath.Join(dir, "scootgate.toml"))
	n.cmd.Env = []string{"SG_CRASHLOOP_PROVIDER_KEY=" + crashProviderKey}
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // owned: ends at stderr EOF, when the process exits
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			n.mu.Lock()
			n.log.Write(sc.Bytes())
			n.log.WriteByte('\n')
			n.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		// Wait closes the pipe, so it runs only after every line was
		// read (exec.Cmd.StderrPipe): the node's last lines, "node
		// stopped" among them, come at exit.
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-n.exited:
		default:
			_ = n.cmd.Process.Kill() // only the child this test started
			<-n.exited
		}
		if t.Failed() {
			t.Logf("round %d node log (last 600 bytes):\n%s", round, tail(n.output(), 600))
		}
	})
	return n
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func (n *crashNode) output() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log.String()
}

// waitReady polls /readyz until it answers 200.
func (n *crashNode) waitReady(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get("http://" + n.health + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-n.exited:
			t.Fatalf("round %d: node exited before it was ready:\n%s", n.round, n.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("round %d: node not ready within %v:\n%s", n.round, d, tail(n.output(), 3000))
		}
		time.Sleep(20 * time.Millisecond) // polling an external process
	}
}

// scrapeUntil lets the node run for d, scraping its drop counter every
// 50 ms, and returns the last value seen.
func (n *crashNode) scrapeUntil(d time.Duration) nodeMetrics {
	end := time.Now().Add(d)
	var last nodeMetrics
	for time.Now().Before(end) {
		if st := n.metrics(); st.ok {
			last = st
		}
		time.Sleep(min(50*time.Millisecond, time.Until(end))) // the kill moment is the point
	}
	return last
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *crashNode) kill(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-n.exited
}

// term sends SIGTERM and waits for an orderly exit.
func (n *crashNode) term(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case <-n.exited:
	case <-timer.C:
		t.Fatalf("final node still running 30s after SIGTERM")
	}
	if !strings.Contains(n.output(), `"msg":"node stopped"`) {
		t.Errorf("final node: no orderly stop in the log:\n%s", tail(n.output(), 3000))
	}
}

// nodeMetrics are the few metric values the loop reads.
type nodeMetrics struct {
	ok                         bool
	depth, appended, committed float64
	unsynced                   float64
	goroutines                 float64
	dropped                    uint64 // every reason
	reasons                    string // the non-zero reasons, "queue=3 full=1"
}

func (n *crashNode) metrics() nodeMetrics {
	resp, err := http.Get("http://" + n.health + "/metrics")
	if err != nil {
		return nodeMetrics{}
	}
	defer resp.Body.Close()
	var m nodeMetrics
	m.ok = resp.StatusCode == http.StatusOK
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch {
		case name == "go_goroutines":
			m.goroutines = v
		case name == "scootgate_outbox_depth":
			m.depth = v
		case name == "scootgate_outbox_unsynced":
			m.unsynced = v
		case name == "scootgate_outbox_appended_total":
			m.appended = v
		case name == "scootgate_outbox_committed_total":
			m.committed = v
		case strings.HasPrefix(name, "scootgate_outbox_dropped_total{"):
			m.dropped += uint64(v)
			if v > 0 {
				m.reasons += strings.TrimSuffix(strings.TrimPrefix(name, `scootgate_outbox_dropped_total{reason="`), `"}`) + "=" + strconv.FormatFloat(v, 'f', -1, 64) + " "
			}
		}
	}
	return m
}

// outboxRows opens the outbox a killed node left (as the next node will),
// and returns event_id -> request_id of every row in it.
func outboxRows(t *testing.T, path string) map[string]string {
	t.Helper()
	st, err := outbox.Open(outbox.Options{Path: path, LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("open the outbox after a kill: %v", err)
	}
	defer st.Close()
	if q := st.Quarantined(); q != "" {
		t.Fatalf("the outbox left by a kill was corrupt (moved to %s)", q)
	}
	recs, err := st.Read(0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(recs))
	for _, r := range recs {
		var ev struct {
			EventID   string `json:"event_id"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(r.Payload, &ev); err != nil || ev.EventID == "" {
			t.Fatalf("outbox row %d is not an event: %v: %.200q", r.Seq, err, r.Payload)
		}
		out[ev.EventID] = ev.RequestID
	}
	return out
}

// ---------------------------------------------------------------------------
// the subscriber.

type deliveredEvent struct {
	rid      string
	endpoint string
	stage    string // failure_stage
	usage    bool   // the event has usage
	count    int
}

type eventSubscriber struct {
	c paho.Client

	mu     sync.Mutex
	events map[string]*deliveredEvent // guarded by mu; by event_id
	last   time.Time                  // guarded by mu; last message
	bad    int                        // guarded by mu
}

// subscribeEvents subscribes with QoS 1 on a clean session; the
// connection must stay up for the whole test (a loss fails it: messages
// could have been missed).
func subscribeEvents(t *testing.T, addr, topic string) *eventSubscriber {
	t.Helper()
	s := &eventSubscriber{events: map[string]*deliveredEvent{}}
	lost := make(chan error, 1)
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).
		SetClientID(fmt.Sprintf("crashloop-sub-%d", time.Now().UnixNano())).
		SetCleanSession(true).SetAutoReconnect(false).SetOrderMatters(false).
		SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err })
	s.c = paho.NewClient(o)
	if tok := s.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber connect to %s: %v", addr, tok.Error())
	}
	tok := s.c.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
		var ev struct {
			EventID      string          `json:"event_id"`
			RequestID    string          `json:"request_id"`
			Endpoint     string          `json:"endpoint"`
			FailureStage string          `json:"failure_stage"`
			Usage        json.RawMessage `json:"usage"`
		}
		err := json.Unmarshal(m.Payload(), &ev)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.last = time.Now()
		if err != nil || ev.EventID == "" {
			s.bad++
			return
		}
		e := s.events[ev.EventID]
		if e == nil {
			e = &deliveredEvent{rid: ev.RequestID, endpoint: ev.Endpoint, stage: ev.FailureStage,
				usage: len(ev.Usage) > 0 && string(ev.Usage) != "null"}
			s.events[ev.EventID] = e
		}
		e.count++
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	t.Cleanup(func() {
		select {
		case err := <-lost:
			t.Errorf("the subscriber lost its connection (%v): deliveries may have been missed", err)
		default:
		}
		s.c.Disconnect(100)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.bad > 0 {
			t.Errorf("%d delivered messages were not usage events", s.bad)
		}
	})
	return s
}

// quiesce waits until no message arrived for d.
func (s *eventSubscriber) quiesce(d time.Duration) {
	for {
		s.mu.Lock()
		idle := time.Since(s.last)
		s.mu.Unlock()
		if idle >= d {
			return
		}
		time.Sleep(d - idle) // waiting out the broker's last deliveries
	}
}

func (s *eventSubscriber) snapshot() map[string]deliveredEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]deliveredEvent, len(s.events))
	for id, e := range s.events {
		out[id] = *e
	}
	return out
}

// ---------------------------------------------------------------------------
// the open-loop generator.

// generator sends requests at a fixed rate whatever the answers do, 1 in
// 5 a stream, and records the X-Request-Id of every complete answer under
// the round it was sent in.
type generator struct {
	base     string
	interval time.Duration
	client   *http.Client
	round    atomic.Int64 // -1: no node serving
	errors   atomic.Int64

	mu       sync.Mutex
	answered map[int][]string // guarded by mu
}

func newGenerator(base string, rate int) *generator {
	tr := &http.Transport{MaxIdleConnsPerHost: 512, DisableCompression: true}
	g := &generator{
		base: base, interval: time.Second / time.Duration(rate),
		client:   &http.Client{Transport: tr, Timeout: 30 * time.Second},
		answered: map[int][]string{},
	}
	g.round.Store(-1)
	return g
}

func (g *generator) setRound(r int) { g.round.Store(int64(r)) }

// maxInFlight bounds the generator's own goroutines; a shot due beyond it
// is skipped (and counted as an error).
const maxInFlight = 2048

func (g *generator) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxInFlight)
	ticker := time.NewTicker(g.interval)
	defer ticker.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			g.client.CloseIdleConnections()
			return
		case <-ticker.C:
		}
		r := int(g.round.Load())
		if r < 0 {
			continue // no node: nothing to measure
		}
		select {
		case slots <- struct{}{}:
		default:
			g.errors.Add(1)
			continue
		}
		stream := i%5 == 0
		wg.Go(func() {
			defer func() { <-slots }()
			if rid, ok := g.shot(ctx, stream); ok {
				g.mu.Lock()
				g.answered[r] = append(g.answered[r], rid)
				g.mu.Unlock()
			} else {
				g.errors.Add(1)
			}
		})
	}
}

// shot sends one request and reports its X-Request-Id if the answer was
// complete: a 200 with the whole body (a stream up to [DONE]).
func (g *generator) shot(ctx context.Context, stream bool) (string, bool) {
	body := fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":"crash loop"}]}`, crashModel, stream)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return "", false
	}
	req.Header.Set("Authorization", "Bearer "+crashKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", false
	}
	if stream && !bytes.Contains(data, []byte("data: [DONE]")) {
		return "", false
	}
	return resp.Header.Get("X-Request-Id"), true
}

// answeredByRound returns a copy of the answered request ids by round.
func (g *generator) answeredByRound() map[int][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[int][]string, len(g.answered))
	for r, ids := range g.answered {
		out[r] = append([]string(nil), ids...)
		sort.Strings(out[r])
	}
	return out
}
