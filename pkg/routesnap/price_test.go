package routesnap_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/usd"
)

// TestPricesFixture: the priced example decodes, validates, and parses to
// the picodollars a token its decimals say.
func TestPricesFixture(t *testing.T) {
	s, err := routesnap.Decode(readFixture(t, "valid-prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	got := s.Models[1].Targets[0].Price.Parse()
	want := usd.Price{
		Base:      usd.Rates{Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000},
		LongAbove: 200000,
		Long:      usd.Rates{Input: 6_000_000, Output: 22_500_000, CacheRead: 600_000, CacheWrite: 7_500_000},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("claude price (-got +want):\n%s", diff)
	}
	// Absent cache prices are the input price.
	got = s.Models[0].Targets[0].Price.Parse()
	if want := (usd.Rates{Input: 2_500_000, Output: 10_000_000, CacheRead: 1_250_000, CacheWrite: 2_500_000}); got.Base != want || got.LongAbove != 0 {
		t.Errorf("gpt price = %+v, want base %+v and no tier", got, want)
	}
	if got := s.Models[2].Targets[0].Price.Parse().Long.CacheWrite; got != 2_500_000 {
		t.Errorf("gemini long-context cache_write = %d, want the tier's input price 2500000", got)
	}
}
