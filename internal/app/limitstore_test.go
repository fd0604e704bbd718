package app

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/pkg/authsnap"
)

// TestNodeLimitsRedisStore: with limits.store = "redis", a node whose
// Redis is unreachable says so on /readyz and in
// scootgate_limits_store_up, and with on_store_failure = "closed"
// answers a limited key 503 before anything is sent; a key without
// limits is served. With Debian's redis-server started on that address,
// the node joins the fleet's buckets without a restart.
func TestNodeLimitsRedisStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there yet
	path := filepath.Join(t.TempDir(), "authz-limits.json")
	doc := authsnap.Snapshot{Schema: authsnap.Schema, Version: 1,
		Keys: []authsnap.Key{
			{KeyID: "k-full", TenantID: "t-1", Digest: authsnap.Digest(clientKey)},
			{KeyID: "k-limited", TenantID: "t-2", Digest: authsnap.Digest(limitedKey), Limits: authsnap.Limits{RequestsPerMinute: 100}},
		},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, stackOptions{authzSource: "file:" + path, limits: "store = \"redis\"\n[limits.redis]\n" +
		"address = \"127.0.0.1:" + strconv.Itoa(port) + "\"\non_store_failure = \"closed\""})
	body := `{"model":"` + openAIModel + `","messages":[{"role":"user","content":"hi"}]}`
	r := s.do("POST", "/v1/chat/completions", bearer(limitedKey), body)
	if r.status != 503 || r.header.Get("X-Should-Retry") != "true" || !strings.Contains(r.body, "limits is unreachable") {
		t.Fatalf("limited key with the store down: %d %s", r.status, r.body)
	}
	if n := s.prov.RequestCount(); n != 0 {
		t.Errorf("the provider got %d requests, want 0", n)
	}
	if r := s.do("POST", "/v1/chat/completions", bearer(clientKey), body); r.status != 200 {
		t.Fatalf("a key without limits: %d", r.status)
	}
	if got := readyDetail(t, s.health); !strings.Contains(got, "unreachable; until it answers, limited requests refused with 503") {
		t.Errorf("/readyz detail %q", got)
	}
	if m := s.scrapeMetrics(); !strings.Contains(m, "scootgate_limits_store_up 0") {
		t.Errorf("store metric:\n%s", grepLines(m, "store_up"))
	}

	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not installed (apt-get install redis-server)"
		if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
			t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
		}
		t.Skip("SKIPPING the rest (Redis comes up): " + msg)
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// The node probes with backoff (at most 5 s apart); wait for it.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(readyDetail(t, s.health), ": up;") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz detail %q 20s after redis-server started", readyDetail(t, s.health))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := s.do("POST", "/v1/chat/completions", bearer(limitedKey), body); r.status != 200 || r.header.Get("X-Ratelimit-Limit-Requests") != "100" {
		t.Fatalf("limited key with the store up: %d, limit %q", r.status, r.header.Get("X-Ratelimit-Limit-Requests"))
	}
	m := s.scrapeMetrics()
	if !strings.Contains(m, "scootgate_limits_store_up 1") {
		t.Errorf("store metric:\n%s", grepLines(m, "store_up"))
	}
	// The limited request's takes reached Redis, and are counted.
	if !strings.Contains(m, "scootgate_limits_store_round_trips_total ") || strings.Contains(m, "scootgate_limits_store_round_trips_total 0\n") {
		t.Errorf("round trips metric:\n%s", grepLines(m, "round_trips"))
	}
}

// readyDetail returns the limits_store detail of /readyz.
func readyDetail(t *testing.T, healthURL string) string {
	t.Helper()
	resp, err := http.Get(healthURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep ReadyReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	return rep.Details["limits_store"]
}

// TestNodeLimitsThroughSentinel: a node whose [limits.redis] names a
// Redis Sentinel and its master set (no address) finds the primary
// through it, says so on /readyz, and serves a limited key by the
// fleet's buckets.
func TestNodeLimitsThroughSentinel(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not installed (apt-get install redis-server)"
		if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
			t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
		}
		t.Skip("SKIPPING real-Redis Sentinel test: " + msg)
	}
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	start := func(args ...string) {
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	rp, sp := free(), free()
	dir := t.TempDir()
	start("--port", rp, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte("port "+sp+"\nbind 127.0.0.1\ndir "+dir+"\nsentinel monitor sg 127.0.0.1 "+rp+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start(conf, "--sentinel")

	path := filepath.Join(t.TempDir(), "authz-limits.json")
	data, err := json.Marshal(authsnap.Snapshot{Schema: authsnap.Schema, Version: 1, Keys: []authsnap.Key{
		{KeyID: "k-limited", TenantID: "t-2", Digest: authsnap.Digest(limitedKey), Limits: authsnap.Limits{RequestsPerMinute: 100}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, stackOptions{authzSource: "file:" + path, limits: "store = \"redis\"\n[limits.redis]\n" +
		"sentinel_addrs = [\"127.0.0.1:" + sp + "\"]\nmaster_name = \"sg\"\non_store_failure = \"closed\""})
	want := "redis sg (sentinels 127.0.0.1:" + sp + "): up;"
	deadline := time.Now().Add(20 * time.Second) // the Sentinel and the node's probes start on their own
	for !strings.Contains(readyDetail(t, s.health), want) {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz detail %q, want %q", readyDetail(t, s.health), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	body := `{"model":"` + anthropicModel + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	r := s.do("POST", "/v1/messages", map[string]string{"x-api-key": limitedKey, "anthropic-version": "2023-06-01"}, body)
	if r.status != 200 || r.header.Get("Anthropic-Ratelimit-Requests-Limit") != "100" {
		t.Fatalf("limited key through Sentinel: %d, headers %v", r.status, r.header)
	}
}
