package mqttpub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
	"github.com/scootgate/scootgate/pkg/usd"
)

// BenchmarkEventLife is the whole life of usage events in one process, as
// a serving node lives it: at a steady rate the request path builds each
// attempt's event (usage.NewEvent) and hands it to the recorder
// (Record: validation, encoding, the outbox's Append); the outbox's writer
// commits them in groups to bbolt; the publisher reads each commit,
// publishes every row with QoS 1, and deletes it after its PUBACK, the
// deletes committed with a later group. The node's own options
// throughout (commit window, crash bound, publisher window, backoff).
//
// Variants run in the same iteration, in rotating order, each for the
// same events at the same pace: "off" paces the same ticks and builds no
// event (a node with usage events off); "disk" has its outbox on the test
// directory's file system, "tmpfs" on /dev/shm (fsync is free there;
// skipped where it is missing), "down" on disk with the broker
// unreachable (everything but delivery), and "floor" the least any
// durable commit at the same pace costs here: no bbolt, no broker, no
// encoding, a goroutine woken at each commit deadline that appends the
// events' bytes to a plain file with one write(2) and one fsync
// (floorSink). cpu-us/event is the process's
// CPU (user + system, getrusage) from the first event until the last one
// is deleted on disk (for "down", committed), less "off" over the same
// ticks, per event: everything the event's life costs, the kernel's part
// (bbolt's writes and fdatasyncs, the socket, futex wakeups) included.
// The runtime's own CPU metrics (runtime/metrics /cpu/classes/...) are
// estimates from the scheduler's states that leave out time in system
// calls, which is where much of this goes; time.Now around the request
// path alone would leave out the writer and the publisher, which run on
// goroutines of their own.
//
// The broker is the real Mosquitto when SCOOTGATE_MOSQUITTO_ADDR names
// one, out of the process, so the CPU counted is the node's own; without
// it the embedded broker runs in this process and its CPU is counted too
// (broker=embedded in the name says so). allocs/event counts every heap
// allocation in the process, less "off"; switches/event the process's
// context switches. With -cpuprofile, `go tool pprof -tagfocus
// variant=disk` shows one variant (the pacing goroutine and every
// goroutine the variant started carry the label);
// SCOOTGATE_EVENTLIFE_VARIANTS=disk runs "off" and "disk" only, for a
// profile of the whole process (perf record) with one variant in it.
// commits/event is the outbox's commits per event: most of what an event
// costs is paid per commit (the writer's and the publisher's wakeups, two
// fdatasync), so it sets the cost per event. To try other commit groups,
// SCOOTGATE_EVENTLIFE_COMMIT_INTERVAL (a duration) and
// SCOOTGATE_EVENTLIFE_MAX_BATCH (events) replace the node's defaults.
func BenchmarkEventLife(b *testing.B) {
	broker, where := os.Getenv("SCOOTGATE_MOSQUITTO_ADDR"), "mosquitto"
	if broker == "" {
		broker, _ = startMochiWith(b, "127.0.0.1:0", &allowHook{}, nil)
		where = "embedded"
	}
	for _, rate := range []int{500, 2000} {
		b.Run(fmt.Sprintf("broker=%s/rate=%d", where, rate), func(b *testing.B) {
			eventLife(b, broker, rate, 2*rate)
		})
	}
}

// lifeVariant is one variant of BenchmarkEventLife: a recorder, its
// outbox and publisher, kept for the whole benchmark.
type lifeVariant struct {
	name  string
	rec   *usage.Recorder
	ob    *outbox.Store
	pub   *Publisher
	down  bool
	floor *floorSink

	cpu, allocs, switches, commits float64
}

func eventLife(b *testing.B, broker string, rate, events int) {
	variants := []*lifeVariant{{name: "off"}}
	dirs := map[string]string{"disk": b.TempDir(), "down": b.TempDir()}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "scootgate-eventlife-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		dirs["tmpfs"] = d
	}
	only := os.Getenv("SCOOTGATE_EVENTLIFE_VARIANTS") // e.g. "disk": "off" and disk only, to profile one
	interval, batch := lifeCommitKnobs(b)
	for _, name := range []string{"disk", "tmpfs", "down"} {
		dir, ok := dirs[name]
		if !ok || only != "" && !slices.Contains(strings.Split(only, ","), name) {
			continue
		}
		v := &lifeVariant{name: name, down: name == "down"}
		labeled(name, func() {
			var err error
			v.ob, err = outbox.Open(outbox.Options{
				Path:           filepath.Join(dir, "outbox.db"),
				CommitInterval: interval,
				MaxBatch:       batch,
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { v.ob.Close() })
			v.rec = usage.NewRecorder(v.ob, DefaultMaxPayload)
			addr := broker
			if v.down {
				addr = closedPort(b)
			}
			o := testOptions(addr, uniqueTopic(b))
			o.AckTimeout, o.BackoffMin, o.BackoffMax = DefaultAckTimeout, DefaultBackoffMin, DefaultBackoffMax
			v.pub = newPublisher(b, v.ob, o)
			start(b, v.pub)
		})
		if !v.down {
			eventually(b, "connected", func() bool { return v.pub.Stats().Connected })
		}
		variants = append(variants, v)
	}
	if only == "" || slices.Contains(strings.Split(only, ","), "floor") {
		variants = append(variants, &lifeVariant{name: "floor", floor: newFloorSink(b, filepath.Join(dirs["disk"], "floor.log"), interval)})
	}
	// A warm-up: files at their steady size, connections and buffers
	// grown.
	for _, v := range variants {
		v.run(b, rate, rate/2)
	}
	for _, v := range variants {
		v.cpu, v.allocs, v.switches, v.commits = 0, 0, 0, 0
	}

	for i := 0; b.Loop(); i++ {
		for k := range variants {
			v := variants[(k+i)%len(variants)]
			runtime.GC() // each variant pays for its own garbage only
			c0 := v.commitCount()
			cpu0, m0, sw0 := cpuTime(b), mallocCount(), switches(b)
			v.run(b, rate, events)
			v.cpu += float64((cpuTime(b) - cpu0).Nanoseconds())
			v.allocs += float64(mallocCount() - m0)
			v.switches += float64(switches(b) - sw0)
			v.commits += float64(v.commitCount() - c0)
		}
	}
	n := float64(b.N * events)
	off := variants[0]
	for _, v := range variants[1:] {
		b.ReportMetric((v.cpu-off.cpu)/n/1e3, v.name+"-cpu-us/event")
		b.ReportMetric((v.allocs-off.allocs)/n, v.name+"-allocs/event")
		b.ReportMetric((v.switches-off.switches)/n, v.name+"-switches/event")
		b.ReportMetric(v.commits/n, v.name+"-commits/event")
		if v.floor != nil {
			continue
		}
		st := v.rec.Stats()
		if st.Recorded != uint64(b.N*events+rate/2) {
			b.Fatalf("%s: %d events recorded, want %d (%+v)", v.name, st.Recorded, b.N*events+rate/2, st)
		}
	}
	b.ReportMetric(off.cpu/n/1e3, "off-cpu-us/tick-event")
}

// lifeCommitKnobs returns the outbox's commit interval and batch: the
// node's defaults, or those the environment names.
func lifeCommitKnobs(b *testing.B) (time.Duration, int) {
	interval, batch := outbox.DefaultCommitInterval, CommitBatch(DefaultBatchMax, outbox.DefaultMaxUnsynced)
	if e := os.Getenv("SCOOTGATE_EVENTLIFE_COMMIT_INTERVAL"); e != "" {
		d, err := time.ParseDuration(e)
		if err != nil {
			b.Fatalf("SCOOTGATE_EVENTLIFE_COMMIT_INTERVAL: %v", err)
		}
		interval = d
	}
	if e := os.Getenv("SCOOTGATE_EVENTLIFE_MAX_BATCH"); e != "" {
		n, err := strconv.Atoi(e)
		if err != nil {
			b.Fatalf("SCOOTGATE_EVENTLIFE_MAX_BATCH: %v", err)
		}
		batch = n
	}
	return interval, batch
}

// commitCount is the outbox's commits so far; 0 for "off".
func (v *lifeVariant) commitCount() uint64 {
	if v.floor != nil {
		return v.floor.commitCount()
	}
	if v.ob == nil {
		return 0
	}
	return v.ob.Stats().Commits
}

// run paces events at rate through v (nothing for "off") and returns once
// the last is deleted on disk (committed, with the broker down).
func (v *lifeVariant) run(b *testing.B, rate, events int) {
	b.Helper()
	pprof.Do(context.Background(), pprof.Labels("variant", v.name), func(context.Context) {
		a := lifeAttempt()
		tick := time.NewTicker(lifeTick)
		defer tick.Stop()
		begin := time.Now()
		for sent := 0; sent < events; {
			now := <-tick.C
			due := min(events, int(now.Sub(begin).Seconds()*float64(rate)))
			for ; sent < due; sent++ {
				if v.floor != nil {
					v.floor.add(floorPayload)
					continue
				}
				if v.rec == nil {
					continue
				}
				a.Started, a.Ended = now.Add(-300*time.Millisecond), now
				v.rec.Record(usage.NewEvent(a))
			}
		}
		if v.floor != nil {
			v.floor.wait(b)
			return
		}
		if v.rec == nil {
			return
		}
		poll := time.NewTicker(5 * time.Millisecond)
		defer poll.Stop()
		deadline := time.Now().Add(time.Minute)
		for {
			st := v.ob.Stats()
			if v.down && st.Unsynced == 0 || !v.down && st.Depth == 0 {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: not drained after a minute: %+v", v.name, st)
			}
			<-poll.C
		}
	})
}

// lifeTick paces the events: every 10 ms, the events due by then. A
// finer tick costs the pacing loop more than the events it paces (a
// wakeup is dear on a virtual machine: docs/performance.md), and "off"
// would be mostly its noise.
const lifeTick = 10 * time.Millisecond

// lifeAttempt is a typical priced chat completion that reported usage,
// as the request path describes it to usage.NewEvent.
func lifeAttempt() *usage.Attempt {
	return &usage.Attempt{
		NodeID: "node-a", RequestID: "sg-8a17d3c05b9e2f64a1c7d0e3", TenantID: "t_9", KeyID: "k_123",
		PublicModel: "demo-gpt", ServedModel: "demo-gpt", ProviderModel: "gpt-4.1-mini-2025-04-14", Backend: "openai-1",
		Protocol: usageevent.ProtocolOpenAI, Endpoint: usageevent.EndpointChatCompletions,
		Placement: usageevent.PlacementBalanced, N: 1, SendState: usageevent.SendResponseReceived, ClientStatus: 200,
		RequestBytes: 2873, ResponseBytes: 934, TTFB: 240 * time.Millisecond,
		Usage:    usageevent.Usage{InputTokens: 615, OutputTokens: 153, CacheReadTokens: 512},
		RawUsage: json.RawMessage(`{"prompt_tokens":615,"completion_tokens":153,"total_tokens":768,"prompt_tokens_details":{"cached_tokens":512}}`),
		HasUsage: true, Priced: true, Cost: usd.Amount(123456789), PriceVersion: 7,
	}
}

// floorPayload is the bytes of lifeAttempt's event, encoded once: what
// "floor" writes for each event.
var floorPayload = func() []byte {
	p, err := json.Marshal(usage.NewEvent(lifeAttempt()))
	if err != nil {
		panic(err)
	}
	return p
}()

// floorSink is BenchmarkEventLife's "floor": the least a durable commit of
// events costs on this machine at the outbox's pace. The first event that
// finds it idle sets a timer for its commit deadline (the outbox's
// commit interval from then, as the outbox's writer does); the writer
// goroutine, woken by it, appends what was added since to a plain file
// with one write(2) and one fsync. Nothing is framed, checked, delivered
// or deleted: the other variants' cost less this one's is what bbolt,
// the recorder and the publisher add.
type floorSink struct {
	f        *os.File
	interval time.Duration
	timer    *time.Timer

	mu      sync.Mutex
	cond    sync.Cond // signalled after each commit
	buf     []byte    // added, not yet written
	armed   bool      // the timer is set for buf's deadline
	written int       // bytes added and synced so far
	added   int       // bytes added so far
	commits uint64
	err     error
}

func newFloorSink(b *testing.B, path string, interval time.Duration) *floorSink {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	s := &floorSink{f: f, interval: interval}
	s.cond.L = &s.mu
	s.timer = time.NewTimer(time.Hour)
	s.timer.Stop()
	stop := make(chan struct{})
	done := make(chan struct{})
	go s.run(stop, done)
	b.Cleanup(func() {
		close(stop)
		<-done
		f.Close()
	})
	return s
}

func (s *floorSink) add(p []byte) {
	s.mu.Lock()
	s.buf = append(s.buf, p...)
	s.added += len(p)
	if !s.armed {
		s.armed = true
		s.timer.Reset(s.interval)
	}
	s.mu.Unlock()
}

func (s *floorSink) run(stop, done chan struct{}) {
	defer close(done)
	var spare []byte
	for {
		select {
		case <-stop:
			return
		case <-s.timer.C:
		}
		s.mu.Lock()
		batch := s.buf
		s.buf, s.armed = spare[:0], false
		s.mu.Unlock()
		_, err := s.f.Write(batch)
		if err == nil {
			err = s.f.Sync()
		}
		s.mu.Lock()
		s.written += len(batch)
		s.commits++
		if s.err == nil {
			s.err = err
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		spare = batch
	}
}

// wait returns once everything added is synced.
func (s *floorSink) wait(b *testing.B) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.written < s.added && s.err == nil {
		s.cond.Wait()
	}
	if s.err != nil {
		b.Fatalf("floor: %v", s.err)
	}
}

func (s *floorSink) commitCount() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}
