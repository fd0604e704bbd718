package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// refusing is an egress transport whose every connection fails before
// anything is sent.
type refusing struct{}

func (refusing) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("dial tcp: connection refused")
}

// TestEveryAttemptGivesItsSlotBack: whatever way an attempt ends, its
// lease is done and the backend's in-flight count is back to 0 once the
// request is over.
func TestEveryAttemptGivesItsSlotBack(t *testing.T) {
	tests := []struct {
		name, body string
		refuse     bool
		want       int
	}{
		{name: "success", body: `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`, want: 200},
		{name: "stream success", body: `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"hi"}]}`, want: 200},
		{name: "provider refused the credential", body: `{"model":"gpt","messages":[{"role":"user","content":"[[status=401]]"}]}`, want: 502},
		{name: "rate limited", body: `{"model":"gpt","messages":[{"role":"user","content":"[[status=429]]"}]}`, want: 429},
		{name: "provider error", body: `{"model":"gpt","messages":[{"role":"user","content":"[[status=500]]"}]}`, want: 500},
		{name: "reset after the body", body: `{"model":"gpt","messages":[{"role":"user","content":"[[reset=after_body]]"}]}`, want: 502},
		{name: "no first byte", body: `{"model":"gpt","messages":[{"role":"user","content":"[[hang]]"}]}`, want: 504},
		{name: "stream cut before its first event", body: `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"[[cut=after_events:0]]"}]}`, want: 502},
		{name: "stream cut after it began", body: `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"[[chunks=4]] [[cut=after_events:2]]"}]}`, want: 200},
		{name: "connection refused, re-picked", body: `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`, refuse: true, want: 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &events{}
			h, _ := newHandler(t, Options{Recorders: []Recorder{rec}, FirstByte: 100 * time.Millisecond, MaxAttempts: 3})
			if tt.refuse {
				h.o.Transport = refusing{}
			}
			srv := httptest.NewServer(h)
			resp, _ := postChat(t, srv.URL, tt.body)
			srv.Close() // waits for the handler to return
			if resp.StatusCode != tt.want {
				t.Fatalf("client got %d, want %d", resp.StatusCode, tt.want)
			}
			if len(rec.all()) == 0 {
				t.Fatal("no attempt was made")
			}
			m, _ := h.o.Routes.Load().Model("gpt")
			for _, pool := range m.Pools {
				for _, tg := range pool {
					if n := tg.Backend.State.InFlight(); n != 0 {
						t.Errorf("backend %s has %d in flight after the request, want 0", tg.Backend.ID, n)
					}
				}
			}
		})
	}
}
