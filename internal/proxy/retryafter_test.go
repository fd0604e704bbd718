package proxy

import (
	"net/http"
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
