package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/scootgate/scootgate/internal/provider"
)

// ErrorType returns the Anthropic error "type" for a status
// (docs.claude.com/en/api/errors).
func ErrorType(status int) string {
	switch status {
	case 400, 405:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, 529:
		return "overloaded_error"
	default:
		if status >= 500 {
			return "api_error"
		}
		return "invalid_request_error"
	}
}

type errorBody struct {
	Type      string      `json:"type"`
	Error     errorObject `json:"error"`
	RequestID string      `json:"request_id,omitempty"`
}

type errorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ErrorBody renders a gateway error in the Anthropic shape:
// {"type":"error","error":{"type":…,"message":…},"request_id":…}.
func ErrorBody(status int, msg, requestID string) []byte {
	b, err := json.Marshal(errorBody{
		Type:      "error",
		Error:     errorObject{Type: ErrorType(status), Message: msg},
		RequestID: requestID,
	})
	if err != nil { // unreachable: only strings are marshalled
		return []byte(`{"type":"error","error":{"type":"api_error","message":"internal error"}}`)
	}
	return b
}

// quotaMarkers are words of Anthropic and Anthropic-compatible providers
// for "the account is out of money or quota", as opposed to a rate limit.
var quotaMarkers = []string{"credit balance is too low", "billing_", "余额不足"}

// creditTooLow begins Anthropic's 400 for an account without credit.
const creditTooLow = "Your credit balance is too low"

// quotaExhausted reports whether an answer says the account's quota or
// balance is used up (docs/failures.md "Quota exhaustion"):
//
//   - 402 Payment Required, always (no provider uses it for anything else);
//   - 429 whose message (the body, when it is not an error document) names
//     a billing or balance problem;
//   - 400 whose error message begins with "Your credit balance is too low".
//     Only the beginning: a 400's message can quote the client's request,
//     and a tenant must not be able to word a request so that its error
//     takes the backend from every tenant for the quota cooldown.
func quotaExhausted(status int, body []byte) bool {
	switch status {
	case http.StatusPaymentRequired:
		return true
	case http.StatusTooManyRequests:
		e, ok := provider.ReadError(body)
		if !ok {
			return provider.Mentions(string(body), quotaMarkers)
		}
		return provider.Mentions(e.Message, quotaMarkers)
	case http.StatusBadRequest:
		e, ok := provider.ReadError(body)
		return ok && strings.HasPrefix(e.Message, creditTooLow)
	}
	return false
}
