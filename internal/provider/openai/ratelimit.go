package openai

import (
	"net/http"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
)

// headroom reads OpenAI's rate-limit headers, which Azure OpenAI and most
// compatible providers send too: x-ratelimit-{limit,remaining}-{requests,
// tokens} as whole numbers and x-ratelimit-reset-{requests,tokens} as Go-
// style durations ("6m0s", "1s", "20ms"). Azure often leaves the resets
// out; the budget then has none.
func headroom(h http.Header, _ time.Time) provider.Headroom {
	var hr provider.Headroom
	hr.Requests = provider.ReadBudget(h, "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", parseReset, &hr.Malformed)
	hr.Tokens = provider.ReadBudget(h, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", parseReset, &hr.Malformed)
	return hr
}

// parseReset reads a reset duration: "6m0s", "1s", "20ms", "1h2m3.5s".
// A negative one is malformed; "0s" means the budget is whole again.
func parseReset(v string) (time.Duration, bool) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}
