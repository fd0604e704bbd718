package usd_test

import (
	"testing"

	"github.com/scootgate/scootgate/pkg/usd"
)

// TestPriceMost: the most an attempt can cost is every input token at
// the dearest input rate plus the output at the output rate (both tiers'
// dearest above the long-context threshold), never below what any split
// of the same tokens costs.
func TestPriceMost(t *testing.T) {
	// $3 in, $15 out, $0.30 cache reads, $3.75 cache writes per million;
	// above 200,000 input tokens $6 in, $22.50 out.
	p := &usd.Price{
		Base:      usd.Rates{Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000},
		LongAbove: 200_000,
		Long:      usd.Rates{Input: 6_000_000, Output: 22_500_000, CacheRead: 600_000, CacheWrite: 7_500_000},
	}
	tests := []struct {
		name          string
		input, output int64
		want          usd.Amount
	}{
		{"base: input at the cache-write rate", 1000, 100, 1000*3_750_000 + 100*15_000_000},
		{"long: both tiers' dearest", 300_000, 100, 300_000*7_500_000 + 100*22_500_000},
		{"nothing", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.Most(tt.input, tt.output)
			if got != tt.want {
				t.Errorf("Most(%d, %d) = %d, want %d", tt.input, tt.output, got, tt.want)
			}
			for _, tk := range []usd.Tokens{
				{Input: tt.input, Output: tt.output},
				{Input: tt.input, Output: tt.output, CacheWrite: tt.input},
				{Input: tt.input, Output: tt.output, CacheRead: tt.input / 2, CacheWrite: tt.input / 2},
				{Input: tt.input / 2, Output: tt.output, CacheWrite: tt.input / 2},
			} {
				if c := p.Cost(tk); c > got {
					t.Errorf("Cost(%+v) = %d is above Most %d", tk, c, got)
				}
			}
		})
	}
	if !p.PricesOutput() || (&usd.Price{Base: usd.Rates{Input: 1}}).PricesOutput() {
		t.Error("PricesOutput wrong")
	}
}
