// Command scootgate-load is the node's load harness (`make
// bench-load`; method and latest numbers in docs/performance.md). It
// measures the node against the thinnest possible Go proxy hop, a bare
// httputil.ReverseProxy, both reaching the same fake provider through the
// same loopback egress proxy, and reports the node's numbers as ratios to
// that baseline: absolute numbers on a shared 2-core machine are noise.
//
// # Basics
//
// Without -role it is the harness. It re-executes itself as child
// processes, so that each system's CPU time can be read from /proc:
//
//	-role=provider  fake provider (internal/devstack/fakeprovider) and an
//	                embedded MQTT broker (mochi)
//	-role=proxy     loopback SOCKS5 and CONNECT egress proxies
//	                (internal/devstack/socks5proxy, connectproxy)
//	-role=node      the real node: config.Load of a generated TOML, app.Run
//	-role=baseline  httputil.ReverseProxy{FlushInterval: -1} through the
//	                same egress proxy (golang.org/x/net/proxy for SOCKS5)
//
// With taskset available and two CPUs, the system under test runs alone on
// the first CPU; the provider, the proxy and the harness (the load
// generator) share the second. Every system under test, node or baseline,
// gets the same CPU, GOMAXPROCS, GOGC and GOMEMLIMIT from one place and
// reports what it got (sutruntime.go). The harness then runs, all on
// 127.0.0.1:
//
//  1. interleaved rounds of open-loop runs on each of -paths (chat
//     completions, Anthropic messages, Responses): non-stream at each
//     -rates and streams at each -stream-rates, rotating which system goes
//     first; on the first path, at the first rate of each kind, also the
//     node with its MQTT broker down, with usage events off and with
//     tracing on;
//  2. a search for the maximum sustainable non-stream rate (first path),
//     and with -overload, each searched system overloaded and then loaded
//     at half its maximum, to see how soon it serves again (overload.go);
//     with -overload-rate instead, node and baseline on one absolute
//     schedule, repeated, after a spare node has taken the load side's
//     first burst;
//  3. for each count of -idle-streams, streams that send one event and
//     then idle, against a fresh node and a fresh baseline, reading their
//     resident memory and, from inside each process, where it went
//     (memory.go).
//
// It prints a Markdown report and writes it with a JSON copy to
// -out/load-<UTC time>.{md,json}. Every run, step and wait is bounded, and
// -max-time bounds the whole.
//
// `scootgate-load converge` is the fleet convergence benchmark (`make
// bench-fleet`, converge.go): -nodes node processes long-polling the dev
// control plane, and the time from each publish to each node applying it.
//
// `scootgate-load count` is the exact yardstick (`make bench-count`,
// count.go): user-space instructions per request under valgrind's
// callgrind, and system calls and context switches per request counted by
// the kernel, for the node with and without usage events and the hop.
//
// `scootgate-load limits` is the fleet measurement of the redis store of
// limits (limitsfleet.go): in-process nodes sharing one redis-server, one
// key offered five times its limit, a Redis kill and restart midway.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		if role, ok := strings.CutPrefix(os.Args[1], "-role="); ok {
			if err := runRole(role, os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "scootgate-load -role=%s: %v\n", role, err)
				os.Exit(1)
			}
			return
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "converge" {
		if err := runConverge(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "scootgate-load converge:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "count" {
		if err := runCount(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "scootgate-load count:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "limits" {
		if err := runLimits(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "scootgate-load limits:", err)
			os.Exit(1)
		}
		return
	}
	if err := harness(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "scootgate-load:", err)
		os.Exit(1)
	}
}

func runRole(role string, args []string) error {
	switch role {
	case "provider":
		return runProvider(args)
	case "proxy":
		return runProxy(args)
	case "node":
		return runNode(args)
	case "baseline":
		return runBaseline(args)
	}
	return fmt.Errorf("unknown role %q (provider, proxy, node, baseline)", role)
}

func harness(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	pin, err := pinSelf(o.pin) // may re-execute this process under taskset
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, runErr := run(ctx, o, pin)
	if rep == nil {
		return runErr
	}
	if runErr != nil {
		rep.finish()
	}
	path, err := writeFiles(o.out, rep)
	fmt.Print(rep.markdown())
	if err == nil {
		fmt.Fprintln(os.Stderr, "report written to", path, "(and .json)")
	}
	return errors.Join(runErr, err)
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("scootgate-load", flag.ContinueOnError)
	fs.StringVar(&o.out, "out", "bench-results", "directory for load-<time>.md and .json")
	fs.IntVar(&o.rounds, "rounds", 5, "interleaved rounds")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "length of each measured run")
	fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "warm-up run per system, scenario and path before the rounds")
	rates := fs.String("rates", "500,2000", "non-stream rates per second, comma separated, \"\" for none (the first also runs the usage-event and tracing variants)")
	paths := fs.String("paths", strings.Join(pathOrder, ","), "client endpoints to load, comma separated: openai (chat completions), anthropic (messages), responses; the first also runs the variants and the search")
	fs.DurationVar(&o.settle, "settle", 100*time.Millisecond, "pause between runs (after the system under test is idle again)")
	streamRates := fs.String("stream-rates", "200,1000", "streams per second, comma separated, \"\" for none (the first also runs the variants)")
	fs.DurationVar(&o.commit, "commit-interval", 0, "the nodes' usage.commit_interval (0 = the shipped default)")
	fs.IntVar(&o.events, "events", 20, "content events per stream")
	fs.DurationVar(&o.eventGap, "event-gap", 5*time.Millisecond, "the provider's gap between stream events")
	fs.DurationVar(&o.delay, "delay", 0, "the provider's fixed latency before the status line")
	fs.StringVar(&o.egress, "egress", "socks5", "egress proxy: socks5 or connect")
	fs.BoolVar(&o.search, "search", true, "search for the maximum sustainable rate")
	fs.Float64Var(&o.searchStart, "search-start", 1000, "first rate of the search")
	fs.Float64Var(&o.searchFactor, "search-factor", 1.4, "rate multiplier between search steps")
	fs.IntVar(&o.searchSteps, "search-steps", 10, "at most this many rising steps")
	fs.IntVar(&o.searchRefine, "search-refine", 2, "bisection steps after the first failure")
	fs.IntVar(&o.searchConfirm, "search-confirm", 1, "re-tries of a failed search step before it counts as failed")
	fs.DurationVar(&o.searchDuration, "search-duration", 2*time.Second, "length of each search step")
	fs.DurationVar(&o.searchP99, "search-p99", 50*time.Millisecond, "a search step fails when p99 exceeds this")
	fs.BoolVar(&o.overload, "overload", false, "after the search, overload each searched system and measure how it recovers (needs -search)")
	fs.Float64Var(&o.overloadFactor, "overload-factor", 1.5, "the overload's rate, as a multiple of the system's maximum sustainable rate")
	fs.DurationVar(&o.overloadDuration, "overload-duration", 2*time.Second, "length of the overload")
	fs.Float64Var(&o.recoveryFactor, "recovery-factor", 0.5, "the rate right after the overload, as a multiple of the maximum sustainable rate")
	fs.DurationVar(&o.recoveryDuration, "recovery-duration", 8*time.Second, "length of the run right after the overload")
	fs.Float64Var(&o.overloadRate, "overload-rate", 0, "the overload's absolute rate, the same for node and baseline (0: -overload-factor × each one's searched maximum)")
	fs.Float64Var(&o.recoveryRate, "recovery-rate", 0, "with -overload-rate, the absolute rate right after the overload")
	fs.IntVar(&o.overloadReps, "overload-reps", 3, "with -overload-rate, repetitions, alternating node and baseline")
	fs.IntVar(&o.overloadTries, "overload-tries", 3, "with -overload-rate, the most runs of a system in a repetition: a run that does not count (-max-lag, or the load side over 80 % of its CPU) is run again")
	fs.DurationVar(&o.maxLag, "max-lag", 100*time.Millisecond, "with -overload-rate, an overload run whose generator sent a request later than this after its intended time does not count")
	fs.DurationVar(&o.firstByte, "first-byte", 0, "the nodes' timeouts.first_byte (0: the shipped default)")
	fs.StringVar(&o.nodeLimits, "node-limits", "", `extra [limits] lines for every node, ";" between them, e.g. 'shed_wait = "0s"'`)
	variants := fs.String("variants", strings.Join(variantOrder, ","), "node variants run beside the node on the first path's first rates, comma separated, \"\" for none: "+strings.Join(variantOrder, ", "))
	searchTargets := fs.String("search-targets", "baseline,node", "systems the search runs against: baseline, node, node-broker-down, node-usage-off, node-tracing, node-batched")
	idle := fs.String("idle-streams", "1000,5000", "idle streams held open against a fresh node and baseline, one pair of processes per count, comma separated (0 or empty = skip)")
	fs.Float64Var(&o.idleRate, "idle-rate", 2500, "idle streams opened per second")
	fs.DurationVar(&o.idleHold, "idle-hold", 2*time.Second, "how long the idle streams are held while memory is sampled")
	fs.Float64Var(&o.quiet, "quiet", 0.15, "most CPU (in CPUs) other processes may use on each of the two CPUs before and during a run")
	fs.Float64Var(&o.burst, "burst", 0.5, "most CPU other processes may use on either CPU in any 500 ms of a run")
	fs.DurationVar(&o.quietWait, "quiet-wait", 10*time.Second, "longest wait for a quiet machine before a run")
	fs.IntVar(&o.retries, "retries", 2, "re-runs of a run during which other processes exceeded -quiet or -burst")
	fs.DurationVar(&o.noiseBudget, "noise-budget", time.Minute, "total time the run may spend waiting for quiet and on discarded runs")
	fs.StringVar(&o.stalls, "stalls", "auto", "trace host stalls (another process holding a harness CPU for 1 ms or more) with perf and read the tail targets without the waits and gaps they overlap: auto (when perf can trace), on (required), off")
	fs.BoolVar(&o.pin, "pin", true, "pin processes to CPUs with taskset when possible")
	fs.Float64Var(&o.cpuQuota, "cpu-quota", 0, "cap every system under test, node and baseline alike, at this share of one CPU, each in a cgroup of its own, and put the load side in one that outweighs other processes (cgroup v1 cpu controller, root); 0: no cap")
	fs.IntVar(&o.sutGOGC, "sut-gogc", 100, "GOGC of every system under test, node and baseline alike (-1: off)")
	fs.Int64Var(&o.sutMemLimitMiB, "sut-gomemlimit", 0, "GOMEMLIMIT of every system under test in MiB, node and baseline alike (0: none)")
	fs.StringVar(&o.profile, "profile", "", "directory for CPU and allocation profiles of every system under test, node variants included (off when empty)")
	fs.BoolVar(&o.nodeLog, "node-log", true, "let the node write its per-request JSON log (to a file), as in production")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (configs, child logs, node logs) for inspection")
	fs.DurationVar(&o.maxTime, "max-time", 15*time.Minute, "bound on the whole run")
	err := fs.Parse(args)
	if err != nil {
		return o, err
	}
	if *variants != "" {
		for key := range strings.SplitSeq(*variants, ",") {
			if !slices.Contains(variantOrder, key) {
				return o, fmt.Errorf("-variants: %q is not a node variant (%s)", key, strings.Join(variantOrder, ", "))
			}
			if slices.Contains(o.variants, key) {
				return o, fmt.Errorf("-variants: %q given twice", key)
			}
			o.variants = append(o.variants, key)
		}
	}
	for key := range strings.SplitSeq(*searchTargets, ",") {
		if _, ok := targetNames[key]; !ok {
			return o, fmt.Errorf("-search-targets: unknown system %q", key)
		}
		if key != keyBaseline && key != keyNode && !slices.Contains(o.variants, key) {
			return o, fmt.Errorf("-search-targets: %q is not among -variants", key)
		}
		o.searchTargets = append(o.searchTargets, key)
	}
	for part := range strings.SplitSeq(*idle, ",") {
		if part = strings.TrimSpace(part); part == "" || part == "0" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return o, fmt.Errorf("-idle-streams: %q is not a count of streams", part)
		}
		o.idleStreams = append(o.idleStreams, n)
	}
	if o.rates, err = parseRates("-rates", *rates); err != nil {
		return o, err
	}
	if o.streamRates, err = parseRates("-stream-rates", *streamRates); err != nil {
		return o, err
	}
	if o.paths, err = parsePaths(*paths); err != nil {
		return o, err
	}
	switch {
	case o.egress != "socks5" && o.egress != "connect":
		return o, fmt.Errorf("-egress: %q is not socks5 or connect", o.egress)
	case o.rounds < 1, o.duration <= 0, o.warmup <= 0, o.events < 1, o.eventGap < 0, o.delay < 0:
		return o, errors.New("-rounds, -duration, -warmup and -events must be positive; -event-gap and -delay not negative")
	case len(o.rates) == 0 && len(o.streamRates) == 0:
		return o, errors.New("-rates and -stream-rates are both empty: nothing to measure")
	case o.search && (o.searchStart <= 0 || o.searchFactor <= 1 || o.searchSteps < 1 || o.searchDuration <= 0 || o.searchP99 <= 0):
		return o, errors.New("-search-start, -search-steps, -search-duration and -search-p99 must be positive and -search-factor above 1")
	case o.overload && o.overloadRate > 0 && (o.recoveryRate <= 0 || o.recoveryRate >= o.overloadRate || o.overloadReps < 1 || o.overloadTries < 1 || o.maxLag <= 0 || o.overloadDuration <= 0 || o.recoveryDuration <= 0):
		return o, errors.New("-overload-rate needs -recovery-rate in (0, -overload-rate), -overload-reps and -overload-tries at least 1, and positive -max-lag and durations")
	case o.overload && o.overloadRate < 0:
		return o, errors.New("-overload-rate must not be negative")
	case o.overload && o.overloadRate == 0 && (!o.search || o.overloadFactor <= 1 || o.overloadDuration <= 0 || o.recoveryFactor <= 0 || o.recoveryFactor >= 1 || o.recoveryDuration <= 0):
		return o, errors.New("-overload needs -search, -overload-factor above 1, -recovery-factor in (0, 1) and positive durations")
	case o.firstByte < 0:
		return o, errors.New("-first-byte must not be negative")
	case len(o.idleStreams) > 0 && (o.idleRate <= 0 || o.idleHold <= 0):
		return o, errors.New("-idle-rate and -idle-hold must be positive")
	case o.stalls != "auto" && o.stalls != "on" && o.stalls != "off":
		return o, fmt.Errorf("-stalls: %q is not auto, on or off", o.stalls)
	case o.cpuQuota < 0 || o.cpuQuota > 1:
		return o, errors.New("-cpu-quota must be a share of one CPU in (0, 1], or 0 for none")
	case o.maxTime <= 0:
		return o, errors.New("-max-time must be positive")
	case o.sutMemLimitMiB < 0 || o.sutMemLimitMiB > math.MaxInt64>>20:
		return o, errors.New("-sut-gomemlimit must be 0 (none) or a positive number of MiB")
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return o, err
		}
	}
	return o, nil
}

// parseRates reads a comma-separated list of positive rates; "" is none.
func parseRates(flagName, s string) ([]float64, error) {
	var out []float64
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: %q is not a positive rate", flagName, part)
		}
		out = append(out, v)
	}
	return out, nil
}
