package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat CPU times. It is 100 on every
// Linux architecture Go supports (the kernel's exported USER_HZ, not the
// internal HZ), so it is fixed here rather than read through cgo's sysconf.
const userHZ = 100

// ErrProcFormat wraps every error about a /proc file that does not read as
// expected.
var ErrProcFormat = errors.New("loadgen: unexpected /proc format")

// CPUTime returns the CPU time, user plus system, that process pid has used
// so far (all its threads), to the clock tick.
func CPUTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("loadgen: cpu time of %d: %w", pid, err)
	}
	ticks, err := parseStatTicks(data)
	if err != nil {
		return 0, fmt.Errorf("loadgen: cpu time of %d: %w", pid, err)
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// parseStatTicks returns utime + stime from a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseStatTicks(data []byte) (uint64, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: no command name in stat", ErrProcFormat)
	}
	// After ')': field 3 (state) is the first; utime is field 14, stime 15.
	fields := bytes.Fields(data[i+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("%w: stat has %d fields after the command name", ErrProcFormat, len(fields))
	}
	u, err1 := strconv.ParseUint(string(fields[utime]), 10, 64)
	s, err2 := strconv.ParseUint(string(fields[stime]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("%w: stat times: %w", ErrProcFormat, err)
	}
	return u + s, nil
}

// RSS returns the resident set size of process pid in bytes (VmRSS).
func RSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("loadgen: rss of %d: %w", pid, err)
	}
	n, err := parseVmRSS(data)
	if err != nil {
		return 0, fmt.Errorf("loadgen: rss of %d: %w", pid, err)
	}
	return n, nil
}

// parseVmRSS reads the "VmRSS:   1234 kB" line of /proc/<pid>/status.
func parseVmRSS(data []byte) (int64, error) {
	for line := range bytes.Lines(data) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("%w: VmRSS line %q", ErrProcFormat, bytes.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: VmRSS: %w", ErrProcFormat, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%w: no VmRSS line (kernel thread or zombie?)", ErrProcFormat)
}

// CPUBusy returns how long CPU n has been busy since boot (n < 0: all CPUs
// together): user, nice, system, irq, softirq and steal time from
// /proc/stat. Subtracting the CPU time of known processes from its growth
// gives the load of everything else on the machine.
func CPUBusy(n int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("loadgen: cpu busy: %w", err)
	}
	name := "cpu"
	if n >= 0 {
		name = "cpu" + strconv.Itoa(n)
	}
	ticks, err := parseCPUBusy(data, name)
	if err != nil {
		return 0, fmt.Errorf("loadgen: cpu busy: %w", err)
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// parseCPUBusy sums the busy fields of the /proc/stat line for name
// ("cpu" or "cpuN"): user nice system idle iowait irq softirq steal …
func parseCPUBusy(data []byte, name string) (uint64, error) {
	for line := range bytes.Lines(data) {
		f := bytes.Fields(line)
		if len(f) == 0 || string(f[0]) != name {
			continue
		}
		if len(f) < 9 {
			return 0, fmt.Errorf("%w: %s has %d fields", ErrProcFormat, name, len(f))
		}
		var sum uint64
		for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
			v, err := strconv.ParseUint(string(f[i]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: %s: %w", ErrProcFormat, name, err)
			}
			sum += v
		}
		return sum, nil
	}
	return 0, fmt.Errorf("%w: no %s line", ErrProcFormat, name)
}

// Syscalls returns how many read-family and write-family system calls
// process pid has made so far (syscr and syscw of /proc/<pid>/io: read,
// write, their vector and positional forms, and socket reads and writes
// that go through them, as Go's netpoller does). Fewer calls per request
// is what batching log lines, outbox commits and MQTT packets buys.
func Syscalls(pid int) (reads, writes uint64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("loadgen: syscalls of %d: %w", pid, err)
	}
	reads, writes, err = parseIO(data)
	if err != nil {
		return 0, 0, fmt.Errorf("loadgen: syscalls of %d: %w", pid, err)
	}
	return reads, writes, nil
}

// parseIO reads the syscr and syscw lines of /proc/<pid>/io.
func parseIO(data []byte) (reads, writes uint64, err error) {
	var seen int
	for line := range bytes.Lines(data) {
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *uint64
		switch string(name) {
		case "syscr":
			dst = &reads
		case "syscw":
			dst = &writes
		default:
			continue
		}
		v, perr := strconv.ParseUint(string(bytes.TrimSpace(val)), 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("%w: io %s: %w", ErrProcFormat, name, perr)
		}
		*dst = v
		seen++
	}
	if seen != 2 {
		return 0, 0, fmt.Errorf("%w: io has no syscr/syscw lines", ErrProcFormat)
	}
	return reads, writes, nil
}
