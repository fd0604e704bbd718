package gateway

import (
	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/pkg/usd"
)

// Reservations (docs/limits.md "Reservations"): a key whose budget, or
// its tenant's, reserves is admitted with the most its request can cost.

// errUnbounded refuses, for a reserving budget, a request whose cost
// has no bound.
func errUnbounded() *apierr.Error {
	return apierr.BadRequest("output_cap_required",
		"this API key's budget holds each request's worst-case cost: the request must declare its output cap "+
			"(max_tokens, max_completion_tokens or max_output_tokens), or the model's targets theirs")
}

// errSessionUnbounded refuses a realtime session to a key whose budget
// reserves: a session's cost has no bound.
func errSessionUnbounded() *apierr.Error {
	return apierr.BadRequest("reservation_unsupported",
		"this API key's budget holds each request's worst-case cost, which a realtime session does not have")
}

// reserveCost is the most the request can cost on any target it may be
// sent to, those of m and of the fallbacks of m the key may use: its
// whole body as input tokens (a tokenizer that works on bytes never
// makes more tokens of a text than it has bytes) at the dearest input
// rate, plus its output cap (the request's, or the target's when that is
// lower or the request declares none) at the output rate; and for each
// further attempt the estimate a failed attempt is charged. bounded is
// false when a target that prices output has no output cap.
func (c *call) reserveCost(m *routes.Model) (worst usd.Amount, bounded bool) {
	in := int64(len(c.body))
	var first, again usd.Amount
	visit := func(x *routes.Model) bool {
		for _, t := range x.Pools[c.spec.Endpoint] {
			p := t.Price
			if p == nil {
				continue // an unpriced target costs nothing
			}
			out := c.req.MaxOutput
			if t.MaxOutput > 0 && (out == 0 || t.MaxOutput < out) {
				out = t.MaxOutput
			}
			if out == 0 && p.PricesOutput() {
				return false
			}
			first = max(first, p.Most(in, out))
			again = max(again, p.Most(limits.EstimateTokens(in), 0))
		}
		return true
	}
	if !visit(m) {
		return 0, false
	}
	for _, x := range m.Chain {
		if c.principal.Allows(x.Name) && !visit(x) {
			return 0, false
		}
	}
	return usd.Add(first, usd.Mul(int64(c.h.o.MaxAttempts-1), again)), true
}
