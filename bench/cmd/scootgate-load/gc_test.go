package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestWithoutGC: the generator does not collect during a run, however
// much it allocates (below the memory limit), and collects again after.
func TestWithoutGC(t *testing.T) {
	var sink [][]byte
	allocate := func() {
		sink = sink[:0]
		for range 4096 {
			sink = append(sink, make([]byte, 16<<10)) // 64 MiB in all
		}
	}
	var during uint64
	withoutGC(func() {
		before := gcCycles()
		allocate()
		during = gcCycles() - before
		if p := debug.SetGCPercent(-1); p != -1 {
			t.Errorf("GC percent during the run = %d, want -1 (off)", p)
		}
	})
	if during != 0 {
		t.Errorf("%d collections during the run", during)
	}
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	if p < 0 {
		t.Errorf("GC percent after the run = %d: still off", p)
	}
	before := gcCycles()
	allocate()
	if gcCycles() == before {
		t.Errorf("no collection while allocating 64 MiB after the run: the collector stayed off")
	}
	runtime.KeepAlive(sink)
}
