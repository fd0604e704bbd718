package converse

import (
	"bytes"
	"mime"
	"net/http"
	"net/url"
	"strings"

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

// ModelSegment reads a Bedrock Runtime path as sent, "/model/{modelId}/{op}":
// the model id percent-decoded once, and the operation. ok is false for a
// path of another shape. An id that is empty, holds a "/" that was not
// encoded (the AWS SDKs encode an ARN's as %2F), is not valid
// percent-encoding, or still holds a percent-escape once decoded (doubly
// encoded: one reader would decode it once and another twice) is a
// *BodyError, with ok true.
func ModelSegment(escapedPath string) (model, op string, ok bool, err *provider.BodyError) {
	rest, found := strings.CutPrefix(escapedPath, "/model/")
	if !found {
		return "", "", false, nil
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", "", false, nil
	}
	seg, op := rest[:i], rest[i+1:]
	if op == "" || strings.IndexByte(op, '%') >= 0 {
		return "", "", false, nil // the operation is never encoded: not a path of the door
	}
	if seg == "" || strings.IndexByte(seg, '/') >= 0 {
		return "", op, true, &provider.BodyError{Code: "invalid_model", Msg: `the model id in the path must be one segment: percent-encode its "/" and ":" as %2F and %3A`}
	}
	id, uerr := url.PathUnescape(seg)
	if uerr != nil || id == "" || doublyEncoded(id) {
		return "", op, true, &provider.BodyError{Code: "non_canonical_path", Msg: "the model id in the path must be percent-encoded exactly once"}
	}
	return id, op, true, nil
}

// doublyEncoded reports whether s, once decoded, still holds a
// percent-escape.
func doublyEncoded(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; i = strings.IndexByte(s, '%') {
		if i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]) {
			return true
		}
		s = s[i+1:]
	}
	return false
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
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
	frames frames
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
	b.frames.feed(p, b.frame)
	return len(p), b.err
}

// frame writes one SSE event as its event-stream message.
func (b *Writer) frame(typ string, data []byte) {
	if b.err != nil {
		return
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
		b.frames.feed([]byte("\n\n"), b.frame)
	}
	return b.err
}

// isSSE reports whether a Content-Type is SSE's.
func isSSE(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// frames cuts an SSE byte stream, fed in any pieces, into its events (the
// event type and the data lines joined by "\n"), as the SSE specification
// dispatches them. Comments and fields other than event and data are
// dropped, and so is an event without data.
type frames struct {
	line   []byte // a line not yet ended
	skipLF bool   // the last piece ended in a CR: a LF first in the next ends nothing
	typ    string
	data   []byte
	has    bool // a data line was seen
}

func (s *frames) feed(p []byte, emit func(typ string, data []byte)) {
	if s.skipLF && len(p) > 0 {
		s.skipLF = false
		if p[0] == '\n' {
			p = p[1:]
		}
	}
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			s.line = append(s.line, p...)
			return
		}
		s.line = append(s.line, p[:i]...)
		// A CRLF ends one line, as do a lone CR and a lone LF.
		n := 1
		if p[i] == '\r' {
			if i+1 == len(p) {
				s.skipLF = true
			} else if p[i+1] == '\n' {
				n = 2
			}
		}
		p = p[i+n:]
		s.endLine(emit)
	}
}

func (s *frames) endLine(emit func(typ string, data []byte)) {
	line := s.line
	s.line = s.line[:0]
	if len(line) == 0 {
		if s.has {
			typ := s.typ
			if typ == "" {
				typ = "message" // the SSE default; the request path always names one
			}
			emit(typ, s.data)
		}
		s.typ, s.data, s.has = "", s.data[:0], false
		return
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		s.typ = string(value)
	case "data":
		if s.has {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.has = true
	}
}

var _ provider.DoorWriter = (*Writer)(nil)
