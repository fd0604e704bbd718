package usage

import (
	"bytes"
	"encoding/json"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// normalizeResponses derives the normalized counts from an OpenAI
// Responses usage object: input_tokens includes the cached tokens
// (input_tokens_details.cached_tokens), output_tokens includes the
// reasoning tokens (output_tokens_details.reasoning_tokens), as in Chat
// Completions under other names.
func normalizeResponses(obj []byte) usageevent.Usage {
	v := lookup4(obj, [4]string{"input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details"})
	u := usageevent.Usage{
		InputTokens:     count(v[0]),
		OutputTokens:    count(v[1]),
		CacheReadTokens: inner(v[2], "cached_tokens"),
		ReasoningTokens: inner(v[3], "reasoning_tokens"),
	}
	return clamp(u)
}

// FromResponsesBody returns the usage of a non-stream OpenAI Responses
// answer (the response object's top-level usage), like [FromOpenAIBody].
func FromResponsesBody(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	return fromBody(body, normalizeResponses)
}

// ResponsesStream follows an OpenAI Responses stream. Usage arrives once,
// in the response object of the terminal event (response.completed,
// response.incomplete or response.failed); the response objects of earlier
// events (response.created, response.in_progress) say "usage":null. The
// tracker keeps the last usage object of any event's "response", so it
// needs no list of event types. It never hides an event. One stream, one
// tracker.
type ResponsesStream struct {
	raw []byte // copy of the last usage object seen; nil until one is
}

// NewResponsesStream returns a tracker for one Responses stream.
func NewResponsesStream() *ResponsesStream { return &ResponsesStream{} }

// Observe looks at the next event of the stream, in order. An event
// without a usage object (every delta) costs a byte search.
func (s *ResponsesStream) Observe(ev *sse.Event) (hide bool) {
	if !mayHaveUsage(ev.Data) {
		return false
	}
	resp, ok, err := jsonedit.Lookup(ev.Data, "response")
	if err != nil || !ok || !isObject(resp) {
		return false
	}
	if raw, ok, err := jsonedit.Lookup(resp, "usage"); err == nil && ok && usable(raw) {
		s.raw = append(s.raw[:0], raw...)
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
	return normalizeResponses(s.raw), bytes.Clone(s.raw), true
}
