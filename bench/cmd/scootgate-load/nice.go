package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// setNice gives every thread of this process the nice value n (-nice).
// Linux keeps the value per thread and a new thread, or a child process,
// inherits its creator's, so once every thread has it, every later
// thread and every process the harness starts has it too. It passes over
// the threads until a pass finds none it had not set, so that a thread
// created meanwhile is not missed. A negative n needs root
// (CAP_SYS_NICE).
func setNice(n int) error {
	set := map[int]bool{}
	for {
		entries, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("nice: %w", err)
		}
		fresh := false
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || set[tid] {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil {
				return fmt.Errorf("nice %d for thread %d: %w", n, tid, err)
			}
			set[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
}
