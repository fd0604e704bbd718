package apierr

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/provider/openai"
)

func TestShapes(t *testing.T) {
	tests := []struct {
		name        string
		err         *Error
		proto       provider.Protocol
		wantBody    string
		wantHeaders map[string]string
	}{
		{
			name:     "openai 401",
			err:      Unauthorized("invalid API key"),
			wantBody: `{"error":{"message":"invalid API key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
		},
		{
			name:     "anthropic 401",
			err:      Unauthorized("invalid API key"),
			proto:    provider.Anthropic,
			wantBody: `{"type":"error","error":{"type":"authentication_error","message":"invalid API key"},"request_id":"sg-1"}`,
		},
		{
			name:        "openai 503 retry advice",
			err:         Unavailable("busy", 1500*time.Millisecond),
			wantBody:    `{"error":{"message":"busy","type":"server_error","param":null,"code":"no_target_available"}}`,
			wantHeaders: map[string]string{"Retry-After": "2", "Retry-After-Ms": "1500", "X-Should-Retry": "true"},
		},
		{
			name:        "anthropic 503 is overloaded",
			err:         Unavailable("busy", time.Second),
			proto:       provider.Anthropic,
			wantBody:    `{"type":"error","error":{"type":"overloaded_error","message":"busy"},"request_id":"sg-1"}`,
			wantHeaders: map[string]string{"Retry-After": "1", "X-Should-Retry": "true"},
		},
		{
			name:        "openai 429 key limit",
			err:         RateLimited(false, "over the key's requests per minute", 20*time.Second),
			wantBody:    `{"error":{"message":"over the key's requests per minute","type":"rate_limit_exceeded","param":null,"code":"key_rate_limited"}}`,
			wantHeaders: map[string]string{"Retry-After": "20", "Retry-After-Ms": "20000", "X-Should-Retry": "true"},
		},
		{
			name:        "anthropic 429 tenant limit",
			err:         RateLimited(true, "over the tenant's tokens per minute", 1500*time.Millisecond),
			proto:       provider.Anthropic,
			wantBody:    `{"type":"error","error":{"type":"rate_limit_error","message":"over the tenant's tokens per minute"},"request_id":"sg-1"}`,
			wantHeaders: map[string]string{"Retry-After": "2", "X-Should-Retry": "true"},
		},
		{
			name:        "gemini 429 carries RetryInfo",
			err:         RateLimited(false, "over the key's limit", 1500*time.Millisecond),
			proto:       provider.Gemini,
			wantBody:    `{"error":{"code":429,"message":"over the key's limit","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"KEY_RATE_LIMITED","domain":"scootgate"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"},{"@type":"type.googleapis.com/google.rpc.RequestInfo","requestId":"sg-1"}]}}`,
			wantHeaders: map[string]string{"Retry-After": "2", "X-Should-Retry": "true"},
		},
		{
			name:        "possibly sent 502 is not retryable",
			err:         BadGateway("upstream_failed", "failed", true),
			proto:       provider.Anthropic,
			wantBody:    `{"type":"error","error":{"type":"api_error","message":"failed"},"request_id":"sg-1"}`,
			wantHeaders: map[string]string{"X-Should-Retry": "false"},
		},
		{
			name:        "504",
			err:         GatewayTimeout("slow", true),
			wantBody:    `{"error":{"message":"slow","type":"server_error","param":null,"code":"upstream_timeout"}}`,
			wantHeaders: map[string]string{"X-Should-Retry": "false"},
		},
		{
			name:     "anthropic 413",
			err:      TooLarge("big"),
			proto:    provider.Anthropic,
			wantBody: `{"type":"error","error":{"type":"request_too_large","message":"big"},"request_id":"sg-1"}`,
		},
		{
			name:     "anthropic 403",
			err:      Forbidden("no"),
			proto:    provider.Anthropic,
			wantBody: `{"type":"error","error":{"type":"permission_error","message":"no"},"request_id":"sg-1"}`,
		},
		{
			name:     "anthropic 404",
			err:      NotFound("model_not_found", "no"),
			proto:    provider.Anthropic,
			wantBody: `{"type":"error","error":{"type":"not_found_error","message":"no"},"request_id":"sg-1"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tt.err.Write(rec, catalog.API(tt.proto), "sg-1")
			if rec.Code != tt.err.Status {
				t.Errorf("status = %d, want %d", rec.Code, tt.err.Status)
			}
			if diff := cmp.Diff(rec.Body.String(), tt.wantBody); diff != "" {
				t.Errorf("body (-got +want):\n%s", diff)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			for k, v := range tt.wantHeaders {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if tt.wantHeaders["X-Should-Retry"] == "" && rec.Header().Get("X-Should-Retry") != "" {
				t.Errorf("unexpected X-Should-Retry %q", rec.Header().Get("X-Should-Retry"))
			}
		})
	}
}

func TestInBand(t *testing.T) {
	e := &Error{Status: 502, Msg: "cut"}
	for _, tc := range []struct {
		spec *provider.Spec
		want string
	}{
		{openai.Chat, "data: {\"error\":{\"message\":\"cut\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"},
		{openai.Responses, "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"cut\",\"param\":null,\"sequence_number\":7}\n\n"},
		{anthropic.Messages, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"cut\"},\"request_id\":\"sg-1\"}\n\n"},
	} {
		if got := string(e.InBand(tc.spec, "sg-1", 7)); got != tc.want {
			t.Errorf("%s in-band = %q, want %q", tc.spec.Path, got, tc.want)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(e.Body(openai.API, ""), &doc); err != nil {
		t.Fatal(err)
	}
}

// Anthropic-shape answers carry the node's request id in request-id, which
// the Anthropic SDKs read into an error's RequestID; OpenAI ones do not.
func TestRequestIDHeader(t *testing.T) {
	for _, p := range []provider.Protocol{provider.OpenAI, provider.Anthropic} {
		rec := httptest.NewRecorder()
		NotFound("x", "y").Write(rec, catalog.API(p), "sg-9")
		want := ""
		if p == provider.Anthropic {
			want = "sg-9"
		}
		if got := rec.Header().Get("Request-Id"); got != want {
			t.Errorf("%v: request-id = %q, want %q", p, got, want)
		}
	}
}
