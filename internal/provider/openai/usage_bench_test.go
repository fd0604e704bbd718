package openai

import (
	"strings"
	"testing"
)

// BenchmarkChatBodyUsage is the read of a non-stream chat completion
// answer's usage as OpenAI writes it: found in the whole answer, then
// normalized.
func BenchmarkChatBodyUsage(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-AbC123dEf456GhI789jKl","object":"chat.completion","created":1764590400,` +
		`"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("Hamlet, prince of Denmark, feigns madness to avenge his father's murder by his uncle Claudius; ", 6) +
		`\n\nOphelia, caught between them, drowns.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":25,"completion_tokens":120,"total_tokens":145,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":7,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},` +
		`"service_tier":"default","system_fingerprint":"fp_0ba0d124f1"}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		u, _, ok := ChatBodyUsage(body)
		if !ok || u.InputTokens != 25 || u.CacheReadTokens != 3 || u.ReasoningTokens != 7 {
			b.Fatalf("usage %+v, %t", u, ok)
		}
	}
}
