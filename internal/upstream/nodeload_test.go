package upstream

import (
	"context"
	"math"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestNodeLoadObserve: a window whose wait reaches the threshold
// saturates the node, which stays saturated for Hold after the last such
// window and no longer.
func TestNodeLoadObserve(t *testing.T) {
	l := NewNodeLoad(NodeLoadOptions{Threshold: 50 * time.Millisecond, Hold: time.Second})
	t0 := l.epoch.Add(time.Minute)
	type step struct {
		at        time.Duration // since t0
		wait      time.Duration
		saturated bool
		changed   bool
	}
	steps := []step{
		{0, 0, false, false},
		{100 * time.Millisecond, 49 * time.Millisecond, false, false},
		{200 * time.Millisecond, 50 * time.Millisecond, true, true},
		{300 * time.Millisecond, time.Millisecond, true, false},
		{900 * time.Millisecond, 2 * time.Second, true, false}, // holds until 1.9s
		{1800 * time.Millisecond, 0, true, false},
		{1900 * time.Millisecond, 0, false, true},
		{2000 * time.Millisecond, 0, false, false},
	}
	var got []step
	for _, s := range steps {
		sat, ch := l.Observe(t0.Add(s.at), s.wait)
		if sat != l.Saturated() {
			t.Fatalf("at %v: Observe says %t, Saturated %t", s.at, sat, l.Saturated())
		}
		got = append(got, step{s.at, s.wait, sat, ch})
	}
	if diff := cmp.Diff(got, steps, cmp.AllowUnexported(step{})); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	var none *NodeLoad
	if none.Saturated() || none.SaturatedSince(t0) {
		t.Error("a nil NodeLoad is saturated")
	}
}

// TestNodeLoadSaturatedSince: an attempt ran through the node's overload
// when it started before the node's last saturated window plus Hold.
func TestNodeLoadSaturatedSince(t *testing.T) {
	l := NewNodeLoad(NodeLoadOptions{Threshold: 50 * time.Millisecond, Hold: time.Second})
	t0 := l.epoch.Add(time.Minute)
	if l.SaturatedSince(l.epoch) {
		t.Fatal("saturated before any window")
	}
	l.Observe(t0, 60*time.Millisecond)  // saturated until t0+1s
	l.Observe(t0.Add(3*time.Second), 0) // no longer
	tests := []struct {
		started time.Duration // since t0
		want    bool
	}{
		{-time.Hour, true},             // a long attempt that ran through it
		{999 * time.Millisecond, true}, // sent within Hold of the last saturated window
		{time.Second, false},           // sent after it
		{2 * time.Second, false},
	}
	for _, tt := range tests {
		if got := l.SaturatedSince(t0.Add(tt.started)); got != tt.want {
			t.Errorf("SaturatedSince(t0%+v) = %t, want %t", tt.started, got, tt.want)
		}
	}
	if l.Saturated() {
		t.Error("Saturated after the hold")
	}
}

// TestNodeLoadWindow: the wait of a window is the quantile of the waits
// counted since the previous read, as its bucket's lower bound.
func TestNodeLoadWindow(t *testing.T) {
	buckets := []float64{math.Inf(-1), 0, 0.001, 0.01, 0.1, 1, math.Inf(1)}
	tests := []struct {
		name   string
		counts []uint64 // cumulative, after the first read of all zeros
		q      float64
		want   time.Duration
	}{
		{"empty window", []uint64{0, 0, 0, 0, 0, 0}, 0.9, 0},
		{"all fast", []uint64{0, 100, 0, 0, 0, 0}, 0.9, 0},
		{"90th in the 10ms bucket", []uint64{0, 80, 5, 10, 5, 0}, 0.9, 10 * time.Millisecond},
		{"median in the 1ms bucket", []uint64{0, 40, 20, 30, 10, 0}, 0.5, time.Millisecond},
		{"the slowest wait", []uint64{0, 99, 0, 0, 0, 1}, 1, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewNodeLoad(NodeLoadOptions{Quantile: tt.q})
			h := &metrics.Float64Histogram{Buckets: buckets, Counts: make([]uint64, len(buckets)-1)}
			if got := l.window(h); got != 0 {
				t.Fatalf("first read = %v, want 0", got)
			}
			// Counts from before the window are not in it.
			copy(h.Counts, []uint64{0, 1000, 0, 0, 0, 1000})
			l.window(h)
			for i := range h.Counts {
				h.Counts[i] += tt.counts[i]
			}
			if got := l.window(h); got != tt.want {
				t.Errorf("window = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestNodeLoadTick: a window's wait is the histogram's quantile or the
// sampler's own lateness, whichever is longer, so a run queue that has
// not yet let its goroutines finish waiting (the histogram is empty or
// fast) still saturates the node.
func TestNodeLoadTick(t *testing.T) {
	buckets := []float64{math.Inf(-1), 0, 0.001, 0.01, 0.1, 1, math.Inf(1)}
	tests := []struct {
		name   string
		counts []uint64
		late   time.Duration
		want   time.Duration
	}{
		{"on time, fast waits", []uint64{0, 100, 0, 0, 0, 0}, 0, 0},
		{"late sampler, no waits counted yet", []uint64{0, 0, 0, 0, 0, 0}, 80 * time.Millisecond, 80 * time.Millisecond},
		{"late sampler, fast waits counted", []uint64{0, 100, 0, 0, 0, 0}, 60 * time.Millisecond, 60 * time.Millisecond},
		{"the histogram longer", []uint64{0, 0, 0, 0, 100, 0}, 20 * time.Millisecond, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewNodeLoad(NodeLoadOptions{})
			fired := time.Now() // after the NodeLoad's epoch
			h := &metrics.Float64Histogram{Buckets: buckets, Counts: make([]uint64, len(buckets)-1)}
			l.window(h)
			copy(h.Counts, tt.counts)
			got := l.tick(fired, fired.Add(tt.late), h)
			if got != tt.want {
				t.Errorf("tick = %v, want %v", got, tt.want)
			}
			if sat, _ := l.Observe(fired.Add(tt.late), got); sat != (tt.want >= DefaultNodeLoadThreshold) {
				t.Errorf("saturated = %v after a window of %v", sat, got)
			}
		})
	}
}

// TestNodeLoadRunStops: Run reads the runtime's histogram and returns when
// its context ends.
func TestNodeLoadRunStops(t *testing.T) {
	l := NewNodeLoad(NodeLoadOptions{Interval: time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx, nil, nil, nil) })
	cancel()
	wg.Wait()
}

// TestNodeLoadShed: the node sheds once its scheduling wait has been at
// or above ShedWait in every window for ShedAfter, and stops once it has
// been below it for ShedAfter. Normal load (short waits, a lone long window among
// them, as a GC pause or one throttled period makes) never sheds, and a
// NodeLoad without ShedWait never does.
func TestNodeLoadShed(t *testing.T) {
	type step struct {
		at       time.Duration // since t0; windows every 100ms as Run reads them
		wait     time.Duration
		shedding bool
		changed  bool
	}
	tests := []struct {
		name  string
		o     NodeLoadOptions
		steps []step
	}{
		{
			name: "normal load",
			o:    NodeLoadOptions{ShedWait: 50 * time.Millisecond, ShedAfter: 100 * time.Millisecond},
			steps: []step{
				{0, time.Millisecond, false, false},
				{100 * time.Millisecond, 49 * time.Millisecond, false, false},
				{200 * time.Millisecond, 60 * time.Millisecond, false, false}, // one long window
				{300 * time.Millisecond, 2 * time.Millisecond, false, false},
				{400 * time.Millisecond, 80 * time.Millisecond, false, false}, // another, not in a row
				{500 * time.Millisecond, 0, false, false},
			},
		},
		{
			name: "overload and its end",
			o:    NodeLoadOptions{ShedWait: 50 * time.Millisecond, ShedAfter: 100 * time.Millisecond},
			steps: []step{
				{0, time.Millisecond, false, false},
				{100 * time.Millisecond, 50 * time.Millisecond, false, false}, // the run starts
				{200 * time.Millisecond, 300 * time.Millisecond, true, true},  // and has lasted ShedAfter
				{300 * time.Millisecond, 90 * time.Millisecond, true, false},
				// Windows of 20ms while shedding: one short window does not
				// stop it, ShedAfter of them does.
				{320 * time.Millisecond, 10 * time.Millisecond, true, false},
				{340 * time.Millisecond, 60 * time.Millisecond, true, false}, // the backlog is still there
				{360 * time.Millisecond, 10 * time.Millisecond, true, false},
				{420 * time.Millisecond, 20 * time.Millisecond, true, false},
				{460 * time.Millisecond, 5 * time.Millisecond, false, true}, // short for ShedAfter: gone
				{560 * time.Millisecond, 70 * time.Millisecond, false, false},
				{660 * time.Millisecond, 70 * time.Millisecond, true, true},
			},
		},
		{
			name: "longer ShedAfter",
			o:    NodeLoadOptions{ShedWait: 50 * time.Millisecond, ShedAfter: 300 * time.Millisecond},
			steps: []step{
				{0, 60 * time.Millisecond, false, false},
				{100 * time.Millisecond, 60 * time.Millisecond, false, false},
				{200 * time.Millisecond, 60 * time.Millisecond, false, false},
				{300 * time.Millisecond, 60 * time.Millisecond, true, true},
			},
		},
		{
			name: "off",
			o:    NodeLoadOptions{},
			steps: []step{
				{0, time.Second, false, false},
				{100 * time.Millisecond, time.Second, false, false},
				{200 * time.Millisecond, time.Second, false, false},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewNodeLoad(tt.o)
			t0 := l.epoch.Add(time.Minute)
			var got []step
			for _, s := range tt.steps {
				on, ch := l.Shed(t0.Add(s.at), s.wait)
				got = append(got, step{s.at, s.wait, on, ch})
			}
			if diff := cmp.Diff(got, tt.steps, cmp.AllowUnexported(step{})); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

// BenchmarkNodeLoadWindow is one window of the runtime's own scheduling
// histogram (its 160-odd buckets), a hundred waits counted in its fast
// buckets since the previous read: the sampler's work every 100 ms.
func BenchmarkNodeLoadWindow(b *testing.B) {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	h := s[0].Value.Float64Histogram()
	l := NewNodeLoad(NodeLoadOptions{})
	l.window(h)
	b.ReportAllocs()
	for b.Loop() {
		for i := 1; i < 11; i++ {
			h.Counts[i] += 10
		}
		l.window(h)
	}
}
