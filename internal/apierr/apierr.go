// Package apierr renders gateway-originated errors in the client's protocol
// shape (docs/api.md "Status codes").
//
// OpenAI shape:    {"error":{"message":…,"type":…,"param":null,"code":…}}
// Anthropic shape: {"type":"error","error":{"type":…,"message":…},"request_id":…}
//
// The HTTP status is the contract; the type strings follow each provider's
// published conventions so that the official SDKs raise the right exception.
// The documents themselves are rendered by the provider API's package
// (internal/provider/openai, internal/provider/anthropic) through its
// provider.API.
// Messages never carry a client key, a provider key or a request body.
package apierr

import (
	"net/http"
	"strconv"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
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
	// ShouldRetry, when set, is sent as x-should-retry (docs/api.md "Tell the client whether a retry is
	// safe": false on
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

// RateLimited is the 429 for a request over its key's (tenantScope false)
// or its tenant's limits (docs/limits.md "Refusals"): nothing was sent,
// and a retry after retryAfter will fit.
func RateLimited(tenantScope bool, msg string, retryAfter time.Duration) *Error {
	code := "key_rate_limited"
	if tenantScope {
		code = "tenant_rate_limited"
	}
	return &Error{Status: 429, Code: code, Msg: msg, RetryAfter: retryAfter, ShouldRetry: &yes}
}

// BudgetExceeded is the 429 of a spent budget (docs/limits.md
// "Budgets"): key_budget_exceeded or tenant_budget_exceeded, with
// Retry-After the time until the window ends and x-should-retry false:
// no retry can succeed before then.
func BudgetExceeded(tenantScope bool, msg string, retryAfter time.Duration) *Error {
	code := "key_budget_exceeded"
	if tenantScope {
		code = "tenant_budget_exceeded"
	}
	return &Error{Status: 429, Code: code, Msg: msg, RetryAfter: retryAfter, ShouldRetry: &no}
}

// Abandoned is the 429 of a key whose client cancels its requests as
// soon as they arrive, faster than the node allows (docs/limits.md
// "Abandoned requests"): too_many_abandoned_requests, retryable after
// Retry-After.
func Abandoned(msg string, retryAfter time.Duration) *Error {
	return &Error{Status: 429, Code: "too_many_abandoned_requests", Msg: msg, RetryAfter: retryAfter, ShouldRetry: &yes}
}

// BadGateway is a 502. possiblySent reports whether the request may have
// reached the provider; if so the client is told not to retry
// (docs/failures.md).
func BadGateway(code, msg string, possiblySent bool) *Error {
	return upstreamFailure(502, code, msg, possiblySent)
}

// GatewayTimeout is the 504 for a provider that did not answer within the
// node's time limits; possiblySent as for [BadGateway].
func GatewayTimeout(msg string, possiblySent bool) *Error {
	return upstreamFailure(504, "upstream_timeout", msg, possiblySent)
}

func upstreamFailure(status int, code, msg string, possiblySent bool) *Error {
	e := &Error{Status: status, Code: code, Msg: msg, ShouldRetry: &yes}
	if possiblySent {
		e.ShouldRetry = &no
	}
	return e
}

// MethodNotAllowed is a 405.
func MethodNotAllowed(msg string) *Error {
	return &Error{Status: 405, Code: "method_not_allowed", Msg: msg}
}

// Body renders the JSON error document of api, with the retry advice in
// it where the API's shape has a place for it.
func (e *Error) Body(api *provider.API, requestID string) []byte {
	if e.RetryAfter > 0 && api.RetryErrorBody != nil {
		return api.RetryErrorBody(e.Status, e.Code, e.Msg, requestID, e.RetryAfter)
	}
	return api.ErrorBody(e.Status, e.Code, e.Msg, requestID)
}

// InBand renders e as the event that ends a stream of spec after the 200
// was committed (n events already relayed): OpenAI chat `data: {"error":…}`,
// Responses `event: error`, Anthropic `event: error`. It never imitates a
// clean terminator. spec must stream.
func (e *Error) InBand(spec *provider.Spec, requestID string, n int) []byte {
	return spec.Stream.InBandError(e.Status, e.Code, e.Msg, requestID, n)
}

// Noter is implemented by a ResponseWriter that wants to know which
// error is written through it (the gateway's refusal log reads the code):
// Write calls NoteError before the header goes out.
type Noter interface{ NoteError(e *Error) }

// Write sends e as the complete response in the error shape of api. The
// caller has set the X-Request-Id header already; the id also goes in the
// API's own request id header, where its SDKs read it (Anthropic's
// request-id).
func (e *Error) Write(w http.ResponseWriter, api *provider.API, requestID string) {
	if n, ok := w.(Noter); ok {
		n.NoteError(e)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if api.RequestIDHeader != "" && requestID != "" {
		h.Set(api.RequestIDHeader, requestID)
	}
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
		h.Set("Retry-After-Ms", strconv.FormatInt(e.RetryAfter.Milliseconds(), 10))
	}
	if e.ShouldRetry != nil {
		h.Set("X-Should-Retry", strconv.FormatBool(*e.ShouldRetry))
	}
	body := e.Body(api, requestID)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}
