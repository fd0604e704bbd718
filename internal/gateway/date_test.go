package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHTTPDates: the Date value is net/http's format of the time in UTC,
// one value (the same slice) for every answer of a second, a new one for
// the next second.
func TestHTTPDates(t *testing.T) {
	var d httpDates
	at := time.Date(2026, 12, 6, 21, 4, 5, 100, time.FixedZone("X", 3600))
	v := d.now(at)
	if want := at.UTC().Format(http.TimeFormat); len(v) != 1 || v[0] != want {
		t.Fatalf("Date = %q, want [%q]", v, want)
	}
	if w := d.now(at.Add(900 * time.Millisecond)); &w[0] != &v[0] {
		t.Errorf("a second answer of the same second formatted its own Date")
	}
	if w := d.now(at.Add(time.Second)); w[0] != at.Add(time.Second).UTC().Format(http.TimeFormat) {
		t.Errorf("next second: Date = %q", w[0])
	}
}

// TestAnswerHasNodeDate: the handler gives its answers a Date itself (a
// ResponseRecorder, unlike net/http's server, adds none), for its own
// errors and for relayed answers, JSON and streams.
func TestAnswerHasNodeDate(t *testing.T) {
	h, _ := newHandler(t, Options{})
	for _, tt := range []struct {
		name, path, body string
		status           int
	}{
		{"node's own 404", "/v1/nothing", `{}`, http.StatusNotFound},
		{"relayed JSON", "/v1/chat/completions", `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`, http.StatusOK},
		{"relayed stream", "/v1/chat/completions", `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now().Truncate(time.Second)
			r := httptest.NewRequest(http.MethodPost, tt.path, strings.NewReader(tt.body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			got, err := http.ParseTime(w.Header().Get("Date"))
			if err != nil {
				t.Fatalf("status %d, Date %q: %v", w.Code, w.Header().Get("Date"), err)
			}
			if got.Before(before) || got.After(time.Now()) {
				t.Errorf("Date %v, want between %v and now", got, before)
			}
		})
	}
}
