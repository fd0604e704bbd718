package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
)

// TestStateCollectorPedantic registers the state collector, with every
// source, on a pedantic registry, which fails a Gather whose metrics do
// not match what Describe announced.
func TestStateCollectorPedantic(t *testing.T) {
	c := newStateCollector(clock.NewFake(time.Time{}).Now)
	c.set(func(s *sources) {
		s.backends = func(yield func(Backend) bool) {
			_ = yield(Backend{"a", upstream.View{Cap: 1, BreakerState: upstream.BreakerOpen}, true}) &&
				yield(Backend{"a", upstream.View{Cap: 2, InFlight: 1}, false})
		}
		s.health = &healthSource{func() bool { return true }, func() bool { return false }}
		s.client = func() ClientStats { return ClientStats{InFlight: 1, Limit: 2} }
		s.snapshots = []snapshotSource{{SnapshotAuthz, func() snapshot.Status { return snapshot.Status{Version: 1} }}}
		s.outbox = func() outbox.Stats { return outbox.Stats{Depth: 1} }
		s.mqtt = func() MQTTStats { return MQTTStats{Connected: true} }
		s.usage = func() usage.RecorderStats { return usage.RecorderStats{Recorded: 1} }
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// 7 backend + 4 more (headroom held, ineligible by 2 reasons,
	// malformed; no headroom ratio: unknown) + 5 snapshot (no age: never
	// reached) + 15 outbox + 7 MQTT + 5 usage + 2 health + 7 client
	if n != 52 {
		t.Errorf("series = %d, want 52", n)
	}
}

func TestIDLabel(t *testing.T) {
	tests := []struct{ in, want string }{
		{"openai-a", "openai-a"},
		{"A.b_C-9", "A.b_C-9"},
		{string(make([]byte, 65)), labelInvalid},
		{"", labelInvalid},
		{"https://x", labelInvalid},
		{"a b", labelInvalid},
		{"é", labelInvalid},
		{"a\n", labelInvalid},
	}
	for _, tt := range tests {
		if got := idLabel(tt.in); got != tt.want {
			t.Errorf("idLabel(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := "a234567890123456789012345678901234567890123456789012345678901234"
	if got := idLabel(long); got != long {
		t.Errorf("64-byte id mapped to %q", got)
	}
}

func TestStatusCodes(t *testing.T) {
	sc := newStatusCodes()
	for c := 100; c < 600; c++ {
		if got, want := sc.label(c), time.Duration(c).String(); got+"ns" != want {
			t.Fatalf("label(%d) = %q", c, got)
		}
	}
	for _, c := range []int{-1, 0, 99, 600, 1 << 20} {
		if got := sc.label(c); got != labelUnknown {
			t.Errorf("label(%d) = %q, want unknown", c, got)
		}
	}
}

// TestBreakerValues pins the documented numbers of
// scootgate_backend_breaker_state.
func TestBreakerValues(t *testing.T) {
	for s, want := range map[upstream.BreakerState]float64{upstream.BreakerClosed: 0, upstream.BreakerOpen: 1, upstream.BreakerHalfOpen: 2} {
		if got := breakerValue(s); got != want {
			t.Errorf("breakerValue(%v) = %v, want %v", s, got, want)
		}
	}
}
