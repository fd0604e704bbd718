//go:build !linux

package balance

import "time"

var cpuEpoch = time.Now()

// threadCPU is wall time where no thread CPU clock is wired up.
func threadCPU() time.Duration { return time.Since(cpuEpoch) }
