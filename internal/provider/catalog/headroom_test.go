package catalog_test

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/upstream"
)

// TestHeadroom: each API's reading of the rate-limit headers, well-formed
// and not. Gemini documents none.
func TestHeadroom(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// An unknown limit is 0.
	b := func(limit, remaining int64, reset time.Duration) upstream.Budget {
		return upstream.Budget{Stated: true, Limit: limit, Remaining: remaining, Reset: reset}
	}
	var none upstream.Budget
	tests := []struct {
		name   string
		p      provider.Protocol
		header map[string][]string
		want   upstream.Headroom
	}{
		{
			name: "openai all six",
			p:    provider.OpenAI,
			header: map[string][]string{
				"X-Ratelimit-Limit-Requests": {"60"}, "X-Ratelimit-Remaining-Requests": {"59"}, "X-Ratelimit-Reset-Requests": {"1s"},
				"X-Ratelimit-Limit-Tokens": {"150000"}, "X-Ratelimit-Remaining-Tokens": {"149984"}, "X-Ratelimit-Reset-Tokens": {"6m0s"},
			},
			want: upstream.Headroom{Requests: b(60, 59, time.Second), Tokens: b(150000, 149984, 6*time.Minute)},
		},
		{
			name:   "openai milliseconds",
			p:      provider.OpenAI,
			header: map[string][]string{"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"20ms"}},
			want:   upstream.Headroom{Requests: b(0, 0, 20*time.Millisecond), Tokens: none},
		},
		{
			name:   "azure without resets",
			p:      provider.OpenAI,
			header: map[string][]string{"X-Ratelimit-Remaining-Requests": {"12"}, "X-Ratelimit-Remaining-Tokens": {"3000"}},
			want:   upstream.Headroom{Requests: b(0, 12, 0), Tokens: b(0, 3000, 0)},
		},
		{
			name: "openai malformed values are ignored and counted",
			p:    provider.OpenAI,
			header: map[string][]string{
				"X-Ratelimit-Limit-Requests": {"sixty"}, "X-Ratelimit-Remaining-Requests": {"-1"}, "X-Ratelimit-Reset-Requests": {"soon"},
				"X-Ratelimit-Remaining-Tokens": {"5", "6"}, "X-Ratelimit-Reset-Tokens": {"-3s"},
			},
			want: upstream.Headroom{Requests: none, Tokens: none, Malformed: 5},
		},
		{
			name:   "a limit and a reset without what remains say nothing",
			p:      provider.OpenAI,
			header: map[string][]string{"X-Ratelimit-Limit-Requests": {"60"}, "X-Ratelimit-Reset-Requests": {"1s"}},
			want:   upstream.Headroom{Requests: none, Tokens: none},
		},
		{
			name:   "remaining above the limit trusts neither",
			p:      provider.OpenAI,
			header: map[string][]string{"X-Ratelimit-Limit-Requests": {"10"}, "X-Ratelimit-Remaining-Requests": {"11"}},
			want:   upstream.Headroom{Requests: none, Tokens: none, Malformed: 1},
		},
		{
			name: "anthropic: the tightest token budget counts",
			p:    provider.Anthropic,
			header: map[string][]string{
				"Anthropic-Ratelimit-Requests-Limit": {"50"}, "Anthropic-Ratelimit-Requests-Remaining": {"0"}, "Anthropic-Ratelimit-Requests-Reset": {"2026-01-02T03:04:35Z"},
				"Anthropic-Ratelimit-Tokens-Limit": {"100000"}, "Anthropic-Ratelimit-Tokens-Remaining": {"90000"}, "Anthropic-Ratelimit-Tokens-Reset": {"2026-01-02T03:05:05Z"},
				"Anthropic-Ratelimit-Input-Tokens-Limit": {"80000"}, "Anthropic-Ratelimit-Input-Tokens-Remaining": {"70000"}, "Anthropic-Ratelimit-Input-Tokens-Reset": {"2026-01-02T03:05:05Z"},
				"Anthropic-Ratelimit-Output-Tokens-Limit": {"20000"}, "Anthropic-Ratelimit-Output-Tokens-Remaining": {"1000"}, "Anthropic-Ratelimit-Output-Tokens-Reset": {"2026-01-02T03:04:15+00:00"},
			},
			want: upstream.Headroom{Requests: b(50, 0, 30*time.Second), Tokens: b(20000, 1000, 10*time.Second)},
		},
		{
			name: "anthropic reset in the past is now; a bad time is counted",
			p:    provider.Anthropic,
			header: map[string][]string{
				"Anthropic-Ratelimit-Requests-Remaining": {"3"}, "Anthropic-Ratelimit-Requests-Reset": {"2026-01-02T03:00:00Z"},
				"Anthropic-Ratelimit-Tokens-Remaining": {"3"}, "Anthropic-Ratelimit-Tokens-Reset": {"in 5s"},
			},
			want: upstream.Headroom{Requests: b(0, 3, 0), Tokens: b(0, 3, 0), Malformed: 1},
		},
		{
			name:   "anthropic ignores the OpenAI forms",
			p:      provider.Anthropic,
			header: map[string][]string{"X-Ratelimit-Remaining-Requests": {"0"}},
			want:   upstream.Headroom{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := catalog.API(tt.p).Headroom(http.Header(tt.header), now)
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("Headroom (-got +want):\n%s", diff)
			}
		})
	}
	if catalog.API(provider.Gemini).Headroom != nil {
		t.Error("Gemini documents no rate-limit headers; its Headroom should be nil")
	}
}

// TestHostileRateLimitHeaders: the rate-limit headers of the last
// hostile-input review (testdata/hostile/ratelimit.json), each read by
// its API and applied to a backend: whatever reset they name, the
// backend is held back for rate_limit_max at most, as after a 429.
func TestHostileRateLimitHeaders(t *testing.T) {
	data, err := os.ReadFile("../../../testdata/hostile/ratelimit.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Finding  string
		Protocol string
		Headers  map[string]string
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	now := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	for _, c := range cases {
		p, ok := provider.ParseProtocol(c.Protocol)
		if !ok {
			t.Fatalf("%s: protocol %q", c.Finding, c.Protocol)
		}
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		hr := catalog.API(p).Headroom(h, now)
		o := upstream.Options{Clock: func() time.Time { return now }}
		s := upstream.NewRegistry(o).Get(upstream.Identity{ID: "b", Cap: 10})
		if !s.Acquire() {
			t.Fatal("Acquire refused")
		}
		s.Finish(upstream.Result{Outcome: upstream.Success, Sent: s.Acquired(), Headroom: hr})
		if s.ReadyNow() && s.Fits(1) {
			t.Errorf("%s: not held back at all (read %+v)", c.Finding, hr)
		}
		end := now.Add(upstream.DefaultRateLimitMax)
		if at := s.EligibleAt(); at.After(end) {
			t.Errorf("%s: held until %v, past rate_limit_max", c.Finding, at)
		}
		if at := s.FitsAt(1); at.After(end) {
			t.Errorf("%s: tokens held until %v, past rate_limit_max", c.Finding, at)
		}
	}
}
