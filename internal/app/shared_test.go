package app

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// sharedConsumer is one consumer of an MQTT shared subscription: it
// records the event ids delivered to it.
type sharedConsumer struct {
	c   paho.Client
	mu  sync.Mutex
	ids []string // guarded by mu
	qos []byte   // guarded by mu; the QoS of each delivery
}

func newSharedConsumer(t *testing.T, addr, filter string, delivered chan<- string) *sharedConsumer {
	t.Helper()
	sc := &sharedConsumer{}
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).
		SetClientID(fmt.Sprintf("shared-%d", time.Now().UnixNano())).
		SetCleanSession(true).SetAutoReconnect(false).SetOrderMatters(false)
	sc.c = paho.NewClient(o)
	if tok := sc.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("consumer connect: %v", tok.Error())
	}
	t.Cleanup(func() { sc.c.Disconnect(50) })
	tok := sc.c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) {
		ev, err := usageevent.Decode(m.Payload())
		if err != nil {
			t.Errorf("consumer got a non-event: %v", err)
			return
		}
		sc.mu.Lock()
		sc.ids = append(sc.ids, ev.EventID)
		sc.qos = append(sc.qos, m.Qos())
		sc.mu.Unlock()
		delivered <- ev.EventID
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", filter, tok.Error())
	}
	return sc
}

// TestSharedSubscriptionMosquitto: usage consumers scale out with an MQTT
// shared subscription ($share/GROUP/topic, docs/usage-consumers.md). Two
// consumers in one group, on a real Mosquitto, receive disjoint sets of
// events whose union is every event the node published, each with QoS 1,
// and the node's outbox drains (every event acknowledged by PUBACK).
func TestSharedSubscriptionMosquitto(t *testing.T) {
	addr := os.Getenv("SCOOTGATE_MOSQUITTO_ADDR")
	if addr == "" {
		const msg = "SCOOTGATE_MOSQUITTO_ADDR is unset: Mosquitto is not running. Start it with: env=$(scripts/ci-mosquitto.sh) && eval \"$env\""
		if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
			t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
		}
		t.Skip("SKIPPING real-Mosquitto test: " + msg)
	}
	const n = 40
	topic := fmt.Sprintf("scootgate-test/shared-%d-%d/usage", os.Getpid(), time.Now().UnixNano())
	delivered := make(chan string, 2*n)
	a := newSharedConsumer(t, addr, "$share/billing/"+topic, delivered)
	b := newSharedConsumer(t, addr, "$share/billing/"+topic, delivered)

	s := startStack(t, stackOptions{extraTOML: fmt.Sprintf("[mqtt]\nbroker = %q\ntopic = %q\n", "tcp://"+addr, topic)})
	for range n {
		if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	seen := map[string]int{}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for len(seen) < n {
		select {
		case id := <-delivered:
			seen[id]++
		case <-deadline.C:
			t.Fatalf("the group received %d distinct events, want %d", len(seen), n)
		}
	}

	a.mu.Lock()
	b.mu.Lock()
	defer a.mu.Unlock()
	defer b.mu.Unlock()
	inA := map[string]bool{}
	for _, id := range a.ids {
		inA[id] = true
	}
	for _, id := range b.ids {
		if inA[id] {
			t.Errorf("event %s went to both consumers of the group", id)
		}
	}
	if len(a.ids) == 0 || len(b.ids) == 0 || len(a.ids)+len(b.ids) != n {
		t.Errorf("consumers got %d and %d events, want a split of %d with both taking part", len(a.ids), len(b.ids), n)
	}
	for _, q := range append(a.qos, b.qos...) {
		if q != 1 {
			t.Errorf("delivered with QoS %d, want 1", q)
		}
	}
	// PUBACK rule: a row leaves the outbox only once the broker
	// acknowledged it, so a drained outbox means every event was acked.
	waitMetric(t, s, "scootgate_outbox_depth 0", 10*time.Second)
	waitMetric(t, s, fmt.Sprintf("scootgate_mqtt_acked_total %d", n), 10*time.Second)
}

// waitMetric waits until the node's /metrics has line.
func waitMetric(t *testing.T, s *stack, line string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		m := s.scrapeMetrics()
		if strings.Contains("\n"+m, "\n"+line+"\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %q", line)
		}
		<-tick.C
	}
}
