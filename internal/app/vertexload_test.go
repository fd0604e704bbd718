package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
)

// gate holds the requests to a handler while it is closed.
type gate struct {
	entered chan struct{} // one send per held request (dropped when full)

	mu   sync.Mutex
	held chan struct{} // guarded by mu; nil: open
}

func (g *gate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		held := g.held
		g.mu.Unlock()
		if held != nil {
			select {
			case g.entered <- struct{}{}:
			default:
			}
			<-held
		}
		h.ServeHTTP(w, r)
	})
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = make(chan struct{})
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

// TestVertexRefreshUnderLoad: requests that all find the Vertex token
// expired while its replacement is being granted wait for that one grant
// (single flight through a whole node, the egress proxy included): the
// token endpoint sees one grant, every request succeeds on the Vertex
// target with the new token, none goes elsewhere.
func TestVertexRefreshUnderLoad(t *testing.T) {
	// 1,000 requests; under -race fewer, as the race detector allows
	// 8,128 live goroutines and each request here keeps about ten (client,
	// node, SOCKS5 tunnel, fake provider), and every package's race tests
	// share two cores in CI.
	n := 1000
	if raceEnabled {
		n = 300
	}
	clk := clock.NewFake(time.Now())
	// All n connections open at once from one address: under load more
	// than the node's bound on unauthenticated connections per address
	// may wait for their first request at once (docs/operations.md), and
	// it would close them, which is not what this test is about.
	s := startStack(t, stackOptions{vertex: true, tokenClock: clk.Now, cap: 2 * n, attempts: 1, firstByte: "1m", underLoad: true,
		limits: "max_unauthenticated_per_client = 0\n"})
	first := vertexMessage(t.Context(), s)
	if first.err != nil || first.status != http.StatusOK {
		t.Fatalf("first request: %+v", first)
	}
	if g := s.google.Grants(); g != 1 {
		t.Fatalf("%d grants after the first request, want 1", g)
	}
	s.prov.Reset()

	// The token expires; the grant that replaces it is held at the
	// endpoint until every request waits for it.
	clk.Advance(tokenLifetime + time.Minute)
	s.tokens.hold()
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = vertexMessage(t.Context(), s) })
	}
	select {
	case <-s.tokens.entered:
	case <-time.After(2 * time.Minute): // only when it fails
		t.Fatal("no grant reached the token endpoint")
	}
	// Bounds, not synchronisation: under -race on two shared cores the
	// requests take tens of seconds to all arrive.
	waitMetric(t, s, fmt.Sprintf(`scootgate_backend_inflight{backend="vx"} %d`, n), 2*time.Minute)
	s.tokens.release()
	wg.Wait()

	failed := 0
	for i, r := range results {
		if r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, "echo: load") {
			if failed++; failed <= 3 {
				t.Errorf("request %d: %+v", i, r)
			}
		}
	}
	if failed > 0 {
		t.Logf("the node's last log lines:\n%s", lastLines(s.logs.String(), 8))
		t.Fatalf("%d of %d requests failed", failed, n)
	}
	if g := s.google.Grants(); g != 2 {
		t.Errorf("%d grants in all, want 2: one for the first request, one for all %d after expiry", g, n)
	}
	reqs := s.prov.Requests()
	if len(reqs) != n {
		t.Fatalf("the provider saw %d requests, want %d", len(reqs), n)
	}
	token := reqs[0].Header.Get("Authorization")
	for _, r := range reqs {
		if r.Protocol != fakeprovider.Anthropic || r.Path != vertexAnthropicPath+":rawPredict" || r.Header.Get("Authorization") != token {
			t.Fatalf("provider saw %s %s with another token, want every request on Vertex with the one new token", r.Protocol, r.Path)
		}
	}
	if !s.google.Live(strings.TrimPrefix(token, "Bearer ")) {
		t.Error("the requests' token is not live at the endpoint")
	}
}

type result struct {
	status int
	body   string
	err    error
}

// vertexMessage sends one Messages request for vertexModel; safe from
// any goroutine (no t.Fatal).
func vertexMessage(ctx context.Context, s *stack) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.api+"/v1/messages",
		strings.NewReader(`{"model":"`+vertexModel+`","max_tokens":5,"messages":[{"role":"user","content":"load"}]}`))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("X-Api-Key", clientKey)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, body: string(body), err: err}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
