package proxy

import (
	"net/http"
	"strings"

	"github.com/scootgate/scootgate/internal/routes"
)

// defaultAnthropicVersion is sent when the client names none (SPEC §1: "a
// sane default version"). Unfamiliar client versions pass through unchanged.
const defaultAnthropicVersion = "2023-06-01"

// requestHeaders lists the client headers that may reach the provider
// (SPEC §11 "Headers"). Everything else is dropped: client auth, cookies,
// hop-by-hop, x-forwarded-*, Idempotency-Key (it would let Go's transport
// re-send a POST on a reused connection), Accept-Encoding (the transport
// owns compression), OpenAI-Organization/-Project (they name the client's
// account, not ours).
var requestHeaders = []string{"Content-Type", "Accept", "User-Agent", "Openai-Beta"}

var anthropicRequestHeaders = []string{"Anthropic-Version", "Anthropic-Beta"}

// upstreamHeader builds the provider request's headers from scratch.
func upstreamHeader(client http.Header, b *routes.Backend) http.Header {
	h := make(http.Header, 6)
	for _, k := range requestHeaders {
		if v := client[k]; len(v) > 0 {
			h[k] = v
		}
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	if b.Protocol == routes.Anthropic {
		for _, k := range anthropicRequestHeaders {
			if v := client[k]; len(v) > 0 {
				h[k] = v
			}
		}
		if h.Get("Anthropic-Version") == "" {
			h.Set("Anthropic-Version", defaultAnthropicVersion)
		}
		h.Set("X-Api-Key", b.Credential.Reveal())
	} else {
		h.Set("Authorization", "Bearer "+b.Credential.Reveal())
	}
	return h
}

// copyResponseHeaders copies the provider headers a client may see (SPEC
// §11): content type, retry advice, rate-limit state, and the provider's
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
