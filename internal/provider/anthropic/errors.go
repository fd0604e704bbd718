package anthropic

import (
	"encoding/json"

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

// quota is how Anthropic and the providers compatible with it say that
// the account is out of credit: Anthropic's 400 "Your credit balance is
// too low", and the words of compatible providers (DeepSeek's "余额不足",
// OpenAI-style insufficient_quota and billing errors).
var quota = provider.QuotaRules{
	Codes:        []string{"insufficient_quota"},
	Words:        []string{"insufficient_quota", "billing_", "credit balance is too low", "余额不足"},
	CreditPrefix: "Your credit balance is too low",
}
