package provider_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
)

func TestRateLimitHeadersWrite(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	names := func(resetAt bool) *provider.RateLimitHeaders {
		return &provider.RateLimitHeaders{
			Replace:  []string{"X-Ratelimit-", "Anthropic-Ratelimit-"},
			Requests: [3]string{"R-Limit", "R-Remaining", "R-Reset"},
			Tokens:   [3]string{"T-Limit", "T-Remaining", "T-Reset"},
			ResetAt:  resetAt,
		}
	}
	tests := []struct {
		name    string
		resetAt bool
		rl      provider.RateLimits
		want    http.Header
	}{
		{
			name: "durations, rounded up to the millisecond; the provider's headers replaced",
			rl: provider.RateLimits{
				Requests: provider.RateWindow{Limit: 60, Remaining: 59, Reset: time.Second},
				Tokens:   provider.RateWindow{Limit: 1000, Remaining: 0, Reset: 6*time.Minute + 1},
			},
			want: http.Header{"Content-Type": {"application/json"}, "Retry-After": {"3"},
				"R-Limit": {"60"}, "R-Remaining": {"59"}, "R-Reset": {"1s"},
				"T-Limit": {"1000"}, "T-Remaining": {"0"}, "T-Reset": {"6m0.001s"}},
		},
		{
			name:    "an instant; a kind without a limit is not written",
			resetAt: true,
			rl:      provider.RateLimits{Requests: provider.RateWindow{Limit: 2, Remaining: 1, Reset: 30 * time.Second}},
			want: http.Header{"Content-Type": {"application/json"}, "Retry-After": {"3"},
				"R-Limit": {"2"}, "R-Remaining": {"1"}, "R-Reset": {"2026-12-01T12:00:30Z"}},
		},
		{
			name: "no limits: only the provider's headers go",
			want: http.Header{"Content-Type": {"application/json"}, "Retry-After": {"3"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{
				"Content-Type": {"application/json"}, "Retry-After": {"3"},
				"X-Ratelimit-Limit-Requests": {"10000"}, "Anthropic-Ratelimit-Tokens-Remaining": {"5"},
			}
			names(tt.resetAt).Write(h, tt.rl, now)
			if diff := cmp.Diff(h, tt.want); diff != "" {
				t.Errorf("headers (-got +want):\n%s", diff)
			}
		})
	}
}
