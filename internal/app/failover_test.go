package app

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
)

func port(t *testing.T, rawURL string) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(u.Host)
	n, _ := strconv.Atoi(p)
	return n
}

const chat = `{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`

// TestRepickWhenProxyRefuses: the egress proxy refuses the CONNECT to the
// preferred backend; nothing was sent, so the node re-picks the other
// backend within the attempt limit and the refused provider sees nothing
// (definitely_not_sent, docs/failures.md "Send state").
func TestRepickWhenProxyRefuses(t *testing.T) {
	var blocked int
	s := startStack(t, stackOptions{
		egress: "connect", second: true, weight: 1000,
		connectAllow: func(_ string, p int) bool { return p != blocked },
	})
	blocked = port(t, s.provURL)
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat)
	if r.status != 200 {
		t.Fatalf("status %d, want 200 after a re-pick; body %s", r.status, r.body)
	}
	if n := s.prov.ConnCount(); n != 0 {
		t.Fatalf("refused provider accepted %d connections, want 0", n)
	}
	if n := s.prov2.RequestCount(); n != 1 {
		t.Fatalf("other provider got %d requests, want 1", n)
	}
	s.events.waitFor(t, "request chat_completions 200", 0)
	s.logs.mustContain(t, `"send_state":"definitely_not_sent"`) // the first attempt's line
}

// TestNoRetryAfterPossiblySent: the provider resets after reading the body.
// Exactly one attempt reaches it — also when the client sent an
// Idempotency-Key on a reused connection — and the client is told not to
// retry (docs/failures.md "Send state", docs/api.md "Tell the client whether a retry is safe").
func TestNoRetryAfterPossiblySent(t *testing.T) {
	s := startStack(t, stackOptions{second: true, weight: 1000, attempts: 3})
	// Warm the node's pooled connection to the first provider.
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
		t.Fatalf("warm-up status %d", r.status)
	}
	before := s.prov.RequestCount()
	h := bearer(clientKey)
	h["Idempotency-Key"] = "idem-42"
	r := s.do(http.MethodPost, "/v1/chat/completions", h, `{"model":"demo-gpt","messages":[{"role":"user","content":"x [[reset=after_body]]"}]}`)
	if r.status != 502 || r.header.Get("X-Should-Retry") != "false" {
		t.Fatalf("status %d x-should-retry %q, want 502 false", r.status, r.header.Get("X-Should-Retry"))
	}
	if n := s.prov.RequestCount() - before; n != 1 {
		t.Fatalf("the reset provider received %d attempts, want exactly 1", n)
	}
	if n := s.prov2.RequestCount(); n != 0 {
		t.Fatalf("a possibly-sent request was re-sent to the other backend (%d)", n)
	}
}

// TestProviderAuthDisablesBackend: a provider 401 reaches the client as
// 502 and takes the backend out until its definition changes
// (docs/failures.md "Disabled backends").
func TestProviderAuthDisablesBackend(t *testing.T) {
	s := startStack(t, stackOptions{second: true, weight: 1000,
		script: func(fakeprovider.Request) *fakeprovider.Behaviour { return &fakeprovider.Behaviour{Status: 401} },
	})
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat)
	if r.status != 502 {
		t.Fatalf("first request status %d, want 502 (never the provider's 401)", r.status)
	}
	for i := range 5 {
		if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
			t.Fatalf("request %d after the 401: status %d, want 200 from the other backend", i, r.status)
		}
	}
	if n := s.prov.RequestCount(); n != 1 {
		t.Fatalf("disabled backend received %d requests, want only the first", n)
	}
}

// TestRateLimitCoolsTarget: a provider 429 is passed through as received,
// and the target cools down, so the next requests go elsewhere
// (docs/failures.md "Cooldowns").
func TestRateLimitCoolsTarget(t *testing.T) {
	s := startStack(t, stackOptions{second: true, weight: 1000,
		script: func(fakeprovider.Request) *fakeprovider.Behaviour {
			return &fakeprovider.Behaviour{Status: 429, RetryAfter: 30e9}
		},
	})
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat)
	if r.status != 429 || r.header.Get("Retry-After") != "30" {
		t.Fatalf("status %d Retry-After %q, want the provider's 429 with 30", r.status, r.header.Get("Retry-After"))
	}
	for range 5 {
		if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
			t.Fatalf("status %d during the cooldown, want 200 from the other backend", r.status)
		}
	}
	if n := s.prov.RequestCount(); n != 1 {
		t.Fatalf("cooling backend received %d requests, want 1", n)
	}
}

// TestNothingEligible503: with the only target cooling down, the node
// answers 503 with Retry-After = when it can take traffic again, and
// x-should-retry: true, without contacting the provider (docs/api.md "Tell the client whether a retry is safe").
func TestNothingEligible503(t *testing.T) {
	s := startStack(t, stackOptions{
		script: func(fakeprovider.Request) *fakeprovider.Behaviour {
			return &fakeprovider.Behaviour{Status: 429, RetryAfter: 30e9}
		},
	})
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 429 {
		t.Fatalf("status %d, want 429", r.status)
	}
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat)
	ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
	if r.status != 503 || ra < 25 || ra > 30 || r.header.Get("X-Should-Retry") != "true" {
		t.Fatalf("status %d Retry-After %q x-should-retry %q, want 503 with ~30 and true", r.status, r.header.Get("Retry-After"), r.header.Get("X-Should-Retry"))
	}
	if n := s.prov.RequestCount(); n != 1 {
		t.Fatalf("provider received %d requests, want 1", n)
	}
}

// TestQuotaAnswersCoolTarget: quota exhaustion as providers send it with
// other statuses (Anthropic's 400 "credit balance is too low", DeepSeek's
// 402) is passed through and cools the backend for cooldown.quota without
// counting a failure, so the next requests go elsewhere. A 400 that is not
// about credit cools nothing. Before, only a 429 could mean quota, and the
// exhausted backend kept taking (and failing) its share of requests.
func TestQuotaAnswersCoolTarget(t *testing.T) {
	tests := []struct {
		name     string
		b        fakeprovider.Behaviour
		wantCool bool
	}{
		{"anthropic 400 credit balance", fakeprovider.Behaviour{Status: 400,
			ErrorMessage: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}, true},
		{"deepseek 402", fakeprovider.Behaviour{Status: 402, ErrorMessage: "Insufficient Balance"}, true},
		{"an ordinary 400", fakeprovider.Behaviour{Status: 400, ErrorMessage: "Invalid value for 'temperature'"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first atomic.Bool
			s := startStack(t, stackOptions{second: true, weight: 1000,
				script: func(fakeprovider.Request) *fakeprovider.Behaviour {
					if first.CompareAndSwap(false, true) {
						return &tt.b
					}
					return nil
				},
			})
			if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != tt.b.Status {
				t.Fatalf("status %d, want the provider's %d passed through", r.status, tt.b.Status)
			}
			for range 5 {
				if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
					t.Fatalf("status %d after the answer, want 200", r.status)
				}
			}
			// Weight 1000 against 1: without a cooldown the first backend
			// takes the next requests too.
			want := int64(6)
			if tt.wantCool {
				want = 1
			}
			if n := s.prov.RequestCount(); n != want {
				t.Fatalf("first backend received %d requests, want %d", n, want)
			}
		})
	}
}
