package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// retryAfter reads a provider's retry advice: retry-after-ms (OpenAI),
// then Retry-After as seconds or an HTTP date. Zero when absent or invalid.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
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

// quotaMarkers are provider words for "the account is out of money or
// quota", as opposed to a rate limit (docs/failures.md
// "Cooldowns").
var quotaMarkers = [][]byte{
	[]byte("insufficient_quota"),
	[]byte("billing_"),
	[]byte("credit balance is too low"),
	[]byte("余额不足"),
}

// quotaExhausted reports whether a provider answer says the account's quota
// or balance is used up, whatever status carries it (docs/failures.md
// "Quota exhaustion"):
//
//   - 429 whose error type or code is insufficient_quota, or whose message
//     names a billing or balance problem (isQuotaExhausted);
//   - 402 Payment Required, always (DeepSeek's "Insufficient Balance" /
//     "余额不足"; no provider uses 402 for anything else);
//   - 400 whose error message begins with Anthropic's "Your credit balance
//     is too low". Only the beginning: a 400's message can quote the
//     client's request, and a tenant must not be able to word a request so
//     that its error takes the backend from every tenant for the quota
//     cooldown.
func quotaExhausted(status int, body []byte) bool {
	switch status {
	case http.StatusTooManyRequests:
		return isQuotaExhausted(body)
	case http.StatusPaymentRequired:
		return true
	case http.StatusBadRequest:
		var doc struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		return json.Unmarshal(body, &doc) == nil && strings.HasPrefix(doc.Error.Message, creditTooLow)
	}
	return false
}

// creditTooLow begins Anthropic's 400 for an account without credit.
const creditTooLow = "Your credit balance is too low"

// isQuotaExhausted reports whether a 429 body says the quota or balance is
// exhausted. It looks at the error's code and type first, then at known
// provider phrases in the message.
func isQuotaExhausted(body []byte) bool {
	var doc struct {
		Error struct {
			Code    json.RawMessage `json:"code"`
			Type    string          `json:"type"`
			Message string          `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &doc) == nil {
		if doc.Error.Type == "insufficient_quota" || bytes.Equal(doc.Error.Code, []byte(`"insufficient_quota"`)) {
			return true
		}
		body = []byte(doc.Error.Message)
	}
	for _, m := range quotaMarkers {
		if bytes.Contains(body, m) {
			return true
		}
	}
	return false
}
