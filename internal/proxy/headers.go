package proxy

import (
	"net/http"
	"strings"
)

// copyResponseHeaders copies the provider headers a client may see
// (docs/api.md "Headers"): content type, retry advice, rate-limit state, and the provider's
// request id renamed so that X-Request-Id stays ours. Never Set-Cookie.
func copyResponseHeaders(dst, src http.Header) {
	for k, v := range src {
		switch {
		case k == "Content-Type", k == "Retry-After", k == "Retry-After-Ms":
			dst[k] = v
		case k == "X-Request-Id", k == "Request-Id":
			dst["X-Provider-Request-Id"] = v
		case strings.HasPrefix(k, "X-Ratelimit-"), strings.HasPrefix(k, "Anthropic-Ratelimit-"):
			dst[k] = v
		}
	}
}
