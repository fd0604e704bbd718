package catalog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/openai"
	"github.com/scootgate/scootgate/internal/sse"
)

// readEvents returns the complete events of a transcript, each with its
// own copy of the bytes.
func readEvents(tb testing.TB, path string) []sse.Event {
	tb.Helper()
	in, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return parseEvents(tb, in)
}

func parseEvents(tb testing.TB, in []byte) []sse.Event {
	tb.Helper()
	rd := sse.NewReader(bytes.NewReader(in), 0)
	var evs []sse.Event
	for {
		ev, err := rd.Next()
		if err == io.EOF || errors.Is(err, sse.ErrTruncated) {
			return evs
		}
		if err != nil {
			tb.Fatal(err)
		}
		evs = append(evs, sse.Event{Type: ev.Type, Data: bytes.Clone(ev.Data), Raw: bytes.Clone(ev.Raw), Comment: ev.Comment})
	}
}

const openAIUsage = `{"prompt_tokens":1200,"completion_tokens":198,"total_tokens":1398,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`

// openAIStream is a 200-event chat completion stream: a role chunk, 196
// content chunks, a finish chunk, the usage chunk and [DONE]. usageMember
// is what every chunk but the last says about usage ("" = no member, as
// when the client did not ask for usage).
func openAIStream(tb testing.TB, usageMember string) []sse.Event {
	var b strings.Builder
	chunk := func(choices, usage string) {
		b.WriteString(`data: {"id":"chatcmpl-C1xQ7fR2kLmN8pVb3sT9uW0yZ","object":"chat.completion.chunk","created":1764410400,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":`)
		b.WriteString(choices)
		b.WriteString(usage)
		b.WriteString("}\n\n")
	}
	chunk(`[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`, usageMember)
	for i := range 196 {
		chunk(fmt.Sprintf(`[{"index":0,"delta":{"content":" word%d"},"logprobs":null,"finish_reason":null}]`, i), usageMember)
	}
	chunk(`[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`, usageMember)
	chunk(`[]`, `,"usage":`+openAIUsage)
	b.WriteString("data: [DONE]\n\n")
	evs := parseEvents(tb, []byte(b.String()))
	if len(evs) != 200 {
		tb.Fatalf("built %d events, want 200", len(evs))
	}
	return evs
}

// anthropicStream is a 200-event Messages stream: message_start with cache
// usage, a text block of 196 deltas, message_delta and message_stop.
func anthropicStream(tb testing.TB) []sse.Event {
	var b strings.Builder
	ev := func(typ, data string) { fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_01Hq4Z9yKxQw3nT7bV2cR8pL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,"cache_creation":{"ephemeral_5m_input_tokens":2048,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	for i := range 195 {
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" word%d"}}`, i))
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":12,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,"output_tokens":198}}`)
	ev("message_stop", `{"type":"message_stop"}`)
	evs := parseEvents(tb, []byte(b.String()))
	if len(evs) != 200 {
		tb.Fatalf("built %d events, want 200", len(evs))
	}
	return evs
}

// benchStream runs one tracker per stream over evs and reports per-event
// costs next to the per-stream ones.
func benchStream(b *testing.B, evs []sse.Event, newTracker func() provider.Tracker) {
	b.ReportAllocs()
	var bytesIn int64
	for i := range evs {
		bytesIn += int64(len(evs[i].Data))
	}
	b.SetBytes(bytesIn)
	for b.Loop() {
		tr := newTracker()
		for i := range evs {
			tr.Observe(&evs[i])
		}
		if _, _, ok := tr.Usage(); !ok {
			b.Fatal("no usage")
		}
	}
	n := float64(b.N) * float64(len(evs))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
}

func BenchmarkObserve(b *testing.B) {
	b.Run("openai/usage-null", func(b *testing.B) {
		benchStream(b, openAIStream(b, `,"usage":null`), func() provider.Tracker { return openai.NewChatStream(true) })
	})
	b.Run("openai/no-usage-member", func(b *testing.B) {
		benchStream(b, openAIStream(b, ""), func() provider.Tracker { return openai.NewChatStream(true) })
	})
	b.Run("anthropic", func(b *testing.B) {
		benchStream(b, anthropicStream(b), func() provider.Tracker { return anthropic.NewStream() })
	})
}

// BenchmarkObserveBaseline is what the prefilter avoids: decoding every
// chunk with encoding/json to find its usage.
func BenchmarkObserveBaseline(b *testing.B) {
	evs := openAIStream(b, `,"usage":null`)
	b.ReportAllocs()
	for b.Loop() {
		for i := range evs {
			var c struct {
				Choices []json.RawMessage `json:"choices"`
				Usage   json.RawMessage   `json:"usage"`
			}
			_ = json.Unmarshal(evs[i].Data, &c)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(b.N)*float64(len(evs))), "ns/event")
}

// TestObserveDoesNotAllocate pins the performance promise of the package
// doc: events without usage cost no allocation.
func TestObserveDoesNotAllocate(t *testing.T) {
	oai := openAIStream(t, `,"usage":null`)
	plain := openAIStream(t, "")
	ant := anthropicStream(t)
	o := openai.NewChatStream(true)
	a := anthropic.NewStream()
	for name, c := range map[string]struct {
		tr provider.Tracker
		ev *sse.Event
	}{
		"openai usage null":    {o, &oai[50]},
		"openai no usage":      {o, &plain[50]},
		"openai [DONE]":        {o, &oai[len(oai)-1]},
		"anthropic text delta": {a, &ant[50]},
		"anthropic stop":       {a, &ant[len(ant)-1]},
	} {
		if n := testing.AllocsPerRun(100, func() { c.tr.Observe(c.ev) }); n != 0 {
			t.Errorf("%s: %v allocations per event, want 0", name, n)
		}
	}
	// The usage chunk itself is scanned without allocating once the
	// tracker's buffer has grown.
	usageChunk := &oai[len(oai)-2]
	o.Observe(usageChunk)
	if n := testing.AllocsPerRun(100, func() { o.Observe(usageChunk) }); n != 0 {
		t.Errorf("openai usage chunk: %v allocations per event, want 0", n)
	}
}
