package usage

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// lookupCount and lookupNested are the per-key reading of a usage object
// that lookup4 replaces: one jsonedit.Lookup per key.
func lookupCount(obj []byte, key string) int64 { return member(obj, key) }

func lookupNested(obj []byte, outer, key string) int64 {
	raw, ok, err := jsonedit.Lookup(obj, outer)
	if err != nil || !ok || !isObject(raw) {
		return 0
	}
	return member(raw, key)
}

// TestNormalizeOnePass: the one-pass normalizers give what one Lookup per
// key gives, over generated usage objects: duplicate keys (the last wins),
// escaped keys, nulls, floats, nested and malformed objects.
func TestNormalizeOnePass(t *testing.T) {
	keys := []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details",
		"input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details",
		"cache_creation_input_tokens", "cache_read_input_tokens", "cached_tokens", "reasoning_tokens",
		`prompt_tok\u0065ns`, `input_t\u006fkens`, "other"}
	values := []string{"0", "7", "12.0", "12.5", "-3", "null", `"9"`, "1e3", "99999999999999999999", "[]", "{}", "true"}
	r := rand.New(rand.NewPCG(3, 4))
	var gen func(depth int) string
	gen = func(depth int) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range r.IntN(9) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + keys[r.IntN(len(keys))] + `":`)
			if depth < 2 && r.IntN(4) == 0 {
				b.WriteString(gen(depth + 1))
			} else {
				b.WriteString(values[r.IntN(len(values))])
			}
		}
		b.WriteByte('}')
		return b.String()
	}
	for n := range 20000 {
		obj := gen(0)
		if n%7 == 0 && len(obj) > 2 {
			obj = obj[:r.IntN(len(obj))] // malformed
		}
		b := []byte(obj)
		want := clamp(usageevent.Usage{
			InputTokens:     lookupCount(b, "prompt_tokens"),
			OutputTokens:    lookupCount(b, "completion_tokens"),
			CacheReadTokens: lookupNested(b, "prompt_tokens_details", "cached_tokens"),
			ReasoningTokens: lookupNested(b, "completion_tokens_details", "reasoning_tokens"),
		})
		if got := normalizeOpenAI(b); got != want {
			t.Fatalf("openai %s: %+v, want %+v", obj, got, want)
		}
		want = clamp(usageevent.Usage{
			InputTokens:     lookupCount(b, "input_tokens"),
			OutputTokens:    lookupCount(b, "output_tokens"),
			CacheReadTokens: lookupNested(b, "input_tokens_details", "cached_tokens"),
			ReasoningTokens: lookupNested(b, "output_tokens_details", "reasoning_tokens"),
		})
		if got := normalizeResponses(b); got != want {
			t.Fatalf("responses %s: %+v, want %+v", obj, got, want)
		}
		in, write, read := lookupCount(b, "input_tokens"), lookupCount(b, "cache_creation_input_tokens"), lookupCount(b, "cache_read_input_tokens")
		want = clamp(usageevent.Usage{
			InputTokens: addSat(addSat(in, write), read), OutputTokens: lookupCount(b, "output_tokens"),
			CacheReadTokens: read, CacheWriteTokens: write,
		})
		if got := normalizeAnthropic(b); got != want {
			t.Fatalf("anthropic %s: %+v, want %+v", obj, got, want)
		}
	}
}

// BenchmarkNormalize reads the usage object of a chat completion, a
// Responses answer and an Anthropic message, one Lookup per key
// ("per-key", the reading lookup4 replaced) and in one pass.
func BenchmarkNormalize(b *testing.B) {
	oa := []byte(`{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":64,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`)
	rs := []byte(`{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":1500}`)
	an := []byte(`{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":1024,"output_tokens":300,"service_tier":"standard"}`)
	b.Run("per-key", func(b *testing.B) {
		for b.Loop() {
			_ = lookupCount(oa, "prompt_tokens") + lookupCount(oa, "completion_tokens") +
				lookupNested(oa, "prompt_tokens_details", "cached_tokens") + lookupNested(oa, "completion_tokens_details", "reasoning_tokens")
			_ = lookupCount(rs, "input_tokens") + lookupCount(rs, "output_tokens") +
				lookupNested(rs, "input_tokens_details", "cached_tokens") + lookupNested(rs, "output_tokens_details", "reasoning_tokens")
			_ = lookupCount(an, "input_tokens") + lookupCount(an, "cache_creation_input_tokens") +
				lookupCount(an, "cache_read_input_tokens") + lookupCount(an, "output_tokens")
		}
	})
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			_ = normalizeOpenAI(oa)
			_ = normalizeResponses(rs)
			_ = normalizeAnthropic(an)
		}
	})
}
