package app

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/config"
)

// TestOutboxCommitBatch: a commit starts early at 64 waiting events with
// one event a message, at up to 1,024 with batched messages (fsyncs then
// follow the commit interval at high rates), and never later than a
// quarter of the crash window by count.
func TestOutboxCommitBatch(t *testing.T) {
	for _, tt := range []struct {
		name, extra string
		want        int
	}{
		{"no broker", "", 64},
		{"one event a message", "[mqtt]\nbroker = \"tcp://127.0.0.1:1883\"\n", 64},
		{"batches of 4", "[mqtt]\nbroker = \"tcp://127.0.0.1:1883\"\nbatch_max = 4\n", 256},
		{"batches of 100", "[mqtt]\nbroker = \"tcp://127.0.0.1:1883\"\nbatch_max = 100\n", 1024},
		{"small crash window", "[usage]\ncrash_window_events = 200\n[mqtt]\nbroker = \"tcp://127.0.0.1:1883\"\nbatch_max = 100\n", 50},
		{"smallest crash window", "[usage]\ncrash_window_events = 16\n", 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(staticTOML+tt.extra), func(string) (string, bool) { return "secret", true }, os.ReadFile)
			if err != nil {
				t.Fatal(err)
			}
			if got := outboxOptions(cfg, nil).MaxBatch; got != tt.want {
				t.Errorf("MaxBatch = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestOutboxUnavailable: a node whose usage outbox cannot open does not
// serve unbilled and unseen. By default it is not ready and /readyz says
// why; with usage.serve_without_outbox it is ready, /readyz shows that it
// serves without usage events, and scootgate_usage_events_enabled is 0
// either way (1 on a node that records them).
func TestOutboxUnavailable(t *testing.T) {
	tests := []struct {
		name       string
		broken     bool
		extra      string
		wantCode   int
		wantReason bool
		wantDetail bool
		wantMetric string
	}{
		{name: "open", wantCode: 200, wantMetric: "scootgate_usage_events_enabled 1"},
		{name: "cannot open: unready", broken: true, wantCode: 503, wantReason: true, wantMetric: "scootgate_usage_events_enabled 0"},
		{name: "cannot open, serve_without_outbox", broken: true, extra: "serve_without_outbox = true\n", wantCode: 200, wantDetail: true, wantMetric: "scootgate_usage_events_enabled 0"},
		{name: "usage off", extra: "enabled = false\n", wantCode: 200, wantDetail: true, wantMetric: "scootgate_usage_events_enabled 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := stackOptions{extraTOML: tt.extra}
			if tt.broken {
				o.outboxPath = t.TempDir() // a directory: bbolt cannot open it
			}
			s := startStack(t, o)
			code, rep := s.readyz()
			if code != tt.wantCode {
				t.Errorf("/readyz = %d, want %d: %+v", code, tt.wantCode, rep)
			}
			if got := strings.Contains(rep.Reasons["usage_outbox"], "usage outbox could not open"); got != tt.wantReason {
				t.Errorf("usage_outbox reason %q, want one: %v", rep.Reasons["usage_outbox"], tt.wantReason)
			}
			if got := strings.HasPrefix(rep.Details["usage_events"], "off: "); got != tt.wantDetail {
				t.Errorf("usage_events detail %q, want one: %v", rep.Details["usage_events"], tt.wantDetail)
			}
			resp, err := http.Get(s.health + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), "\n"+tt.wantMetric+"\n") {
				t.Errorf("/metrics has no %q", tt.wantMetric)
			}
		})
	}
}
