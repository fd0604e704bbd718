package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
)

// `scootgate-load count` (`make bench-count`) is the exact yardstick: it
// counts what the node and the bare hop do per request instead of timing
// it. CPU time per request on a shared VM moves by more than the
// differences worth finding, while these counts repeat within a percent:
//
//   - user-space instructions per request, with each system under test
//     run under valgrind's callgrind (one process per system and egress;
//     windows cut with callgrind_control, each load window followed by an
//     idle one of the same length whose count is subtracted), at rates
//     low enough for the slowed process to keep up;
//   - system calls per request by kind and context switches per request,
//     with the process running natively at the harness's rates, counted
//     by the kernel (perf stat on the syscalls:sys_enter_* tracepoints and
//     the context-switches event, started disabled and switched on and off
//     through a control pipe around each window), less an idle window of
//     the same length.
//
// The callgrind dumps stay in -out for callgrind_annotate: they say where
// the instructions of a window went, function by function.

// countOptions are the flags of `scootgate-load count`.
type countOptions struct {
	out     string
	egress  []string // "connect", "socks5"
	systems []string // target keys: baseline, node-usage-off, node
	path    string   // apiPaths key
	repeats int      // windows of each kind per scenario
	kinds   []string // load kinds: "json", "stream"

	instructions bool
	vgRate       float64 // non-stream requests/s under valgrind
	vgStreamRate float64 // streams/s under valgrind
	vgRequests   int     // non-stream requests per window
	vgStreams    int     // streams per window
	vgWarmup     int     // requests (and streams) before the first window
	vgSettle     time.Duration
	vgIdle       float64 // idle window length, as a share of the load window's
	vgGOGC       int     // GOGC of the systems under valgrind; -1: off

	kernel      bool
	rates       []float64 // native non-stream rates
	streamRates []float64 // native stream rates
	duration    time.Duration
	warmup      time.Duration

	events   int
	eventGap time.Duration
	nodeLog  bool
	pin      bool
	keep     bool
	maxTime  time.Duration
}

// countSystems are the systems the count compares, in report order.
var countSystems = []string{keyBaseline, keyUsageOff, keyNode}

// countKinds are the kinds of load a count runs: non-stream requests and
// streams.
var countKinds = []string{"json", "stream"}

func parseCountFlags(args []string) (countOptions, error) {
	var o countOptions
	fs := flag.NewFlagSet("scootgate-load count", flag.ContinueOnError)
	fs.StringVar(&o.out, "out", "bench-results", "directory for count-<time>.md and .json and the callgrind dumps")
	egress := fs.String("egress", "connect,socks5", "egress proxies, comma separated: connect, socks5")
	systems := fs.String("systems", strings.Join(countSystems, ","), "systems, comma separated: "+strings.Join(countSystems, ", "))
	kinds := fs.String("kinds", strings.Join(countKinds, ","), "kinds of load, comma separated: "+strings.Join(countKinds, ", "))
	fs.StringVar(&o.path, "path", pathOpenAI, "client endpoint: "+strings.Join(pathOrder, ", "))
	fs.IntVar(&o.repeats, "repeats", 3, "load windows (each with its idle window) per scenario and system")
	fs.BoolVar(&o.instructions, "instructions", true, "count user-space instructions under valgrind's callgrind")
	fs.Float64Var(&o.vgRate, "vg-rate", 40, "non-stream requests per second under valgrind")
	fs.Float64Var(&o.vgStreamRate, "vg-stream-rate", 10, "streams per second under valgrind")
	fs.IntVar(&o.vgRequests, "vg-requests", 2000, "non-stream requests per window under valgrind")
	fs.IntVar(&o.vgStreams, "vg-streams", 400, "streams per window under valgrind")
	fs.IntVar(&o.vgWarmup, "vg-warmup", 100, "requests and streams before the first window under valgrind")
	fs.DurationVar(&o.vgSettle, "vg-settle", 2*time.Second, "wait after a window's last answer before it ends (the node's deferred work: usage events, log lines)")
	fs.IntVar(&o.vgGOGC, "vg-gogc", -1, "GOGC of every system under valgrind (-1: off, so that a window's count is the request path's own work and not which collections fell into it; allocated bytes are reported beside it)")
	fs.Float64Var(&o.vgIdle, "vg-idle", 0.25, "length of each idle window under valgrind, as a share of its load window (its count is scaled up to the load window's length)")
	fs.BoolVar(&o.kernel, "kernel", true, "count system calls and context switches with perf stat, natively")
	rates := fs.String("rates", "500,2000", "native non-stream rates, comma separated")
	streamRates := fs.String("stream-rates", "200", "native stream rates, comma separated")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "native window length")
	fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "native warm-up per scenario")
	fs.IntVar(&o.events, "events", 20, "content events per stream")
	fs.DurationVar(&o.eventGap, "event-gap", 5*time.Millisecond, "the provider's gap between stream events")
	fs.BoolVar(&o.nodeLog, "node-log", true, "let the node write its per-request JSON log (to a file), as in production")
	fs.BoolVar(&o.pin, "pin", true, "pin processes to CPUs with taskset when possible")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (configs, child logs, node logs) for inspection")
	fs.DurationVar(&o.maxTime, "max-time", 2*time.Hour, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.egress, err = parseList("-egress", *egress, []string{"connect", "socks5"}); err != nil {
		return o, err
	}
	if o.systems, err = parseList("-systems", *systems, countSystems); err != nil {
		return o, err
	}
	if o.kinds, err = parseList("-kinds", *kinds, countKinds); err != nil {
		return o, err
	}
	if _, ok := apiPaths[o.path]; !ok {
		return o, fmt.Errorf("-path: unknown path %q (want %s)", o.path, strings.Join(pathOrder, ", "))
	}
	if o.rates, err = parseRates("-rates", *rates); err != nil {
		return o, err
	}
	if o.streamRates, err = parseRates("-stream-rates", *streamRates); err != nil {
		return o, err
	}
	switch {
	case !o.instructions && !o.kernel:
		return o, errors.New("-instructions and -kernel are both off: nothing to count")
	case o.repeats < 1, o.vgRequests < 1, o.vgStreams < 1, o.vgWarmup < 1, o.events < 1:
		return o, errors.New("-repeats, -vg-requests, -vg-streams, -vg-warmup and -events must be at least 1")
	case o.vgRate <= 0, o.vgStreamRate <= 0, o.vgIdle <= 0, o.duration <= 0, o.warmup <= 0, o.vgSettle < 0, o.eventGap < 0, o.maxTime <= 0:
		return o, errors.New("-vg-rate, -vg-stream-rate, -duration, -warmup and -max-time must be positive; -vg-settle and -event-gap not negative")
	}
	return o, nil
}

// parseList reads a comma-separated list of known words, no repeats.
func parseList(flagName, s string, known []string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		w := strings.TrimSpace(part)
		if !slices.Contains(known, w) {
			return nil, fmt.Errorf("%s: %q is not one of %s", flagName, w, strings.Join(known, ", "))
		}
		if slices.Contains(out, w) {
			return nil, fmt.Errorf("%s: %q given twice", flagName, w)
		}
		out = append(out, w)
	}
	return out, nil
}

// ofKinds returns the scenarios of scs whose kind -kinds asks for.
func (o countOptions) ofKinds(scs []countScenario) []countScenario {
	return slices.DeleteFunc(scs, func(sc countScenario) bool {
		kind := "json"
		if sc.stream {
			kind = "stream"
		}
		return !slices.Contains(o.kinds, kind)
	})
}

// countScenario is one kind of load in a count.
type countScenario struct {
	name   string // "JSON @ 500/s"
	stream bool
	rate   float64
	n      int // shots per window
}

// countRow is one system's windows in one scenario and egress.
type countRow struct {
	Egress   string `json:"egress"`
	Scenario string `json:"scenario"`
	System   string `json:"system"`
	// PerRequest is one value per load window: instructions, or for the
	// kernel the total of Syscalls, per answered request, idle subtracted.
	PerRequest []float64 `json:"per_request"`
	// Syscalls and Switches are per answered request, medians over the
	// windows, idle subtracted (kernel rows only).
	Syscalls map[string]float64 `json:"syscalls,omitempty"`
	Switches []float64          `json:"context_switches,omitempty"`
	// Failed counts the shots that were not answered in full, over all
	// windows; per-request values divide by the answered ones.
	Failed int `json:"failed,omitempty"`
	// Late is the most a window's last answer came after its schedule
	// ended: the system under test fell behind.
	Late time.Duration `json:"late_ns,omitempty"`
	// Bytes and GCs are the bytes allocated per answered request and the
	// collections in the window, one value per window.
	Bytes []float64 `json:"bytes_per_request,omitempty"`
	GCs   []uint32  `json:"gcs,omitempty"`
	// Tunnels is the egress tunnels the system opened in each window: a
	// new connection costs more than a request on a kept one, so a
	// window that opened more counts more.
	Tunnels []int64 `json:"tunnels,omitempty"`
	// IdleShare is the largest share of a load window's count the idle
	// window's took.
	IdleShare float64 `json:"idle_share"`
	// Dumps are the load windows' callgrind files (instruction rows).
	Dumps []string `json:"dumps,omitempty"`
}

// countReport is what `scootgate-load count` prints and writes.
type countReport struct {
	Start        time.Time  `json:"start"`
	Setup        string     `json:"setup"`
	Instructions []countRow `json:"instructions"`
	Kernel       []countRow `json:"kernel"`
}

func runCount(args []string) error {
	o, err := parseCountFlags(args)
	if err != nil {
		return err
	}
	if o.instructions {
		for _, tool := range []string{"valgrind", "callgrind_control"} {
			if _, err := exec.LookPath(tool); err != nil {
				return fmt.Errorf("-instructions needs %s: %w", tool, err)
			}
		}
	}
	if o.kernel {
		if _, err := exec.LookPath("perf"); err != nil {
			return fmt.Errorf("-kernel needs perf: %w", err)
		}
	}
	pin, err := pinSelf(o.pin)
	if err != nil {
		return err
	}
	if o.out, err = filepath.Abs(o.out); err != nil {
		return err
	}
	stamp := time.Now().UTC().Format("20060102-150405")
	dumps := filepath.Join(o.out, "count-"+stamp)
	if err := os.MkdirAll(dumps, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.maxTime)
	defer cancel()
	rep := &countReport{Start: time.Now().UTC()}
	runErr := countAll(ctx, o, pin, dumps, rep)
	md := rep.markdown(o)
	fmt.Print(md)
	base := filepath.Join(o.out, "count-"+stamp)
	js, err := json.MarshalIndent(rep, "", "  ")
	if err == nil {
		err = errors.Join(os.WriteFile(base+".md", []byte(md), 0o644), os.WriteFile(base+".json", js, 0o644))
	}
	if err == nil {
		fmt.Fprintln(os.Stderr, "report written to", base+".md (and .json); callgrind dumps in", dumps)
	}
	return errors.Join(runErr, err)
}

// countAll starts the provider and the proxy and runs every count,
// filling rep as it goes.
func countAll(ctx context.Context, o countOptions, pin pinning, dumps string, rep *countReport) error {
	if _, err := raiseFDLimit(1 << 18); err != nil {
		return fmt.Errorf("fd limit: %w", err)
	}
	dir, err := os.MkdirTemp("", "scootgate-count-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	b := &bench{
		o:   options{events: o.events, eventGap: o.eventGap, nodeLog: o.nodeLog, sutGOGC: 100},
		pin: pin, dir: dir,
		env: []string{providerKeyEnv + "=fake-provider-key-for-load"},
		sut: newSUTRuntime(pin, 100, 0),
	}
	rep.Setup = fmt.Sprintf("%s; systems under test: %s (under valgrind: %s); path %s", pin, b.sut, newSUTRuntime(pin, o.vgGOGC, 0), apiPaths[o.path].label)
	b.logf("scootgate-load count: %s; work dir %s", rep.Setup, dir)
	cmd, err := childCommand(pin, pin.side, "provider", []string{
		"-events", fmt.Sprint(o.events), "-event-gap", o.eventGap.String(),
	}, b.env)
	if err != nil {
		return err
	}
	if b.prov, err = startChild(ctx, "provider", cmd, dir); err != nil {
		return err
	}
	defer b.prov.stop()
	if cmd, err = childCommand(pin, pin.side, "proxy", nil, b.env); err != nil {
		return err
	}
	if b.proxy, err = startChild(ctx, "proxy", cmd, dir); err != nil {
		return err
	}
	defer b.proxy.stop()
	b.broker = b.prov.ready.Broker

	p := apiPaths[o.path]
	var errs []error // a system that fails is reported; the others still run
	for i, eg := range o.egress {
		if ctx.Err() != nil {
			break
		}
		b.egress = "socks5://" + b.proxy.ready.SOCKS
		if eg == "connect" {
			b.egress = "http://" + b.proxy.ready.Connect
		}
		systems := rotate(o.systems, i)
		if o.kernel {
			var native []countScenario
			for _, r := range o.rates {
				native = append(native, countScenario{name: fmt.Sprintf("JSON @ %g/s", r), rate: r, n: int(r * o.duration.Seconds())})
			}
			for _, r := range o.streamRates {
				native = append(native, countScenario{name: fmt.Sprintf("stream @ %g/s", r), stream: true, rate: r, n: int(r * o.duration.Seconds())})
			}
			native = o.ofKinds(native)
			for _, key := range systems {
				rows, err := b.countKernel(ctx, o, eg, key, p, native)
				rep.Kernel = append(rep.Kernel, rows...)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s, %s: %w", key, eg, err))
					b.logf("%v", errs[len(errs)-1])
				}
			}
		}
		if o.instructions {
			// Every kind warms up, whatever -kinds counts: a node that
			// meets its first stream cold under valgrind sheds some, and
			// the counts stay comparable with a full run's.
			warm := []countScenario{
				{name: fmt.Sprintf("JSON @ %g/s", o.vgRate), rate: o.vgRate, n: o.vgRequests},
				{name: fmt.Sprintf("stream @ %g/s", o.vgStreamRate), stream: true, rate: o.vgStreamRate, n: o.vgStreams},
			}
			slow := o.ofKinds(slices.Clone(warm))
			for _, key := range systems {
				rows, err := b.countInstructions(ctx, o, eg, key, p, warm, slow, dumps)
				rep.Instructions = append(rep.Instructions, rows...)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s, %s: %w", key, eg, err))
					b.logf("%v", errs[len(errs)-1])
				}
			}
		}
	}
	return errors.Join(append(errs, ctx.Err())...)
}

// rotate returns s starting at its i-th element (mod len), so that no
// system always goes first.
func rotate(s []string, i int) []string {
	i %= len(s)
	return append(slices.Clone(s[i:]), s[:i]...)
}

// countWindow runs one load window of sc against t. It returns the
// answered shots, the failed ones, and how long after the schedule's end
// the last answer came. More than 5 % failed is an error: the counts
// would no longer be per request. (The bare hop cuts 1–3 % of its streams
// under valgrind: its upstream connection is closed under the body copy.)
func (b *bench) countWindow(ctx context.Context, t *target, p *apiPath, sc countScenario, n int) (ok, failed int, late time.Duration, err error) {
	d := time.Duration(float64(n) / sc.rate * float64(time.Second))
	a := loadgen.Attack{Rate: sc.rate, Duration: d, MaxInFlight: 4000, Timeout: time.Minute}
	res, err := loadgen.Run(ctx, a, b.fire(t, p, sc.stream))
	if err != nil {
		return 0, 0, 0, err
	}
	ok = res.OK()
	failed = len(res.Shots) - ok
	late = max(0, res.Elapsed-d)
	if failed*20 > len(res.Shots) {
		for _, s := range res.Shots {
			if s.Err != nil {
				return ok, failed, late, fmt.Errorf("%s: %d of %d shots failed, first: %w", sc.name, failed, len(res.Shots), s.Err)
			}
		}
	}
	return ok, failed, late, nil
}

// countInstructions runs key under callgrind, warms it up with each of
// warm, and for each of scs and repeat counts a load window and an idle
// window as long.
func (b *bench) countInstructions(ctx context.Context, o countOptions, eg, key string, p *apiPath, warm, scs []countScenario, dumps string) ([]countRow, error) {
	out := filepath.Join(dumps, fmt.Sprintf("%s.%s.cg", key, eg))
	b.wrap = func(cmd *exec.Cmd) *exec.Cmd {
		// Go's asynchronous preemption signals trip an assertion in
		// callgrind's signal tracking (valgrind 3.19), and valgrind
		// cannot decode RDTSCP, which the runtime's cputicks uses when
		// the CPU has it. The same for every system under test.
		return wrapCommand(cmd, []string{"valgrind", "--tool=callgrind", "--callgrind-out-file=" + out}, valgrindGODEBUG)
	}
	// Under valgrind every goroutine waits ~50 times longer to run, which
	// the node reads as its own overload and sheds (docs/failures.md
	// "Shedding"): a node without shedding counts the request path.
	sut, limits := b.sut, b.o.nodeLimits
	b.sut = newSUTRuntime(b.pin, o.vgGOGC, 0)
	b.o.nodeLimits = `shed_wait = "0s"`
	defer func() { b.wrap, b.sut, b.o.nodeLimits = nil, sut, limits }()
	b.logf("instructions: %s through %s, under callgrind", key, eg)
	t, err := b.startTarget(ctx, key, "-"+eg)
	if err != nil {
		return nil, err
	}
	defer t.close()
	cg := &callgrind{pid: t.proc.pid(), out: out}
	for _, sc := range warm {
		if _, _, _, err := b.countWindow(ctx, t, p, sc, o.vgWarmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	if _, err := cg.dump(ctx, "warmup"); err != nil {
		return nil, err
	}
	var rows []countRow
	for _, sc := range scs {
		row := countRow{Egress: eg, Scenario: sc.name, System: key}
		for r := range o.repeats {
			// Reading the counters costs the process a request's work; both
			// reads fall in idle windows, whose counts are small.
			var st0, st1 sutStats
			if err := t.proc.stats(ctx, &st0); err != nil {
				return append(rows, row), err
			}
			up0, err := b.upstream(ctx)
			if err != nil {
				return append(rows, row), err
			}
			t0 := time.Now()
			ok, failed, late, err := b.countWindow(ctx, t, p, sc, sc.n)
			row.Failed, row.Late = row.Failed+failed, max(row.Late, late)
			if err == nil {
				err = b.pause(ctx, o.vgSettle)
			}
			if err != nil {
				return append(rows, row), err
			}
			load, err := cg.dump(ctx, fmt.Sprintf("load-%d", r))
			if err != nil {
				return append(rows, row), err
			}
			wall := time.Since(t0)
			t1 := time.Now()
			if err := t.proc.stats(ctx, &st1); err != nil {
				return append(rows, row), err
			}
			up1, err := b.upstream(ctx)
			if err != nil {
				return append(rows, row), err
			}
			row.Tunnels = append(row.Tunnels, up1.SOCKSTunnels+up1.ConnectTunnels-up0.SOCKSTunnels-up0.ConnectTunnels)
			row.Bytes = append(row.Bytes, float64(st1.TotalAlloc-st0.TotalAlloc)/float64(ok))
			row.GCs = append(row.GCs, st1.NumGC-st0.NumGC)
			if err := b.pause(ctx, time.Duration(o.vgIdle*float64(wall))); err != nil {
				return append(rows, row), err
			}
			idle, err := cg.dump(ctx, fmt.Sprintf("idle-%d", r))
			if err != nil {
				return append(rows, row), err
			}
			idleScaled := float64(idle.ir) * wall.Seconds() / time.Since(t1).Seconds()
			row.PerRequest = append(row.PerRequest, (float64(load.ir)-idleScaled)/float64(ok))
			row.IdleShare = max(row.IdleShare, idleScaled/float64(load.ir))
			row.Dumps = append(row.Dumps, load.file)
			b.logf("  %s %s window %d: %.0f instructions and %.0f bytes allocated a request, %d collections, %d tunnels opened (idle %.2f%% of the window; %d failed, last answer %s after the schedule)",
				key, sc.name, r+1, row.PerRequest[r], row.Bytes[r], row.GCs[r], row.Tunnels[r], 100*idleScaled/float64(load.ir), failed, late.Round(time.Millisecond))
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// valgrindGODEBUG is the environment of a system under test under
// valgrind.
const valgrindGODEBUG = "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off"

// wrapCommand returns cmd with prefix run in front of this executable
// (after taskset, if cmd has it) and env added.
func wrapCommand(cmd *exec.Cmd, prefix []string, env ...string) *exec.Cmd {
	exe, _ := os.Executable()
	i := slices.Index(cmd.Args, exe)
	if i < 0 {
		i = 0
	}
	argv := append(append(slices.Clone(cmd.Args[:i]), prefix...), cmd.Args[i:]...)
	wrapped := exec.Command(argv[0], argv[1:]...)
	wrapped.Env = append(slices.Clone(cmd.Env), env...)
	return wrapped
}

// callgrind is a process under callgrind whose counters are dumped (and
// zeroed) on demand.
type callgrind struct {
	pid   int
	out   string // --callgrind-out-file; dump n is out.n
	parts int
}

type callgrindDump struct {
	file string
	ir   int64
}

// dump asks callgrind for a dump of the counts since the last one and
// reads its total.
func (c *callgrind) dump(ctx context.Context, hint string) (callgrindDump, error) {
	cmd := exec.CommandContext(ctx, "callgrind_control", "--dump="+hint, strconv.Itoa(c.pid))
	if msg, err := cmd.CombinedOutput(); err != nil {
		return callgrindDump{}, fmt.Errorf("callgrind_control: %w: %s", err, msg)
	}
	c.parts++
	file := fmt.Sprintf("%s.%d", c.out, c.parts)
	f, err := os.Open(file)
	if err != nil {
		return callgrindDump{}, fmt.Errorf("callgrind dump %q: %w", hint, err)
	}
	defer f.Close()
	ir, err := callgrindTotal(f, hint)
	return callgrindDump{file: file, ir: ir}, err
}

// callgrindTotal reads the "totals:" line of a callgrind dump triggered
// with hint, checking that it is that dump.
func callgrindTotal(r io.Reader, hint string) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if desc, ok := strings.CutPrefix(line, "desc: Trigger: "); ok {
			if desc != "Client Request: "+hint && desc != "dump "+hint {
				return 0, fmt.Errorf("callgrind dump: trigger %q, want the dump %q", desc, hint)
			}
			seen = true
		}
		if v, ok := strings.CutPrefix(line, "totals: "); ok {
			if !seen {
				return 0, fmt.Errorf("callgrind dump %q: totals before the trigger line", hint)
			}
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("callgrind dump %q: totals: %w", hint, err)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("callgrind dump %q: no totals line", hint)
}

// countKernel runs key natively and, for each scenario, warms up and
// counts repeats load windows and as many idle windows as long.
func (b *bench) countKernel(ctx context.Context, o countOptions, eg, key string, p *apiPath, scs []countScenario) ([]countRow, error) {
	b.logf("system calls: %s through %s", key, eg)
	t, err := b.startTarget(ctx, key, "-"+eg)
	if err != nil {
		return nil, err
	}
	defer t.close()
	var rows []countRow
	for _, sc := range scs {
		row := countRow{Egress: eg, Scenario: sc.name, System: key, Syscalls: map[string]float64{}}
		if _, _, _, err := b.countWindow(ctx, t, p, sc, max(1, int(sc.rate*o.warmup.Seconds()))); err != nil {
			return rows, fmt.Errorf("warm-up: %w", err)
		}
		perKind := map[string][]float64{}
		for r := range o.repeats {
			if _, err := b.quiesce(ctx, t); err != nil {
				return rows, err
			}
			pw, err := startPerf(ctx, t.proc.pid())
			if err != nil {
				return rows, err
			}
			t0 := time.Now()
			ok, failed, late, err := b.countWindow(ctx, t, p, sc, sc.n)
			row.Failed, row.Late = row.Failed+failed, max(row.Late, late)
			if err == nil {
				_, err = b.quiesce(ctx, t) // the node's deferred work belongs to the window
			}
			wall := time.Since(t0)
			load, perr := pw.stop()
			if err = errors.Join(err, perr); err != nil {
				return rows, err
			}
			if pw, err = startPerf(ctx, t.proc.pid()); err != nil {
				return rows, err
			}
			err = b.pause(ctx, wall)
			idle, perr := pw.stop()
			if err = errors.Join(err, perr); err != nil {
				return rows, err
			}
			per := func(name string) float64 { return (load[name] - idle[name]) / float64(ok) }
			total := per(perfSyscalls)
			row.PerRequest = append(row.PerRequest, total)
			row.Switches = append(row.Switches, per(perfSwitches))
			row.IdleShare = max(row.IdleShare, idle[perfSyscalls]/max(1, load[perfSyscalls]))
			other := total
			for name := range load {
				if kind, ok := strings.CutPrefix(name, "syscalls:sys_enter_"); ok {
					perKind[kind] = append(perKind[kind], per(name))
					other -= per(name)
				}
			}
			perKind["other"] = append(perKind["other"], other)
			b.logf("  %s %s window %d: %.2f system calls and %.2f context switches a request (%d failed, last answer %s after the schedule)",
				key, sc.name, r+1, total, per(perfSwitches), failed, late.Round(time.Millisecond))
		}
		for kind, vs := range perKind {
			if m := median(vs); math.Abs(m) >= 0.005 {
				row.Syscalls[kind] = m
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// The perf stat events every kernel window counts: all system calls,
// context switches, and the system calls by kind that either system
// makes (the rest are reported together as "other"). Each tracepoint
// costs perf about 25 ms to open and close, so not all ~360 of them.
const (
	perfSyscalls = "raw_syscalls:sys_enter"
	perfSwitches = "context-switches"
)

var perfKinds = []string{
	"read", "write", "writev", "pread64", "pwrite64", "recvfrom", "sendto",
	"epoll_pwait", "epoll_ctl", "futex", "nanosleep", "sched_yield",
	"accept4", "connect", "socket", "close", "shutdown", "setsockopt",
	"getsockopt", "getsockname", "getpeername",
	"fdatasync", "fsync", "madvise", "mmap", "munmap",
	"getpid", "tgkill", "rt_sigreturn", "getrandom", "clone",
}

// perfEvents is the -e list of perf stat.
func perfEvents() string {
	events := []string{perfSyscalls, perfSwitches}
	for _, k := range perfKinds {
		events = append(events, "syscalls:sys_enter_"+k)
	}
	return strings.Join(events, ",")
}

// perfWindow is a perf stat attached to a process, counting between its
// start and stop.
type perfWindow struct {
	cmd *exec.Cmd
	pc  *perfControl
	out string
}

// startPerf attaches perf stat to pid with its events disabled, enables
// them and returns once perf has acknowledged: counting has begun.
func startPerf(ctx context.Context, pid int) (*perfWindow, error) {
	f, err := os.CreateTemp("", "scootgate-count-perf-*.csv")
	if err != nil {
		return nil, err
	}
	f.Close()
	cmd := exec.CommandContext(ctx, "perf", "stat", "-x,", "-o", f.Name(), "-D", "-1", "--control", "fd:3,4",
		"-e", perfEvents(), "-p", strconv.Itoa(pid))
	pc, err := newPerfControl(cmd)
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	err = cmd.Start()
	pc.started()
	pw := &perfWindow{cmd: cmd, pc: pc, out: f.Name()}
	if err != nil {
		pw.close()
		return nil, fmt.Errorf("perf stat: %w", err)
	}
	if err := pw.command("enable"); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		pw.close()
		return nil, err
	}
	return pw, nil
}

// command sends perf one control command and waits for its ack.
func (pw *perfWindow) command(c string) error { return pw.pc.command(c) }

func (pw *perfWindow) close() {
	pw.pc.close()
	os.Remove(pw.out)
}

// stop disables the counters, ends perf and returns its counts by event.
func (pw *perfWindow) stop() (map[string]float64, error) {
	defer pw.close()
	err := pw.command("disable")
	_ = pw.cmd.Process.Signal(os.Interrupt)
	if werr := pw.cmd.Wait(); err == nil && werr != nil {
		var exit *exec.ExitError
		if !errors.As(werr, &exit) { // perf exits non-zero on SIGINT
			err = werr
		}
	}
	if err != nil {
		return nil, err
	}
	f, err := os.Open(pw.out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parsePerfStat(f)
}

// parsePerfStat reads perf stat -x, output: value,unit,event,... per
// line; "<not counted>" is 0 (the event's threads never ran).
func parsePerfStat(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 3 {
			return nil, fmt.Errorf("perf stat: unexpected line %q", line)
		}
		v := 0.0
		if f[0] != "<not counted>" && f[0] != "<not supported>" {
			var err error
			if v, err = strconv.ParseFloat(f[0], 64); err != nil {
				return nil, fmt.Errorf("perf stat: line %q: %w", line, err)
			}
		}
		out[f[2]] += v
	}
	if _, ok := out[perfSyscalls]; !ok {
		return nil, fmt.Errorf("perf stat: no %s count", perfSyscalls)
	}
	return out, sc.Err()
}

// markdown renders the report: the ratios first, then each system's
// counts with their spread over the windows.
func (r *countReport) markdown(o countOptions) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# scootgate-load count, %s\n\n%s.\n\n", r.Start.Format("2006-01-02 15:04 UTC"), r.Setup)
	if len(r.Instructions) > 0 {
		fmt.Fprintf(&sb, "## User-space instructions per request (callgrind)\n\n")
		gc := fmt.Sprintf("GOGC=%d", o.vgGOGC)
		if o.vgGOGC < 0 {
			gc = "garbage collector off (GOGC=off): the request path's own work; what the collector would add follows the bytes allocated"
		}
		fmt.Fprintf(&sb, "Each window %d requests or %d streams, an idle window subtracted; median of %d windows, spread = (max − min) ÷ median; %s.\n\n", o.vgRequests, o.vgStreams, o.repeats, gc)
		writeRatios(&sb, r.Instructions, "%.3f×")
		sb.WriteString("| egress | scenario | system | instructions a request | range | spread | bytes allocated a request | collections a window | tunnels opened a window | idle share | failed | most late |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range r.Instructions {
			if len(row.PerRequest) == 0 {
				continue
			}
			lo, hi := slices.Min(row.PerRequest), slices.Max(row.PerRequest)
			m := median(row.PerRequest)
			gcs := make([]string, len(row.GCs))
			for i, n := range row.GCs {
				gcs[i] = strconv.Itoa(int(n))
			}
			tunnels := make([]string, len(row.Tunnels))
			for i, n := range row.Tunnels {
				tunnels[i] = strconv.FormatInt(n, 10)
			}
			bytes := "–"
			if len(row.Bytes) > 0 {
				bytes = fmt.Sprintf("%.0f", median(row.Bytes))
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %.0f | %.0f…%.0f | %.2f%% | %s | %s | %s | %.2f%% | %d | %s |\n", row.Egress, row.Scenario, row.System, m, lo, hi, 100*(hi-lo)/m, bytes, strings.Join(gcs, ", "), strings.Join(tunnels, ", "), 100*row.IdleShare, row.Failed, row.Late.Round(time.Millisecond))
		}
		sb.WriteString("\n")
	}
	if len(r.Kernel) > 0 {
		fmt.Fprintf(&sb, "## System calls and context switches per request (perf stat, native)\n\n")
		fmt.Fprintf(&sb, "Each window %s of load, then an idle window as long, subtracted; median of %d windows.\n\n", o.duration, o.repeats)
		writeRatios(&sb, r.Kernel, "%.2f×")
		sb.WriteString("| egress | scenario | system | system calls | range | context switches | by kind |\n|---|---|---|---:|---:|---:|---|\n")
		for _, row := range r.Kernel {
			if len(row.PerRequest) == 0 {
				continue
			}
			kinds := make([]string, 0, len(row.Syscalls))
			for k := range row.Syscalls {
				kinds = append(kinds, k)
			}
			slices.SortFunc(kinds, func(a, b string) int {
				if c := -cmpFloat(row.Syscalls[a], row.Syscalls[b]); c != 0 {
					return c
				}
				return strings.Compare(a, b)
			})
			parts := make([]string, 0, len(kinds))
			for _, k := range kinds {
				parts = append(parts, fmt.Sprintf("%s %.2f", k, row.Syscalls[k]))
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %.2f | %.2f…%.2f | %.2f | %s |\n", row.Egress, row.Scenario, row.System,
				median(row.PerRequest), slices.Min(row.PerRequest), slices.Max(row.PerRequest), median(row.Switches), strings.Join(parts, ", "))
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeRatios writes node ÷ hop per egress and scenario: the median of
// each system's windows over the hop's median.
func writeRatios(sb *strings.Builder, rows []countRow, format string) {
	type cell struct{ egress, scenario string }
	hop := map[cell]float64{}
	var cells []cell
	for _, row := range rows {
		c := cell{row.Egress, row.Scenario}
		if !slices.Contains(cells, c) {
			cells = append(cells, c)
		}
		if row.System == keyBaseline && len(row.PerRequest) > 0 {
			hop[c] = median(row.PerRequest)
		}
	}
	sb.WriteString("| egress | scenario | node, events off ÷ hop | node ÷ hop |\n|---|---|---:|---:|\n")
	for _, c := range cells {
		ratio := func(key string) string {
			for _, row := range rows {
				if row.Egress == c.egress && row.Scenario == c.scenario && row.System == key && len(row.PerRequest) > 0 && hop[c] > 0 {
					return fmt.Sprintf(format, median(row.PerRequest)/hop[c])
				}
			}
			return "–"
		}
		fmt.Fprintf(sb, "| %s | %s | %s | %s |\n", c.egress, c.scenario, ratio(keyUsageOff), ratio(keyNode))
	}
	sb.WriteString("\n")
}
