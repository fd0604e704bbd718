package mqttpub

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// brokerCostFor is how long BenchmarkBrokerCost measures each variant.
const brokerCostFor = 20 * time.Second

// BenchmarkBrokerCost measures what the framing of usage events costs the
// broker: the real Mosquitto's own CPU time (utime + stime in
// /proc/<pid>/stat, before and after) while a publisher of this package
// delivers events offered at 100,000 a second ("rate=100k") for 20 s,
// QoS 1, and one paho subscriber (QoS 1) consumes them; and at 10,000 a
// second ("rate=10k"), a rate one event a message can keep up with, so
// that the framings also compare at the same rate. Variants: "single",
// one event a message (batch_max 1), and "batch=100" and "batch=1000".
// The events come from an in-memory outbox that commits the rows due
// every millisecond (100 a commit at 100k/s) and signals Notify, as the
// outbox's group commits do, so that the disk does not cap the rate; the
// publisher sends what each Read finds, as it does on a node.
//
// broker-us/event is Mosquitto's CPU per event the publisher had
// acknowledged within the window; broker-us/msg per message it published;
// broker-core is the share of one core the broker used. acked-events/s
// is the rate the publisher reached (below the offer when it cannot keep
// up); delivered/acked is what the subscriber had received by the end.
// process-us/event is this process's CPU (publisher and subscriber).
//
// It needs the broker's address and its PID (a local broker):
//
//	env=$(scripts/ci-mosquitto.sh) && eval "$env"   # sets both
//	go test -run '^$' -bench BrokerCost -benchtime 1x ./internal/mqttpub
//
// or SCOOTGATE_MOSQUITTO_ADDR with SCOOTGATE_MOSQUITTO_PID for a broker
// started otherwise.
func BenchmarkBrokerCost(b *testing.B) {
	addr := mosquittoAddr(b)
	pid := mosquittoPID(b)
	for _, v := range []struct {
		rate, batchMax int
	}{{100_000, 1}, {100_000, 100}, {100_000, 1000}, {10_000, 1}, {10_000, 100}, {10_000, 1000}} {
		name := fmt.Sprintf("rate=%dk/single", v.rate/1000)
		if v.batchMax > 1 {
			name = fmt.Sprintf("rate=%dk/batch=%d", v.rate/1000, v.batchMax)
		}
		b.Run(name, func(b *testing.B) {
			var events, msgs, delivered, brokerCPU, selfCPU, wall float64
			for i := 0; i < b.N; i++ {
				r := brokerCostRun(b, addr, pid, v.rate, v.batchMax)
				events += float64(r.acked)
				msgs += float64(r.published)
				delivered += float64(r.delivered)
				brokerCPU += r.broker.Seconds()
				selfCPU += r.self.Seconds()
				wall += r.wall.Seconds()
			}
			b.ReportMetric(events/wall, "acked-events/s")
			b.ReportMetric(msgs/events, "msgs/event")
			b.ReportMetric(delivered/events, "delivered/acked")
			b.ReportMetric(brokerCPU/events*1e6, "broker-us/event")
			b.ReportMetric(brokerCPU/msgs*1e6, "broker-us/msg")
			b.ReportMetric(brokerCPU/wall, "broker-core")
			b.ReportMetric(selfCPU/events*1e6, "process-us/event")
		})
	}
}

// brokerCostResult is one variant's window.
type brokerCostResult struct {
	acked, published, delivered uint64
	broker, self, wall          time.Duration
}

func brokerCostRun(b *testing.B, addr string, pid, rate, batchMax int) brokerCostResult {
	b.Helper()
	topic := uniqueTopic(b)
	sub := subscribeCounting(b, addr, topic)
	src := newPacedSource(rate, payloads("cost", 4096, 400))
	defer src.stop()
	o := testOptions(addr, topic)
	o.BatchMax = batchMax
	p := newPublisher(b, src, o)
	r := start(b, p)
	defer r.stop(b)
	eventually(b, "connected", func() bool { return p.Stats().Connected })

	src.begin()
	st0, broker0, self0, begin := p.Stats(), brokerCPUTime(b, pid), cpuTime(b), time.Now()
	window := time.NewTimer(brokerCostFor) // the measurement's length, not a synchronisation
	<-window.C
	st, broker, self, wall := p.Stats(), brokerCPUTime(b, pid), cpuTime(b), time.Since(begin)
	if st.Reconnects > st0.Reconnects || st.ConnectFailures > st0.ConnectFailures {
		b.Fatalf("the publisher lost its connection during the run: %s", st.LastError)
	}
	return brokerCostResult{
		acked: st.Acked - st0.Acked, published: st.Published - st0.Published, delivered: sub.events.Load(),
		broker: broker - broker0, self: self - self0, wall: wall,
	}
}

// mosquittoPID is the PID of the broker at SCOOTGATE_MOSQUITTO_ADDR:
// SCOOTGATE_MOSQUITTO_PID, or the one scripts/ci-mosquitto.sh recorded in
// SCOOTGATE_CI_MOSQUITTO_DIR. It skips (fails with daemons required)
// without one.
func mosquittoPID(b *testing.B) int {
	b.Helper()
	s := os.Getenv("SCOOTGATE_MOSQUITTO_PID")
	if s == "" {
		if dir := os.Getenv("SCOOTGATE_CI_MOSQUITTO_DIR"); dir != "" {
			data, err := os.ReadFile(filepath.Join(dir, "mosquitto.pid"))
			if err != nil {
				b.Fatal(err)
			}
			s = strings.TrimSpace(string(data))
		}
	}
	if s == "" {
		const msg = "the broker's PID is unknown: set SCOOTGATE_MOSQUITTO_PID, or start it with scripts/ci-mosquitto.sh"
		if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
			b.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
		}
		b.Skip("SKIPPED: " + msg)
	}
	pid, err := strconv.Atoi(s)
	if err != nil {
		b.Fatalf("broker PID %q: %v", s, err)
	}
	return pid
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ: 100
// on every Linux architecture Go runs on).
const userHZ = 100

// brokerCPUTime is the user and system CPU time the process pid used so
// far, from /proc/<pid>/stat (utime and stime, fields 14 and 15).
func brokerCPUTime(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("broker CPU time: %v", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		b.Fatalf("broker CPU time: short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("broker CPU time: bad /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / userHZ
}

// countingSubscriber counts the events delivered on a topic, singly and
// in batches.
type countingSubscriber struct {
	events, msgs atomic.Uint64
}

func subscribeCounting(b *testing.B, addr, topic string) *countingSubscriber {
	b.Helper()
	s := &countingSubscriber{}
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).
		SetClientID(fmt.Sprintf("sub-cost-%d", time.Now().UnixNano())).
		SetCleanSession(true).SetAutoReconnect(false)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(waitLimit) || tok.Error() != nil {
		b.Fatalf("subscriber connect: %v", tok.Error())
	}
	b.Cleanup(func() { c.Disconnect(50) })
	tok := c.SubscribeMultiple(map[string]byte{topic: 1, topic + usageevent.BatchTopicSuffix: 1}, func(_ paho.Client, m paho.Message) {
		s.msgs.Add(1)
		if strings.HasSuffix(m.Topic(), usageevent.BatchTopicSuffix) {
			s.events.Add(uint64(bytes.Count(m.Payload(), []byte{'\n'})))
			return
		}
		s.events.Add(1)
	})
	if !tok.WaitTimeout(waitLimit) || tok.Error() != nil {
		b.Fatalf("subscribe: %v", tok.Error())
	}
	return s
}

// pacedSource is an in-memory outbox to which, from begin on, the rows
// due at rate a second are committed every millisecond, each commit
// followed by a Notify: group commits of rate/1000 rows. Rows are made on
// Read from a ring of payloads, so it holds no rows itself.
type pacedSource struct {
	rate      int
	payloads  [][]byte
	notify    chan struct{}
	committed atomic.Uint64 // rows 1..committed can be read

	quit chan struct{}
	wg   sync.WaitGroup
}

func newPacedSource(rate int, payloads [][]byte) *pacedSource {
	return &pacedSource{rate: rate, payloads: payloads, notify: make(chan struct{}, 1), quit: make(chan struct{})}
}

// begin starts committing rows.
func (s *pacedSource) begin() {
	start := time.Now()
	s.wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.quit:
				return
			case now := <-tick.C:
				s.committed.Store(uint64(now.Sub(start).Seconds() * float64(s.rate)))
				select {
				case s.notify <- struct{}{}:
				default:
				}
			}
		}
	})
}

func (s *pacedSource) stop() { close(s.quit); s.wg.Wait() }

func (s *pacedSource) Read(after uint64, max int) ([]Record, error) {
	last := min(s.committed.Load(), after+uint64(max))
	if last <= after {
		return nil, nil
	}
	out := make([]Record, 0, last-after)
	for seq := after + 1; seq <= last; seq++ {
		out = append(out, Record{Seq: seq, Payload: s.payloads[seq%uint64(len(s.payloads))]})
	}
	return out, nil
}

// Delete forgets nothing: rows are made on Read, and a Read after a
// reconnect (from 0) would offer every row again (the benchmark fails on
// a reconnect).
func (s *pacedSource) Delete(...uint64) error { return nil }

func (s *pacedSource) Notify() <-chan struct{} { return s.notify }
