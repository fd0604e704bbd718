package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// With -cpu-quota every system under test runs in a control group of its
// own whose CFS bandwidth limit is the same share of one CPU: node and
// baseline then have exactly the same CPU to serve an overload with, and
// the CPU they cannot use stays with the load side (docs/performance.md
// "Overload and recovery"). The load side (this process, the generator,
// and the provider and proxy it starts) runs in a group of its own too.
// Every group has the largest weight the kernel takes, so that whatever
// else runs on a shared machine, the harness's processes run first: the
// generator keeps its schedule and a system under test gets its whole
// quota. Nice values would not do: with autogroup scheduling the kernel
// weighs them only within a session, and every shell is one. It needs
// the cgroup v1 cpu controller (cgroup v2's cpu.max is not supported)
// and the right to create groups in it (root); without either the
// harness refuses to start.

// cpuQuotaPeriod is the CFS period of every group: the quota is spent in
// 10 ms slices, so a throttled system waits at most the rest of one
// (the kernel's default 100 ms would hold it up to 60 ms at 40 %).
const cpuQuotaPeriod = 10 * time.Millisecond

// cpuWeight is every group's cpu.shares, the kernel's largest, against
// 1024 for a session's processes (autogroup) or another group.
const cpuWeight = 262144

// loadGroup is the load side's group.
const loadGroup = "load"

// cpuQuota creates and removes the harness's groups under one parent,
// <controller mount>/scootgate-load-<pid>.
type cpuQuota struct {
	mount string  // the controller's root group
	dir   string  // the parent group
	share float64 // of one CPU, for every system under test
	load  bool    // this process is in the load group
}

// cpuGroup is one system under test's group.
type cpuGroup struct {
	dir string
}

// cpuThrottle is a group's cpu.stat: how often and for how long the
// kernel held its processes back because they had used up their quota.
type cpuThrottle struct {
	Periods   int64         `json:"periods"`   // CFS periods in which it ran
	Throttled int64         `json:"throttled"` // periods that ended with it held back
	Time      time.Duration `json:"throttled_ns"`
}

// errNoCPUController says there is no cgroup v1 cpu controller mounted.
var errNoCPUController = errors.New("no cgroup v1 cpu controller mounted (cgroup v2 is not supported)")

// newCPUQuota finds the cpu controller in mounts (/proc/self/mounts) and
// creates the harness's parent group in it for share of one CPU per
// system (0 < share ≤ 1).
func newCPUQuota(mounts io.Reader, share float64) (*cpuQuota, error) {
	if share <= 0 || share > 1 {
		return nil, fmt.Errorf("cpu quota %g: want a share of one CPU in (0, 1]", share)
	}
	mount, err := cpuController(mounts)
	if err != nil {
		return nil, err
	}
	return newCPUQuotaAt(mount, share)
}

// newCPUQuotaAt creates the parent group under the controller mounted at
// mount.
func newCPUQuotaAt(mount string, share float64) (*cpuQuota, error) {
	if _, err := os.Stat(filepath.Join(mount, "cpu.cfs_quota_us")); err != nil {
		return nil, fmt.Errorf("%s is no cgroup v1 cpu controller (no CFS bandwidth control): %w", mount, err)
	}
	dir := filepath.Join(mount, fmt.Sprintf("scootgate-load-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup (needs root): %w", err)
	}
	// A group's weight counts among its siblings: the parent's decides
	// against everything else.
	if err := os.WriteFile(filepath.Join(dir, "cpu.shares"), []byte(strconv.Itoa(cpuWeight)), 0o644); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("cgroup: cpu.shares: %w", err)
	}
	return &cpuQuota{mount: mount, dir: dir, share: share}, nil
}

// cpuController returns where the cgroup v1 hierarchy with the cpu
// controller is mounted, from a /proc/self/mounts listing.
func cpuController(mounts io.Reader) (string, error) {
	sc := bufio.NewScanner(mounts)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[2] != "cgroup" {
			continue
		}
		for opt := range strings.SplitSeq(f[3], ",") {
			if opt == "cpu" {
				return f[1], nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read mounts: %w", err)
	}
	return "", errNoCPUController
}

// quotaMicros is the cfs_quota_us of share at cpuQuotaPeriod.
func (q *cpuQuota) quotaMicros() int64 {
	return int64(q.share * float64(cpuQuotaPeriod.Microseconds()))
}

// add creates the group name capped at the quota and moves process pid,
// all its threads, into it.
func (q *cpuQuota) add(name string, pid int) (*cpuGroup, error) {
	// The period first: a quota is checked against the period in force.
	return q.group(name, pid,
		"cpu.cfs_period_us", strconv.FormatInt(cpuQuotaPeriod.Microseconds(), 10),
		"cpu.cfs_quota_us", strconv.FormatInt(q.quotaMicros(), 10))
}

// joinLoad moves this process into the load side's group, without a
// quota; the processes it starts from now on start there too.
func (q *cpuQuota) joinLoad() error {
	if _, err := q.group(loadGroup, os.Getpid()); err != nil {
		return err
	}
	q.load = true
	return nil
}

// group creates the group name with the largest weight and the settings
// given as file, value pairs, and moves process pid into it.
func (q *cpuQuota) group(name string, pid int, settings ...string) (*cpuGroup, error) {
	g := &cpuGroup{dir: filepath.Join(q.dir, name)}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", name, err)
	}
	type write struct{ file, value string }
	writes := []write{{"cpu.shares", strconv.Itoa(cpuWeight)}}
	for i := 0; i+1 < len(settings); i += 2 {
		writes = append(writes, write{settings[i], settings[i+1]})
	}
	writes = append(writes, write{"cgroup.procs", strconv.Itoa(pid)})
	for _, w := range writes {
		if err := os.WriteFile(filepath.Join(g.dir, w.file), []byte(w.value), 0o644); err != nil {
			_ = os.Remove(g.dir)
			return nil, fmt.Errorf("cgroup %s: %s: %w", name, w.file, err)
		}
	}
	return g, nil
}

// throttle reads the group's cpu.stat.
func (g *cpuGroup) throttle() (cpuThrottle, error) {
	data, err := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
	if err != nil {
		return cpuThrottle{}, fmt.Errorf("cgroup: %w", err)
	}
	return parseCPUStat(string(data))
}

// parseCPUStat reads nr_periods, nr_throttled and throttled_time (ns)
// from a cgroup v1 cpu.stat.
func parseCPUStat(data string) (cpuThrottle, error) {
	var t cpuThrottle
	seen := 0
	for line := range strings.Lines(data) {
		name, val, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "nr_periods":
			dst = &t.Periods
		case "nr_throttled":
			dst = &t.Throttled
		case "throttled_time":
			dst = (*int64)(&t.Time)
		default:
			continue
		}
		v, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return cpuThrottle{}, fmt.Errorf("cgroup: cpu.stat %s: %w", name, err)
		}
		*dst = v
		seen++
	}
	if seen != 3 {
		return cpuThrottle{}, fmt.Errorf("cgroup: cpu.stat lacks nr_periods, nr_throttled or throttled_time: %q", data)
	}
	return t, nil
}

func (t cpuThrottle) minus(u cpuThrottle) cpuThrottle {
	return cpuThrottle{Periods: t.Periods - u.Periods, Throttled: t.Throttled - u.Throttled, Time: t.Time - u.Time}
}

// remove removes the group once its process has exited.
func (g *cpuGroup) remove() error {
	if err := os.Remove(g.dir); err != nil {
		return fmt.Errorf("cgroup: remove: %w", err)
	}
	return nil
}

// close moves this process back to the controller's root group and
// removes every group left, once their processes have exited (a group
// with a process in it cannot be removed), and then the parent.
func (q *cpuQuota) close() error {
	var errs []error
	if q.load {
		errs = append(errs, os.WriteFile(filepath.Join(q.mount, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644))
	}
	entries, err := os.ReadDir(q.dir)
	if err != nil {
		return fmt.Errorf("cgroup: %w", errors.Join(append(errs, err)...))
	}
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, os.Remove(filepath.Join(q.dir, e.Name())))
		}
	}
	errs = append(errs, os.Remove(q.dir))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cgroup: remove: %w", err)
	}
	return nil
}
