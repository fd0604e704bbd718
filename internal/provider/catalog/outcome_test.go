package catalog_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/openai"
	"github.com/scootgate/scootgate/internal/sse"
)

// TestBodyOutcome: the response model and finish reasons of each
// protocol's non-stream answer; anything but a short string is left out.
func TestBodyOutcome(t *testing.T) {
	long := `"` + strings.Repeat("x", provider.MaxOutcomeString+1) + `"`
	for _, c := range []struct {
		name string
		read func([]byte) provider.Outcome
		body string
		want provider.Outcome
	}{
		{"chat", openai.ChatBodyOutcome,
			`{"id":"c","model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"content":"secret"},"finish_reason":"stop"},{"index":1,"finish_reason":"length"}],"usage":{}}`,
			provider.Outcome{Model: "gpt-4o-2024-08-06", FinishReasons: []string{"stop", "length"}}},
		{"chat, null and odd reasons", openai.ChatBodyOutcome,
			`{"model":` + long + `,"choices":[{"finish_reason":null},{"finish_reason":{"x":1}},{"finish_reason":` + long + `},{"finish_reason":"tool_calls"}]}`,
			provider.Outcome{FinishReasons: []string{"tool_calls"}}},
		{"chat, many choices", openai.ChatBodyOutcome,
			`{"choices":[` + strings.TrimSuffix(strings.Repeat(`{"finish_reason":"stop"},`, 20), ",") + `]}`,
			provider.Outcome{FinishReasons: strings.Split(strings.TrimSuffix(strings.Repeat("stop,", provider.MaxFinishReasons), ","), ",")}},
		{"embeddings", openai.ChatBodyOutcome,
			`{"object":"list","data":[],"model":"text-embedding-3-small","usage":{"prompt_tokens":3}}`,
			provider.Outcome{Model: "text-embedding-3-small"}},
		{"not JSON", openai.ChatBodyOutcome, `upstream error`, provider.Outcome{}},
		{"responses", openai.ResponsesBodyOutcome,
			`{"id":"r","status":"completed","incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":[]}`,
			provider.Outcome{Model: "gpt-4.1-2025-04-14", FinishReasons: []string{"completed"}}},
		{"responses incomplete", openai.ResponsesBodyOutcome,
			`{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"model":"gpt-4.1"}`,
			provider.Outcome{Model: "gpt-4.1", FinishReasons: []string{"max_output_tokens"}}},
		{"messages", anthropic.BodyOutcome,
			`{"id":"msg","type":"message","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"secret"}],"stop_reason":"end_turn","usage":{}}`,
			provider.Outcome{Model: "claude-sonnet-4-5-20250929", FinishReasons: []string{"end_turn"}}},
		{"messages, escaped", anthropic.BodyOutcome,
			`{"model":"claude\u002dx","stop_reason":null}`,
			provider.Outcome{Model: "claude-x"}},
	} {
		if diff := cmp.Diff(c.read([]byte(c.body)), c.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", c.name, diff)
		}
	}
}

// TestStreamOutcome: the response model and finish reasons of each
// protocol's stream, from the events that carry them.
func TestStreamOutcome(t *testing.T) {
	for _, c := range []struct {
		name   string
		track  outcomeTracker
		stream string
		want   provider.Outcome
	}{
		{"chat", &openai.ChatOutcome{}, "" +
			`data: {"id":"c","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":"finish_reason"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"c","model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":1}}` + "\n\n" +
			"data: [DONE]\n\n",
			provider.Outcome{Model: "gpt-4o-2024-08-06", FinishReasons: []string{"stop"}}},
		{"responses", &openai.ResponsesOutcome{}, "" +
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\",\"model\":\"gpt-4.1-2025-04-14\"}}\n\n" +
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"secret\"}\n\n" +
			"event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"model\":\"gpt-4.1-2025-04-14\"}}\n\n",
			provider.Outcome{Model: "gpt-4.1-2025-04-14", FinishReasons: []string{"max_output_tokens"}}},
		{"responses without event names", &openai.ResponsesOutcome{}, "" +
			"data: {\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\",\"model\":\"m\"}}\n\n" +
			"data: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"incomplete_details\":null,\"model\":\"m\"}}\n\n",
			provider.Outcome{Model: "m", FinishReasons: []string{"completed"}}},
		{"responses cut before the end", &openai.ResponsesOutcome{},
			"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"status\":\"in_progress\",\"model\":\"m\"}}\n\n",
			provider.Outcome{Model: "m"}},
		{"messages", &anthropic.StreamOutcome{}, "" +
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg\",\"model\":\"claude-sonnet-4-5-20250929\",\"stop_reason\":null,\"usage\":{}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"secret\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			provider.Outcome{Model: "claude-sonnet-4-5-20250929", FinishReasons: []string{"max_tokens"}}},
	} {
		for _, ev := range parseEvents(t, []byte(c.stream)) {
			c.track.Observe(&ev)
		}
		if diff := cmp.Diff(c.track.Outcome(), c.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", c.name, diff)
		}
	}
}

type outcomeTracker interface {
	Observe(*sse.Event)
	Outcome() provider.Outcome
}

// BenchmarkOutcome is what a traced stream adds to BenchmarkObserve: the
// outcome tracker on the same events.
func BenchmarkOutcome(b *testing.B) {
	for _, c := range []struct {
		name  string
		evs   []sse.Event
		track func() outcomeTracker
	}{
		{"openai", openAIStream(b, `,"usage":null`), func() outcomeTracker { return &openai.ChatOutcome{} }},
		{"anthropic", anthropicStream(b), func() outcomeTracker { return &anthropic.StreamOutcome{} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tr := c.track()
				for i := range c.evs {
					tr.Observe(&c.evs[i])
				}
				if o := tr.Outcome(); o.Model == "" || len(o.FinishReasons) != 1 {
					b.Fatalf("outcome %+v", o)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(b.N)*float64(len(c.evs))), "ns/event")
		})
	}
}
