package usage

import (
	"bytes"
	"encoding/json"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// OpenAIStream follows an OpenAI Chat Completions stream: it keeps the last
// usage object the provider sent and tells the relay which chunk to hide.
// It is not safe for concurrent use; one stream, one tracker.
type OpenAIStream struct {
	hideUsageChunk bool
	raw            []byte // copy of the last usage object seen; reused
	seen           bool
}

// NewOpenAIStream returns a tracker for one stream. hideUsageChunk is the
// injected result of [InjectIncludeUsage]: when true, the usage-only chunk
// the client did not ask for is hidden from it (docs/usage-events.md, docs/api.md "Streams").
func NewOpenAIStream(hideUsageChunk bool) *OpenAIStream {
	return &OpenAIStream{hideUsageChunk: hideUsageChunk}
}

var (
	usageKey   = []byte(`"usage"`)
	nullPrefix = []byte("null")
)

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
func (s *OpenAIStream) Observe(ev *sse.Event) (hide bool) {
	if !mayHaveUsage(ev.Data) {
		return false
	}
	raw, ok, err := jsonedit.Lookup(ev.Data, "usage")
	if err != nil || !ok || !usable(raw) {
		return false
	}
	s.raw = append(s.raw[:0], raw...)
	s.seen = true
	return s.hideUsageChunk && usageOnly(ev.Data)
}

// Usage returns the normalized usage, a copy of the last usage object the
// provider sent, and true; or false when the stream carried none (the
// client did not ask and the node did not inject, or the stream ended
// before the usage chunk).
func (s *OpenAIStream) Usage() (usageevent.Usage, json.RawMessage, bool) {
	if !s.seen {
		return usageevent.Usage{}, nil, false
	}
	return normalizeOpenAI(s.raw), bytes.Clone(s.raw), true
}

// mayHaveUsage is the cheap filter in front of the JSON scan: it reports
// false when data certainly has no top-level usage object. Almost every
// chunk of a stream that asked for usage says "usage":null; a chunk where
// every `"usage"` is followed by `:null` cannot have a usage object at the
// top level, whatever its nesting. The bytes `"usage"` cannot occur inside
// a JSON string (its quotes would be escaped), so only a key or the string
// value "usage" matches; a key spelled with escapes ("us\u0061ge") is not
// recognised.
func mayHaveUsage(data []byte) bool { return mayHaveValue(data, usageKey) }

// mayHaveValue is mayHaveUsage for any quoted member name key: false when
// every occurrence of key in data is followed by :null.
func mayHaveValue(data, key []byte) bool {
	for {
		i := bytes.Index(data, key)
		if i < 0 {
			return false
		}
		data = skipSpace(data[i+len(key):])
		if len(data) == 0 || data[0] != ':' {
			return true // the string value "usage", or malformed: look closer
		}
		data = skipSpace(data[1:])
		if !bytes.HasPrefix(data, nullPrefix) {
			return true
		}
		data = data[len(nullPrefix):]
	}
}

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
	return len(raw) >= 2 && raw[0] == '[' && len(skipSpace(raw[1:])) == 1
}

// skipSpace drops leading JSON white space (RFC 8259 §2).
func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
