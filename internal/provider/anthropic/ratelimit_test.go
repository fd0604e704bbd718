package anthropic

import (
	"net/http"
	"testing"
	"time"
)

// TestHeadroomAllocs: reading the rate-limit headers of an answer, done
// on every Anthropic answer, allocates nothing.
func TestHeadroomAllocs(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := http.Header{}
	for _, kind := range []string{"Requests", "Tokens", "Input-Tokens", "Output-Tokens"} {
		p := "Anthropic-Ratelimit-" + kind + "-"
		h.Set(p+"Limit", "1000")
		h.Set(p+"Remaining", "999")
		h.Set(p+"Reset", "2026-01-02T03:05:05Z")
	}
	hr := headroom(h, now)
	if hr.Requests.Remaining != 999 || hr.Tokens.Reset != time.Minute || hr.Malformed != 0 {
		t.Fatalf("headroom = %+v", hr)
	}
	if n := testing.AllocsPerRun(100, func() { hr = headroom(h, now) }); n != 0 {
		t.Errorf("headroom allocates %v times per answer, want 0", n)
	}
}
