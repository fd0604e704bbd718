package usage

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// MaxRawUsageBytes bounds a provider usage object the package keeps. A
// larger one is ignored as if the provider had reported no usage: it would
// push the event past the MQTT payload limit, and no real provider sends
// one (theirs are a few hundred bytes).
const MaxRawUsageBytes = 16 << 10

// normalizeOpenAI derives the normalized counts from an OpenAI usage
// object (docs/usage-events.md "Token usage"): prompt_tokens already includes cached tokens,
// completion_tokens already includes reasoning tokens.
func normalizeOpenAI(obj []byte) usageevent.Usage {
	v := lookup4(obj, [4]string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"})
	u := usageevent.Usage{
		InputTokens:     count(v[0]),
		OutputTokens:    count(v[1]),
		CacheReadTokens: inner(v[2], "cached_tokens"),
		ReasoningTokens: inner(v[3], "reasoning_tokens"),
	}
	return clamp(u)
}

// normalizeAnthropic derives the normalized counts from an Anthropic usage
// object (docs/usage-events.md "Token usage"): input_tokens excludes cache reads and writes, so
// the three are added to give the total input.
func normalizeAnthropic(obj []byte) usageevent.Usage {
	v := lookup4(obj, [4]string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"})
	in, write, read := count(v[0]), count(v[1]), count(v[2])
	u := usageevent.Usage{
		InputTokens:      addSat(addSat(in, write), read),
		OutputTokens:     count(v[3]),
		CacheReadTokens:  read,
		CacheWriteTokens: write,
	}
	return clamp(u)
}

// clamp enforces the subset rules of usageevent.Usage on provider numbers
// that break them (a cached count above the prompt count), so that every
// event validates; the provider's own numbers stay in the raw object.
func clamp(u usageevent.Usage) usageevent.Usage {
	u.CacheReadTokens = min(u.CacheReadTokens, u.InputTokens)
	u.CacheWriteTokens = min(u.CacheWriteTokens, u.InputTokens-u.CacheReadTokens)
	u.ReasoningTokens = min(u.ReasoningTokens, u.OutputTokens)
	return u
}

// addSat adds two non-negative counts, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// lookup4 returns, for each of keys, what jsonedit.Lookup(obj, key)
// returns (the value of the last top-level member of that name, nil when
// there is none), in one pass over obj instead of one per key; all nil
// when obj is malformed, where every Lookup fails.
func lookup4(obj []byte, keys [4]string) (vals [4][]byte) {
	it, err := jsonedit.Members(obj)
	if err != nil {
		return vals
	}
	for {
		m, ok, err := it.Next()
		if err != nil {
			return [4][]byte{}
		}
		if !ok {
			return vals
		}
		for i, k := range keys {
			if m.KeyIs(k) {
				vals[i] = m.Value
			}
		}
	}
}

// member returns the count in the top-level member key of the object obj,
// or 0 when it is absent, null, negative or not an integer.
func member(obj []byte, key string) int64 {
	raw, ok, err := jsonedit.Lookup(obj, key)
	if err != nil || !ok {
		return 0
	}
	return count(raw)
}

// inner returns the count at the member key of raw, 0 when raw is not an
// object (absent, null) or has no such count.
func inner(raw []byte, key string) int64 {
	if !isObject(raw) {
		return 0
	}
	return member(raw, key)
}

// count reads a JSON number that is a non-negative integer. Some
// OpenAI-compatible servers write counts as floats ("12.0"); those are
// accepted when integral. Anything else is 0.
func count(raw []byte) int64 {
	var n int64
	digits := true
	for _, c := range raw {
		if c < '0' || c > '9' {
			digits = false
			break
		}
		if n > (math.MaxInt64-int64(c-'0'))/10 {
			return math.MaxInt64 // saturate: JSON allows any size
		}
		n = n*10 + int64(c-'0')
	}
	if digits && len(raw) > 0 {
		return n
	}
	if len(raw) == 0 || raw[0] == '-' || raw[0] == '"' {
		return 0
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	switch {
	case err != nil || f != math.Trunc(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(f)
}

// isObject reports whether raw, a valid JSON value, is an object.
func isObject(raw []byte) bool { return len(raw) > 0 && raw[0] == '{' }

// usable reports whether raw is a usage object worth keeping.
func usable(raw []byte) bool { return isObject(raw) && len(raw) <= MaxRawUsageBytes }

// fromBody reads the top-level usage object of a non-stream response body.
func fromBody(body []byte, normalize func([]byte) usageevent.Usage) (usageevent.Usage, json.RawMessage, bool) {
	raw, ok, err := jsonedit.Lookup(body, "usage")
	if err != nil || !ok || !usable(raw) {
		return usageevent.Usage{}, nil, false
	}
	return normalize(raw), bytes.Clone(raw), true
}

// FromOpenAIBody returns the usage of a non-stream OpenAI Chat Completions
// response body: the normalized counts, a copy of the provider's usage
// object, and true; or false when the body has no usage object (an error
// answer, or not JSON).
func FromOpenAIBody(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	return fromBody(body, normalizeOpenAI)
}

// FromAnthropicBody returns the usage of a non-stream Anthropic Messages
// response body, like [FromOpenAIBody].
func FromAnthropicBody(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	return fromBody(body, normalizeAnthropic)
}
