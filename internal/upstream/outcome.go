package upstream

import "time"

// Outcome classifies how an attempt ended, from the backend's point of view.
// The request path decides it from the send state and the provider's status
// (never from error strings); Finish applies it (see the package doc).
type Outcome uint8

const (
	// Success: the provider answered 2xx. Result.TTFB is sampled into the
	// latency estimate.
	Success Outcome = iota
	// ProviderError: the provider answered non-2xx, other than the cases
	// below. No latency sample; not a breaker failure.
	ProviderError
	// RateLimited: provider 429 (rate limit). Cooldown for
	// Result.RetryAfter (a default when 0, capped). No latency sample
	// (docs/failures.md "Fast errors").
	RateLimited
	// QuotaExhausted: provider 429 saying the quota or balance is used up
	// (OpenAI insufficient_quota, billing errors). Long cooldown (docs/failures.md "Cooldowns");
	// not a transport failure.
	QuotaExhausted
	// AuthRejected: provider 401/403. The backend is disabled until a
	// newer routing table still lists it or its probe gets another answer
	// (see the package doc, Disabled backends).
	AuthRejected
	// TransportFailure: the backend could not be reached or failed
	// mid-exchange (target unreachable through the proxy, provider TLS,
	// reset, timeout). Counts toward the breaker.
	TransportFailure
	// EgressFault: the egress proxy itself failed (down, refused our
	// credentials). Not the backend's fault (docs/egress.md "Failures"): neutral.
	EgressFault
	// Cancelled: the client went away. Neutral.
	Cancelled
	// NodeOverloaded: one of the node's own timers (first byte, stream
	// idle, total, connect) ran out while the node itself was saturated
	// ([NodeLoad]): the node was too late to read the answer, so the
	// failure is the node's, not the backend's. Neutral.
	NodeOverloaded
)

var outcomeNames = [...]string{
	Success:          "success",
	ProviderError:    "provider_error",
	RateLimited:      "rate_limited",
	QuotaExhausted:   "quota_exhausted",
	AuthRejected:     "auth_rejected",
	TransportFailure: "transport_failure",
	EgressFault:      "egress_fault",
	Cancelled:        "cancelled",
	NodeOverloaded:   "node_overloaded",
}

// String returns a snake_case name, suitable as a metric label.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Result is what one attempt reports to Finish.
type Result struct {
	Outcome Outcome
	// TTFB is the time from sending the request to the first response
	// byte; used only with Success, and only when > 0.
	TTFB time.Duration
	// RetryAfter is the provider's Retry-After, 0 when absent; used with
	// RateLimited and QuotaExhausted.
	RetryAfter time.Duration
	// Headroom is what the answer's rate-limit headers said, whatever the
	// outcome; the zero value says nothing.
	Headroom Headroom
	// Sent is State.Acquired right after this attempt took its slot (the
	// lease sets it): answers to older requests than the newest applied
	// one are stale, and the requests sent since are not in the
	// provider's count. 0: unknown (then nothing is discounted).
	Sent uint64
	// SentTokens is State.Spend's mark for this attempt (the lease sets
	// it): the tokens spent since are not in the provider's count. 0:
	// none spent.
	SentTokens uint64
}
