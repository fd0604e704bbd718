package openai

import (
	"bytes"
	"encoding/json"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Token usage of the OpenAI API (docs/usage-events.md "Token usage"):
//
//	          Chat Completions, Embeddings                Responses
//	input     prompt_tokens (already includes cached)     input_tokens (the same)
//	output    completion_tokens                           output_tokens
//	cache rd  prompt_tokens_details.cached_tokens          input_tokens_details.cached_tokens
//	cache wr  0 (not reported)                            0
//	reasoning completion_tokens_details.reasoning_tokens   output_tokens_details.reasoning_tokens
//
// Chat Completions streams report usage only when asked
// (stream_options.include_usage): the node asks when the client did not
// (Request.AskUsage) and then hides the usage-only chunk from it. Responses
// streams carry it in the response object of their terminal event.

// chatUsage and responsesUsage read the usage objects of Chat Completions
// (and Embeddings) and of Responses: the input already includes the
// cached tokens, the output the reasoning tokens.
var (
	chatUsage = provider.UsageForm{
		Names:     [5]string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"},
		Inner:     [5]string{2: "cached_tokens", 3: "reasoning_tokens"},
		Normalize: normalize,
	}
	responsesUsage = provider.UsageForm{
		Names:     [5]string{"input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details"},
		Inner:     [5]string{2: "cached_tokens", 3: "reasoning_tokens"},
		Normalize: normalize,
	}
)

// normalize makes the normalized usage of the counts input, output,
// cached, reasoning.
func normalize(c [5]int64) usageevent.Usage {
	return provider.Clamp(usageevent.Usage{
		InputTokens:     c[0],
		OutputTokens:    c[1],
		CacheReadTokens: c[2],
		ReasoningTokens: c[3],
	})
}

// ChatBodyUsage returns the usage of a non-stream Chat Completions or
// Embeddings answer: the normalized counts, a copy of the provider's usage
// object, and true; or false when the body has none.
func ChatBodyUsage(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	return provider.BodyUsage(body, &chatUsage)
}

// ResponsesBodyUsage returns the usage of a non-stream Responses answer
// (the response object's top-level usage), like [ChatBodyUsage].
func ResponsesBodyUsage(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	return provider.BodyUsage(body, &responsesUsage)
}

// ChatStream follows a Chat Completions stream: it keeps the last usage
// object the provider sent and tells the relay which chunk to hide. It is
// not safe for concurrent use; one stream, one tracker.
type ChatStream struct {
	hideUsageChunk bool
	raw            []byte // copy of the last usage object seen; reused
	usage          usageevent.Usage
	seen           bool
}

// NewChatStream returns a tracker for one stream. hideUsageChunk says that
// the node asked for usage the client did not (Request.AskUsage was
// applied): the usage-only chunk is then hidden from the client
// (docs/api.md "Streams").
func NewChatStream(hideUsageChunk bool) *ChatStream {
	return &ChatStream{hideUsageChunk: hideUsageChunk}
}

var usageKey = provider.NewKey("usage")

// Observe looks at the next event of the stream, in order, and reports
// whether the relay must not pass it to the client. ev is not kept.
//
// A chunk whose top-level "usage" is an object updates the usage (the last
// one wins: OpenAI sends one, some compatible servers repeat a cumulative
// one on every chunk). Such a chunk is hidden only when hideUsageChunk is
// set and it is the usage-only chunk: "choices" absent, null or empty, and
// no "error" member. A chunk that carries usage together with choices is
// never hidden, because it carries content too; a client that did not ask
// for usage then sees its usage member, as it would without the gateway.
// Comments, "[DONE]", malformed chunks and chunks without usage are never
// hidden.
//
// Almost every chunk of a stream that asked for usage ends with
// "usage":null: those are settled by their last bytes, other chunks
// without usage by a byte search ([provider.MayHaveMember]), none by
// parsing, and no chunk without usage allocates.
func (s *ChatStream) Observe(ev *sse.Event) (hide bool) {
	if !provider.MayHaveMember(ev.Data, usageKey) {
		return false
	}
	u, raw, ok := provider.FindUsage(ev.Data, "usage", &chatUsage)
	if !ok {
		return false
	}
	s.raw = append(s.raw[:0], raw...)
	s.usage, s.seen = u, true
	return s.hideUsageChunk && usageOnly(ev.Data)
}

// Usage returns the normalized usage, a copy of the last usage object the
// provider sent, and true; or false when the stream carried none (the
// client did not ask and the node did not either, or the stream ended
// before the usage chunk).
func (s *ChatStream) Usage() (usageevent.Usage, json.RawMessage, bool) {
	if !s.seen {
		return usageevent.Usage{}, nil, false
	}
	return s.usage, bytes.Clone(s.raw), true
}

var jsonNull = []byte("null")

// usageOnly reports whether a chunk with a usage object is the usage-only
// chunk: no choices to show and no error.
func usageOnly(chunk []byte) bool {
	if _, ok, _ := jsonedit.Lookup(chunk, "error"); ok {
		return false
	}
	choices, ok, err := jsonedit.Lookup(chunk, "choices")
	if err != nil {
		return false
	}
	return !ok || bytes.Equal(choices, jsonNull) || isEmptyArray(choices)
}

// isEmptyArray reports whether raw, a valid JSON value, is [] (with any
// white space inside).
func isEmptyArray(raw []byte) bool {
	return len(raw) >= 2 && raw[0] == '[' && !provider.NonEmptyArray(raw)
}

// ResponsesStream follows a Responses stream. Usage arrives once, in the
// response object of the terminal event (response.completed,
// response.incomplete or response.failed); the response objects of earlier
// events (response.created, response.in_progress) say "usage":null. The
// tracker keeps the last usage object of any event's "response", so it
// needs no list of event types. It never hides an event. One stream, one
// tracker.
type ResponsesStream struct {
	raw   []byte // copy of the last usage object seen; nil until one is
	usage usageevent.Usage
}

// NewResponsesStream returns a tracker for one Responses stream.
func NewResponsesStream() *ResponsesStream { return &ResponsesStream{} }

// Observe looks at the next event of the stream, in order. An event
// without a usage object (every delta) costs a byte search.
func (s *ResponsesStream) Observe(ev *sse.Event) (hide bool) {
	if !provider.MayHaveValue(ev.Data, usageKey) {
		return false
	}
	resp, ok, err := jsonedit.Lookup(ev.Data, "response")
	if err != nil || !ok || !provider.Object(resp) {
		return false
	}
	if u, raw, ok := provider.FindUsage(resp, "usage", &responsesUsage); ok {
		s.raw, s.usage = append(s.raw[:0], raw...), u
	}
	return false
}

// Usage returns the normalized usage, a copy of the provider's usage
// object, and true; or false when the stream ended before an event carried
// one.
func (s *ResponsesStream) Usage() (usageevent.Usage, json.RawMessage, bool) {
	if s.raw == nil {
		return usageevent.Usage{}, nil, false
	}
	return s.usage, bytes.Clone(s.raw), true
}

// RerankBodyUsage returns the usage of a rerank answer. Jina and vLLM
// report a "usage" object (prompt_tokens and/or total_tokens: a rerank
// model only reads, so the input is prompt_tokens, else total_tokens);
// Cohere reports meta.billed_units (search_units, input_tokens,
// output_tokens). The counts that are tokens become the normalized ones;
// the raw object kept is the one read ("usage", or "billed_units", whose
// search_units are what Cohere bills).
func RerankBodyUsage(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	if raw, ok, err := jsonedit.Lookup(body, "usage"); err == nil && ok && provider.Usable(raw) {
		v := provider.Lookup4(raw, [4]string{"prompt_tokens", "total_tokens", "completion_tokens", ""})
		in := provider.Count(v[0])
		if v[0] == nil {
			in = provider.Count(v[1])
		}
		return provider.Clamp(usageevent.Usage{InputTokens: in, OutputTokens: provider.Count(v[2])}), bytes.Clone(raw), true
	}
	meta, ok, err := jsonedit.Lookup(body, "meta")
	if err != nil || !ok || !provider.Object(meta) {
		return usageevent.Usage{}, nil, false
	}
	billed, ok, err := jsonedit.Lookup(meta, "billed_units")
	if err != nil || !ok || !provider.Usable(billed) {
		return usageevent.Usage{}, nil, false
	}
	v := provider.Lookup4(billed, [4]string{"input_tokens", "output_tokens", "", ""})
	return provider.Clamp(usageevent.Usage{InputTokens: provider.Count(v[0]), OutputTokens: provider.Count(v[1])}), bytes.Clone(billed), true
}

// TranscriptStream follows a transcription or image stream: the usage is
// the top-level "usage" of an event (transcript.text.done's,
// image_generation.completed's). It never hides
// an event. One stream, one tracker.
type TranscriptStream struct {
	raw   []byte
	usage usageevent.Usage
}

// Observe keeps the last usage object seen.
func (s *TranscriptStream) Observe(ev *sse.Event) (hide bool) {
	if !provider.MayHaveMember(ev.Data, usageKey) {
		return false
	}
	if u, raw, ok := provider.FindUsage(ev.Data, "usage", &responsesUsage); ok {
		s.raw, s.usage = append(s.raw[:0], raw...), u
	}
	return false
}

// Usage returns the normalized usage (input_tokens, output_tokens), a
// copy of the provider's object, and true; or false when no event
// carried one.
func (s *TranscriptStream) Usage() (usageevent.Usage, json.RawMessage, bool) {
	if s.raw == nil {
		return usageevent.Usage{}, nil, false
	}
	return s.usage, bytes.Clone(s.raw), true
}
