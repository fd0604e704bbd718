package usage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

type sliceAppender struct {
	accept  bool
	got     [][]byte
	notSent []bool // got[i] came through AppendNotSent
}

func (s *sliceAppender) Append(p []byte) bool { return s.add(p, false) }

func (s *sliceAppender) AppendNotSent(p []byte) bool { return s.add(p, true) }

func (s *sliceAppender) add(p []byte, notSent bool) bool {
	if s.accept {
		s.got = append(s.got, bytes.Clone(p)) // Append must copy (Appender)
		s.notSent = append(s.notSent, notSent)
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

func (c *copyAppender) AppendNotSent(p []byte) bool { return c.Append(p) }

// benchEvent is a typical stream attempt with usage.
func benchEvent() *usageevent.Event {
	return &usageevent.Event{
		EventID: "01a226bf-5a94-74cc-acd7-02a5cb7a7097", Schema: usageevent.Schema,
		NodeID: "node-a", RequestID: "sg-8a17d3c05b9e2f64a1c7d0e3", TenantID: "t_9", KeyID: "k_123",
		PublicModel: "demo-claude", ProviderModel: "claude-sonnet-4-5-20250929", Backend: "anthropic-1",
		Protocol: usageevent.ProtocolAnthropic, Stream: true, Attempt: 1,
		SendState: usageevent.SendResponseReceived, HTTPStatus: 200,
		RequestBytes: 28731, ResponseBytes: 9342, TTFBMs: 640.213, DurationMs: 7421.7, // to the microsecond, as NewEvent writes them
		StartedAt: time.Date(2026, 11, 29, 10, 0, 4, 500123456, time.UTC),
		Usage:     &usageevent.Usage{InputTokens: 6156, OutputTokens: 153, CacheReadTokens: 4096, CacheWriteTokens: 2048},
		ProviderUsage: json.RawMessage(`{"input_tokens":12,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,` +
			`"cache_creation":{"ephemeral_5m_input_tokens":2048,"ephemeral_1h_input_tokens":0},"output_tokens":153,"service_tier":"standard"}`),
	}
}

// BenchmarkRecord runs Record, and Validate alone (Record includes it).
// Besides ns/op it reports cpu-ns/op, the process's CPU time per call
// (garbage collection included): on a shared machine wall time counts the
// waits for a CPU too.
func BenchmarkRecord(b *testing.B) {
	ev := benchEvent()
	b.Run("Record", func(b *testing.B) {
		out := &copyAppender{}
		r := NewRecorder(out, 1<<20)
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			r.Record(ev)
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		if r.Stats().Recorded == 0 {
			b.Fatal("nothing recorded")
		}
	})
	b.Run("Validate", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			if err := ev.Validate(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestRecordUnencodable: an event that passes Validate but that JSON
// cannot hold is counted invalid and never reaches the outbox.
func TestRecordUnencodable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(e *usageevent.Event)
	}{
		{"year 10000", func(e *usageevent.Event) { e.StartedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"zone 24h", func(e *usageevent.Event) { e.StartedAt = e.StartedAt.In(time.FixedZone("X", 24*3600)) }},
		{"empty provider_usage", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage{} }},
		// Validate takes white space as no provider_usage; written as it
		// is, it would leave the member without a value.
		{"provider_usage of white space", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(" \n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := validEvent()
			tc.change(ev)
			if err := ev.Validate(); err != nil {
				t.Fatalf("the case must pass Validate: %v", err)
			}
			out := &sliceAppender{accept: true}
			r := NewRecorder(out, 0)
			r.Record(ev)
			if st := r.Stats(); st != (RecorderStats{Invalid: 1}) || len(out.got) != 0 {
				t.Fatalf("stats %+v, %d appended; want 1 invalid, none appended", st, len(out.got))
			}
		})
	}
}

// TestRecordSendStateClass: events of attempts that may have reached a
// provider go through Append, those that definitely did not through
// AppendNotSent, so the outbox can keep room for the former.
func TestRecordSendStateClass(t *testing.T) {
	out := &sliceAppender{accept: true}
	r := NewRecorder(out, 0)
	for _, st := range []string{usageevent.SendResponseReceived, usageevent.SendPossiblySent, usageevent.SendDefinitelyNotSent} {
		ev := validEvent()
		ev.SendState = st
		switch st {
		case usageevent.SendPossiblySent:
			ev.HTTPStatus, ev.FailureStage = 502, usageevent.StageSend
		case usageevent.SendDefinitelyNotSent:
			ev.HTTPStatus, ev.FailureStage = 0, usageevent.StageConnect
		}
		r.Record(ev)
	}
	if st := r.Stats(); st.Recorded != 3 {
		t.Fatalf("stats %+v; want 3 recorded", st)
	}
	if diff := cmp.Diff(out.notSent, []bool{false, false, true}); diff != "" {
		t.Errorf("through AppendNotSent (-got +want):\n%s", diff)
	}
}

// TestRecordCancelBudget: one key's attempts cancelled before sending are
// recorded up to its budget and counted beyond it; another key's, and
// other attempts of the same key, are recorded all the same, and the
// budget refills with the events' own clock.
func TestRecordCancelBudget(t *testing.T) {
	out := &sliceAppender{accept: true}
	r := NewRecorder(out, 0)
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	cancelled := func(key string, at time.Time) *usageevent.Event {
		ev := validEvent()
		ev.KeyID, ev.StartedAt = key, at
		ev.SendState, ev.FailureStage, ev.HTTPStatus = usageevent.SendDefinitelyNotSent, usageevent.StageClientCancelled, 0
		return ev
	}
	for range 1000 {
		r.Record(cancelled("flood", start))
	}
	for range 5 {
		r.Record(cancelled("other", start))
		ok := validEvent()
		ok.KeyID, ok.StartedAt = "flood", start
		r.Record(ok)
	}
	// Half a second later a flood key has CancelRate/2 tokens again.
	for range 10 {
		r.Record(cancelled("flood", start.Add(500*time.Millisecond)))
	}
	want := RecorderStats{Recorded: CancelBurst + 10 + CancelRate/2, OverKeyBudget: 1000 - CancelBurst + 10 - CancelRate/2}
	if diff := cmp.Diff(r.Stats(), want); diff != "" {
		t.Errorf("stats (-got +want):\n%s", diff)
	}
}

// TestKeyBudgetBounded: keys whose bucket has refilled are forgotten once
// the budget holds many keys, so its memory follows the active keys.
func TestKeyBudgetBounded(t *testing.T) {
	kb := NewKeyBudget(1, 2)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 * pruneAt {
		now = now.Add(100 * time.Millisecond) // each key is full again 2s after its Take
		if ok, _ := kb.Take(fmt.Sprint("k", i), now); !ok {
			t.Fatalf("key %d: first Take refused", i)
		}
	}
	if n := len(kb.keys); n > pruneAt {
		t.Errorf("holds %d keys after 10×%d one-off keys; want at most %d", n, pruneAt, pruneAt)
	}
	// A refused Take is reported with the next allowed one.
	for range 3 {
		kb.Take("busy", now)
	}
	if ok, refused := kb.Take("busy", now.Add(time.Second)); !ok || refused != 1 {
		t.Errorf("Take after a refusal = %v, %d; want true, 1", ok, refused)
	}
}
