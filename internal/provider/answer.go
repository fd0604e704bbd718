package provider

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What the provider packages share to read a provider's answer.

// RetryAfter reads the Retry-After header of an answer, as seconds or an
// HTTP date (RFC 9110 §10.2.3). Zero when absent, invalid or past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs > 0 {
			return time.Duration(secs * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// ErrorDoc is what an error answer says went wrong, in the members the
// OpenAI and Anthropic shapes share: {"error":{"type","code","message"}}.
// Code is the string value of error.code, "" when it is not a string.
type ErrorDoc struct {
	Type    string
	Code    string
	Message string
}

// ReadError reads an error answer's ErrorDoc; ok is false when body is not
// a JSON object (a member of another type reads as "").
func ReadError(body []byte) (e ErrorDoc, ok bool) {
	var doc struct {
		Error struct {
			Type    json.RawMessage `json:"type"`
			Code    json.RawMessage `json:"code"`
			Message json.RawMessage `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ErrorDoc{}, false
	}
	str := func(raw json.RawMessage) string {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	return ErrorDoc{Type: str(doc.Error.Type), Code: str(doc.Error.Code), Message: str(doc.Error.Message)}, true
}

// Mentions reports whether s contains one of words.
func Mentions(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// QuotaRules is how an API's providers say that the account's quota or
// balance is used up, as opposed to a rate limit or a problem with the
// request (docs/failures.md "Quota exhaustion"). Each provider package
// keeps its own; [QuotaRules.Exhausted] applies them.
type QuotaRules struct {
	// Codes are error types or codes that mean it on a 429.
	Codes []string
	// Words are phrases that mean it in a 429's error message (or its
	// body, when it is not an error document).
	Words []string
	// CreditPrefix begins the message of a 400 that means it. Only the
	// beginning: a 400's message can quote the client's request, and a
	// tenant must not be able to word a request so that its error takes
	// the backend from every tenant for the quota cooldown.
	CreditPrefix string
}

// Exhausted reports whether an answer says the quota or balance is used
// up: a 402 always (no provider uses it for anything else), a 429 by its
// codes or words, a 400 by its message's beginning.
func (q *QuotaRules) Exhausted(status int, body []byte) bool {
	switch status {
	case http.StatusPaymentRequired:
		return true
	case http.StatusTooManyRequests:
		e, ok := ReadError(body)
		if !ok {
			return Mentions(string(body), q.Words)
		}
		for _, c := range q.Codes {
			if e.Type == c || e.Code == c {
				return true
			}
		}
		return Mentions(e.Message, q.Words)
	case http.StatusBadRequest:
		if q.CreditPrefix == "" {
			return false
		}
		e, ok := ReadError(body)
		return ok && strings.HasPrefix(e.Message, q.CreditPrefix)
	}
	return false
}

// RequestRules is how an API's providers say that an error answer is
// about the one request, not about the backend: a 429 that refuses the
// request for its size alone, or a 403 saying that the backend's
// credential may not use the model the request names. Such an answer
// neither cools nor disables the backend for everyone else
// (docs/failures.md "Refusals about one request"). Each provider package
// keeps its own; [RequestRules.AboutRequest] applies them.
//
// Every rule reads what only the provider writes (an error code, the
// beginning of a message): a client must not be able to word a request so
// that its error reads as about the backend, nor the other way round.
type RequestRules struct {
	// TooLargePrefix begins the message of a 429 that refuses the request
	// because it alone exceeds a per-minute limit (OpenAI "Request too
	// large for …"): a retry never fits, and smaller requests still do.
	TooLargePrefix string
	// ModelCodes are error codes that, on a 403, say the credential may
	// not use this model (OpenAI model_not_found, "Project … does not have
	// access to model …"), as opposed to a refused credential.
	ModelCodes []string
}

// AboutRequest reports whether an error answer is about the request (see
// [RequestRules]).
func (q *RequestRules) AboutRequest(status int, body []byte) bool {
	switch status {
	case http.StatusTooManyRequests:
		if q.TooLargePrefix == "" {
			return false
		}
		e, ok := ReadError(body)
		return ok && strings.HasPrefix(e.Message, q.TooLargePrefix)
	case http.StatusForbidden:
		e, ok := ReadError(body)
		return ok && e.Code != "" && slices.Contains(q.ModelCodes, e.Code)
	}
	return false
}
