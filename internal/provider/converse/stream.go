package converse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Token usage of the Converse API (docs/usage-events.md "Token usage"):
// inputTokens excludes the prompt-cache reads and writes, which
// cacheReadInputTokens and cacheWriteInputTokens count, so the total
// input is their sum; output is outputTokens; reasoning is not reported
// apart. A whole answer carries the usage object at its top level, a
// stream in its metadata event.

// usageForm reads a Converse usage object.
var usageForm = provider.UsageForm{
	Names:     [5]string{"inputTokens", "cacheWriteInputTokens", "cacheReadInputTokens", "outputTokens"},
	Normalize: normalize,
}

// normalize makes the normalized usage of the counts input, cache write,
// cache read, output.
func normalize(c [5]int64) usageevent.Usage {
	in, write, read := c[0], c[1], c[2]
	return provider.Clamp(usageevent.Usage{
		InputTokens:      provider.AddSat(provider.AddSat(in, write), read),
		OutputTokens:     c[3],
		CacheReadTokens:  read,
		CacheWriteTokens: write,
	})
}

// BodyUsage returns the usage of a whole Converse answer.
func BodyUsage(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	return provider.BodyUsage(body, &usageForm)
}

// bodyOutcome reads a whole answer's stop reason (Converse answers do
// not name the model).
func bodyOutcome(body []byte) provider.Outcome {
	var o provider.Outcome
	if raw, ok, err := jsonedit.Lookup(body, "stopReason"); err == nil && ok {
		if s, ok := provider.OutcomeString(raw); ok {
			o.FinishReasons = []string{s}
		}
	}
	return o
}

// Stream follows a Converse stream and keeps the usage of its metadata
// event. Not safe for concurrent use; one stream, one tracker.
type Stream struct {
	raw []byte // the last metadata event's usage object; nil until one
}

// Observe looks at the next event; it never hides one.
func (s *Stream) Observe(ev *sse.Event) (hide bool) {
	if ev.Type != "metadata" {
		return false
	}
	if raw, ok, err := jsonedit.Lookup(ev.Data, "usage"); err == nil && ok && provider.Usable(raw) {
		s.raw = append(s.raw[:0], raw...) // the event's buffer is reused after Observe
	}
	return false
}

// Usage returns the usage the stream reported, false when none.
func (s *Stream) Usage() (usageevent.Usage, json.RawMessage, bool) {
	if s.raw == nil {
		return usageevent.Usage{}, nil, false
	}
	return usageForm.Read(s.raw), bytes.Clone(s.raw), true
}

// streamOutcome keeps a traced stream's stop reason (messageStop).
type streamOutcome struct{ o provider.Outcome }

func (s *streamOutcome) Observe(ev *sse.Event) {
	if ev.Type == "messageStop" {
		s.o = bodyOutcome(ev.Data)
	}
}

func (s *streamOutcome) Outcome() provider.Outcome { return s.o }

// ErrEventStream is a Bedrock event stream the node cannot read: a frame
// whose checksum or length is wrong, or a message without the headers
// Bedrock sends. Nothing of such a frame reaches the client; the request
// path treats it as the provider failing mid-stream.
var ErrEventStream = errors.New("converse: bad bedrock event stream")

// newEventStream reads a Bedrock Converse event stream (AWS event-stream
// framing, decoded and CRC-checked by the AWS SDK's codec) and yields one
// SSE event per message, in order: "event: {:event-type}" (or the
// exception's {:exception-type}) and the payload as data, its bytes
// unchanged (a payload with line breaks is several data lines, which an
// SSE reader joins back).
func newEventStream(r io.Reader) *provider.AWSEventStream {
	return provider.NewAWSEventStream(r, ErrEventStream, frame)
}

// frame appends the SSE event of one message to out.
func frame(m eventstream.Message, out []byte) ([]byte, error) {
	var typ string
	payload := m.Payload
	switch provider.EventStreamHeader(m.Headers, ":message-type") {
	case "event":
		typ = provider.EventStreamHeader(m.Headers, ":event-type")
	case "exception":
		typ = provider.EventStreamHeader(m.Headers, ":exception-type")
		if !isException(typ) {
			typ = "internalServerException" // an exception the node must not read as an event
		}
	case "error":
		// A service error in the stream: no payload, its code and message
		// in headers.
		typ = "internalServerException"
		payload = ErrorBody(provider.EventStreamHeader(m.Headers, ":error-code") + ": " + provider.EventStreamHeader(m.Headers, ":error-message"))
	default:
		return out, fmt.Errorf("%w: a message of unknown type", ErrEventStream)
	}
	if !validType(typ) {
		return out, fmt.Errorf("%w: a message without a usable type", ErrEventStream)
	}
	return appendEvent(out, typ, payload), nil
}

// validType reports whether typ can be an SSE event type as sent: not
// empty, without line breaks.
func validType(typ string) bool {
	if typ == "" {
		return false
	}
	for i := range len(typ) {
		if c := typ[i]; c == '\r' || c == '\n' {
			return false
		}
	}
	return true
}

// appendEvent appends the SSE event of one message: its type, then each
// line of its payload as a data line.
func appendEvent(out []byte, typ string, payload []byte) []byte {
	out = append(out, "event: "...)
	out = append(out, typ...)
	out = append(out, '\n')
	if len(payload) == 0 {
		out = append(out, "data: \n"...)
	}
	for line := range bytes.Lines(payload) {
		out = append(out, "data: "...)
		out = append(out, bytes.TrimRight(line, "\r\n")...)
		out = append(out, '\n')
	}
	return append(out, '\n')
}
