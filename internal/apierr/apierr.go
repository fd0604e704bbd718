// Package apierr renders gateway-originated errors in the client's protocol
// shape (SPEC §1 "Error mapping", §11 "Errors").
//
// OpenAI shape:    {"error":{"message":…,"type":…,"param":null,"code":…}}
// Anthropic shape: {"type":"error","error":{"type":…,"message":…},"request_id":…}
//
// The HTTP status is the contract; the type strings follow each provider's
// published conventions so that the official SDKs raise the right exception.
// Messages never carry a client key, a provider key or a request body.
package apierr

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Protocol selects the error shape.
type Protocol uint8

const (
	OpenAI Protocol = iota
	Anthropic
)

// Error is a gateway-originated failure. Build it with the constructors
// below so that status, kind and retry advice stay consistent.
type Error struct {
	Status int
	// Code is the OpenAI "code" (invalid_api_key, model_not_found, …); the
	// Anthropic shape has no code and ignores it.
	Code string
	Msg  string
	// RetryAfter, when positive, is sent as Retry-After (whole seconds,
	// rounded up) and retry-after-ms.
	RetryAfter time.Duration
	// ShouldRetry, when set, is sent as x-should-retry (SPEC §11: false on
	// every possibly_sent failure, true on local 503s).
	ShouldRetry *bool
}

func (e *Error) Error() string { return e.Msg }

var (
	yes = true
	no  = false
)

// BadRequest is a 400 invalid_request_error.
func BadRequest(code, msg string) *Error { return &Error{Status: 400, Code: code, Msg: msg} }

// Unauthorized is the 401 for a missing, unknown, expired or revoked key.
func Unauthorized(msg string) *Error {
	return &Error{Status: 401, Code: "invalid_api_key", Msg: msg}
}

// Forbidden is the 403 for a key that may not use the model.
func Forbidden(msg string) *Error { return &Error{Status: 403, Code: "model_not_allowed", Msg: msg} }

// NotFound is the 404 for an unknown model or path.
func NotFound(code, msg string) *Error { return &Error{Status: 404, Code: code, Msg: msg} }

// TooLarge is the 413 for a body over the limit.
func TooLarge(msg string) *Error { return &Error{Status: 413, Code: "request_too_large", Msg: msg} }

// Unavailable is the local 503: nothing can take the request now. Retrying
// is safe because nothing was sent.
func Unavailable(msg string, retryAfter time.Duration) *Error {
	return &Error{Status: 503, Code: "no_target_available", Msg: msg, RetryAfter: retryAfter, ShouldRetry: &yes}
}

// BadGateway is a 502. sent reports whether the request may have reached
// the provider; if so the client is told not to retry (SPEC §6).
func BadGateway(code, msg string, possiblySent bool) *Error {
	e := &Error{Status: 502, Code: code, Msg: msg}
	if possiblySent {
		e.ShouldRetry = &no
	} else {
		e.ShouldRetry = &yes
	}
	return e
}

// GatewayTimeout is the 504 for no first byte within the limit after the
// request may have been sent: never safe to retry.
func GatewayTimeout(msg string) *Error {
	return &Error{Status: 504, Code: "upstream_timeout", Msg: msg, ShouldRetry: &no}
}

// MethodNotAllowed is a 405.
func MethodNotAllowed(msg string) *Error {
	return &Error{Status: 405, Code: "method_not_allowed", Msg: msg}
}

// OpenAIType returns the OpenAI error "type" for a status.
func OpenAIType(status int) string {
	switch {
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

// AnthropicType returns the Anthropic error "type" for a status
// (docs.claude.com/en/api/errors).
func AnthropicType(status int) string {
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

type openAIBody struct {
	Error openAIError `json:"error"`
}

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type anthropicBody struct {
	Type      string         `json:"type"`
	Error     anthropicError `json:"error"`
	RequestID string         `json:"request_id,omitempty"`
}

type anthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Body renders the JSON error document for p.
func (e *Error) Body(p Protocol, requestID string) []byte {
	var (
		b   []byte
		err error
	)
	if p == Anthropic {
		b, err = json.Marshal(anthropicBody{
			Type:      "error",
			Error:     anthropicError{Type: AnthropicType(e.Status), Message: e.Msg},
			RequestID: requestID,
		})
	} else {
		oe := openAIError{Message: e.Msg, Type: OpenAIType(e.Status)}
		if e.Code != "" {
			code := e.Code
			oe.Code = &code
		}
		b, err = json.Marshal(openAIBody{Error: oe})
	}
	if err != nil { // unreachable: only strings are marshalled
		return []byte(`{"error":{"message":"internal error","type":"server_error"}}`)
	}
	return b
}

// Write sends e as the complete response. The caller has set the request
// id header already.
func (e *Error) Write(w http.ResponseWriter, p Protocol, requestID string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
		h.Set("Retry-After-Ms", strconv.FormatInt(e.RetryAfter.Milliseconds(), 10))
	}
	if e.ShouldRetry != nil {
		h.Set("X-Should-Retry", strconv.FormatBool(*e.ShouldRetry))
	}
	body := e.Body(p, requestID)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// InBand renders e as a stream event for a failure after the 200 was
// committed (SPEC §11 "Streams"): OpenAI `data: {"error":…}`, Anthropic
// `event: error`. It never imitates a clean terminator.
func (e *Error) InBand(p Protocol, requestID string) []byte {
	body := e.Body(p, requestID)
	out := make([]byte, 0, len(body)+32)
	if p == Anthropic {
		out = append(out, "event: error\ndata: "...)
	} else {
		out = append(out, "data: "...)
	}
	out = append(out, body...)
	return append(out, "\n\n"...)
}
