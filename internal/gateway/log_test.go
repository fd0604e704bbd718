package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/usage"
)

// TestRequestLine: each attempt writes one request line through the
// node's handler with the fields docs/operations.md "Logs" lists; a
// failure adds its stage and error, at WARN.
func TestRequestLine(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return at } // fixed: ttfb and duration are 0
	// One backend each for the failures: a failure cools its backend down.
	reqs := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt","messages":[{"role":"user","content":"hi \"quoted\" \u2028"}]}`},
		{"/v1/messages", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"[[hang]]"}]}`},
		{"/v1/chat/completions", `{"model":"gpt-raw","stream":true,"messages":[{"role":"user","content":"[[cut=after_events:1]]"}]}`},
		{"/v1/chat/completions", `{"model":"gpt","messages":[{"role":"user","content":"[[status=429]]"}]}`},
	}
	var logs syncBuffer
	// FirstByte ends the [[hang]] request; it is long enough that the
	// others answer within it on a loaded machine.
	hd, _ := newHandler(t, Options{Now: now, FirstByte: time.Second, Logger: slog.New(logline.NewHandler(&logs, nil))})
	srv := httptest.NewServer(hd)
	defer srv.Close()
	for _, r := range reqs {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+r.path, strings.NewReader(r.body))
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	var got []map[string]any
	for sc := bufio.NewScanner(strings.NewReader(logs.String())); sc.Scan(); {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %s: %v", sc.Bytes(), err)
		}
		if line["msg"] != "request" {
			continue
		}
		for _, k := range []string{"time", "request_id"} { // they vary
			if _, ok := line[k]; !ok {
				t.Errorf("line %v has no %s", line, k)
			}
			delete(line, k)
		}
		if _, ok := line["error"]; ok {
			line["error"] = "(set)" // its text is the error's own
		}
		got = append(got, line)
	}
	line := func(level, path, model string, stream bool, backend, state string, status float64, stage string, err bool) map[string]any {
		m := map[string]any{
			"level": level, "msg": "request", "path": path, "model": model, "stream": stream, "backend": backend,
			"attempt": 1.0, "send_state": state, "status": status, "ttfb_ms": 0.0, "duration_ms": 0.0, "placement": "balanced",
		}
		if stage != "" {
			m["stage"] = stage
		}
		if err {
			m["error"] = "(set)"
		}
		return m
	}
	want := []map[string]any{
		line("INFO", "/v1/chat/completions", "gpt", false, "oa", "response_received", 200, "", false),
		line("WARN", "/v1/messages", "claude", false, "an", "possibly_sent", 504, "timeout", true),
		line("WARN", "/v1/chat/completions", "gpt-raw", true, "oa-raw", "response_received", 200, "stream", true),
		// A provider's own error status is an answer, not a failure.
		line("INFO", "/v1/chat/completions", "gpt", false, "oa", "response_received", 429, "provider_status", false),
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("request lines (-got +want):\n%s\nlog:\n%s", diff, logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the handler's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestCancelledNotSentLinesLimited: request lines of attempts cancelled by
// their client before anything was sent are limited per key: a flooding
// key gets its burst, then a line per refill that counts the lines left
// out, and another key's lines, and the flooding key's other lines, are
// all written.
func TestCancelledNotSentLinesLimited(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var logs syncBuffer
	h := New(Options{Now: func() time.Time { return at }, Logger: slog.New(logline.NewHandler(&logs, nil))})
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	call := func(key string, state provider.SendState, st stage) {
		c := &call{h: h, r: r, rid: "sg-1", start: at, principal: &authz.Principal{KeyID: key}}
		c.log(t.Context(), &attempt{n: 1, state: state, stage: st})
	}
	for range 1000 {
		call("flood", provider.NotSent, stageClientCancelled)
	}
	for range 5 {
		call("other", provider.NotSent, stageClientCancelled)
		call("flood", provider.NotSent, stageConnect)
		call("flood", provider.PossiblySent, stageClientCancelled)
	}
	at = at.Add(time.Second / usage.CancelRate) // one line's worth of refill
	call("flood", provider.NotSent, stageClientCancelled)

	count := map[string]int{}
	var last string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `"stage":"client_cancelled"`) && strings.Contains(l, `"send_state":"definitely_not_sent"`) {
			count["cancelled-not-sent"]++
			last = l
			continue
		}
		count["other"]++
	}
	want := map[string]int{"cancelled-not-sent": usage.CancelBurst + 5 + 1, "other": 10}
	if diff := cmp.Diff(count, want); diff != "" {
		t.Errorf("request lines (-got +want):\n%s", diff)
	}
	if wantS := fmt.Sprintf(`"suppressed":%d`, 1000-usage.CancelBurst); !strings.Contains(last, wantS) {
		t.Errorf("the line after the refill: %s; want it to hold %s", last, wantS)
	}
}
