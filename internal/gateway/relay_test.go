package gateway

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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

// TestGeminiBadKeyIsTheGatewaysProblem: Google answers a refused API key
// with a 400 (reason API_KEY_INVALID), not a 401. The client's request was
// fine: it gets a 502 upstream_auth_failed, never the provider's 400, and
// the backend is disabled as for a 401. A 400 about the request itself
// passes through and disables nothing.
func TestGeminiBadKeyIsTheGatewaysProblem(t *testing.T) {
	badKey := `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`
	badRequest := `{"error":{"code":400,"message":"API_KEY_INVALID is not a valid role","status":"INVALID_ARGUMENT"}}`
	for _, tc := range []struct {
		name, body string
		status     int
		disabled   bool
	}{
		{"refused key", badKey, 502, true},
		{"a bad request that quotes the words", badRequest, 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer prov.Close()
			h := newHandlerAt(t, Options{}, prov.URL+"/v1")
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/v1beta/models/gemini:generateContent", "application/json",
				strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, data)
			}
			passed := string(data) == tc.body // the provider's answer, as received
			if passed == tc.disabled {
				t.Errorf("body %s (passed through: %v)", data, passed)
			}
			m, _ := h.o.Routes.Load().Model("gemini")
			disabled := m.Pools[provider.GenerateContent][0].Backend.State.Disabled()
			if disabled != tc.disabled {
				t.Errorf("backend disabled %v, want %v", disabled, tc.disabled)
			}
		})
	}
}
