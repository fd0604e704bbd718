package app

import (
	"os"
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
