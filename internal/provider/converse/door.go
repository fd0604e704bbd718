package converse

import (
	"mime"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/scootgate/scootgate/internal/provider"
)

// The client side of Converse (docs/api.md "Bedrock Converse"): its
// paths are Bedrock Runtime's, with the model id percent-encoded in them,
// so each endpoint is reached through a door (provider.Door) whose Match
// reads the escaped path, and whose writer frames the answer as Bedrock
// does: a stream as AWS event-stream messages, an error with its
// exception's name in x-amzn-ErrorType. The body is the endpoint's own
// request as it comes.

// door is the client path /model/{modelId}/{op}.
func door(op string, stream bool) *provider.Door {
	return &provider.Door{
		Platform: provider.Bedrock,
		Match: func(escapedPath string) (string, bool, bool, *provider.BodyError) {
			model, got, ok, err := ModelSegment(escapedPath)
			if !ok || got != op {
				return "", false, false, nil
			}
			return model, stream, true, err
		},
		Request: func(body []byte, model string, _ bool, _ http.Header) ([]byte, string, *provider.BodyError) {
			return body, model, nil
		},
		Writer: func(w http.ResponseWriter) provider.DoorWriter { return NewWriter(w) },
	}
}

// ModelSegment reads a Bedrock Runtime path as sent
// ([provider.BedrockModelSegment]).
func ModelSegment(escapedPath string) (model, op string, ok bool, err *provider.BodyError) {
	return provider.BedrockModelSegment(escapedPath)
}

// Writer is the Converse door's response writer. An SSE answer (the
// relayed stream, the node's own exception when it cuts one) is written
// as an AWS event stream, one message per event: an event as
// ":message-type" event with its type as ":event-type", an exception as
// ":message-type" exception with its name as ":exception-type", the data
// as the payload, unchanged; comments (keepalives) are dropped: an
// event-stream has none. An error answer, already Bedrock's document,
// gets its exception's name in x-amzn-ErrorType when the provider's did
// not come with one. Anything else passes unchanged. Not safe for
// concurrent use.
type Writer struct {
	w      http.ResponseWriter
	status int
	stream bool
	enc    *eventstream.Encoder
	frames provider.SSEFrames
	msg    eventstream.Message
	err    error // the first write error to the client, sticky
}

// NewWriter returns the door's writer around w.
func NewWriter(w http.ResponseWriter) *Writer { return &Writer{w: w} }

func (b *Writer) Header() http.Header         { return b.w.Header() }
func (b *Writer) Unwrap() http.ResponseWriter { return b.w }

func (b *Writer) WriteHeader(status int) {
	if b.status != 0 {
		return
	}
	b.status = status
	h := b.w.Header()
	switch {
	case status >= 400:
		if h.Get("X-Amzn-Errortype") == "" {
			h.Set("X-Amzn-Errortype", Exception(status))
		}
	case isSSE(h.Get("Content-Type")):
		b.stream = true
		h.Set("Content-Type", eventStreamType)
		h.Del("Content-Length")
		b.enc = eventstream.NewEncoder()
	}
	b.w.WriteHeader(status)
}

func (b *Writer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.WriteHeader(http.StatusOK)
	}
	if !b.stream {
		return b.w.Write(p)
	}
	if b.err != nil {
		return 0, b.err
	}
	b.frames.Feed(p, b.frame)
	return len(p), b.err
}

// frame writes one SSE event as its event-stream message.
func (b *Writer) frame(typ string, data []byte) {
	if b.err != nil {
		return
	}
	if typ == "" {
		typ = "message" // the SSE default; the request path always names one
	}
	m := &b.msg
	m.Headers = m.Headers[:0]
	if isException(typ) {
		m.Headers.Set(":message-type", eventstream.StringValue("exception"))
		m.Headers.Set(":exception-type", eventstream.StringValue(typ))
	} else {
		m.Headers.Set(":message-type", eventstream.StringValue("event"))
		m.Headers.Set(":event-type", eventstream.StringValue(typ))
	}
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Payload = data
	b.err = b.enc.Encode(b.w, *m)
}

// FlushError sends what was written to the client.
func (b *Writer) FlushError() error {
	if b.err != nil {
		return b.err
	}
	return http.NewResponseController(b.w).Flush()
}

// Finish writes an event the stream left unterminated (the request path
// never does; a cut stream ends with its exception).
func (b *Writer) Finish() error {
	if b.stream {
		b.frames.Feed([]byte("\n\n"), b.frame)
	}
	return b.err
}

// isSSE reports whether a Content-Type is SSE's.
func isSSE(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

var _ provider.DoorWriter = (*Writer)(nil)
