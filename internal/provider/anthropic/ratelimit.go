package anthropic

import (
	"net/http"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/upstream"
)

// headroom reads Anthropic's rate-limit headers:
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
// {limit,remaining,reset}, the counts as whole numbers and the resets as
// RFC 3339 times (when the budget is whole again). Of the three token
// budgets the one with the least left counts.
func headroom(h http.Header, now time.Time) upstream.Headroom {
	var hr upstream.Headroom
	reset := func(v string) (time.Duration, bool) {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return 0, false
		}
		return max(t.Sub(now), 0), true
	}
	budget := func(n *[3]string) upstream.Budget {
		return provider.ReadBudget(h, n[0], n[1], n[2], reset, &hr.Malformed)
	}
	hr.Requests = budget(&requestsNames)
	hr.Tokens = provider.Tighter(provider.Tighter(budget(&tokensNames), budget(&inputTokensNames)), budget(&outputTokensNames))
	return hr
}

// The canonical names of each budget's limit, remaining and reset
// headers, spelled out once: built per answer they were a dozen string
// allocations on every Anthropic request.
var (
	requestsNames     = budgetNames("Requests")
	tokensNames       = budgetNames("Tokens")
	inputTokensNames  = budgetNames("Input-Tokens")
	outputTokensNames = budgetNames("Output-Tokens")
)

func budgetNames(kind string) [3]string {
	p := "Anthropic-Ratelimit-" + kind + "-"
	return [3]string{p + "Limit", p + "Remaining", p + "Reset"}
}
