package usage

import (
	"bytes"
	"encoding/json"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// AnthropicStream follows an Anthropic Messages stream and merges the usage
// of message_start with that of every message_delta. It is not safe for
// concurrent use; one stream, one tracker.
type AnthropicStream struct {
	merged []byte // merged usage object; nil until the first one
	key    []byte // scratch: a member's key with its quotes
}

// NewAnthropicStream returns a tracker for one stream.
func NewAnthropicStream() *AnthropicStream { return &AnthropicStream{} }

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
func (s *AnthropicStream) Observe(ev *sse.Event) (hide bool) {
	switch ev.Type {
	case "message_start":
		msg, ok, err := jsonedit.Lookup(ev.Data, "message")
		if err != nil || !ok || !isObject(msg) {
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
// MaxRawUsageBytes, leaves the last good merge.
func (s *AnthropicStream) merge(raw []byte) {
	if !usable(raw) {
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
		case exists && bytes.Equal(v, jsonNull):
			continue // null does not erase a count already seen
		case exists:
			merged, _, err = jsonedit.Replace(merged, key, v)
		default:
			merged, err = jsonedit.Insert(merged, key, v)
		}
		if err != nil || len(merged) > MaxRawUsageBytes {
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
func (s *AnthropicStream) Usage() (usageevent.Usage, json.RawMessage, bool) {
	if s.merged == nil {
		return usageevent.Usage{}, nil, false
	}
	return normalizeAnthropic(s.merged), bytes.Clone(s.merged), true
}
