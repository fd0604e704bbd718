package gateway

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/openai"
)

// TestResponseHeaders: a client sees the content type, Retry-After, the
// retry advice and rate-limit state its API lists, and the provider's
// request id as X-Provider-Request-Id (x-request-id winning over
// request-id, whatever the map order); never cookies, never anything
// else.
func TestResponseHeaders(t *testing.T) {
	src := http.Header{
		"Content-Type": {"application/json"}, "Retry-After": {"2"}, "Retry-After-Ms": {"1500"},
		"X-Ratelimit-Remaining-Requests": {"9"}, "Anthropic-Ratelimit-Requests-Remaining": {"8"},
		"X-Request-Id": {"req_openai"}, "Request-Id": {"req_anthropic"},
		"Set-Cookie": {"s=1"}, "Server": {"x"}, "Content-Encoding": {"gzip"},
	}
	only := http.Header{"Request-Id": {"req_anthropic"}}
	for _, api := range []*provider.API{openai.API, anthropic.API} {
		dst := http.Header{}
		copyResponseHeaders(dst, only, api)
		if got := dst.Get("X-Provider-Request-Id"); got != "req_anthropic" {
			t.Errorf("%v: request-id alone: X-Provider-Request-Id = %q", api.Protocol, got)
		}
	}
	for _, tc := range []struct {
		api  *provider.API
		want http.Header
	}{
		{openai.API, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"2"}, "Retry-After-Ms": {"1500"},
			"X-Ratelimit-Remaining-Requests": {"9"}, "Anthropic-Ratelimit-Requests-Remaining": {"8"}, "X-Provider-Request-Id": {"req_openai"}}},
		{anthropic.API, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"2"}, "Retry-After-Ms": {"1500"},
			"X-Ratelimit-Remaining-Requests": {"9"}, "Anthropic-Ratelimit-Requests-Remaining": {"8"}, "X-Provider-Request-Id": {"req_openai"}}},
	} {
		for range 20 { // map order changes between iterations
			dst := http.Header{}
			copyResponseHeaders(dst, src, tc.api)
			if diff := cmp.Diff(dst, tc.want); diff != "" {
				t.Fatalf("%v (-got +want):\n%s", tc.api.Protocol, diff)
			}
		}
	}
}

// TestUnknownContentEncodingRefused: an encoding other than gzip is never
// relayed as if it were JSON.
func TestUnknownContentEncodingRefused(t *testing.T) {
	for _, ce := range []string{"br", "zstd", "deflate", "gzip, br"} {
		resp := &http.Response{Header: http.Header{"Content-Encoding": {ce}}}
		if _, err := decodedBody(resp, strings.NewReader("x")); !errors.Is(err, errUnknownEncoding) {
			t.Errorf("%s: err = %v, want errUnknownEncoding", ce, err)
		}
	}
	resp := &http.Response{Header: http.Header{"Content-Encoding": {"identity"}}}
	if _, err := decodedBody(resp, strings.NewReader("x")); err != nil {
		t.Errorf("identity: %v", err)
	}
}
