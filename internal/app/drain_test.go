package app

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestDrainLetsStreamsFinish: on shutdown /readyz fails at once, new
// connections are refused, and an in-flight stream runs to its terminator
// within the grace (docs/operations.md "Drain").
func TestDrainLetsStreamsFinish(t *testing.T) {
	s := startStack(t, stackOptions{grace: "20s"})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"a b c [[chunks=6]] [[event_delay_ms=100]]"}]}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil { // the stream is live
		t.Fatal(err)
	}

	stopped := make(chan struct{})
	go func() { s.shutdown(); close(stopped) }()
	s.events.waitFor(t, "draining", 10*time.Second)
	hr, err := http.Get(s.health + "/readyz")
	if err != nil {
		t.Fatalf("health listener gone while a stream is in flight: %v", err)
	}
	hr.Body.Close()
	if hr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while draining = %d, want 503", hr.StatusCode)
	}

	rest, err := readAll(rd)
	if err != nil {
		t.Fatalf("stream broken by the drain: %v", err)
	}
	if !strings.Contains(rest, "data: [DONE]") {
		t.Fatalf("stream did not finish cleanly during the drain:\n%s", rest)
	}
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("node did not stop after its last stream ended")
	}
}

// TestDrainGraceIsBounded: what is still running when the grace ends is
// cancelled, and Run returns.
func TestDrainGraceIsBounded(t *testing.T) {
	s := startStack(t, stackOptions{grace: "200ms", firstByte: "60s"})
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api+"/v1/chat/completions",
			strings.NewReader(`{"model":"demo-gpt","messages":[{"role":"user","content":"[[hang]]"}]}`))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	s.waitForProviderRequests(t, 1)
	start := time.Now()
	s.shutdown()
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("shutdown took %v with a 200ms grace", d)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung request was not ended by the grace expiry")
	}
	s.events.waitFor(t, "grace over", time.Second)
}

func readAll(rd *bufio.Reader) (string, error) {
	var b strings.Builder
	_, err := rd.WriteTo(&b)
	return b.String(), err
}

// TestDrainDelayKeepsServingWithConnectionClose: during drain.delay the
// node still answers (the load balancer may not have noticed /readyz yet),
// but tells HTTP/1.1 clients to close the connection.
func TestDrainDelayKeepsServingWithConnectionClose(t *testing.T) {
	s := startStack(t, stackOptions{delay: "2s"})
	stopped := make(chan struct{})
	go func() { s.shutdown(); close(stopped) }()
	s.events.waitFor(t, "draining", 10*time.Second)

	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","messages":[{"role":"user","content":"late"}]}`)
	if r.status != 200 {
		t.Fatalf("request during drain delay: %d, want 200", r.status)
	}
	if !r.close {
		t.Fatal("no Connection: close on an HTTP/1.1 answer during the drain")
	}
	hr, err := http.Get(s.health + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	if hr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d during drain, want 503", hr.StatusCode)
	}
	<-stopped
}

// TestDrainGraceEndCutsStreamsInBand: streams still open when the grace
// ends are cut by the node: each client gets the in-band error (never a
// [DONE]), and each attempt's usage event says shutdown, not
// client_cancelled. Before, they stopped after a normal chunk and were
// recorded as cancelled by the client, if at all.
func TestDrainGraceEndCutsStreamsInBand(t *testing.T) {
	s := startStack(t, stackOptions{grace: "300ms", idle: "60s"})
	const streams = 3
	var bodies []*bufio.Reader
	for range streams {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api+"/v1/chat/completions",
			strings.NewReader(`{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"a b c [[chunks=4]] [[event_delay_ms=60000]]"}]}`))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		rd := bufio.NewReader(resp.Body)
		if _, err := rd.ReadString('\n'); err != nil { // the stream is live
			t.Fatal(err)
		}
		bodies = append(bodies, rd)
	}
	s.shutdown()
	for i, rd := range bodies {
		rest, _ := readAll(rd)
		if !strings.Contains(rest, "node_shutting_down") || strings.Contains(rest, "[DONE]") {
			t.Errorf("stream %d after the grace: %q; want the in-band error, no [DONE]", i, rest)
		}
	}
	recs := s.outboxEvents(t)
	if len(recs) != streams {
		t.Fatalf("outbox holds %d events, want %d", len(recs), streams)
	}
	for _, ev := range recs {
		if ev.FailureStage != usageevent.StageShutdown {
			t.Errorf("event of a stream cut at the grace end: failure_stage %q, want %q", ev.FailureStage, usageevent.StageShutdown)
		}
	}
}
