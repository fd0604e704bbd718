// The open-file limit against limits.max_concurrent_requests
// (docs/operations.md "Open-file limit").

package app

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Descriptors a node needs (docs/operations.md "Open-file limit").
const (
	// descriptorsPerRequest: the client's connection and the tunnel to
	// the provider.
	descriptorsPerRequest = 2
	// descriptorReserve is kept for all else: the listeners, the
	// outbox's file, the control-plane, MQTT, Redis and tracing
	// connections, files read at a reload, the runtime's own, and idle
	// client connections and idle tunnels beyond the requests in flight.
	descriptorReserve = 256
)

// procLimits is where Linux shows the process's resource limits.
const procLimits = "/proc/self/limits"

// openFileLimit returns the process's open-file limit (the soft
// RLIMIT_NOFILE, which the Go runtime raised to the hard limit at start),
// read from /proc/self/limits; false when it is unknown (not Linux) or
// unlimited. It reads a file with package os rather than calling
// getrlimit, which package syscall and golang.org/x/sys/unix both make as
// a raw system call (prlimit64): the node stays above the runtime, and
// needs no new dependency.
func openFileLimit() (uint64, bool) {
	data, err := os.ReadFile(procLimits)
	if err != nil {
		return 0, false
	}
	n, ok, err := parseOpenFileLimit(data)
	if err != nil {
		return 0, false
	}
	return n, ok
}

// parseOpenFileLimit reads the soft limit of the "Max open files" line of
// a /proc/<pid>/limits document: false when it is "unlimited", an error
// when the line is missing or malformed.
func parseOpenFileLimit(data []byte) (uint64, bool, error) {
	const name = "Max open files"
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(name))
		if !ok {
			continue
		}
		f := bytes.Fields(rest) // soft, hard, units
		if len(f) < 2 {
			return 0, false, fmt.Errorf("%s: %q: want a soft and a hard limit", procLimits, sc.Text())
		}
		if string(f[0]) == "unlimited" {
			return 0, false, nil
		}
		n, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: soft limit of open files: %w", procLimits, err)
		}
		return n, true, nil
	}
	return 0, false, errors.New(procLimits + ": no \"Max open files\" line")
}

// descriptorsFor returns the descriptors a node with max concurrent
// requests needs: descriptorsPerRequest each, and the reserve.
func descriptorsFor(max int) uint64 {
	return uint64(max)*descriptorsPerRequest + descriptorReserve
}

// concurrencyFor returns the concurrent requests a node may serve with
// configured as limits.max_concurrent_requests and an open-file limit of
// files: configured when the limit allows it, else as many as it allows,
// so that the node answers its own 503 before it runs out of descriptors
// (a client it cannot accept gets nothing, and a dial it cannot make
// fails). It is an error when files cannot serve one request.
func concurrencyFor(configured int, files uint64) (int, error) {
	if files >= descriptorsFor(configured) {
		return configured, nil
	}
	if files < descriptorsFor(1) {
		return 0, fmt.Errorf("open-file limit %d is below the %d descriptors the node needs to serve one request (%d reserved, %d per request): raise it (ulimit -n, systemd LimitNOFILE)",
			files, descriptorsFor(1), descriptorReserve, descriptorsPerRequest)
	}
	return int((files - descriptorReserve) / descriptorsPerRequest), nil
}

// concurrencyLimit returns the limit the API listener's concurrency cap
// enforces: limits.max_concurrent_requests, lowered to what the open-file
// limit allows with a warning in the log and on /readyz (detail
// "open_files"), or an error when it cannot serve one request.
func (n *node) concurrencyLimit() (int, error) {
	configured := n.cfg.Limits.MaxConcurrentRequests
	read := n.o.OpenFileLimit
	if read == nil {
		read = openFileLimit
	}
	files, ok := read()
	if !ok {
		n.log.Debug("open-file limit unknown or unlimited: not checked against limits.max_concurrent_requests")
		return configured, nil
	}
	limit, err := concurrencyFor(configured, files)
	if err != nil {
		return 0, fmt.Errorf("limits.max_concurrent_requests: %w", err)
	}
	if limit < configured {
		why := fmt.Sprintf("open-file limit %d allows %d concurrent requests, not limits.max_concurrent_requests = %d (which needs %d): the node answers 503 beyond %d; raise the limit (ulimit -n, systemd LimitNOFILE) or lower the setting",
			files, limit, configured, descriptorsFor(configured), limit)
		n.log.Warn("open-file limit too low for limits.max_concurrent_requests: the node sheds beyond a lower limit",
			"open_files_limit", files, "max_concurrent_requests", configured, "needed", descriptorsFor(configured), "effective", limit)
		n.health.SetDetail("open_files", why)
	}
	return limit, nil
}
