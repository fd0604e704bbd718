package metrics_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestHotPathAllocs: the request-path methods do not allocate once a
// series exists (client_golang hashes the label values and finds the
// child under a read lock).
func TestHotPathAllocs(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	tests := []struct {
		name string
		f    func()
	}{
		{"ObserveRequest", func() {
			m.ObserveRequest(provider.Chat, 200, provider.ResponseReceived, time.Second, true)
		}},
		{"ObserveRequest unknown values", func() { m.ObserveRequest(provider.Endpoint(200), 0, provider.SendState(200), time.Second, false) }},
		{"ObserveAttempt", func() { m.ObserveAttempt("openai-a", "azure", upstream.Success, 300*time.Millisecond) }},
		{"ObserveAttempt invalid", func() { m.ObserveAttempt("http://x", "x", upstream.Outcome(200), time.Second) }},
		{"ObserveEgressError", func() { m.ObserveEgressError("socks-1", egress.StageProxyDial) }},
		{"Record", func() { m.Record(benchEvent) }},
	}
	for _, tt := range tests {
		tt.f() // create the series
		if n := testing.AllocsPerRun(100, tt.f); n != 0 {
			t.Errorf("%s: %v allocs/op, want 0", tt.name, n)
		}
	}
}

func BenchmarkObserveRequest(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveRequest(provider.Chat, 200, provider.ResponseReceived, 1500*time.Millisecond, true)
	}
}

// benchEvent is a finished stream attempt with usage, as the request path
// records it.
var benchEvent = &usageevent.Event{
	PublicModel: "gpt-4o-mini", Backend: "openai-primary", HTTPStatus: 200, Stream: true,
	SendState: usageevent.SendResponseReceived, RequestBytes: 900, ResponseBytes: 4200,
	TTFBMs: 420, DurationMs: 9000,
	Usage: &usageevent.Usage{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 1024, ReasoningTokens: 64},
}

// BenchmarkRecord is the per-attempt cost of the scootgate_model_*
// families (one lookup, up to ten series updates).
func BenchmarkRecord(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	b.ReportAllocs()
	for b.Loop() {
		m.Record(benchEvent)
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Record(benchEvent)
		}
	})
}

func BenchmarkObserveAttempt(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveAttempt("openai-primary", "openai", upstream.Success, 300*time.Millisecond)
	}
}

func BenchmarkObserveAttemptParallel(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveAttempt("openai-primary", "openai", upstream.Success, 300*time.Millisecond)
		}
	})
}

func BenchmarkObserveNil(b *testing.B) {
	var m *metrics.Metrics
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveRequest(provider.Chat, 200, provider.ResponseReceived, time.Second, true)
		m.ObserveAttempt("openai-primary", "openai", upstream.Success, 300*time.Millisecond)
	}
}

// BenchmarkScrape gathers the state families of 100 backends and two
// snapshots, the work each scrape adds to the node.
func BenchmarkScrape(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	reg := newRegistry(clock.NewFake(time.Time{}), false)
	for i := range 100 {
		reg.Get(identity("backend-"+strconv.Itoa(i), 8))
	}
	m.RegisterBackends(metrics.RegistryBackends(reg, nil))
	for _, k := range []string{metrics.SnapshotAuthz, metrics.SnapshotRoutes} {
		m.RegisterSnapshot(k, func() snapshot.Status { return snapshot.Status{Version: 1} })
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Gatherer().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
