package catalog_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
)

// TestAPIsComplete: every API of the catalog fills every field the
// request path calls, lists only endpoints of its own protocol, and every
// endpoint has a Spec the request path can run.
func TestAPIsComplete(t *testing.T) {
	seen := map[provider.Endpoint]bool{}
	for _, a := range catalog.APIs() {
		if a.Claims == nil || a.ErrorBody == nil || a.NotRouted == nil || a.RetryAfter == nil ||
			a.QuotaExhausted == nil || a.ListModels == nil || a.GetModel == nil || len(a.ProviderRequestID) == 0 {
			t.Errorf("%v: an API field is missing: %+v", a.Protocol, a)
		}
		if catalog.API(a.Protocol) != a {
			t.Errorf("catalog.API(%v) is not the listed API", a.Protocol)
		}
		for _, s := range a.Endpoints {
			if s.Endpoint.Protocol() != a.Protocol {
				t.Errorf("%v lists %v, an endpoint of %v", a.Protocol, s.Endpoint, s.Endpoint.Protocol())
			}
			// A client path: Path, or Match, or (for an endpoint that only
			// a cloud platform's clients call) only doors.
			doorsOnly := s.Path == "" && s.Match == nil
			if (s.Inspect == nil) == (s.InspectForm == nil) || s.Header == nil || s.BodyUsage == nil || s.Path != "" && s.Match != nil || doorsOnly && len(s.Doors) == 0 || s.UpstreamPath == "" {
				t.Errorf("%v: a Spec field is missing (or both Path and Match, or Inspect and InspectForm, are set)", s.Endpoint)
			}
			if (s.Match != nil || doorsOnly) && strings.Count(s.UpstreamPath, "{model}") != 1 {
				t.Errorf("%v: the path names the model, but the upstream path %q does not", s.Endpoint, s.UpstreamPath)
			}
			if st := s.Stream; st != nil && (st.Terminal == nil || st.NewTracker == nil || st.InBandError == nil || len(st.Keepalive) == 0) {
				t.Errorf("%v: a StreamSpec field is missing", s.Endpoint)
			}
			seen[s.Endpoint] = true
		}
	}
	for e := range provider.NumEndpoints {
		if !seen[e] {
			t.Errorf("no API serves %v", e)
		}
	}
}

// TestRetryAfter: each API's reading of a provider's retry advice.
// Retry-After is seconds or an HTTP date; OpenAI's retry-after-ms wins
// over it; the Anthropic API has no such header.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		h         map[string]string
		openai    time.Duration
		anthropic time.Duration // and gemini and bedrock_converse: Retry-After only
	}{
		{"absent", nil, 0, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second, 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, 500 * time.Millisecond},
		{"ms", map[string]string{"Retry-After": "7", "Retry-After-Ms": "1200"}, 1200 * time.Millisecond, 7 * time.Second},
		{"bad ms", map[string]string{"Retry-After": "7", "Retry-After-Ms": "soon"}, 7 * time.Second, 7 * time.Second},
		{"http date", map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second, 30 * time.Second},
		{"past date", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.h {
			h.Set(k, v)
		}
		for _, a := range catalog.APIs() {
			p := a.Protocol
			want := expect(t, p, map[provider.Protocol]time.Duration{provider.OpenAI: tt.openai, provider.Anthropic: tt.anthropic, provider.Gemini: tt.anthropic, provider.BedrockConverse: tt.anthropic})
			if got := a.RetryAfter(h, now); got != want {
				t.Errorf("%s, %v: RetryAfter = %v, want %v", tt.name, p, got, want)
			}
		}
	}
}

// TestBodyRetryAfter: Google states retry advice in the error body
// (google.rpc.RetryInfo, a protobuf Duration); the other APIs state none
// there.
func TestBodyRetryAfter(t *testing.T) {
	retry := func(delay string) string {
		return `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[` +
			`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":` + delay + `}]}}`
	}
	tests := []struct {
		name, body string
		gemini     time.Duration
	}{
		{"quota answer", geminiQuota("GenerateRequestsPerMinutePerProjectPerModel"), 36 * time.Second},
		{"in a stream array", "[" + geminiQuota("GenerateRequestsPerMinutePerProjectPerModel") + "]", 36 * time.Second},
		{"fraction", retry(`"0.5s"`), 500 * time.Millisecond},
		{"nanos", retry(`"37.516744915s"`), 37516744915 * time.Nanosecond},
		{"capped at a day", retry(`"999999999s"`), 24 * time.Hour},
		{"zero", retry(`"0s"`), 0},
		{"negative", retry(`"-3s"`), 0},
		{"no unit", retry(`"36"`), 0},
		{"another unit", retry(`"36m"`), 0},
		{"not a string", retry(`36`), 0},
		{"NaN", retry(`"NaNs"`), 0},
		{"no RetryInfo", `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`, 0},
		{"another detail's field", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.Help","retryDelay":"36s"}]}}`, 0},
		{"not json", `retryDelay 36s`, 0},
	}
	for _, tt := range tests {
		for _, a := range catalog.APIs() {
			p := a.Protocol
			var got, want time.Duration
			if f := a.BodyRetryAfter; f != nil {
				got = f([]byte(tt.body))
			}
			if p == provider.Gemini {
				want = tt.gemini
			}
			if got != want {
				t.Errorf("%s, %v: BodyRetryAfter = %v, want %v", tt.name, p, got, want)
			}
		}
	}
}

// TestQuotaExhaustedWhateverTheStatus: quota and balance exhaustion as
// providers send it (OpenAI's 429 insufficient_quota, Anthropic's 400
// credit balance, DeepSeek's 402), through either API (compatible
// providers use the other's words), and the answers that only quote the
// words or are rate limits. Bedrock has no balance: only a 402 means it.
func TestQuotaExhaustedWhateverTheStatus(t *testing.T) {
	tests := []struct {
		name                      string
		status                    int
		body                      string
		openai, anthropic, gemini bool
	}{
		{"anthropic 400 credit balance", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`, true, true, false},
		{"deepseek 402", 402, `{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}`, true, true, true},
		{"deepseek 402 in chinese", 402, `{"error":{"message":"余额不足","type":"unknown_error"}}`, true, true, true},
		{"402 without a body", 402, ``, true, true, true},
		{"openai 429 insufficient_quota", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, true, true, false},
		{"429 code insufficient_quota", 429, `{"error":{"message":"x","type":"requests","code":"insufficient_quota"}}`, true, true, false},
		{"openai 429 rate limit", 429, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`, false, false, false},
		{"anthropic 429 rate limit", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`, false, false, false},
		{"429 credit balance", 429, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the API"}}`, true, true, false},
		{"429 balance in chinese", 429, `{"error":{"message":"账户余额不足","code":"1113"}}`, true, true, true},
		{"429 billing", 429, `{"error":{"message":"billing_hard_limit_reached"}}`, true, true, false},
		{"429 not json, balance", 429, `not json 余额不足`, true, true, true},
		{"429 not json", 429, `not json`, false, false, false},
		{"400 that quotes the words", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.0: unknown field 'Your credit balance is too low'"}}`, false, false, false},
		{"400 other", 400, `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error"}}`, false, false, false},
		{"400 not json", 400, `Your credit balance is too low`, false, false, false},
		{"403 with the words", 403, `{"error":{"message":"Your credit balance is too low"}}`, false, false, false},
		{"500 with the words", 500, `{"error":{"message":"余额不足"}}`, false, false, false},
		// Gemini: a QuotaFailure comes with per-minute limits too; only a
		// daily quota, or used-up credits, is exhaustion.
		{"gemini 429 daily quota", 429, geminiQuota("GenerateRequestsPerDayPerProjectPerModel-FreeTier"), false, false, true},
		{"gemini 429 per-minute quota", 429, geminiQuota("GenerateRequestsPerMinutePerProjectPerModel-FreeTier"), false, false, false},
		{"gemini 429 daily in ErrorInfo", 429, `{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","metadata":{"quota_limit":"Gemini25ProRequestsPerDay"}}]}}`, false, false, true},
		{"gemini 429 without details", 429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`, false, false, false},
		{"gemini 429 prepaid credits", 429, `{"error":{"code":429,"message":"Your prepayment credits are depleted. Please go to AI Studio to manage your project and billing.","status":"RESOURCE_EXHAUSTED"}}`, false, false, true},
		{"gemini 429 daily, in a stream array", 429, "[" + geminiQuota("GenerateRequestsPerDayPerProjectPerModel") + "]", false, false, true},
		{"gemini 400 daily quota", 400, geminiQuota("GenerateRequestsPerDayPerProjectPerModel"), false, false, false},
	}
	for _, tt := range tests {
		for _, a := range catalog.APIs() {
			p := a.Protocol
			want := expect(t, p, map[provider.Protocol]bool{provider.OpenAI: tt.openai, provider.Anthropic: tt.anthropic, provider.Gemini: tt.gemini, provider.BedrockConverse: tt.status == 402})
			if got := a.QuotaExhausted(tt.status, []byte(tt.body)); got != want {
				t.Errorf("%s, %v: QuotaExhausted(%d) = %v, want %v", tt.name, p, tt.status, got, want)
			}
		}
	}
}

// geminiQuota is Google's 429 for a quota, with a QuotaFailure naming it:
// the message asks to check billing even for a per-minute limit.
func geminiQuota(quotaID string) string {
	return `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"` + quotaID + `"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"36s"}]}}`
}

// TestClaiming: a request no endpoint serves is answered in the Anthropic
// shape when it carries anthropic-version, in the Gemini shape when it
// carries Google's key or SDK header, a key in the query or a Gemini-only
// path, in the default (OpenAI) shape otherwise.
func TestClaiming(t *testing.T) {
	tests := []struct {
		name, target string
		header       http.Header
		want         provider.Protocol
	}{
		{"anthropic-version", "/v1/models", http.Header{"Anthropic-Version": {"2023-06-01"}}, provider.Anthropic},
		{"nothing", "/v1/models", nil, provider.OpenAI},
		{"x-goog-api-key", "/v1/models", http.Header{"X-Goog-Api-Key": {"k"}}, provider.Gemini},
		{"x-goog-api-client", "/v1/models", http.Header{"X-Goog-Api-Client": {"google-genai-sdk/1.30.0 gl-go/1.26"}}, provider.Gemini},
		{"v1beta path", "/v1beta/models", nil, provider.Gemini},
		{"v1beta unknown path", "/v1beta/nothing", nil, provider.Gemini},
		{"upload path", "/upload/v1beta/files", nil, provider.Gemini},
		{"key in the query", "/v1/models?key=k", nil, provider.Gemini},
		{"another parameter", "/v1/models?monkey=1", nil, provider.OpenAI},
		{"v1beta-like path", "/v1betas", nil, provider.OpenAI},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, tt.target, nil)
		for k, v := range tt.header {
			r.Header[k] = v
		}
		if got := catalog.Claiming(r); got.Protocol != tt.want {
			t.Errorf("%s: Claiming = %v, want %v", tt.name, got.Protocol, tt.want)
		}
	}
}

// expect returns a table row's expectation for the API of protocol p,
// failing the test when the row states none: every API of the catalog
// must have its column, so that a new API cannot pass a table by being
// left out of it.
func expect[T any](t *testing.T, p provider.Protocol, cols map[provider.Protocol]T) T {
	t.Helper()
	want, ok := cols[p]
	if !ok {
		t.Fatalf("the table has no expectation for protocol %v: add its column", p)
	}
	return want
}
