package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
)

// The yardstick is fair only if the node and the baseline run on the same
// terms: a node with twice the GOMAXPROCS, or a baseline whose collector
// runs half as often, would move the ratio for reasons that are not the
// code (docs/performance.md "The yardstick"). So every system under test
// (the node, its variants and the baseline) is started by sutCommand with
// one sutRuntime, decided once per harness run, and reports what the Go
// runtime actually gave it in its ready line; startTarget refuses a
// process whose report differs, before anything is measured.

// sutRuntime is the CPU placement and Go runtime settings of a system
// under test.
type sutRuntime struct {
	CPUs       []int `json:"cpus"`       // the CPUs it may run on (its affinity)
	GOMAXPROCS int   `json:"gomaxprocs"` // Ps the scheduler runs goroutines on
	GOGC       int   `json:"gogc"`       // collector's heap growth percent; -1: off
	MemLimit   int64 `json:"gomemlimit"` // soft memory limit in bytes; math.MaxInt64: none
}

// newSUTRuntime is the setting for a harness run with pinning p: pinned,
// the SUT CPU alone and GOMAXPROCS 1; not pinned, the CPUs the harness
// itself may use, all of them as Ps. gogc and memLimitMiB are the -sut-gogc
// and -sut-gomemlimit flags (0 MiB: no limit).
func newSUTRuntime(p pinning, gogc int, memLimitMiB int64) sutRuntime {
	r := sutRuntime{GOGC: gogc, MemLimit: math.MaxInt64}
	if gogc < 0 {
		r.GOGC = -1
	}
	if memLimitMiB > 0 {
		r.MemLimit = memLimitMiB << 20
	}
	if p.on() {
		r.CPUs = []int{p.sut}
	} else if data, err := os.ReadFile("/proc/self/status"); err == nil {
		r.CPUs = allowedCPUs(string(data))
	}
	r.GOMAXPROCS = len(r.CPUs)
	if r.GOMAXPROCS == 0 {
		r.GOMAXPROCS = runtime.NumCPU()
	}
	return r
}

// env is the environment that gives a Go process r's runtime settings;
// the CPU placement is taskset's (childCommand). Explicit GOMAXPROCS also
// keeps the runtime from changing it later on its own (it follows a
// cgroup's CPU limit when unset).
func (r sutRuntime) env() []string {
	gogc, limit := "off", "off"
	if r.GOGC >= 0 {
		gogc = strconv.Itoa(r.GOGC)
	}
	if r.MemLimit != math.MaxInt64 {
		limit = strconv.FormatInt(r.MemLimit, 10)
	}
	return []string{
		"GOMAXPROCS=" + strconv.Itoa(r.GOMAXPROCS),
		"GOGC=" + gogc,
		"GOMEMLIMIT=" + limit,
	}
}

func (r sutRuntime) String() string {
	cpus := make([]string, len(r.CPUs))
	for i, c := range r.CPUs {
		cpus[i] = strconv.Itoa(c)
	}
	return fmt.Sprintf("%s on CPU %s", strings.Join(r.env(), " "), strings.Join(cpus, ","))
}

// readRuntime is what the runtime gave this process: the affinity from
// /proc/self/status, the rest from the runtime itself.
func readRuntime() sutRuntime {
	r := sutRuntime{GOMAXPROCS: runtime.GOMAXPROCS(0), GOGC: -1, MemLimit: math.MaxInt64}
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		r.CPUs = allowedCPUs(string(data))
	}
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	// GOGC=off reads as the int32 -1 converted to uint64.
	if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() <= math.MaxInt32 {
		r.GOGC = int(s[0].Value.Uint64())
	}
	if s[1].Value.Kind() == metrics.KindUint64 && s[1].Value.Uint64() <= math.MaxInt64 {
		r.MemLimit = int64(s[1].Value.Uint64())
	}
	return r
}

// check returns an error naming every difference between r and what a
// process reported (nil: it reported nothing).
func (r sutRuntime) check(got *sutRuntime) error {
	if got == nil {
		return fmt.Errorf("reported no runtime settings; want %s", r)
	}
	var diffs []string
	if !slices.Equal(got.CPUs, r.CPUs) {
		diffs = append(diffs, fmt.Sprintf("CPUs %v, want %v", got.CPUs, r.CPUs))
	}
	if got.GOMAXPROCS != r.GOMAXPROCS {
		diffs = append(diffs, fmt.Sprintf("GOMAXPROCS %d, want %d", got.GOMAXPROCS, r.GOMAXPROCS))
	}
	if got.GOGC != r.GOGC {
		diffs = append(diffs, fmt.Sprintf("GOGC %d, want %d", got.GOGC, r.GOGC))
	}
	if got.MemLimit != r.MemLimit {
		diffs = append(diffs, fmt.Sprintf("GOMEMLIMIT %d, want %d", got.MemLimit, r.MemLimit))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("runs with other settings than every system under test: %s", strings.Join(diffs, "; "))
	}
	return nil
}
