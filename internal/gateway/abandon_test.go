package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/authz"
)

// keyFromHeader is an Authenticator whose key id is the bearer token.
type keyFromHeader struct{}

func (keyFromHeader) Authenticate(h http.Header, _ []string, _ time.Time) (*authz.Principal, error) {
	k := strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
	return &authz.Principal{KeyID: k, TenantID: "t"}, nil
}

// stallTransport holds every round trip, sending nothing, until its
// context ends, as a dial through a slow proxy does, and says when one
// has started.
type stallTransport struct{ entered chan struct{} }

func (s stallTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	s.entered <- struct{}{}
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// TestAbandonedRequestsRefused: a key whose client cancels its requests as
// soon as they arrive, before anything was sent, gets AbandonBurst of
// them, then its requests are refused with 429 before routing, until its
// budget refills; another key is served meanwhile, and requests cancelled
// later than abandonWithin after their arrival never count.
func TestAbandonedRequestsRefused(t *testing.T) {
	var mu sync.Mutex
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return at }
	advance := func(d time.Duration) { mu.Lock(); at = at.Add(d); mu.Unlock() }
	h, _ := newHandler(t, Options{Now: now, Auth: keyFromHeader{}})
	real := h.o.Transport
	stall := stallTransport{entered: make(chan struct{}, 1)}
	h.o.Transport = stall

	body := `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`
	// abandon sends one request of key and cancels it once the node is
	// dialling for it (after late, on the node's clock); it reports
	// whether the node got as far as dialling.
	abandon := func(key string, late time.Duration) (dialled bool, rec *httptest.ResponseRecorder) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+key)
		r.Header.Set("Content-Type", "application/json")
		rec = httptest.NewRecorder()
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(rec, r) }()
		select {
		case <-stall.entered:
			dialled = true
			advance(late)
			cancel()
		case <-done:
		}
		<-done
		return dialled, rec
	}

	// Cancelled later than abandonWithin: never counted.
	for range 2 * AbandonBurst {
		if dialled, rec := abandon("patient", 2*abandonWithin); !dialled {
			t.Fatalf("a late-cancelled key was refused: %d %s", rec.Code, rec.Body)
		}
	}
	for i := range AbandonBurst + 1 {
		if dialled, rec := abandon("flood", 0); !dialled {
			t.Fatalf("request %d of the flooding key refused within its burst: %d %s", i+1, rec.Code, rec.Body)
		}
	}
	dialled, rec := abandon("flood", 0)
	if dialled || rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "too_many_abandoned_requests") {
		t.Fatalf("past its budget: dialled %v, %d %s; want 429 too_many_abandoned_requests before routing", dialled, rec.Code, rec.Body)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}

	// Another key is served, through the real transport.
	h.o.Transport = real
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer other")
	r.Header.Set("Content-Type", "application/json")
	ok := httptest.NewRecorder()
	h.ServeHTTP(ok, r)
	if ok.Code != http.StatusOK {
		t.Fatalf("another key: %d %s", ok.Code, ok.Body)
	}

	// One request's worth of refill lets one more through.
	h.o.Transport = stall
	advance(time.Second / AbandonRate)
	if dialled, rec := abandon("flood", 0); !dialled {
		t.Fatalf("after a refill: %d %s", rec.Code, rec.Body)
	}
	if dialled, _ := abandon("flood", 0); dialled {
		t.Fatal("the refill let two through")
	}
}
