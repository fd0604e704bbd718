package proxy

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// copyResponseHeaders copies the provider headers a client may see
// (docs/api.md "Headers"): content type, retry advice, rate-limit state, and the provider's
// request id renamed so that X-Request-Id stays ours. Never Set-Cookie,
// never Content-Encoding (decodedBody removed any encoding).
func copyResponseHeaders(dst, src http.Header) {
	for k, v := range src {
		switch {
		case k == "Content-Type", k == "Retry-After", k == "Retry-After-Ms":
			dst[k] = v
		case strings.HasPrefix(k, "X-Ratelimit-"), strings.HasPrefix(k, "Anthropic-Ratelimit-"):
			dst[k] = v
		}
	}
	// The provider's own id: x-request-id (OpenAI) wins over request-id
	// (Anthropic) when a provider sends both, whatever the map order.
	if v := src["X-Request-Id"]; len(v) > 0 {
		dst["X-Provider-Request-Id"] = v
	} else if v := src["Request-Id"]; len(v) > 0 {
		dst["X-Provider-Request-Id"] = v
	}
}

// errUnknownEncoding is a provider answer in a content encoding other than
// gzip.
var errUnknownEncoding = errors.New("provider answer has a content encoding the node cannot decode")

// decodedBody returns the provider's answer without its content encoding.
// The node never sends Accept-Encoding, yet some providers (or the CDN in
// front of them) gzip anyway: gzip is decoded, so the client gets readable
// JSON and the node reads its usage; any other encoding is
// errUnknownEncoding (docs/api.md "Status codes": 502
// upstream_bad_encoding). The decoded size stays bounded by the readers
// downstream (maxProviderBody, maxEventBytes).
func decodedBody(resp *http.Response, body io.Reader) (io.Reader, error) {
	ce := strings.TrimSpace(resp.Header.Get("Content-Encoding"))
	switch {
	case ce == "" || strings.EqualFold(ce, "identity"):
		return body, nil
	case strings.EqualFold(ce, "gzip") || strings.EqualFold(ce, "x-gzip"):
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, fmt.Errorf("gzip answer: %w", err)
		}
		resp.Header.Del("Content-Encoding")
		resp.ContentLength = -1 // the header counted the compressed bytes
		return zr, nil
	}
	return nil, fmt.Errorf("%w: %q", errUnknownEncoding, ce)
}
