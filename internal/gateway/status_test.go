package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/routes"
)

// noTarget is a Picker for which no target can take traffic.
type noTarget struct{}

func (noTarget) Pick([]*routes.Target, routes.Caps, []*routes.Target) (balance.Lease, bool) {
	return balance.Lease{}, false
}

// TestErrorStatusIsWhatTheClientGot: on every error path the status the
// attempt's log line and usage event report is the one the client
// received (docs/api.md "Status codes"), because the error writer records
// it, not code beside each write.
func TestErrorStatusIsWhatTheClientGot(t *testing.T) {
	tests := []struct {
		name, body string
		noTarget   bool
		want       int
	}{
		{name: "provider refused the credential", body: `{"model":"gpt","messages":[{"role":"user","content":"[[status=401]]"}]}`, want: 502},
		{name: "provider status passed through", body: `{"model":"gpt","messages":[{"role":"user","content":"[[status=429]]"}]}`, want: 429},
		{name: "reset after the body", body: `{"model":"gpt","messages":[{"role":"user","content":"[[reset=after_body]]"}]}`, want: 502},
		{name: "no first byte", body: `{"model":"gpt","messages":[{"role":"user","content":"[[hang]]"}]}`, want: 504},
		{name: "stream cut before its first event", body: `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"[[cut=after_events:0]]"}]}`, want: 502},
		{name: "no target can take traffic", body: `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`, noTarget: true, want: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				logs  bytes.Buffer
				logMu sync.Mutex
			)
			rec := &events{}
			h, _ := newHandler(t, Options{
				Recorders: []Recorder{rec}, FirstByte: 100 * time.Millisecond, MaxAttempts: 1,
				Logger: slog.New(slog.NewJSONHandler(lockedWriter{&logs, &logMu}, nil)),
			})
			if tt.noTarget {
				h.o.Picker = noTarget{}
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, _ := postChat(t, srv.URL, tt.body)
			if resp.StatusCode != tt.want {
				t.Fatalf("client got %d, want %d", resp.StatusCode, tt.want)
			}

			evs := rec.all()
			if tt.noTarget != (len(evs) == 0) {
				t.Fatalf("got %d usage events", len(evs))
			}
			for _, ev := range evs {
				if ev.HTTPStatus != resp.StatusCode {
					t.Errorf("usage event says %d, the client got %d", ev.HTTPStatus, resp.StatusCode)
				}
			}

			logMu.Lock()
			defer logMu.Unlock()
			lines := 0
			for sc := bufio.NewScanner(&logs); sc.Scan(); {
				var line struct {
					Msg    string `json:"msg"`
					Status int    `json:"status"`
				}
				if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
					t.Fatal(err)
				}
				if line.Msg != "request" {
					continue
				}
				lines++
				if line.Status != resp.StatusCode {
					t.Errorf("log line says %d, the client got %d", line.Status, resp.StatusCode)
				}
			}
			if lines != 1 {
				t.Errorf("%d request log lines, want 1", lines)
			}
		})
	}
}
