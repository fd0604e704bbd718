package app

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/gateway"
)

// TestRefusalLogRateLimited: a flood of refusals writes the burst, then
// refusalRate lines a second by the clock, each later line saying how
// many were left out before it.
func TestRefusalLogRateLimited(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l := newRefusalLog(slog.New(slog.NewJSONHandler(&buf, nil)), func() time.Time { return now })
	r := gateway.Refusal{RequestID: "sg-1", Path: "/v1/chat/completions", Model: "gpt-5", Status: 404, Reason: "model_not_found"}
	for range 1000 {
		l.Refused(r)
	}
	if n := strings.Count(buf.String(), "\n"); n != refusalBurst {
		t.Fatalf("%d lines for a flood of 1000 at one instant, want the burst of %d", n, refusalBurst)
	}
	buf.Reset()
	now = now.Add(time.Second) // refusalRate tokens
	for range 1000 {
		l.Refused(r)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != int(refusalRate) {
		t.Fatalf("%d lines in the next second, want %v", len(lines), refusalRate)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"msg": "request refused", "request_id": "sg-1", "path": "/v1/chat/completions", "model": "gpt-5",
		"status": float64(404), "reason": "model_not_found", "suppressed": float64(980),
	}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, first[k], v, lines[0])
		}
	}
	if strings.Contains(lines[1], "suppressed") {
		t.Errorf("the count of left-out lines is repeated: %s", lines[1])
	}
}

// TestRefusalLogLimitPerKey: a key refused by its limits in a retry loop
// gets one line per limitLogEvery, whatever the global bucket has left;
// another key is not held back by it; the next line of the key says how
// many of its refusals were left out.
func TestRefusalLogLimitPerKey(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l := newRefusalLog(slog.New(slog.NewJSONHandler(&buf, nil)), func() time.Time { return now })
	refusal := func(key string) gateway.Refusal {
		return gateway.Refusal{RequestID: "sg-1", Path: "/v1/chat/completions", Model: "gpt", Status: 429,
			Reason: "key_rate_limited", KeyID: key, TenantID: "t_1", Limit: "requests"}
	}
	for range 100 {
		l.Refused(refusal("k_loop"))
	}
	l.Refused(refusal("k_other"))
	now = now.Add(limitLogEvery - time.Nanosecond)
	l.Refused(refusal("k_loop"))
	now = now.Add(time.Nanosecond)
	l.Refused(refusal("k_loop"))

	type line struct {
		KeyID      string  `json:"key_id"`
		TenantID   string  `json:"tenant_id"`
		Limit      string  `json:"limit"`
		Suppressed float64 `json:"key_suppressed"`
	}
	var got []line
	for _, s := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var ln line
		if err := json.Unmarshal([]byte(s), &ln); err != nil {
			t.Fatal(err)
		}
		got = append(got, ln)
	}
	want := []line{
		{KeyID: "k_loop", TenantID: "t_1", Limit: "requests"},
		{KeyID: "k_other", TenantID: "t_1", Limit: "requests"},
		{KeyID: "k_loop", TenantID: "t_1", Limit: "requests", Suppressed: 100},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("lines (-got +want):\n%s", diff)
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	got := clip(long)
	if len(got) > maxLogField+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("clip: %d bytes %q", len(got), got)
	}
	if clip("short") != "short" {
		t.Error("short string changed")
	}
}

// TestRefusalsLogged: requests refused before routing each write one
// line with the path, the model asked for, the reason and the request
// id, never the key they carried; durations in lifecycle lines are
// readable.
func TestRefusalsLogged(t *testing.T) {
	s := startStack(t, stackOptions{})
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer("sk-canary-unknown"), chat)
	if r.status != 401 {
		t.Fatalf("status %d", r.status)
	}
	s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), `{"model":"not-served","messages":[]}`)
	s.do(http.MethodPost, "/v1/nothing-here", bearer(clientKey), `{}`)
	s.events.waitFor(t, "refused 404 not_found", 10*time.Second)
	log := s.logs.String()
	for _, want := range []string{
		`"msg":"request refused","request_id":"sg-`,
		`"path":"/v1/chat/completions","model":"","status":401,"reason":"invalid_api_key"`,
		`"path":"/v1/chat/completions","model":"not-served","status":404,"reason":"model_not_found"`,
		`"path":"/v1/nothing-here","model":"","status":404,"reason":"not_found"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s", want)
		}
	}
	for _, c := range append(canaries, "sk-canary-unknown", clientKey) {
		if strings.Contains(log, c) {
			t.Errorf("a key appeared in the log")
		}
	}
	s.shutdown()
	s.logs.mustContain(t, `"msg":"drained: every request finished"`) // Run has returned
	if !strings.Contains(s.logs.String(), `"msg":"draining","delay":"0s","grace":"5s"`) {
		t.Errorf("drain line without readable durations:\n%s", s.logs.String())
	}
}
