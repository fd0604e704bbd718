package app

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestCancelFloodKeepsOtherKeysEvents: one key floods the node with
// requests it resets before anything reaches the provider (connections
// that send a request and RST), while another key sends ordinary
// requests. With a crash window of 256 events (room for all of the second
// key's, none for 2,000 of the first), every answered request of the
// second key has its event, the flooding key's cancelled
// attempts are recorded only within its budget, and their request lines
// are bounded the same way.
func TestCancelFloodKeepsOtherKeysEvents(t *testing.T) {
	const hangModel = "flood-gpt"
	hang := deadAddr(t) // never dialled: the proxy holds every CONNECT to it
	hangHost, hangPort, _ := net.SplitHostPort(hang)
	entered := make(chan struct{}, 1<<16)
	release := make(chan struct{})
	s := startStack(t, stackOptions{
		egress: "connect",
		connectAllow: func(host string, port int) bool {
			if host == hangHost && fmt.Sprint(port) == hangPort {
				entered <- struct{}{}
				<-release // the attempt is stuck before its first byte
				return false
			}
			return true
		},
		// The first lines continue [usage].
		extraTOML: fmt.Sprintf(`crash_window_events = 256
[backends.hang]
protocol = "openai"
base_url = "http://%s/v1"
credential = "oa"
max_inflight_per_node = 1000
[models.%s]
[[models.%s.targets]]
backend = "hang"
model = "fake-gpt-1"
weight = 1
`, hang, hangModel, hangModel),
	})
	t.Cleanup(func() { close(release) }) // runs before the stack stops
	start := time.Now()

	// The other key: ordinary requests, two at a time, all through the
	// flood.
	const perWorker = 40
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answered int
	)
	for range 2 {
		wg.Go(func() {
			for range perWorker {
				r := s.do("POST", "/v1/messages", map[string]string{
					"x-api-key": limitedKey, "anthropic-version": "2023-06-01", "content-type": "application/json",
				}, fmt.Sprintf(`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, anthropicModel))
				if r.status == 200 {
					mu.Lock()
					answered++
					mu.Unlock()
				}
			}
		})
	}

	// The flood: rounds of 100 connections that each send a request, wait
	// until the node's attempt is stuck in its CONNECT, and reset.
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"x"}]}`, hangModel)
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: n\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", clientKey, len(body), body)
	api := strings.TrimPrefix(s.api, "http://")
	const rounds, perRound = 20, 100
	for range rounds {
		conns := make([]*net.TCPConn, 0, perRound)
		for range perRound {
			c, err := net.Dial("tcp", api)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c.(*net.TCPConn))
		}
		guard := time.NewTimer(20 * time.Second) // against a hang, not a synchronisation
		for range perRound {
			select {
			case <-entered:
			case <-guard.C:
				t.Fatal("the node's attempts did not reach the proxy")
			}
		}
		guard.Stop()
		for _, c := range conns {
			_ = c.SetLinger(0) // close with a RST
			_ = c.Close()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	s.shutdown() // every attempt ends and the outbox is flushed

	var cancelled, other int
	forB := 0
	for _, ev := range s.outboxEvents(t) {
		switch {
		case ev.KeyID == "k-limited":
			forB++
		case ev.SendState == usageevent.SendDefinitelyNotSent && ev.FailureStage == usageevent.StageClientCancelled:
			cancelled++
		default:
			other++
		}
	}
	if answered != 2*perWorker || forB != answered {
		t.Errorf("the other key: %d of %d requests answered, %d events; want every request answered and one event each", answered, 2*perWorker, forB)
	}
	// Within the flooding key's budget: a burst, then a few a second.
	bound := usage.CancelBurst + int(elapsed.Seconds()+1)*usage.CancelRate
	if cancelled == 0 || cancelled > bound || other != 0 {
		t.Errorf("flooding key: %d cancelled-before-sending events, %d others; want 1..%d (its budget over %v), no others", cancelled, other, bound, elapsed)
	}
	lines := 0
	for l := range strings.Lines(s.logs.String()) {
		if strings.Contains(l, `"msg":"request"`) && strings.Contains(l, `"stage":"client_cancelled"`) {
			lines++
		}
	}
	if lines == 0 || lines > bound {
		t.Errorf("%d request lines of cancelled attempts for %d cancellations; want 1..%d", lines, rounds*perRound, bound)
	}
	t.Logf("%d flood attempts in %v: %d events and %d lines of them kept; the other key: %d events for %d answers", rounds*perRound, elapsed, cancelled, lines, forB, answered)
}
