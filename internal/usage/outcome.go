package usage

import (
	"encoding/json"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/sse"
)

// Outcome is what a provider's answer says about how it ended: the model
// that answered and the reason each generation stopped. It is for trace
// spans only (gen_ai.response.model, gen_ai.response.finish_reasons),
// never for usage events, and it is read only when the attempt is traced:
// an untraced attempt pays nothing for it.
//
// Both are the provider's own short strings. A value is kept only when it
// is a non-empty JSON string of at most MaxOutcomeString bytes (decoded),
// and at most MaxFinishReasons reasons are kept, so that a provider cannot
// push body content into a span.
type Outcome struct {
	Model         string
	FinishReasons []string
}

// Bounds of an Outcome.
const (
	MaxOutcomeString = 128
	MaxFinishReasons = 8
)

// outcomeString decodes raw when it is a short, non-empty JSON string.
func outcomeString(raw []byte) (string, bool) {
	if len(raw) > 6*MaxOutcomeString+2 { // the longest escaped form of a short string
		return "", false
	}
	s, ok := jsonedit.Unquote(raw)
	if !ok || s == "" || len(s) > MaxOutcomeString {
		return "", false
	}
	return s, true
}

// setModel takes the model named by the member key of the object obj.
func (o *Outcome) setModel(obj []byte, key string) {
	if raw, ok, err := jsonedit.Lookup(obj, key); err == nil && ok {
		if s, ok := outcomeString(raw); ok {
			o.Model = s
		}
	}
}

// addReason appends the reason raw, a JSON value, when it is one.
func (o *Outcome) addReason(raw []byte) {
	if len(o.FinishReasons) >= MaxFinishReasons {
		return
	}
	if s, ok := outcomeString(raw); ok {
		o.FinishReasons = append(o.FinishReasons, s)
	}
}

// addChoices appends the finish_reason of every element of the top-level
// "choices" array of an OpenAI Chat Completions document, in order.
func (o *Outcome) addChoices(doc []byte) {
	raw, ok, err := jsonedit.Lookup(doc, "choices")
	if err != nil || !ok || len(raw) == 0 || raw[0] != '[' {
		return
	}
	var choices []struct {
		FinishReason json.RawMessage `json:"finish_reason"`
	}
	if json.Unmarshal(raw, &choices) != nil {
		return
	}
	for _, c := range choices {
		o.addReason(c.FinishReason)
	}
}

// OpenAIBodyOutcome reads the Outcome of a non-stream OpenAI Chat
// Completions (or Embeddings) answer: the top-level "model" and each
// choices[].finish_reason.
func OpenAIBodyOutcome(body []byte) Outcome {
	var o Outcome
	o.setModel(body, "model")
	o.addChoices(body)
	return o
}

// responses reads a Responses object: its "model", and, when final, its
// finish reason: incomplete_details.reason when the response is
// incomplete ("max_output_tokens", "content_filter"), otherwise its
// "status" ("completed", "failed", "cancelled").
func (o *Outcome) responses(resp []byte, final bool) {
	o.setModel(resp, "model")
	if !final {
		return
	}
	o.FinishReasons = o.FinishReasons[:0]
	if d, ok, err := jsonedit.Lookup(resp, "incomplete_details"); err == nil && ok && isObject(d) {
		if raw, ok, err := jsonedit.Lookup(d, "reason"); err == nil && ok {
			o.addReason(raw)
		}
	}
	if len(o.FinishReasons) == 0 {
		if raw, ok, err := jsonedit.Lookup(resp, "status"); err == nil && ok {
			o.addReason(raw)
		}
	}
}

// ResponsesBodyOutcome reads the Outcome of a non-stream OpenAI Responses
// answer, the response object.
func ResponsesBodyOutcome(body []byte) Outcome {
	var o Outcome
	o.responses(body, true)
	return o
}

// AnthropicBodyOutcome reads the Outcome of a non-stream Anthropic
// Messages answer: the top-level "model" and "stop_reason".
func AnthropicBodyOutcome(body []byte) Outcome {
	var o Outcome
	o.setModel(body, "model")
	if raw, ok, err := jsonedit.Lookup(body, "stop_reason"); err == nil && ok {
		o.addReason(raw)
	}
	return o
}

var finishReasonKey = []byte(`"finish_reason"`)

// OpenAIOutcome follows an OpenAI Chat Completions stream for its
// Outcome: the model of the first chunk that names one, and every
// non-null choices[].finish_reason in the order they arrive. One stream,
// one tracker; not safe for concurrent use.
type OpenAIOutcome struct{ o Outcome }

// Observe looks at the next event of the stream. A chunk whose every
// finish_reason is null costs a byte search once the model is known.
func (t *OpenAIOutcome) Observe(ev *sse.Event) {
	if len(ev.Data) == 0 || ev.Data[0] != '{' {
		return // [DONE], comments
	}
	if t.o.Model == "" {
		t.o.setModel(ev.Data, "model")
	}
	if mayHaveValue(ev.Data, finishReasonKey) {
		t.o.addChoices(ev.Data)
	}
}

// Outcome returns what the stream said so far.
func (t *OpenAIOutcome) Outcome() Outcome { return t.o }

// ResponsesOutcome follows an OpenAI Responses stream for its Outcome,
// from the response object of its lifecycle events: the model of any,
// the finish reason of the terminal one (response.completed,
// response.incomplete, response.failed). One stream, one tracker.
type ResponsesOutcome struct{ o Outcome }

// Observe looks at the next event of the stream. Events are told apart
// by their type (the event: field, or the data's "type" when a
// compatible server leaves that out); deltas cost a string compare.
func (t *ResponsesOutcome) Observe(ev *sse.Event) {
	typ := ev.Type
	if typ == "" {
		raw, ok, err := jsonedit.Lookup(ev.Data, "type")
		if err != nil || !ok || len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
			return
		}
		typ = string(raw[1 : len(raw)-1])
	}
	var final bool
	switch typ {
	case "response.completed", "response.incomplete", "response.failed":
		final = true
	case "response.created", "response.in_progress", "response.queued":
	default:
		return
	}
	resp, ok, err := jsonedit.Lookup(ev.Data, "response")
	if err != nil || !ok || !isObject(resp) {
		return
	}
	t.o.responses(resp, final)
}

// Outcome returns what the stream said so far.
func (t *ResponsesOutcome) Outcome() Outcome { return t.o }

// AnthropicOutcome follows an Anthropic Messages stream for its Outcome:
// message.model of message_start and delta.stop_reason of message_delta.
// One stream, one tracker.
type AnthropicOutcome struct{ o Outcome }

// Observe looks at the next event of the stream; events other than
// message_start and message_delta cost nothing.
func (t *AnthropicOutcome) Observe(ev *sse.Event) {
	switch ev.Type {
	case "message_start":
		if msg, ok, err := jsonedit.Lookup(ev.Data, "message"); err == nil && ok && isObject(msg) {
			t.o.setModel(msg, "model")
		}
	case "message_delta":
		d, ok, err := jsonedit.Lookup(ev.Data, "delta")
		if err != nil || !ok || !isObject(d) {
			return
		}
		if raw, ok, err := jsonedit.Lookup(d, "stop_reason"); err == nil && ok {
			if s, ok := outcomeString(raw); ok {
				t.o.FinishReasons = append(t.o.FinishReasons[:0], s) // one message, one reason: the last
			}
		}
	}
}

// Outcome returns what the stream said so far.
func (t *AnthropicOutcome) Outcome() Outcome { return t.o }
