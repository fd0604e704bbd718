package provider

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateWindow is one of the node's per-minute limits for a key as its
// client is shown it (docs/limits.md "Headers").
type RateWindow struct {
	Limit     int64         // 0: no such limit, nothing is written
	Remaining int64         // ≥ 0
	Reset     time.Duration // until the window is full again
}

// RateLimits is the node's requests and tokens state for a key.
type RateLimits struct {
	Requests, Tokens RateWindow
}

// RateLimitHeaders names an API's rate-limit headers. Names are canonical
// (http.CanonicalHeaderKey), so that setting them costs no conversion.
type RateLimitHeaders struct {
	// Replace lists canonical prefixes of the provider's own rate-limit
	// headers: on an answer to a limited key they are dropped before the
	// node's are written, so the client never mixes the provider
	// account's headroom (shared by every key) with its own.
	Replace []string
	// Requests and Tokens name the limit, remaining and reset headers.
	Requests, Tokens [3]string
	// ResetAt writes the reset as an RFC 3339 instant (Anthropic);
	// otherwise as a duration such as "1s" or "6m0s" (OpenAI).
	ResetAt bool
}

// Write replaces the provider's rate-limit headers in h with rl.
func (n *RateLimitHeaders) Write(h http.Header, rl RateLimits, now time.Time) {
	for k := range h {
		for _, p := range n.Replace {
			if strings.HasPrefix(k, p) {
				delete(h, k)
				break
			}
		}
	}
	n.window(h, &n.Requests, rl.Requests, now)
	n.window(h, &n.Tokens, rl.Tokens, now)
}

func (n *RateLimitHeaders) window(h http.Header, names *[3]string, w RateWindow, now time.Time) {
	if w.Limit <= 0 {
		return
	}
	h[names[0]] = []string{strconv.FormatInt(w.Limit, 10)}
	h[names[1]] = []string{strconv.FormatInt(w.Remaining, 10)}
	// Rounded up to the millisecond: a reset reported early would send
	// the client back too soon.
	reset := (w.Reset + time.Millisecond - 1).Truncate(time.Millisecond)
	if n.ResetAt {
		h[names[2]] = []string{now.Add(reset).UTC().Format(time.RFC3339)}
	} else {
		h[names[2]] = []string{reset.String()}
	}
}
