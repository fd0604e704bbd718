package upstream

import (
	"context"
	"math"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// The node's own load: whether the node itself is saturated, so that the
// failures it caused are not blamed on a backend (docs/failures.md
// "When the node is the bottleneck").
//
// # Basics
//
// A saturated node is late at everything: its goroutines wait in the
// scheduler's run queue before they run. Go runs due timers ahead of that
// queue, so an attempt's first-byte, idle or connect timer fires on time
// while the goroutine that would read the provider's answer, already in
// the socket, is still waiting its turn. Those timeouts say nothing about
// the backend, but they look like a provider that stopped answering: five
// of them open its breaker, and a node with one backend answers 503 to
// everything until the breaker's probe succeeds, turning overload into an
// outage.
//
// [NodeLoad.Run] reads the runtime's histogram of how long goroutines
// waited to run (runtime/metrics "/sched/latencies:seconds") every
// Interval and takes the quantile [NodeLoadOptions.Quantile] of the waits
// that ended in that window, or its own tick's lateness if longer (the
// sampler queued as long as that). A window whose wait reaches Threshold
// saturates the node, and it stays saturated until Hold has passed with no
// such window. [NodeLoad.SaturatedSince] says whether that happened while
// an attempt ran, in one atomic load; the request path asks it only when
// an attempt failed on one of the node's own timers, so an attempt sent
// while the node was saturated, or just before, and timed out just after
// is the node's too.
//
// # Shedding
//
// Saturation only changes whom a timeout is blamed on; the requests still
// run out their time limits. When ShedWait is set, the same windows also
// decide whether the node sheds (CoDel's rule for a queue, with the run
// queue as the queue): once every window for ShedAfter has had a wait of
// ShedWait or more, the node sheds ([NodeLoad.Shed]), and it no longer
// does once every window for ShedAfter has been below ShedWait (the
// windows are Interval/5 long while it sheds). While it sheds, the API
// listener admits a bounded number of new requests at once, the bound
// following the rate at which it finishes them, and queues or refuses
// the rest before any work
// (gateway.ConcurrencyLimit.Adapt; docs/failures.md "Shedding"), so that
// the requests it serves get the CPU to finish within their limits
// instead of all of them running out their limits together.
//
// # Caveats
//
// While the node is saturated, a backend that really stopped answering in
// time is not caught by its timeouts (its refused connections, resets and
// 5xx still count); its breaker catches it once the node is no longer
// saturated.
//
// The histogram counts a goroutine's wait only once the goroutine runs,
// so the first windows of an overload look better than they are: in the
// overload runs of docs/performance.md "Overload and recovery" the node,
// reading the histogram alone, saw itself saturated up to 0.8 s after its
// timeouts began. The sampler's own lateness closes most of that: it is
// known as soon as the sampler has queued past Threshold. A host that
// stalls the whole process (a VM descheduled) also reads as saturation,
// which it is: the node's own timers outran its goroutines. The defaults
// come from two of those runs, read against the node's log: its saturated
// periods matched its failed (or discarded) search steps, and none fell in
// a step it passed (up to about 3500 requests/s on one CPU).

// Defaults for zero NodeLoadOptions fields.
const (
	DefaultNodeLoadInterval  = 100 * time.Millisecond
	DefaultNodeLoadThreshold = 50 * time.Millisecond
	DefaultNodeLoadHold      = time.Second
	DefaultNodeLoadQuantile  = 0.9
	DefaultNodeLoadShedAfter = 100 * time.Millisecond
)

// NodeLoadOptions configure a NodeLoad. A zero field takes its default.
type NodeLoadOptions struct {
	// Interval is how often Run reads the scheduler's histogram. Default
	// 100ms.
	Interval time.Duration
	// Threshold is the scheduling wait that saturates the node when the
	// window's Quantile reaches it. Default 50ms.
	Threshold time.Duration
	// Hold is how long the node stays saturated after the last window
	// that saturated it. Default 1s.
	Hold time.Duration
	// Quantile is the share of a window's waits, in (0, 1], below the
	// one compared with Threshold. Default 0.9.
	Quantile float64
	// ShedWait is the scheduling wait that, in every window for
	// ShedAfter, makes the node shed (Shed). Zero never sheds.
	ShedWait time.Duration
	// ShedAfter is how long the windows must have had a wait of ShedWait
	// or more before the node sheds. Default 100ms.
	ShedAfter time.Duration
}

// WithDefaults returns o with every zero or out-of-range field set to its
// default.
func (o NodeLoadOptions) WithDefaults() NodeLoadOptions {
	if o.Interval <= 0 {
		o.Interval = DefaultNodeLoadInterval
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultNodeLoadThreshold
	}
	if o.Hold <= 0 {
		o.Hold = DefaultNodeLoadHold
	}
	if !(o.Quantile > 0 && o.Quantile <= 1) {
		o.Quantile = DefaultNodeLoadQuantile
	}
	if o.ShedWait < 0 {
		o.ShedWait = 0
	}
	if o.ShedAfter <= 0 {
		o.ShedAfter = DefaultNodeLoadShedAfter
	}
	return o
}

// NodeLoad says whether the node is or was saturated, and whether it
// sheds. Saturated and SaturatedSince are safe for concurrent use;
// Observe, Shed and Run are for one goroutine (the sampler).
type NodeLoad struct {
	// immutable
	o     NodeLoadOptions
	epoch time.Time

	// atomic
	saturated atomic.Bool
	until     atomic.Int64 // ns since epoch: the node was saturated before this (0: never)

	// owned by the sampler goroutine
	shedding  bool      // as of the last window (Shed)
	prev      []uint64  // the histogram's counts at the previous read
	delta     []uint64  // scratch: the counts of the window being read
	longFrom  time.Time // the end of the first of the unbroken run of windows with a wait of ShedWait or more; zero: none
	shortFrom time.Time // the same for the run of windows below ShedWait
}

// NewNodeLoad returns a NodeLoad that has not been saturated.
func NewNodeLoad(o NodeLoadOptions) *NodeLoad {
	return &NodeLoad{o: o.WithDefaults(), epoch: time.Now()}
}

// Saturated reports whether the node is saturated now, as of the last
// window. A nil NodeLoad never is.
func (l *NodeLoad) Saturated() bool { return l != nil && l.saturated.Load() }

// SaturatedSince reports whether the node has been saturated at some
// moment after t (Hold included): an attempt that started at t and failed
// on its own timer since ran through the node's overload. One atomic load.
// A nil NodeLoad never was.
func (l *NodeLoad) SaturatedSince(t time.Time) bool {
	if l == nil {
		return false
	}
	u := l.until.Load()
	return u != 0 && int64(t.Sub(l.epoch)) < u
}

// Shed applies one window ending at now, whose scheduling wait was wait,
// to the shedding rule, and reports whether the node sheds after it and
// whether that changed. The node starts shedding once the windows have
// been long (a wait of ShedWait or more) for ShedAfter, and stops once
// they have been short for ShedAfter. The first window of a run starts
// the run's clock at its end (now): with ShedAfter equal to the
// interval, the second long window in a row starts shedding. A single
// short window does not stop it: a window of a node that refuses
// everything new can be short while its backlog is still there.
func (l *NodeLoad) Shed(now time.Time, wait time.Duration) (shedding, changed bool) {
	if l.o.ShedWait <= 0 {
		return false, false
	}
	long := wait >= l.o.ShedWait
	switch {
	case long && l.longFrom.IsZero():
		l.longFrom, l.shortFrom = now, time.Time{}
	case !long && l.shortFrom.IsZero():
		l.shortFrom, l.longFrom = now, time.Time{}
	}
	was := l.shedding
	if was {
		shedding = l.shortFrom.IsZero() || now.Sub(l.shortFrom) < l.o.ShedAfter
	} else {
		shedding = !l.longFrom.IsZero() && now.Sub(l.longFrom) >= l.o.ShedAfter
	}
	l.shedding = shedding
	return shedding, was != shedding
}

// Observe applies one window ending at now in which the goroutines'
// scheduling waits had wait as their Quantile, and reports whether the
// node is saturated after it and whether that changed.
func (l *NodeLoad) Observe(now time.Time, wait time.Duration) (saturated, changed bool) {
	at := int64(now.Sub(l.epoch))
	if wait >= l.o.Threshold {
		l.until.Store(at + int64(l.o.Hold))
	}
	saturated = at < l.until.Load()
	return saturated, l.saturated.Swap(saturated) != saturated
}

// Run reads the scheduler's histogram every Interval until ctx ends and
// applies each window with Observe and Shed; changed and shed, when not
// nil, are told of each change of the one and the other (for the log)
// with the window's wait, and window, when not nil, of every window: the
// shedding state after it and its wait (the admission bound of
// gateway.ConcurrencyLimit.Adapt). The real clock drives it: the
// scheduler's delays are real time whatever a test's clock says.
func (l *NodeLoad) Run(ctx context.Context, changed, shed, window func(on bool, wait time.Duration)) {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return // a runtime without the metric: never saturated
	}
	l.window(s[0].Value.Float64Histogram())
	t := time.NewTicker(l.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case fired := <-t.C:
			metrics.Read(s)
			now := time.Now()
			wait := l.tick(fired, now, s[0].Value.Float64Histogram())
			if sat, ch := l.Observe(now, wait); ch && changed != nil {
				changed(sat, wait)
			}
			on, ch := l.Shed(now, wait)
			if window != nil {
				window(on, wait)
			}
			if ch {
				// While shedding, read five times as often: the node's
				// admission bound follows each window, and each window it
				// still sheds after its backlog is gone holds requests
				// back that its CPU could serve.
				if on {
					t.Reset(l.o.Interval / 5)
				} else {
					t.Reset(l.o.Interval)
				}
				if shed != nil {
					shed(on, wait)
				}
			}
		}
	}
}

// tick is the wait of the window that ends at now: the Quantile of the
// waits h counted since the previous tick, or the sampler's own wait if
// longer (its tick fired at fired; Go runs due timers ahead of the run
// queue, so now − fired is how long this goroutine queued). The histogram
// counts a wait only when it ends and lags an overload's start by up to
// a second in the overload runs; the sampler's own wait is as current as
// the queue it just left.
func (l *NodeLoad) tick(fired, now time.Time, h *metrics.Float64Histogram) time.Duration {
	return max(l.window(h), now.Sub(fired))
}

// window returns the Quantile of the waits h counted since the previous
// call, as the lower bound of the bucket it falls in (so a wait is never
// overstated); 0 when none was counted.
func (l *NodeLoad) window(h *metrics.Float64Histogram) time.Duration {
	if len(l.prev) != len(h.Counts) {
		l.prev = make([]uint64, len(h.Counts))
		l.delta = make([]uint64, len(h.Counts))
		copy(l.prev, h.Counts)
		return 0
	}
	// The window's counts first, then the quantile from the fast end: it
	// is found within the first few of the runtime's 160 buckets unless
	// the node is slow, and each window reads all of them.
	prev, delta := l.prev[:len(h.Counts)], l.delta[:len(h.Counts)]
	var total uint64
	for i, c := range h.Counts {
		delta[i] = c - prev[i]
		total += delta[i]
	}
	copy(prev, h.Counts)
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(l.o.Quantile * float64(total)))
	var seen uint64
	for i, n := range delta {
		if seen += n; seen >= want {
			// Buckets[i] is bucket i's lower bound (-Inf for the first).
			return time.Duration(max(h.Buckets[i], 0) * float64(time.Second))
		}
	}
	return 0
}
