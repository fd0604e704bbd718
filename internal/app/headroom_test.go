package app

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
)

// TestHeadroomUsedUp: an answer that says no requests remain for 30 s
// holds its backend until then, before any 429 (docs/routing.md
// "Headroom"): a model whose only target it is answers 503 with a
// Retry-After of about 30 and x-should-retry: true, sending nothing; in
// either protocol's header forms.
func TestHeadroomUsedUp(t *testing.T) {
	const used = "[[ratelimit_remaining_requests=0]] [[ratelimit_reset=30s]]"
	tests := []struct {
		name   string
		path   string
		header map[string]string
		body   string
		next   string
	}{
		{
			name: "openai", path: "/v1/chat/completions", header: bearer(clientKey),
			body: `{"model":"demo-gpt","messages":[{"role":"user","content":"hi ` + used + `"}]}`,
			next: chat,
		},
		{
			name: "anthropic", path: "/v1/messages", header: anthropicHeaders(clientKey),
			body: `{"model":"` + anthropicModel + `","max_tokens":8,"messages":[{"role":"user","content":"hi ` + used + `"}]}`,
			next: `{"model":"` + anthropicModel + `","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startStack(t, stackOptions{})
			if r := s.do(http.MethodPost, tt.path, tt.header, tt.body); r.status != 200 {
				t.Fatalf("status %d, want 200: the last request still fit; body %s", r.status, r.body)
			}
			r := s.do(http.MethodPost, tt.path, tt.header, tt.next)
			ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
			if r.status != 503 || ra < 28 || ra > 31 || r.header.Get("X-Should-Retry") != "true" {
				t.Fatalf("status %d Retry-After %q x-should-retry %q, want 503 with about 30 and true; body %s",
					r.status, r.header.Get("Retry-After"), r.header.Get("X-Should-Retry"), r.body)
			}
			if n := s.prov.RequestCount(); n != 1 {
				t.Fatalf("provider received %d requests, want 1: nothing is sent to a used-up backend", n)
			}
		})
	}
}

// TestHeadroomPlacesAround: in a pool, the backend whose answers say its
// requests are used up takes nothing more until the reset; the other
// takes everything, without a single 429.
func TestHeadroomPlacesAround(t *testing.T) {
	s := startStack(t, stackOptions{second: true, weight: 1000,
		script: func(fakeprovider.Request) *fakeprovider.Behaviour {
			zero := 0
			return &fakeprovider.Behaviour{RateLimit: fakeprovider.RateLimit{Requests: &zero, Reset: 30e9}}
		},
	})
	// The first backend has almost all the weight: one of the first
	// requests reaches it.
	for i := 0; s.prov.RequestCount() == 0; i++ {
		if i == 20 {
			t.Fatal("the heavy backend never got a request")
		}
		if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	before := s.prov2.RequestCount()
	for i := range 10 {
		if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
			t.Fatalf("request %d: status %d, want 200 from the other backend", i, r.status)
		}
	}
	if n := s.prov.RequestCount(); n != 1 {
		t.Fatalf("used-up backend received %d requests, want 1", n)
	}
	if n := s.prov2.RequestCount() - before; n != 10 {
		t.Fatalf("other backend received %d requests, want 10", n)
	}
}

// TestHeadroomTokens: with 100 tokens left for 30 s, a request that
// declares max_tokens 500 does not fit and gets the fast 503; one that
// declares nothing is not held back on a guess and goes out.
func TestHeadroomTokens(t *testing.T) {
	s := startStack(t, stackOptions{})
	first := `{"model":"demo-gpt","messages":[{"role":"user","content":"hi [[ratelimit_remaining_tokens=100]] [[ratelimit_reset=30s]]"}]}`
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), first); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	big := `{"model":"demo-gpt","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), big)
	ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
	if r.status != 503 || ra < 28 || ra > 31 {
		t.Fatalf("status %d Retry-After %q, want 503 with about 30; body %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if n := s.prov.RequestCount(); n != 1 {
		t.Fatalf("provider received %d requests, want 1", n)
	}
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
		t.Fatalf("status %d for a request without max_tokens, want 200", r.status)
	}
}
