package openai

import (
	"encoding/json"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
)

// addChoices appends the finish_reason of every element of the top-level
// "choices" array of a Chat Completions document, in order.
func addChoices(o *provider.Outcome, doc []byte) {
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
		o.AddReason(c.FinishReason)
	}
}

// ChatBodyOutcome reads the Outcome of a non-stream Chat Completions (or
// Embeddings) answer: the top-level "model" and each
// choices[].finish_reason.
func ChatBodyOutcome(body []byte) provider.Outcome {
	var o provider.Outcome
	o.SetModel(body, "model")
	addChoices(&o, body)
	return o
}

// responseOutcome reads a Responses object into o: its "model", and, when
// final, its finish reason: incomplete_details.reason when the response is
// incomplete ("max_output_tokens", "content_filter"), otherwise its
// "status" ("completed", "failed", "cancelled").
func responseOutcome(o *provider.Outcome, resp []byte, final bool) {
	o.SetModel(resp, "model")
	if !final {
		return
	}
	o.FinishReasons = o.FinishReasons[:0]
	if d, ok, err := jsonedit.Lookup(resp, "incomplete_details"); err == nil && ok && provider.Object(d) {
		if raw, ok, err := jsonedit.Lookup(d, "reason"); err == nil && ok {
			o.AddReason(raw)
		}
	}
	if len(o.FinishReasons) == 0 {
		if raw, ok, err := jsonedit.Lookup(resp, "status"); err == nil && ok {
			o.AddReason(raw)
		}
	}
}

// ResponsesBodyOutcome reads the Outcome of a non-stream Responses answer,
// the response object.
func ResponsesBodyOutcome(body []byte) provider.Outcome {
	var o provider.Outcome
	responseOutcome(&o, body, true)
	return o
}

var finishReasonKey = provider.NewKey("finish_reason")

// ChatOutcome follows a Chat Completions stream for its Outcome: the model
// of the first chunk that names one, and every non-null
// choices[].finish_reason in the order they arrive. One stream, one
// tracker; not safe for concurrent use.
type ChatOutcome struct{ o provider.Outcome }

// Observe looks at the next event of the stream. A chunk whose every
// finish_reason is null costs a byte search once the model is known.
func (t *ChatOutcome) Observe(ev *sse.Event) {
	if len(ev.Data) == 0 || ev.Data[0] != '{' {
		return // [DONE], comments
	}
	if t.o.Model == "" {
		t.o.SetModel(ev.Data, "model")
	}
	if provider.MayHaveValue(ev.Data, finishReasonKey) {
		addChoices(&t.o, ev.Data)
	}
}

// Outcome returns what the stream said so far.
func (t *ChatOutcome) Outcome() provider.Outcome { return t.o }

// ResponsesOutcome follows a Responses stream for its Outcome, from the
// response object of its lifecycle events: the model of any, the finish
// reason of the terminal one (response.completed, response.incomplete,
// response.failed). One stream, one tracker.
type ResponsesOutcome struct{ o provider.Outcome }

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
	if err != nil || !ok || !provider.Object(resp) {
		return
	}
	responseOutcome(&t.o, resp, final)
}

// Outcome returns what the stream said so far.
func (t *ResponsesOutcome) Outcome() provider.Outcome { return t.o }
