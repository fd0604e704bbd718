package app

import (
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"
)

// requireDaemon returns the address of a real Debian daemon from the
// environment (set by scripts/ci-daemons.sh), skipping loudly when it is
// absent — unless SCOOTGATE_REQUIRE_DAEMONS=1 (CI), where absence fails.
func requireDaemon(t *testing.T, env, what string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	msg := env + " is unset: " + what + " is not running. Start it with: env=$(scripts/ci-daemons.sh) && eval \"$env\""
	if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
		t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
	}
	t.Skip("SKIPPING real-daemon test: " + msg)
	return ""
}

// TestOfficialSDKsThroughDante runs the SDK suite with Debian's dante-server
// as the SOCKS5 egress proxy.
func TestOfficialSDKsThroughDante(t *testing.T) {
	addr := requireDaemon(t, "SCOOTGATE_DANTE_ADDR", "dante-server (SOCKS5)")
	s := startStack(t, stackOptions{proxyURL: "socks5://" + addr})
	runSDKSuite(t, s)
}

// TestOfficialSDKsThroughTinyproxy runs the SDK suite with Debian's
// tinyproxy as the HTTP CONNECT egress proxy, with Basic auth.
func TestOfficialSDKsThroughTinyproxy(t *testing.T) {
	u := requireDaemon(t, "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)")
	s := startStack(t, stackOptions{proxyURL: u})
	runSDKSuite(t, s)
}

// TestTinyproxyWrongPasswordFailsClosed: a proxy that refuses our
// credentials is an egress fault: nothing reaches the provider, the client
// gets a 502 that is safe to retry, and the password never shows.
func TestTinyproxyWrongPasswordFailsClosed(t *testing.T) {
	raw := requireDaemon(t, "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), proxyPassword) // wrong, and a canary
	s := startStack(t, stackOptions{proxyURL: u.String()})
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`)
	if r.status != 502 || r.header.Get("X-Should-Retry") != "true" {
		t.Fatalf("status %d x-should-retry %q, want 502 true; body %s", r.status, r.header.Get("X-Should-Retry"), r.body)
	}
	if n := s.prov.ConnCount(); n != 0 {
		t.Fatalf("provider accepted %d connections, want 0", n)
	}
	s.events.waitFor(t, "request chat_completions 502 definitely_not_sent", 5*time.Second)
	s.logs.mustContain(t, `"send_state":"definitely_not_sent"`)
}
