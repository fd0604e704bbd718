package catalog_test

import (
	"encoding/json"
	"testing"

	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/gemini"
	"github.com/scootgate/scootgate/internal/provider/openai"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
	"github.com/scootgate/scootgate/pkg/usd"
)

// TestCostOfEachProtocol prices each protocol's own usage shapes, read by
// its own parser, and compares with costs worked out by hand from the
// provider's numbers (docs/routing.md "Prices"): cache reads and writes
// at their prices, reasoning and thinking at the output price, and the
// long-context tier above its threshold.
func TestCostOfEachProtocol(t *testing.T) {
	claude := &routesnap.Price{Input: "3", Output: "15", CacheRead: "0.3", CacheWrite: "3.75",
		LongContext: &routesnap.PriceTier{AboveInputTokens: 200000, Input: "6", Output: "22.5", CacheRead: "0.6", CacheWrite: "7.5"}}
	gpt := &routesnap.Price{Input: "2.5", Output: "10", CacheRead: "1.25"}
	gem := &routesnap.Price{Input: "1.25", Output: "10", CacheRead: "0.125",
		LongContext: &routesnap.PriceTier{AboveInputTokens: 200000, Input: "2.5", Output: "15", CacheRead: "0.25"}}
	type parse func([]byte) (usageevent.Usage, json.RawMessage, bool)
	tests := []struct {
		name  string
		parse parse
		price *routesnap.Price
		body  string
		want  string // USD, worked out by hand
	}{
		{
			// 176 uncached × 2.5 + 1024 cached × 1.25 + 85 output (64 of
			// them reasoning) × 10, per million:
			// 0.00044 + 0.00128 + 0.00085 = 0.00257
			name: "openai chat, cache read and reasoning", parse: openai.ChatBodyUsage, price: gpt,
			body: `{"usage":{"prompt_tokens":1200,"completion_tokens":85,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":64}}}`,
			want: "0.00257",
		},
		{
			// 1000 × 2.5 + 500 × 10 (200 reasoning), per million: 0.0025 + 0.005
			name: "openai responses, reasoning", parse: openai.ResponsesBodyUsage, price: gpt,
			body: `{"object":"response","usage":{"input_tokens":1000,"output_tokens":500,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":200}}}`,
			want: "0.0075",
		},
		{
			// 12 × 3 + 2048 × 3.75 + 4096 × 0.3 + 153 × 15, per million:
			// 0.000036 + 0.00768 + 0.0012288 + 0.002295 = 0.0112398
			name: "anthropic, cache reads and writes", parse: anthropic.BodyUsage, price: claude,
			body: `{"usage":{"input_tokens":12,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,"output_tokens":153}}`,
			want: "0.0112398",
		},
		{
			// Exactly at the threshold (200000 input in all): base prices.
			// 150000 × 3 + 50000 × 0.3 + 1000 × 15 = 0.45 + 0.015 + 0.015
			name: "anthropic, at the long-context threshold", parse: anthropic.BodyUsage, price: claude,
			body: `{"usage":{"input_tokens":150000,"cache_read_input_tokens":50000,"output_tokens":1000}}`,
			want: "0.48",
		},
		{
			// One more input token: every token at the tier's prices.
			// 150001 × 6 + 50000 × 0.6 + 1000 × 22.5 = 0.900006 + 0.03 + 0.0225
			name: "anthropic, above the long-context threshold", parse: anthropic.BodyUsage, price: claude,
			body: `{"usage":{"input_tokens":150001,"cache_read_input_tokens":50000,"output_tokens":1000}}`,
			want: "0.952506",
		},
		{
			// input 1000 (400 cached) + 50 tool-use prompt; output 300
			// candidates + 700 thoughts: 650 × 1.25 + 400 × 0.125 + 1000 × 10
			// = 0.0008125 + 0.00005 + 0.01
			name: "gemini, cached content and thoughts", parse: gemini.BodyUsage, price: gem,
			body: `{"usageMetadata":{"promptTokenCount":1000,"toolUsePromptTokenCount":50,"cachedContentTokenCount":400,"candidatesTokenCount":300,"thoughtsTokenCount":700,"totalTokenCount":2050}}`,
			want: "0.0108625",
		},
		{
			// 250000 prompt (100000 cached), 2000 out: the tier.
			// 150000 × 2.5 + 100000 × 0.25 + 2000 × 15 = 0.375 + 0.025 + 0.03
			name: "gemini, long context", parse: gemini.BodyUsage, price: gem,
			body: `{"usageMetadata":{"promptTokenCount":250000,"cachedContentTokenCount":100000,"candidatesTokenCount":2000,"totalTokenCount":252000}}`,
			want: "0.43",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nu, _, ok := tt.parse([]byte(tt.body))
			if !ok {
				t.Fatal("no usage read")
			}
			p := tt.price.Parse()
			got := p.Cost(usd.Tokens{Input: nu.InputTokens, Output: nu.OutputTokens, CacheRead: nu.CacheReadTokens, CacheWrite: nu.CacheWriteTokens})
			if got.String() != tt.want {
				t.Errorf("cost of %+v = %s USD, want %s", nu, got, tt.want)
			}
		})
	}
}
