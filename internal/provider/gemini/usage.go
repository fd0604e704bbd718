package gemini

import (
	"bytes"
	"encoding/json"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Token usage of the Gemini API (docs/usage-events.md "Token usage"), the
// usageMetadata object of a GenerateContentResponse:
//
//	input     promptTokenCount (already includes cachedContentTokenCount)
//	          + toolUsePromptTokenCount (the tools' results, counted apart)
//	output    candidatesTokenCount + thoughtsTokenCount (thinking is not
//	          part of the candidates; Google bills it as output)
//	cache rd  cachedContentTokenCount
//	cache wr  0 (not reported)
//	reasoning thoughtsTokenCount
//
// so that input + output is totalTokenCount. A stream repeats usageMetadata
// on its chunks, each one the total so far: the last one is the usage.

const usageName = "usageMetadata"

var usageKey = provider.NewKey("usageMetadata")

// usageForm reads a usageMetadata object.
var usageForm = provider.UsageForm{
	Names:     [5]string{"promptTokenCount", "candidatesTokenCount", "cachedContentTokenCount", "thoughtsTokenCount", "toolUsePromptTokenCount"},
	Normalize: normalize,
}

// normalize makes the normalized usage of the counts prompt, candidates,
// cached content, thoughts, tool-use prompt.
func normalize(c [5]int64) usageevent.Usage {
	thoughts := c[3]
	return provider.Clamp(usageevent.Usage{
		InputTokens:     provider.AddSat(c[0], c[4]),
		OutputTokens:    provider.AddSat(c[1], thoughts),
		CacheReadTokens: c[2],
		ReasoningTokens: thoughts,
	})
}

// BodyUsage returns the usage of a non-stream answer: the usageMetadata of
// a GenerateContentResponse (or an embedding answer, when it has one), or,
// for a streamGenerateContent answer without alt=sse (one JSON array of
// chunks), the last chunk's that has one. False when there is none.
func BodyUsage(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	u, raw, ok := lastUsage(body)
	if !ok {
		return usageevent.Usage{}, nil, false
	}
	return u, bytes.Clone(raw), true
}

// lastUsage returns the usable usageMetadata of the object body, or of the
// last element of the array body that has one, with its normalized
// counts; false when there is none.
func lastUsage(body []byte) (u usageevent.Usage, raw []byte, ok bool) {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '[' {
		return provider.FindUsage(body, usageName, &usageForm)
	}
	it, err := jsonedit.Elements(body)
	if err != nil {
		return usageevent.Usage{}, nil, false
	}
	for {
		el, _, more, err := it.Next()
		if err != nil {
			return usageevent.Usage{}, nil, false
		}
		if !more {
			return u, raw, ok
		}
		if eu, eraw, eok := provider.FindUsage(el, usageName, &usageForm); eok {
			u, raw, ok = eu, eraw, true
		}
	}
}

// Stream follows a streamGenerateContent stream and keeps the last
// usageMetadata a chunk carried. It never hides a chunk. One stream, one
// tracker; not safe for concurrent use.
type Stream struct {
	raw   []byte // copy of the last usage object seen; nil until one is
	usage usageevent.Usage
}

// NewStream returns a tracker for one stream.
func NewStream() *Stream { return &Stream{} }

// Observe looks at the next chunk; one without usageMetadata costs a byte
// search.
func (s *Stream) Observe(ev *sse.Event) (hide bool) {
	if !provider.MayHaveValue(ev.Data, usageKey) {
		return false
	}
	if u, raw, ok := provider.FindUsage(ev.Data, usageName, &usageForm); ok {
		s.raw, s.usage = append(s.raw[:0], raw...), u
	}
	return false
}

// Usage returns the normalized usage, a copy of the last usageMetadata,
// and true; or false when no chunk carried one.
func (s *Stream) Usage() (usageevent.Usage, json.RawMessage, bool) {
	if s.raw == nil {
		return usageevent.Usage{}, nil, false
	}
	return s.usage, bytes.Clone(s.raw), true
}
