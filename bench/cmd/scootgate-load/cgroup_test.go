package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCPUController(t *testing.T) {
	tests := []struct {
		name, mounts, want string
		wantErr            bool
	}{
		{"cgroup v1, cpu alone", "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n", "/sys/fs/cgroup/cpu", false},
		{"cgroup v1, cpu with cpuacct", "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n", "/sys/fs/cgroup/cpu,cpuacct", false},
		{"cpuacct and cpuset are not cpu", "cgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\ncgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n", "", true},
		{"cgroup v2 only", "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n", "", true},
		{"nothing", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cpuController(strings.NewReader(tt.mounts))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("cpuController = %q, %v; want %q, error %t", got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, errNoCPUController) {
				t.Errorf("error %v, want errNoCPUController", err)
			}
		})
	}
}

func TestParseCPUStat(t *testing.T) {
	got, err := parseCPUStat("nr_periods 120\nnr_throttled 45\nthrottled_time 2500000000\nnr_bursts 0\nburst_time 0\n")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, cpuThrottle{Periods: 120, Throttled: 45, Time: 2500 * time.Millisecond}); diff != "" {
		t.Errorf("parseCPUStat (-got +want):\n%s", diff)
	}
	for _, bad := range []string{"", "nr_periods 1\nnr_throttled 1\n", "nr_periods x\nnr_throttled 1\nthrottled_time 1\n"} {
		if _, err := parseCPUStat(bad); err == nil {
			t.Errorf("parseCPUStat(%q) accepted", bad)
		}
	}
}

// TestCPUQuotaWrites checks what a group is given, in a directory that
// stands in for the controller: the period, the quota for the share and
// the process.
func TestCPUQuotaWrites(t *testing.T) {
	mount := t.TempDir()
	if err := os.WriteFile(filepath.Join(mount, "cpu.cfs_quota_us"), []byte("-1"), 0o644); err != nil {
		t.Fatal(err)
	}
	q, err := newCPUQuotaAt(mount, 0.4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.add("node", 4321); err != nil {
		t.Fatal(err)
	}
	if err := q.joinLoad(); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(q.dir, "cpu.shares")); err != nil || string(data) != "262144" {
		t.Errorf("parent group's cpu.shares %q, %v; want the largest weight", data, err)
	}
	read := func(group string) map[string]string {
		got := map[string]string{}
		for _, f := range []string{"cpu.shares", "cpu.cfs_period_us", "cpu.cfs_quota_us", "cgroup.procs"} {
			if data, err := os.ReadFile(filepath.Join(q.dir, group, f)); err == nil {
				got[f] = string(data)
			}
		}
		return got
	}
	want := map[string]string{"cpu.shares": "262144", "cpu.cfs_period_us": "10000", "cpu.cfs_quota_us": "4000", "cgroup.procs": "4321"}
	if diff := cmp.Diff(read("node"), want); diff != "" {
		t.Errorf("system under test's group (-got +want):\n%s", diff)
	}
	want = map[string]string{"cpu.shares": "262144", "cgroup.procs": strconv.Itoa(os.Getpid())}
	if diff := cmp.Diff(read(loadGroup), want); diff != "" {
		t.Errorf("load side's group (-got +want):\n%s", diff)
	}
	if _, err := q.add("node", 4322); err == nil {
		t.Error("a second group of the same name was created")
	}
}

// TestCPUQuotaRefuses: no controller, no quota, and the harness says so
// before it starts anything.
func TestCPUQuotaRefuses(t *testing.T) {
	if _, err := newCPUQuotaAt(t.TempDir(), 0.4); err == nil || !strings.Contains(err.Error(), "no cgroup v1 cpu controller") {
		t.Errorf("a directory without cpu.cfs_quota_us: err = %v, want a refusal", err)
	}
	if _, err := newCPUQuota(strings.NewReader("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"), 0.4); !errors.Is(err, errNoCPUController) {
		t.Errorf("cgroup v2 only: err = %v, want errNoCPUController", err)
	}
	for _, share := range []float64{0, -0.5, 1.5} {
		if _, err := newCPUQuota(strings.NewReader(""), share); err == nil {
			t.Errorf("share %g accepted", share)
		}
	}
}

// TestCPUQuotaCaps puts a process that never stops computing into a real
// group at 20 % of a CPU and requires the kernel to throttle it, then
// removes the group. It needs the cgroup v1 cpu controller and root.
func TestCPUQuotaCaps(t *testing.T) {
	mounts, err := os.Open("/proc/self/mounts")
	if err != nil {
		t.Skip(err)
	}
	mount, err := cpuController(mounts)
	mounts.Close()
	if err != nil {
		t.Skip(err)
	}
	q, err := newCPUQuotaAt(mount, 0.2)
	if err != nil {
		t.Skip(err) // not root
	}
	defer func() {
		if err := q.close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(q.dir); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", q.dir, err)
		}
		if got := cpuCgroupOf(t, os.Getpid()); got != "/" {
			t.Errorf("after close the test process is in cpu group %q, want /", got)
		}
	}()
	if err := q.joinLoad(); err != nil {
		t.Fatal(err)
	}
	if got := cpuCgroupOf(t, os.Getpid()); got != filepath.Join("/", filepath.Base(q.dir), loadGroup) {
		t.Errorf("the test process is in cpu group %q, want the load group", got)
	}
	spin := exec.Command("sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = spin.Process.Kill()
		_ = spin.Wait()
	}()
	g, err := q.add("spin", spin.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		th, err := g.throttle()
		if err != nil {
			t.Fatal(err)
		}
		if th.Throttled > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a spinning process at 20 %% of a CPU was never throttled: %+v", th)
		}
		time.Sleep(20 * time.Millisecond) // polling the kernel's counter, bounded by the deadline
	}
}

// cpuCgroupOf is process pid's group in the cgroup v1 cpu hierarchy.
func cpuCgroupOf(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		// "1:cpu:/path" (or "1:cpu,cpuacct:/path")
		_, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
		ctrls, path, _ := strings.Cut(rest, ":")
		for c := range strings.SplitSeq(ctrls, ",") {
			if c == "cpu" {
				return path
			}
		}
	}
	t.Fatalf("no cpu controller in %s", data)
	return ""
}
