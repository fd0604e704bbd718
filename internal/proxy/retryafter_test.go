package proxy

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    map[string]string
		want time.Duration
	}{
		{"absent", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{"ms wins", map[string]string{"Retry-After": "7", "Retry-After-Ms": "1200"}, 1200 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second},
		{"past date", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.h {
				h.Set(k, v)
			}
			if got := retryAfter(h, now); got != tt.want {
				t.Fatalf("retryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestQuotaExhaustedWhateverTheStatus: quota and balance exhaustion as
// providers actually send it (Anthropic's 400, DeepSeek's 402, OpenAI's
// 429), and the 400s that only quote those words.
func TestQuotaExhaustedWhateverTheStatus(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"anthropic 400 credit balance", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`, true},
		{"deepseek 402", 402, `{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}`, true},
		{"deepseek 402 in chinese", 402, `{"error":{"message":"余额不足","type":"unknown_error"}}`, true},
		{"402 without a body", 402, ``, true},
		{"openai 429 insufficient_quota", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, true},
		{"429 rate limit", 429, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`, false},
		{"400 that quotes the words", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.0: unknown field 'Your credit balance is too low'"}}`, false},
		{"400 other", 400, `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error"}}`, false},
		{"400 not json", 400, `Your credit balance is too low`, false},
		{"403 with the words", 403, `{"error":{"message":"Your credit balance is too low"}}`, false},
		{"500 with the words", 500, `{"error":{"message":"余额不足"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quotaExhausted(tt.status, []byte(tt.body)); got != tt.want {
				t.Fatalf("quotaExhausted(%d, %s) = %v, want %v", tt.status, tt.body, got, tt.want)
			}
		})
	}
}

func TestIsQuotaExhausted(t *testing.T) {
	tests := []struct {
		body string
		want bool
	}{
		{`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, true},
		{`{"error":{"message":"x","type":"requests","code":"insufficient_quota"}}`, true},
		{`{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`, false},
		{`{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`, false},
		{`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the API"}}`, true},
		{`{"error":{"message":"账户余额不足","code":"1113"}}`, true},
		{`not json 余额不足`, true},
		{`not json`, false},
	}
	for _, tt := range tests {
		if got := isQuotaExhausted([]byte(tt.body)); got != tt.want {
			t.Errorf("isQuotaExhausted(%s) = %v, want %v", tt.body, got, tt.want)
		}
	}
}

// TestProviderRequestIDDeterministic: with both x-request-id and
// request-id the client always sees x-request-id's value.
func TestProviderRequestIDDeterministic(t *testing.T) {
	for range 100 { // map order changes between iterations
		src := http.Header{"X-Request-Id": {"req_openai"}, "Request-Id": {"req_anthropic"}, "Content-Type": {"application/json"}}
		dst := http.Header{}
		copyResponseHeaders(dst, src)
		if got := dst.Get("X-Provider-Request-Id"); got != "req_openai" {
			t.Fatalf("X-Provider-Request-Id = %q, want req_openai", got)
		}
	}
	dst := http.Header{}
	copyResponseHeaders(dst, http.Header{"Request-Id": {"req_anthropic"}})
	if got := dst.Get("X-Provider-Request-Id"); got != "req_anthropic" {
		t.Fatalf("X-Provider-Request-Id = %q, want req_anthropic", got)
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
