package fakeprovider_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRateLimitDirectives: the rate-limit directives set the headers of
// any answer, in each protocol's own forms.
func TestRateLimitDirectives(t *testing.T) {
	_, base := start(t, nil)
	const directives = "[[ratelimit_remaining_requests=0]] [[ratelimit_remaining_tokens=7]] [[ratelimit_reset=30s]]"
	tests := []struct {
		name   string
		path   string
		header http.Header
		body   string
		want   map[string]string
	}{
		{
			name: "openai", path: "/chat/completions", header: openAIHeader(),
			body: `{"model":"m","messages":[{"role":"user","content":"hi ` + directives + `"}]}`,
			want: map[string]string{
				"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "30s",
				"X-Ratelimit-Remaining-Tokens": "7", "X-Ratelimit-Reset-Tokens": "30s",
				"X-Ratelimit-Limit-Requests": "10000",
			},
		},
		{
			name: "openai error answer", path: "/chat/completions", header: openAIHeader(),
			body: `{"model":"m","messages":[{"role":"user","content":"[[status=429]] ` + directives + `"}]}`,
			want: map[string]string{
				"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "30s",
				"X-Ratelimit-Remaining-Tokens": "7", "X-Ratelimit-Reset-Tokens": "30s",
				"X-Ratelimit-Limit-Requests": "10000",
			},
		},
		{
			name: "anthropic", path: "/messages", header: anthropicHeader(),
			body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi ` + directives + `"}]}`,
			want: map[string]string{
				"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": "2026-01-02T03:04:35Z",
				"Anthropic-Ratelimit-Tokens-Remaining": "7", "Anthropic-Ratelimit-Tokens-Reset": "2026-01-02T03:04:35Z",
				"Anthropic-Ratelimit-Requests-Limit": "4000",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := post(t, http.DefaultClient, http.MethodPost, base+tt.path, tt.header, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := map[string]string{}
			for k := range tt.want {
				got[k] = resp.Header.Get(k)
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("headers (-got +want):\n%s", diff)
			}
		})
	}
}
