package mqttpub

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// batchSubscriber keeps every message delivered on a topic, whole.
type batchSubscriber struct {
	mu   sync.Mutex
	msgs [][]byte // guarded by mu
}

func subscribeBatches(t testing.TB, addr, topic string) *batchSubscriber {
	t.Helper()
	s := &batchSubscriber{}
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).
		SetClientID(fmt.Sprintf("sub-batch-%d", time.Now().UnixNano())).
		SetCleanSession(true).SetAutoReconnect(false).SetOrderMatters(true)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(waitLimit) || tok.Error() != nil {
		t.Fatalf("subscriber connect: %v", tok.Error())
	}
	tok := c.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
		s.mu.Lock()
		s.msgs = append(s.msgs, bytes.Clone(m.Payload()))
		s.mu.Unlock()
	})
	if !tok.WaitTimeout(waitLimit) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(50) })
	return s
}

// lines returns the events of every message received, split at their
// newlines, and the messages' sizes.
func (s *batchSubscriber) lines() (events []string, sizes []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		sizes = append(sizes, len(m))
		for l := range bytes.Lines(m) {
			events = append(events, string(bytes.TrimSuffix(l, []byte{'\n'})))
		}
	}
	return events, sizes
}

// TestBatchedDelivery: with BatchMax above 1, events go out to the batch
// topic as newline-delimited messages of at most BatchMax events and
// MaxPayload bytes, every event exactly once and in outbox order, and
// every row is deleted on its batch's PUBACK. Nothing goes to the plain
// topic.
func TestBatchedDelivery(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		for _, tc := range []struct {
			name                 string
			batchMax, maxPayload int
			wantMsgs             int
		}{
			{"by count", 50, DefaultMaxPayload, 5},      // 250 events of 200 bytes
			{"by size", 50, 1000, 63},                   // 4 events of 201 bytes fit in 1000
			{"single events stay single", 1, 1000, 250}, // the default framing, on the plain topic
			{"one event per batch", 2, 300, 250},        // two 201-byte lines never fit in 300
		} {
			t.Run(tc.name, func(t *testing.T) {
				topic := uniqueTopic(t)
				events := payloads("batch", 250, 200)
				src := newFakeSource()
				src.add(events...)
				batchTopic := topic + usageevent.BatchTopicSuffix
				subBatch := subscribeBatches(t, b.addr, batchTopic)
				subPlain := subscribeBatches(t, b.addr, topic)
				o := testOptions(b.addr, topic)
				o.BatchMax, o.MaxPayload = tc.batchMax, tc.maxPayload
				p := newPublisher(t, src, o)
				r := start(t, p)
				eventually(t, "every row acknowledged and deleted", func() bool { return src.pending() == 0 })
				want := make([]string, len(events))
				for i, e := range events {
					want[i] = string(e)
				}
				got, plainSizes := subPlain.lines()
				sub, other := subBatch, plainSizes
				if tc.batchMax == 1 {
					sub, other = subPlain, nil
					if n, _ := subBatch.lines(); len(n) != 0 {
						t.Errorf("%d events on the batch topic with batch max 1", len(n))
					}
				}
				eventually(t, "every message delivered", func() bool {
					got, _ = sub.lines()
					return len(got) >= len(events)
				})
				r.stop(t)
				got, sizes := sub.lines()
				if diff := cmp.Diff(got, want); diff != "" {
					t.Fatalf("events delivered (-got +want):\n%s", diff)
				}
				if tc.batchMax > 1 && len(other) != 0 {
					t.Errorf("%d messages on the plain topic while batching", len(other))
				}
				if len(sizes) != tc.wantMsgs {
					t.Errorf("%d messages, want %d", len(sizes), tc.wantMsgs)
				}
				for _, n := range sizes {
					if n > tc.maxPayload {
						t.Errorf("a message of %d bytes, over max payload %d", n, tc.maxPayload)
					}
				}
				if st := p.Stats(); st.Acked != uint64(len(events)) || st.Published != uint64(tc.wantMsgs) {
					t.Errorf("Acked %d Published %d, want %d and %d", st.Acked, st.Published, len(events), tc.wantMsgs)
				}
			})
		}
	})
}

// TestReadsAreBounded: a backlog larger than a read goes out in reads of
// at most maxReadRows rows, each whole batches, whatever the window and
// the batch size; every event is still delivered once.
func TestReadsAreBounded(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		for _, tc := range []struct {
			name      string
			batchMax  int
			wantLimit int // the largest read
		}{
			{"batches of 100", 100, 1000},
			{"batches of 1000", 1000, 1000},
			{"batches of 7", 7, 1022},
			{"one event a message", 1, 1024},
		} {
			t.Run(tc.name, func(t *testing.T) {
				const n = 3000
				src := newFakeSource()
				src.add(payloads("bounded", n, 100)...)
				o := testOptions(b.addr, uniqueTopic(t))
				o.BatchMax, o.Window = tc.batchMax, 1024
				p := newPublisher(t, src, o)
				r := start(t, p)
				eventually(t, "every row acknowledged and deleted", func() bool { return src.pending() == 0 })
				r.stop(t)
				src.mu.Lock()
				defer src.mu.Unlock()
				if src.maxAsked != tc.wantLimit {
					t.Errorf("largest read asked for %d rows, want %d", src.maxAsked, tc.wantLimit)
				}
				if st := p.Stats(); st.Acked != n {
					t.Errorf("Acked %d, want %d", st.Acked, n)
				}
			})
		}
	})
}

// TestWithheldBatchKeepsItsRows: a batch whose PUBACK the broker withholds
// keeps exactly its own rows in the outbox; every other batch's rows go.
func TestWithheldBatchKeepsItsRows(t *testing.T) {
	events := payloads("withheld", 100, 200)
	h := newAckHook()
	marker := events[37] // in the fourth batch of ten
	h.withholdIf = func(p []byte) bool { return bytes.Contains(p, marker) }
	addr, _ := startMochi(t, "127.0.0.1:0", h)
	src := newFakeSource()
	seqs := src.add(events...)
	o := testOptions(addr, uniqueTopic(t))
	o.BatchMax = 10
	p := newPublisher(t, src, o)
	r := start(t, p)
	eventually(t, "all but the withheld batch deleted", func() bool { return src.pending() == 10 })
	r.stop(t)
	recs, _ := src.Read(0, len(events))
	var left []uint64
	for _, rec := range recs {
		left = append(left, rec.Seq)
	}
	if diff := cmp.Diff(left, seqs[30:40]); diff != "" {
		t.Errorf("rows left (-got +want):\n%s", diff)
	}
}
