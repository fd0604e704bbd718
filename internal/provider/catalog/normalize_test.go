package catalog_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/openai"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// lookupCount and lookupNested read a usage object one jsonedit.Lookup per
// key: the reference for the one-pass readers.
func lookupCount(obj []byte, key string) int64 {
	raw, ok, err := jsonedit.Lookup(obj, key)
	if err != nil || !ok {
		return 0
	}
	return provider.Count(raw)
}

func lookupNested(obj []byte, outer, key string) int64 {
	raw, ok, err := jsonedit.Lookup(obj, outer)
	if err != nil || !ok || !provider.Object(raw) {
		return 0
	}
	return lookupCount(raw, key)
}

func chatUsage(body []byte) usageevent.Usage { u, _, _ := openai.ChatBodyUsage(body); return u }
func responsesUsage(body []byte) usageevent.Usage {
	u, _, _ := openai.ResponsesBodyUsage(body)
	return u
}
func anthropicUsage(body []byte) usageevent.Usage { u, _, _ := anthropic.BodyUsage(body); return u }

// TestNormalizeOnePass: each provider's one-pass reading of a usage object
// gives what one jsonedit.Lookup per key gives, over generated usage objects: duplicate keys (the last wins),
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
		body := []byte(`{"usage":` + obj + `}`)
		want := provider.Clamp(usageevent.Usage{
			InputTokens:     lookupCount(b, "prompt_tokens"),
			OutputTokens:    lookupCount(b, "completion_tokens"),
			CacheReadTokens: lookupNested(b, "prompt_tokens_details", "cached_tokens"),
			ReasoningTokens: lookupNested(b, "completion_tokens_details", "reasoning_tokens"),
		})
		if got := chatUsage(body); got != want {
			t.Fatalf("openai %s: %+v, want %+v", obj, got, want)
		}
		want = provider.Clamp(usageevent.Usage{
			InputTokens:     lookupCount(b, "input_tokens"),
			OutputTokens:    lookupCount(b, "output_tokens"),
			CacheReadTokens: lookupNested(b, "input_tokens_details", "cached_tokens"),
			ReasoningTokens: lookupNested(b, "output_tokens_details", "reasoning_tokens"),
		})
		if got := responsesUsage(body); got != want {
			t.Fatalf("responses %s: %+v, want %+v", obj, got, want)
		}
		in, write, read := lookupCount(b, "input_tokens"), lookupCount(b, "cache_creation_input_tokens"), lookupCount(b, "cache_read_input_tokens")
		want = provider.Clamp(usageevent.Usage{
			InputTokens: provider.AddSat(provider.AddSat(in, write), read), OutputTokens: lookupCount(b, "output_tokens"),
			CacheReadTokens: read, CacheWriteTokens: write,
		})
		if got := anthropicUsage(body); got != want {
			t.Fatalf("anthropic %s: %+v, want %+v", obj, got, want)
		}
	}
}
