package openai

import (
	"bytes"
	"encoding/json"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/sse"
)

// responsesTypes are the Responses stream's event types (the API
// reference's streaming events), the commonest first.
var responsesTypes = []string{
	"response.output_text.delta", "response.function_call_arguments.delta",
	"response.reasoning_summary_text.delta", "response.reasoning_text.delta",
	"response.refusal.delta", "response.output_text.done",
	"response.output_text.annotation.added", "response.function_call_arguments.done",
	"response.reasoning_summary_text.done", "response.reasoning_text.done",
	"response.refusal.done", "response.content_part.added", "response.content_part.done",
	"response.output_item.added", "response.output_item.done",
	"response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
	"response.created", "response.in_progress", "response.queued",
	"response.completed", "response.incomplete", "response.failed", "error",
}

// keepalive is an SSE comment: every SSE parser skips it.
var keepalive = []byte(": keepalive\n\n")

var doneData = []byte("[DONE]")

// chatTerminal: [DONE] ends a Chat Completions stream; a chunk that is an
// error object is the provider's in-band failure.
func chatTerminal(ev *sse.Event) (done, failed bool) {
	if bytes.Equal(ev.Data, doneData) {
		return true, false
	}
	return false, bytes.HasPrefix(ev.Data, []byte(`{"error"`))
}

// ResponsesTerminal reports whether a Responses stream event is terminal:
// response.completed or response.incomplete (done), response.failed (done,
// failed); an `error` event is the provider's in-band failure. The type is
// the event: field, or, when a compatible server leaves that out, the
// data's top-level "type" string.
func ResponsesTerminal(ev *sse.Event) (done, failed bool) {
	if ev.Type != "" {
		return responsesKind(ev.Type)
	}
	if len(ev.Data) == 0 || ev.Data[0] != '{' {
		return false, false
	}
	raw, ok, err := jsonedit.Lookup(ev.Data, "type")
	if err != nil || !ok || len(raw) == 0 || raw[0] != '"' {
		return false, false
	}
	for _, t := range [...]string{"response.completed", "response.incomplete", "response.failed", "error"} {
		if jsonedit.EqualString(raw, t) {
			return responsesKind(t)
		}
	}
	return false, false
}

func responsesKind(t string) (done, failed bool) {
	switch t {
	case "response.completed", "response.incomplete":
		return true, false
	case "response.failed":
		return true, true
	case "error":
		return false, true
	}
	return false, false
}

// chatInBand is `data: {"error":…}`: the SDKs raise on a chunk with an
// "error" member.
func chatInBand(status int, code, msg, _ string, _ int) []byte {
	body := ErrorBody(status, code, msg)
	out := make([]byte, 0, len(body)+8)
	out = append(out, "data: "...)
	out = append(out, body...)
	return append(out, "\n\n"...)
}

type streamError struct {
	Type           string  `json:"type"`
	Code           string  `json:"code"`
	Message        string  `json:"message"`
	Param          *string `json:"param"`
	SequenceNumber int     `json:"sequence_number"`
}

// responsesInBand is the Responses stream's own error event, numbered
// after the n events relayed (sequence numbers start at 0).
func responsesInBand(status int, code, msg, _ string, n int) []byte {
	if code == "" {
		code = ErrorType(status)
	}
	body, err := json.Marshal(streamError{Type: "error", Code: code, Message: msg, SequenceNumber: n})
	if err != nil { // unreachable: only strings and an int
		body = []byte(`{"type":"error","code":"server_error","message":"internal error","param":null,"sequence_number":0}`)
	}
	out := make([]byte, 0, len(body)+24)
	out = append(out, "event: error\ndata: "...)
	out = append(out, body...)
	return append(out, "\n\n"...)
}

// transcriptTerminal: transcript.text.done (or [DONE]) ends a
// transcription stream; an event with an "error" member or of type
// "error" is the provider's in-band failure.
var transcriptTerminal = typedTerminal("transcript.text.done")

// typedTerminal returns the Terminal of a stream whose events name their
// type in the data's "type" (and, with some servers, in event:): an event
// of one of the done types (or [DONE]) ends it; one with an "error" member
// or of type "error" is the provider's in-band failure.
func typedTerminal(doneTypes ...string) func(ev *sse.Event) (done, failed bool) {
	return func(ev *sse.Event) (done, failed bool) {
		return typedKind(ev, doneTypes)
	}
}

func typedKind(ev *sse.Event, doneTypes []string) (done, failed bool) {
	if bytes.Equal(ev.Data, doneData) {
		return true, false
	}
	if len(ev.Data) == 0 || ev.Data[0] != '{' {
		return false, false
	}
	if _, ok, err := jsonedit.Lookup(ev.Data, "error"); err == nil && ok {
		return false, true
	}
	raw, ok, err := jsonedit.Lookup(ev.Data, "type")
	if err != nil || !ok {
		return false, false
	}
	for _, t := range doneTypes {
		if jsonedit.EqualString(raw, t) {
			return true, false
		}
	}
	return false, jsonedit.EqualString(raw, "error")
}
