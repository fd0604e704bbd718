package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// saturation is the node's load as a test sets it.
type saturation struct{ on atomic.Bool }

func (s *saturation) SaturatedSince(time.Time) bool { return s.on.Load() }

// attemptOutcomes records the outcome of every attempt.
type attemptOutcomes struct {
	discardObserver
	mu  sync.Mutex
	got []string
}

func (o *attemptOutcomes) ObserveAttempt(_, _ string, out upstream.Outcome, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, out.String())
}

type discardObserver struct{}

func (discardObserver) ObserveRequest(provider.Endpoint, int, provider.SendState, time.Duration, bool) {
}
func (discardObserver) ObserveModels(int, time.Duration)                               {}
func (discardObserver) ObserveAttempt(string, string, upstream.Outcome, time.Duration) {}
func (discardObserver) ObserveLimitRefusal(string, string)                             {}
func (discardObserver) ObserveFallback(string, string, string)                         {}

// TestSaturatedNodeKeepsBreakerClosed: first-byte timeouts of a node that
// is itself saturated are the node's (docs/failures.md "When the node is
// the bottleneck"): five of them leave the backend's breaker closed and
// the next request reaches the provider. On a node that is not saturated,
// the same five open the breaker and the next request is a 503.
func TestSaturatedNodeKeepsBreakerClosed(t *testing.T) {
	tests := []struct {
		name      string
		saturated bool
		want      []int    // statuses: five timeouts, then one ordinary request
		outcomes  []string // of the attempts
	}{
		{"healthy node: the provider's timeouts open the breaker", false,
			[]int{504, 504, 504, 504, 504, 503},
			[]string{"transport_failure", "transport_failure", "transport_failure", "transport_failure", "transport_failure"}},
		{"saturated node: its own timeouts do not", true,
			[]int{504, 504, 504, 504, 504, 200},
			[]string{"node_overloaded", "node_overloaded", "node_overloaded", "node_overloaded", "node_overloaded", "success"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load := &saturation{}
			load.on.Store(tt.saturated)
			obs := &attemptOutcomes{}
			h, _ := newHandler(t, Options{FirstByte: 50 * time.Millisecond, NodeLoad: load, Observer: obs})
			srv := httptest.NewServer(h)
			defer srv.Close()
			var got []int
			for i := range len(tt.want) {
				content := "[[hang]]"
				if i == len(tt.want)-1 {
					content = "hi"
				}
				resp, _ := postChat(t, srv.URL, fmt.Sprintf(`{"model":"gpt","messages":[{"role":"user","content":%q}]}`, content))
				got = append(got, resp.StatusCode)
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("statuses (-got +want):\n%s", diff)
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if diff := cmp.Diff(obs.got, tt.outcomes); diff != "" {
				t.Errorf("outcomes (-got +want):\n%s", diff)
			}
		})
	}
}

// TestNodeTimerOutcome: which failures a saturated node takes as its own.
// Only the node's own timers are; a reset, a provider 5xx or a refused
// connection is the backend's whatever the node's load.
func TestNodeTimerOutcome(t *testing.T) {
	connectTimeout := &egress.NotSentError{Proxy: "p", Stage: egress.StageTarget, Err: egress.ErrConnectTimeout}
	tests := []struct {
		name      string
		a         *attempt
		saturated bool
		want      upstream.Outcome
	}{
		{"first byte, saturated", &attempt{state: provider.PossiblySent, stage: stageTimeout, err: errFirstByteTimeout}, true, upstream.NodeOverloaded},
		{"first byte, healthy", &attempt{state: provider.PossiblySent, stage: stageTimeout, err: errFirstByteTimeout}, false, upstream.TransportFailure},
		{"stream idle after the 200, saturated", &attempt{state: provider.ResponseReceived, providerStatus: 200, stage: stageTimeout, err: errIdleTimeout}, true, upstream.NodeOverloaded},
		{"connect timeout, saturated", &attempt{state: provider.NotSent, stage: stageConnect, err: connectTimeout}, true, upstream.NodeOverloaded},
		{"connect timeout, healthy", &attempt{state: provider.NotSent, stage: stageConnect, err: connectTimeout}, false, upstream.TransportFailure},
		{"first byte limit before a connection, saturated", &attempt{state: provider.NotSent, stage: stageConnect, err: fmt.Errorf("dial: %w", errFirstByteTimeout)}, true, upstream.NodeOverloaded},
		{"first byte limit before a connection, healthy", &attempt{state: provider.NotSent, stage: stageConnect, err: fmt.Errorf("dial: %w", errFirstByteTimeout)}, false, upstream.TransportFailure},
		{"connection refused, saturated", &attempt{state: provider.NotSent, stage: stageConnect, err: &egress.NotSentError{Proxy: "p", Stage: egress.StageTarget, Err: io.EOF}}, true, upstream.TransportFailure},
		{"reset after sending, saturated", &attempt{state: provider.PossiblySent, stage: stageSend, err: io.ErrUnexpectedEOF}, true, upstream.TransportFailure},
		{"provider 503, saturated", &attempt{state: provider.ResponseReceived, providerStatus: 503, stage: stageProviderStatus}, true, upstream.TransportFailure},
		{"stream cut, saturated", &attempt{state: provider.ResponseReceived, providerStatus: 200, stage: stageStream}, true, upstream.TransportFailure},
		{"success, saturated", &attempt{state: provider.ResponseReceived, providerStatus: 200}, true, upstream.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load := &saturation{}
			load.on.Store(tt.saturated)
			c := &call{h: &Handler{o: Options{NodeLoad: load}}}
			if got := c.result(tt.a).Outcome; got != tt.want {
				t.Errorf("outcome %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTimeLimitBeforeConnection: when the first-byte limit runs out while
// the connection to the provider is still being made (a proxy or a node
// under load), the client gets 504 upstream_timeout with x-should-retry:
// true (nothing was sent), not 502 upstream_unreachable; a dial that
// fails at once is still a 502.
func TestTimeLimitBeforeConnection(t *testing.T) {
	released := make(chan struct{})
	defer close(released)
	tests := []struct {
		name       string
		dial       func(ctx context.Context, network, addr string) (net.Conn, error)
		wantStatus int
		wantCode   string
	}{
		{"dial outlasts the first-byte limit", func(context.Context, string, string) (net.Conn, error) {
			// The transport dials on past the request's end; the test
			// lets the dial go when it is done.
			<-released
			return nil, errors.New("released")
		}, http.StatusGatewayTimeout, "upstream_timeout"},
		{"dial refused", func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("connection refused")
		}, http.StatusBadGateway, "upstream_unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newHandler(t, Options{FirstByte: 50 * time.Millisecond})
			h.o.Transport = &http.Transport{DialContext: tt.dial}
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, body := postChat(t, srv.URL, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), `"`+tt.wantCode+`"`) {
				t.Errorf("status %d, body %s; want %d with code %s", resp.StatusCode, body, tt.wantStatus, tt.wantCode)
			}
			if got := resp.Header.Get("x-should-retry"); got != "true" {
				t.Errorf("x-should-retry = %q, want true: nothing was sent", got)
			}
		})
	}
}

// TestOutOfDescriptorsSheds: a dial the egress dialer could not make for
// want of a file descriptor (egress.StageNode, as it reports EMFILE) is
// the node's own overload: the client gets 503 no_target_available with
// Retry-After and x-should-retry: true (nothing was sent), not 502
// upstream_unreachable; the attempt's outcome is node_overloaded, so six
// in a row leave the backend's breaker closed and every request still
// reaches the dialer; the usage event says not sent, stage connect.
func TestOutOfDescriptorsSheds(t *testing.T) {
	emfile := &egress.NotSentError{Proxy: "p", Stage: egress.StageNode,
		Err: fmt.Errorf("dial proxy: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)})}
	var dials atomic.Int64
	obs := &attemptOutcomes{}
	rec := &events{}
	h, _ := newHandler(t, Options{Observer: obs, Recorders: []Recorder{rec}, MaxAttempts: 3})
	h.o.Transport = &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		dials.Add(1)
		return nil, emfile
	}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	const n = 6
	for i := range n {
		resp, body := postChat(t, srv.URL, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"no_target_available"`) {
			t.Fatalf("request %d: status %d, body %s; want 503 no_target_available", i, resp.StatusCode, body)
		}
		if got := resp.Header.Get("x-should-retry"); got != "true" {
			t.Errorf("request %d: x-should-retry = %q, want true: nothing was sent", i, got)
		}
		if got := resp.Header.Get("Retry-After"); got != "1" {
			t.Errorf("request %d: Retry-After = %q, want 1", i, got)
		}
	}
	if got := dials.Load(); got != n {
		t.Errorf("%d dials for %d requests, want one each: the breaker must stay closed", got, n)
	}
	obs.mu.Lock()
	want := make([]string, n)
	for i := range want {
		want[i] = upstream.NodeOverloaded.String()
	}
	if diff := cmp.Diff(obs.got, want); diff != "" {
		t.Errorf("outcomes (-got +want):\n%s", diff)
	}
	obs.mu.Unlock()
	for _, ev := range rec.all() {
		if ev.SendState != usageevent.SendDefinitelyNotSent || ev.FailureStage != usageevent.StageConnect {
			t.Errorf("usage event: send state %q, stage %q; want %q, %q", ev.SendState, ev.FailureStage, usageevent.SendDefinitelyNotSent, usageevent.StageConnect)
		}
	}
	if got := len(rec.all()); got != n {
		t.Errorf("%d usage events, want %d", got, n)
	}
}
