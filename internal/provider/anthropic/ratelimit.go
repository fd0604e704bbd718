package anthropic

import (
	"net/http"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
)

// headroom reads Anthropic's rate-limit headers:
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
// {limit,remaining,reset}, the counts as whole numbers and the resets as
// RFC 3339 times (when the budget is whole again). Of the three token
// budgets the one with the least left counts.
func headroom(h http.Header, now time.Time) provider.Headroom {
	var hr provider.Headroom
	reset := func(v string) (time.Duration, bool) {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return 0, false
		}
		return max(t.Sub(now), 0), true
	}
	budget := func(kind string) provider.Budget {
		p := "Anthropic-Ratelimit-" + kind + "-"
		return provider.ReadBudget(h, p+"Limit", p+"Remaining", p+"Reset", reset, &hr.Malformed)
	}
	hr.Requests = budget("Requests")
	hr.Tokens = provider.Tighter(provider.Tighter(budget("Tokens"), budget("Input-Tokens")), budget("Output-Tokens"))
	return hr
}
