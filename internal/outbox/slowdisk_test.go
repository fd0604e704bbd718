package outbox

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestSlowDisk measures the outbox on a real slow disk, not a modelled one
// (BenchmarkSlowCommit): events arrive open-loop at a fixed rate for a
// fixed time while a consumer reads and deletes rows as the MQTT publisher
// does, with the default crash window, and the test fails if any event is
// dropped. It runs only when SCOOTGATE_SLOWDISK names a directory on the
// disk to measure; scripts/slowdisk.sh makes one (a loop-mounted ext4
// whose writes the blkio cgroup throttles to 20 IOPS) and runs this test
// inside the cgroup. SCOOTGATE_SLOWDISK_RATE (events/s, default 1000) and
// SCOOTGATE_SLOWDISK_DURATION (default 60s) change the load,
// SCOOTGATE_SLOWDISK_CRASH_WINDOW the crash window's age bound (default
// DefaultMaxUnsyncedAge).
//
// Logged: the disk's rate of synchronous 4 KiB writes before the run (so
// that the throttle is seen to work), the drops by reason, the most events unsynced at once and
// the age of the oldest (what a kill -9 would have lost), and each
// commit's latency (one bbolt transaction: its page writes and two
// fdatasyncs) with the events it carried (docs/usage-events.md "Measured
// on a throttled disk").
func TestSlowDisk(t *testing.T) {
	dir := os.Getenv("SCOOTGATE_SLOWDISK")
	if dir == "" {
		t.Skip("SCOOTGATE_SLOWDISK is not set: run it on a throttled disk with scripts/slowdisk.sh")
	}
	rate, duration := 1000, time.Minute
	if v := os.Getenv("SCOOTGATE_SLOWDISK_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("SCOOTGATE_SLOWDISK_RATE=%q: want a positive whole number", v)
		}
		rate = n
	}
	if v := os.Getenv("SCOOTGATE_SLOWDISK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SCOOTGATE_SLOWDISK_DURATION=%q: want a positive duration", v)
		}
		duration = d
	}
	var window time.Duration // DefaultMaxUnsyncedAge
	if v := os.Getenv("SCOOTGATE_SLOWDISK_CRASH_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SCOOTGATE_SLOWDISK_CRASH_WINDOW=%q: want a positive duration", v)
		}
		window = d
	}
	dir, err := os.MkdirTemp(dir, "outbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	probe := fsyncLatency(t, dir, 40)
	var total time.Duration
	for _, d := range probe {
		total += d
	}
	// The throttle lets a short burst through, so the rate says more than
	// the median.
	t.Logf("disk: %d × (4 KiB write + fsync) in %v, %.1f/s; max %v",
		len(probe), total.Round(time.Millisecond), float64(len(probe))/total.Seconds(), pct(probe, 100))

	var (
		mu       sync.Mutex
		began    time.Time
		commits  []time.Duration
		failures int
	)
	h := hooks{
		beforeCommit: func() error {
			mu.Lock()
			began = time.Now()
			mu.Unlock()
			return nil
		},
		afterCommit: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			commits = append(commits, time.Since(began))
			if err != nil {
				failures++
			}
		},
	}
	s, err := open(Options{Path: filepath.Join(dir, "outbox.db"), MaxUnsyncedAge: window}, h)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var consumer sync.WaitGroup
	consumer.Go(func() { consume(s, done) })

	p := bytes.Repeat([]byte("u"), 600) // about one usage event
	n := int(duration.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	var (
		maxUnsynced int
		maxAge      time.Duration
	)
	start := time.Now()
	for i := range n {
		if ahead := time.Until(start.Add(time.Duration(i) * interval)); ahead > time.Millisecond {
			time.Sleep(ahead) // open loop: pace the arrivals, never wait for the outbox
		}
		s.Append(p)
		st := s.Stats()
		maxUnsynced = max(maxUnsynced, st.Unsynced)
		maxAge = max(maxAge, st.UnsyncedAge)
	}
	elapsed := time.Since(start)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	close(done)
	consumer.Wait()

	st := s.Stats()
	mu.Lock()
	lat := slices.Clone(commits)
	mu.Unlock()
	t.Logf("%d events in %v (%.0f/s): appended %d, dropped %d (queue %d, full %d, failing %d), commit failures %d",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(),
		st.Appended, st.Dropped.Total(), st.Dropped.Queue, st.Dropped.Full, st.Dropped.Failing, failures)
	t.Logf("crash window: at most %d events unsynced, the oldest %v old", maxUnsynced, maxAge.Round(time.Millisecond))
	t.Logf("commits: %d (%.1f/s, %.1f events each); latency p50 %v, p90 %v, p99 %v, max %v",
		st.Commits, float64(st.Commits)/elapsed.Seconds(), float64(st.Committed)/float64(max(st.Commits, 1)),
		pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100))
	if st.Dropped.Total() > 0 {
		t.Errorf("%d of %d events dropped", st.Dropped.Total(), n)
	}
}

// fsyncLatency times n appends of 4 KiB to a file in dir, each followed by
// File.Sync: the disk's latency for one synchronous write.
func fsyncLatency(t *testing.T, dir string, n int) []time.Duration {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close(); _ = os.Remove(f.Name()) }()
	page := bytes.Repeat([]byte{1}, 4096)
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		if _, err := f.Write(page); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		out[i] = time.Since(start)
	}
	return out
}

// pct is the p-th percentile of d (p in 0..100, nearest rank); 0 when empty.
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)].Round(100 * time.Microsecond)
}
