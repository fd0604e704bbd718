package openai

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
)

// ErrorType returns the OpenAI error "type" for a status. The node's own
// 429 is a per-key or per-tenant limit (docs/limits.md).
func ErrorType(status int) string {
	switch {
	case status == 429:
		return "rate_limit_exceeded"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ErrorBody renders a gateway error in the OpenAI shape:
// {"error":{"message":…,"type":…,"param":null,"code":…}} (code null when "").
func ErrorBody(status int, code, msg string) []byte {
	oe := errorObject{Message: msg, Type: ErrorType(status)}
	if code != "" {
		oe.Code = &code
	}
	b, err := json.Marshal(errorBody{Error: oe})
	if err != nil { // unreachable: only strings are marshalled
		return []byte(`{"error":{"message":"internal error","type":"server_error"}}`)
	}
	return b
}

// StatefulPath reports whether path is one of the stateful Responses or
// Conversations endpoints (a stored response, its input items, its
// cancellation, a conversation). Those are bound to the provider account
// that stored the object, which a node routing each request on its own
// cannot find again. /v1/responses/compact and /v1/responses/input_tokens
// are stateless and served ([Compact], [InputTokens]); the catalog matches
// endpoint paths before it asks this.
func StatefulPath(path string) bool {
	switch path {
	case Compact.Path, InputTokens.Path:
		return false
	}
	return hasPathPrefix(path, "/v1/responses/") || path == "/v1/conversations" || hasPathPrefix(path, "/v1/conversations/")
}

func hasPathPrefix(path, prefix string) bool {
	return len(path) > len(prefix) && path[:len(prefix)] == prefix
}

// storedObjectPath reports whether path is an endpoint of stored objects
// other than responses: uploaded files, batches (which run on uploaded
// files) and custom voices. Each object lives in the provider account
// that created it.
func storedObjectPath(path string) bool {
	for _, base := range [...]string{"/v1/files", "/v1/uploads", "/v1/batches", "/v1/audio/voices"} {
		if path == base || hasPathPrefix(path, base+"/") {
			return true
		}
	}
	return false
}

// notRouted is StatefulPath, and storedObjectPath, with the 404's code
// and message.
func notRouted(path string) (code, msg string, ok bool) {
	if storedObjectPath(path) {
		return "stateful_endpoint_not_supported", "ScootGate does not serve " + path +
			": files, uploads, batches and custom voices are stored in the provider account that created them, " +
			"and this gateway routes each request on its own to any backend of a pool, so it could not find them again. " +
			"Send the content with each request instead, or see the gateway's docs/api.md", true
	}
	if !StatefulPath(path) {
		return "", "", false
	}
	return "stateful_endpoint_not_supported", "ScootGate does not serve " + path +
		": stored responses and conversations belong to the provider account that stored them, " +
		"and this gateway routes each request on its own to any backend of a pool, so it cannot find them again. " +
		"Send the whole conversation with each POST /v1/responses (store: false), or see the gateway's docs/api.md", true
}

// retryAfter reads an OpenAI answer's retry advice: retry-after-ms, then
// Retry-After ([provider.RetryAfter]). Zero when absent or invalid.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	return provider.RetryAfter(h, now)
}

// quota is how OpenAI and the providers compatible with it say that the
// account is out of quota or money: OpenAI's insufficient_quota and
// billing errors, DeepSeek's 402 and "余额不足", and Anthropic's
// credit-balance 400 from its OpenAI-compatible endpoint.
var quota = provider.QuotaRules{
	Codes:        []string{"insufficient_quota"},
	Words:        []string{"insufficient_quota", "billing_", "credit balance is too low", "余额不足"},
	CreditPrefix: "Your credit balance is too low",
}

// aboutRequest is how OpenAI says an error is about one request: a 429
// "Request too large for gpt-4o in organization org-… on tokens per min
// (TPM): Limit 30000, Requested 48000. The input or output tokens must be
// reduced in order to run successfully." refuses that request for its size
// while smaller ones still fit; a 403 with code model_not_found ("Project
// `proj_…` does not have access to model `gpt-4.1`") refuses the model, not
// the key, which serves its other models.
var aboutRequest = provider.RequestRules{
	TooLargePrefix: "Request too large for ",
	ModelCodes:     []string{"model_not_found"},
}
