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

// normalize derives the normalized counts from a usageMetadata object.
func normalize(obj []byte) usageevent.Usage {
	v := provider.Lookup4(obj, [4]string{"promptTokenCount", "candidatesTokenCount", "cachedContentTokenCount", "thoughtsTokenCount"})
	tool := provider.Inner(obj, "toolUsePromptTokenCount")
	thoughts := provider.Count(v[3])
	return provider.Clamp(usageevent.Usage{
		InputTokens:     provider.AddSat(provider.Count(v[0]), tool),
		OutputTokens:    provider.AddSat(provider.Count(v[1]), thoughts),
		CacheReadTokens: provider.Count(v[2]),
		ReasoningTokens: thoughts,
	})
}

// BodyUsage returns the usage of a non-stream answer: the usageMetadata of
// a GenerateContentResponse (or an embedding answer, when it has one), or,
// for a streamGenerateContent answer without alt=sse (one JSON array of
// chunks), the last chunk's that has one. False when there is none.
func BodyUsage(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	raw := lastUsage(body)
	if raw == nil {
		return usageevent.Usage{}, nil, false
	}
	return normalize(raw), bytes.Clone(raw), true
}

// lastUsage returns the usable usageMetadata of the object body, or of the
// last element of the array body that has one; nil when there is none.
func lastUsage(body []byte) []byte {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '[' {
		return usageOf(body)
	}
	it, err := jsonedit.Elements(body)
	if err != nil {
		return nil
	}
	var last []byte
	for {
		el, _, ok, err := it.Next()
		if err != nil {
			return nil
		}
		if !ok {
			return last
		}
		if u := usageOf(el); u != nil {
			last = u
		}
	}
}

func usageOf(obj []byte) []byte {
	raw, ok, err := jsonedit.Lookup(obj, usageName)
	if err != nil || !ok || !provider.Usable(raw) {
		return nil
	}
	return raw
}

// Stream follows a streamGenerateContent stream and keeps the last
// usageMetadata a chunk carried. It never hides a chunk. One stream, one
// tracker; not safe for concurrent use.
type Stream struct {
	raw []byte // copy of the last usage object seen; nil until one is
}

// NewStream returns a tracker for one stream.
func NewStream() *Stream { return &Stream{} }

// Observe looks at the next chunk; one without usageMetadata costs a byte
// search.
func (s *Stream) Observe(ev *sse.Event) (hide bool) {
	if !provider.MayHaveValue(ev.Data, usageKey) {
		return false
	}
	if raw := usageOf(ev.Data); raw != nil {
		s.raw = append(s.raw[:0], raw...)
	}
	return false
}

// Usage returns the normalized usage, a copy of the last usageMetadata,
// and true; or false when no chunk carried one.
func (s *Stream) Usage() (usageevent.Usage, json.RawMessage, bool) {
	if s.raw == nil {
		return usageevent.Usage{}, nil, false
	}
	return normalize(s.raw), bytes.Clone(s.raw), true
}
