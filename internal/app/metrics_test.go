package app

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMetricsOnHealthListenerOnly: the Prometheus exposition is served on
// the health listener, reflects traffic, and never carries a secret.
func TestMetricsOnHealthListenerOnly(t *testing.T) {
	s := startStack(t, stackOptions{})
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer("sk-canary-unknown"), chat); r.status != 401 {
		t.Fatalf("status %d", r.status)
	}
	resp, err := http.Get(s.health + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`scootgate_requests_total{code="200",endpoint="chat_completions",send_state="response_received"} 1`,
		`scootgate_requests_total{code="401",endpoint="chat_completions",send_state="none"} 1`,
		`scootgate_upstream_attempts_total{backend="oa",outcome="success",platform="openai"} 1`,
		`scootgate_backend_capacity{backend="oa"} 16`,
		`scootgate_snapshot_version{kind="authz"} 1`,
		`scootgate_outbox_`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, c := range append(canaries, "sk-canary-unknown") {
		if strings.Contains(text, c) {
			t.Error("a secret appeared in the metrics")
		}
	}
	if r := s.do(http.MethodGet, "/metrics", nil, ""); r.status != 404 {
		t.Errorf("/metrics on the API listener = %d, want 404", r.status)
	}
}
