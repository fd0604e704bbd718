package usage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

type sliceAppender struct {
	accept bool
	got    [][]byte
}

func (s *sliceAppender) Append(p []byte) bool {
	if s.accept {
		s.got = append(s.got, bytes.Clone(p)) // Append must copy (Appender)
	}
	return s.accept
}

func validEvent() *usageevent.Event {
	return &usageevent.Event{
		EventID: NewEventID(time.Unix(1700000000, 0)), Schema: usageevent.Schema,
		NodeID: "n", RequestID: "sg-1", TenantID: "t", KeyID: "k",
		PublicModel: "m", ProviderModel: "p", Backend: "b", Protocol: usageevent.ProtocolOpenAI,
		Attempt: 1, SendState: usageevent.SendResponseReceived, HTTPStatus: 200,
		StartedAt: time.Unix(1700000000, 0).UTC(),
	}
}

func TestRecorder(t *testing.T) {
	out := &sliceAppender{accept: true}
	r := NewRecorder(out, 4096)
	ev := validEvent()
	r.Record(ev)
	if len(out.got) != 1 {
		t.Fatalf("appended %d events, want 1", len(out.got))
	}
	var back usageevent.Event
	if err := json.Unmarshal(out.got[0], &back); err != nil || back.EventID != ev.EventID {
		t.Fatalf("appended payload does not decode to the event: %v", err)
	}

	big := validEvent()
	big.PublicModel = strings.Repeat("m", 200)
	small := NewRecorder(out, 100)
	small.Record(big)

	bad := validEvent()
	bad.SendState = "sent-ish"
	r.Record(bad)

	full := NewRecorder(&sliceAppender{accept: false}, 4096)
	full.Record(validEvent())

	got := []RecorderStats{r.Stats(), small.Stats(), full.Stats()}
	want := []RecorderStats{{Recorded: 1, Invalid: 1}, {Oversize: 1}, {Dropped: 1}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Fatalf("stats (-got +want):\n%s", diff)
	}
}

// copyAppender copies each payload, as the Appender contract requires, into
// a buffer it reuses, so benchmarks count the recorder's allocations only.
type copyAppender struct{ last []byte }

func (c *copyAppender) Append(p []byte) bool {
	c.last = append(c.last[:0], p...)
	return true
}

// benchEvent is a typical stream attempt with usage.
func benchEvent() *usageevent.Event {
	return &usageevent.Event{
		EventID: "01a226bf-5a94-74cc-acd7-02a5cb7a7097", Schema: usageevent.Schema,
		NodeID: "node-a", RequestID: "sg-8a17d3c05b9e2f64a1c7d0e3", TenantID: "t_9", KeyID: "k_123",
		PublicModel: "demo-claude", ProviderModel: "claude-sonnet-4-5-20250929", Backend: "anthropic-1",
		Protocol: usageevent.ProtocolAnthropic, Stream: true, Attempt: 1,
		SendState: usageevent.SendResponseReceived, HTTPStatus: 200,
		RequestBytes: 28731, ResponseBytes: 9342, TTFBMs: 640.213457, DurationMs: 7421.70012,
		StartedAt: time.Date(2026, 11, 29, 10, 0, 4, 500123456, time.UTC),
		Usage:     &usageevent.Usage{InputTokens: 6156, OutputTokens: 153, CacheReadTokens: 4096, CacheWriteTokens: 2048},
		ProviderUsage: json.RawMessage(`{"input_tokens":12,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,` +
			`"cache_creation":{"ephemeral_5m_input_tokens":2048,"ephemeral_1h_input_tokens":0},"output_tokens":153,"service_tier":"standard"}`),
	}
}

// recordReflect is Record as it was before appendJSON: the baseline for
// BenchmarkRecord.
func (r *Recorder) recordReflect(ev *usageevent.Event) {
	if ev.Validate() != nil {
		r.invalid.Add(1)
		return
	}
	data, err := json.Marshal(ev)
	if err != nil {
		r.invalid.Add(1)
		return
	}
	if r.maxPayload > 0 && len(data) > r.maxPayload {
		r.oversize.Add(1)
		return
	}
	if r.out.Append(data) {
		r.recorded.Add(1)
	} else {
		r.dropped.Add(1)
	}
}

// BenchmarkRecord runs Record beside its json.Marshal baseline, and
// Validate alone (both include it).
func BenchmarkRecord(b *testing.B) {
	ev := benchEvent()
	b.Run("json.Marshal", func(b *testing.B) {
		out := &copyAppender{}
		r := NewRecorder(out, 1<<20)
		b.ReportAllocs()
		for b.Loop() {
			r.recordReflect(ev)
		}
		if r.Stats().Recorded == 0 {
			b.Fatal("nothing recorded")
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		out := &copyAppender{}
		r := NewRecorder(out, 1<<20)
		b.ReportAllocs()
		for b.Loop() {
			r.Record(ev)
		}
		if r.Stats().Recorded == 0 {
			b.Fatal("nothing recorded")
		}
	})
	b.Run("Validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ev.Validate(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// raceEnabled is set by race_test.go: sync.Pool drops some Puts under the
// race detector, so allocation counts mean nothing there.
var raceEnabled bool

// TestRecordAllocs: with a warm pool, recording an event allocates nothing
// (the outbox's own copy aside).
func TestRecordAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	out := &copyAppender{}
	r := NewRecorder(out, 1<<20)
	ev := benchEvent()
	r.Record(ev)
	if n := testing.AllocsPerRun(100, func() { r.Record(ev) }); n != 0 {
		t.Errorf("Record: %v allocations, want 0", n)
	}
}

// lockedAppender keeps a copy of every payload, from any goroutine.
type lockedAppender struct {
	mu  sync.Mutex
	got [][]byte // guarded by mu
}

func (l *lockedAppender) Append(p []byte) bool {
	c := bytes.Clone(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, c)
	return true
}

// TestRecordPayload: Record appends exactly json.Marshal's bytes (the
// encoding replays and consumers saw before appendJSON), also when several
// goroutines share the buffer pool and events of very different sizes
// pass through it (a 100 KiB provider_usage is not pooled afterwards).
func TestRecordPayload(t *testing.T) {
	var evs []*usageevent.Event
	for i := range 64 {
		ev := benchEvent()
		ev.EventID = NewEventID(time.Unix(1700000000+int64(i), 0))
		ev.RequestID = fmt.Sprintf("sg-<%d>&\u2028", i)
		ev.TTFBMs = float64(i) / 7
		ev.StartedAt = ev.StartedAt.Add(time.Duration(i) * time.Nanosecond).In(time.FixedZone("X", i*900))
		switch i % 4 {
		case 1:
			ev.Usage, ev.ProviderUsage = nil, nil
		case 2:
			ev.ProviderUsage = json.RawMessage(`{ "note": "<big>` + strings.Repeat("x", 100<<10) + `" }`)
		case 3:
			ev.ProviderUsage = json.RawMessage("{\n  \"a\" : \"\u2028&\"\n}")
		}
		evs = append(evs, ev)
	}
	out := &lockedAppender{}
	r := NewRecorder(out, 0)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(evs); i += 4 {
				r.Record(evs[i])
			}
		})
	}
	wg.Wait()

	if st := r.Stats(); st != (RecorderStats{Recorded: uint64(len(evs))}) {
		t.Fatalf("stats %+v, want %d recorded", st, len(evs))
	}
	want := map[string]bool{}
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		want[string(b)] = true
	}
	for _, p := range out.got {
		if !want[string(p)] {
			t.Errorf("payload is not json.Marshal of any recorded event: %.200q", p)
		}
		delete(want, string(p))
	}
	if len(want) != 0 {
		t.Errorf("%d events missing from the payloads", len(want))
	}
}

// TestRecordBufferBound: a buffer grown past maxPooledBuf is not kept.
func TestRecordBufferBound(t *testing.T) {
	r := NewRecorder(&copyAppender{}, 0)
	big := make([]byte, 0, maxPooledBuf+1)
	r.putBuf(&big)
	if got := r.bufs.Get(); got != nil {
		t.Fatalf("pool kept a %d-byte buffer", cap(*got.(*[]byte)))
	}
}
