package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
)

// Child processes (-role=upstream|node|baseline) share this plumbing: they
// print one JSON line (readyLine) on stdout once they serve, expose a
// loopback control endpoint with their counters, and stop on SIGINT,
// SIGTERM or when their stdin reaches EOF, which happens when the harness
// closes it or dies: a child never outlives the harness.

// readyLine is what a child prints once it serves.
type readyLine struct {
	Control  string `json:"control"`            // host:port of GET /stats
	API      string `json:"api,omitempty"`      // node, baseline: the client API
	Provider string `json:"provider,omitempty"` // upstream: provider root URL (no /v1)
	SOCKS    string `json:"socks,omitempty"`    // upstream: SOCKS5 proxy host:port
	Connect  string `json:"connect,omitempty"`  // upstream: CONNECT proxy host:port
	Broker   string `json:"broker,omitempty"`   // upstream: MQTT broker host:port
	// Runtime is what a system under test runs with (node, baseline),
	// checked against every other's by the harness (sutruntime.go).
	Runtime *sutRuntime `json:"runtime,omitempty"`
}

// sutStats is a system under test's /stats: allocation counters, read
// between runs so that allocations per request can be charged to it.
type sutStats struct {
	Mallocs    uint64 `json:"mallocs"`
	TotalAlloc uint64 `json:"total_alloc"`
	NumGC      uint32 `json:"num_gc"`
	Goroutines int    `json:"goroutines"`
	HeapInuse  uint64 `json:"heap_inuse"`
	SysReads   uint64 `json:"syscalls_read"`  // read-family system calls so far (/proc/self/io)
	SysWrites  uint64 `json:"syscalls_write"` // write-family system calls so far
	// CPU is the process's user + system time so far, from getrusage: to
	// the microsecond, where /proc/<pid>/stat counts 10 ms ticks.
	CPU time.Duration `json:"cpu_ns"`
	// Switches is the process's context switches so far, voluntary (a
	// thread slept: it waits for the network, a timer or a lock, and is
	// woken later) plus involuntary, from getrusage. Waking an idle
	// process is most of what a request costs at low rates.
	Switches uint64 `json:"context_switches"`
}

func readSUTStats() sutStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	st := sutStats{
		Mallocs: m.Mallocs, TotalAlloc: m.TotalAlloc, NumGC: m.NumGC,
		Goroutines: runtime.NumGoroutine(), HeapInuse: m.HeapInuse,
	}
	// Without /proc/self/io the columns read 0; nothing else depends on them.
	st.SysReads, st.SysWrites, _ = loadgen.Syscalls(os.Getpid())
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		st.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		st.Switches = uint64(ru.Nvcsw + ru.Nivcsw)
	}
	return st
}

// childContext ends on SIGINT, SIGTERM or EOF on stdin. The stdin reader
// goroutine ends at that EOF, which the harness guarantees by closing the
// pipe (or by exiting).
func childContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return ctx, func() { cancel(); stop() }
}

func printReady(r readyLine) error {
	return json.NewEncoder(os.Stdout).Encode(r)
}

// raiseFDLimit lifts RLIMIT_NOFILE to at least want: the idle-stream test
// holds tens of thousands of sockets. Raising the hard limit needs root
// (CAP_SYS_RESOURCE); without it the soft limit goes up to the hard one.
func raiseFDLimit(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Cur >= want {
		return lim.Cur, nil
	}
	next := syscall.Rlimit{Cur: want, Max: max(want, lim.Max)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err == nil {
		return want, nil
	}
	next = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		return lim.Cur, fmt.Errorf("setrlimit: %w", err)
	}
	return lim.Max, nil
}

// controlServer serves GET /stats (stats() as JSON), GET /memory
// (readMemSnapshot), POST /release (releaseMemory), a heap profile at GET
// /debug/pprof/heap and every goroutine's stack at GET
// /debug/pprof/goroutine on a
// loopback port
// until ctx ends. It returns the address; the server's goroutines end with
// ctx.
func controlServer(ctx context.Context, stats func() any) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("control listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(stats())
	})
	mux.HandleFunc("GET /debug/pprof/heap", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_ = pprof.Lookup("heap").WriteTo(w, 0) // the idle-stream test's memory profile
	})
	mux.HandleFunc("GET /debug/pprof/goroutine", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = pprof.Lookup("goroutine").WriteTo(w, 2) // every stack, for the idle-stream test
	})
	mux.HandleFunc("GET /memory", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(readMemSnapshot()) // the idle-stream test's breakdown (memory.go)
	})
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(releaseMemory())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "control server:", err)
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return ln.Addr().String(), nil
}
