package anthropic

import (
	"bytes"
	"encoding/json"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Token usage of the Anthropic API (docs/usage-events.md "Token usage"):
// input_tokens excludes cache reads and writes, so the total input is
// input_tokens + cache_creation_input_tokens + cache_read_input_tokens;
// output is output_tokens (in a stream, the latest message_delta value);
// reasoning is not reported apart.

// usageForm reads an Anthropic usage object.
var usageForm = provider.UsageForm{
	Names:     [5]string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"},
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

// BodyUsage returns the usage of a non-stream Messages answer: the
// normalized counts, a copy of the provider's usage object, and true; or
// false when the body has none.
func BodyUsage(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	return provider.BodyUsage(body, &usageForm)
}

// Stream follows an Anthropic Messages stream and merges the usage
// of message_start with that of every message_delta. It is not safe for
// concurrent use; one stream, one tracker.
type Stream struct {
	merged []byte // merged usage object; nil until the first one
	key    []byte // scratch: a member's key with its quotes
}

// NewStream returns a tracker for one stream.
func NewStream() *Stream { return &Stream{} }

// Observe looks at the next event of the stream, in order. It never asks
// to hide an event: every Anthropic event reaches the client.
//
// The usage of message_start (message.usage: input and cache counts and a
// first, small output count) is the base. The usage of each message_delta
// is cumulative, not incremental (docs/usage-events.md "Token usage"), so each of its members replaces
// the member of the same name; a member the base lacks is added. A null in
// a later usage does not erase a count already seen (later events may
// leave a count out as null). Events are told apart by their "event:" type,
// as Anthropic names every event; other events cost nothing.
func (s *Stream) Observe(ev *sse.Event) (hide bool) {
	switch ev.Type {
	case "message_start":
		msg, ok, err := jsonedit.Lookup(ev.Data, "message")
		if err != nil || !ok || !provider.Object(msg) {
			return false
		}
		if raw, ok, err := jsonedit.Lookup(msg, "usage"); err == nil && ok {
			s.merge(raw)
		}
	case "message_delta":
		if raw, ok, err := jsonedit.Lookup(ev.Data, "usage"); err == nil && ok {
			s.merge(raw)
		}
	}
	return false
}

// merge overlays the usage object raw on the merged one, member by member
// in raw's order. A malformed raw, or a merge that would pass
// provider.MaxRawUsageBytes, leaves the last good merge.
func (s *Stream) merge(raw []byte) {
	if !provider.Usable(raw) {
		return
	}
	if s.merged == nil {
		s.merged = bytes.Clone(raw)
		return
	}
	it, err := jsonedit.Members(raw)
	if err != nil {
		return
	}
	merged := s.merged
	for {
		m, more, err := it.Next()
		if err != nil {
			return
		}
		if !more {
			break
		}
		// The key decoded as encoding/json decodes it (escapes, U+FFFD
		// for bad bytes): Lookup, Replace and Insert match decoded keys.
		s.key = append(append(append(s.key[:0], '"'), m.RawKey...), '"')
		key, ok := jsonedit.Unquote(s.key)
		if !ok {
			return
		}
		v := m.Value
		_, exists, err := jsonedit.Lookup(merged, key)
		switch {
		case err != nil:
			return
		case exists && string(v) == "null":
			continue // null does not erase a count already seen
		case exists:
			merged, _, err = jsonedit.Replace(merged, key, v)
		default:
			merged, err = jsonedit.Insert(merged, key, v)
		}
		if err != nil || len(merged) > provider.MaxRawUsageBytes {
			return // keep the last good merge
		}
	}
	s.merged = merged
}

// Usage returns the normalized usage, the merged usage object (a copy), and
// true; or false when neither message_start nor message_delta carried a
// usage object.
//
// The merged object is what ScootGate reports as the provider's native usage
// of a stream: the members of message_start's usage in their order, each
// replaced by its latest non-null value from message_delta, followed by the
// members only message_delta had. Member values are the provider's bytes.
func (s *Stream) Usage() (usageevent.Usage, json.RawMessage, bool) {
	if s.merged == nil {
		return usageevent.Usage{}, nil, false
	}
	return usageForm.Read(s.merged), bytes.Clone(s.merged), true
}
