package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
)

// options are the harness's flags.
type options struct {
	out      string
	rounds   int
	duration time.Duration
	warmup   time.Duration
	rates    []float64
	settle   time.Duration
	paths    []string // apiPaths keys, in report order

	streamRates []float64
	events      int
	eventGap    time.Duration
	delay       time.Duration
	egress      string        // "socks5" | "connect"
	commit      time.Duration // the nodes' usage.commit_interval; 0 = the shipped default

	search         bool
	searchStart    float64
	searchFactor   float64
	searchSteps    int
	searchRefine   int
	searchDuration time.Duration
	searchP99      time.Duration
	searchTargets  []string // target keys
	variants       []string // node variants run beside the node, in variantOrder's keys
	searchConfirm  int      // re-tries of a failed step

	// The overload phase (overload.go): after the search, each searched
	// system at overloadFactor × its maximum sustainable rate, then at
	// recoveryFactor × it, back to back.
	overload         bool
	overloadFactor   float64
	overloadDuration time.Duration
	recoveryFactor   float64
	recoveryDuration time.Duration
	// With overloadRate set, the schedule is absolute instead: node and
	// baseline alike at overloadRate, then recoveryRate, overloadReps
	// times, alternating which goes first; no search needed.
	overloadRate float64
	recoveryRate float64
	overloadReps int
	// overloadTries bounds the runs of a system in a repetition; maxLag
	// is the largest generator lag of a run that counts.
	overloadTries int
	maxLag        time.Duration
	firstByte     time.Duration // the nodes' timeouts.first_byte; 0 = the shipped default
	nodeLimits    string        // extra [limits] lines for every node (-node-limits)

	idleStreams []int // one fresh node and baseline per count
	idleRate    float64
	idleHold    time.Duration

	quiet       float64       // most foreign load (CPUs) tolerated before and during a run
	burst       float64       // most foreign load (CPUs) tolerated in any burstWindow of a run
	quietWait   time.Duration // longest wait for a quiet machine before a run
	retries     int           // re-runs of a run disturbed by foreign load
	noiseBudget time.Duration // total time for quiet waits and discarded runs
	stalls      string        // host stall tracing: "auto" | "on" | "off"

	pin            bool
	cpuQuota       float64 // share of one CPU for every system under test, each in its own cgroup; 0: no quota
	sutGOGC        int     // GOGC of every system under test; -1: off
	sutMemLimitMiB int64   // GOMEMLIMIT of every system under test; 0: none
	profile        string
	nodeLog        bool
	keep           bool
	maxTime        time.Duration
}

// Target keys, in report order.
const (
	keyBaseline   = "baseline"
	keyNode       = "node"
	keyBrokerDown = "node-broker-down"
	keyUsageOff   = "node-usage-off"
	keyTmpfs      = "node-outbox-tmpfs"
	keyTracing    = "node-tracing"
	keyBatched    = "node-batched"
	keyTwin       = "node-twin"
)

// tmpfsRoot is where the node-outbox-tmpfs variant keeps its outbox: a
// tmpfs, whose fsync costs nothing.
const tmpfsRoot = "/dev/shm"

// batchedMax is the node-batched variant's [mqtt] batch_max.
const batchedMax = 100

// variantOrder is the node variants, in report order.
var variantOrder = []string{keyBrokerDown, keyUsageOff, keyTmpfs, keyTracing, keyBatched, keyTwin}

var targetNames = map[string]string{
	keyBaseline:   "baseline (httputil.ReverseProxy)",
	keyNode:       "node",
	keyBrokerDown: "node, MQTT broker down",
	keyUsageOff:   "node, usage events off",
	keyTmpfs:      "node, outbox on tmpfs",
	keyTracing:    "node, tracing on",
	keyBatched:    "node, usage events batched",
	keyTwin:       "node's twin (the same configuration)",
}

// target is one system under test and the generator's client for it.
type target struct {
	key    string
	proc   *child
	group  *cpuGroup // its CPU quota's group; nil without -cpu-quota
	client *http.Client
	base   string // http://host:port
	// overloads counts the overload runs of this process; restarts the
	// processes of this system started after the first (restartCold).
	overloads, restarts int
}

// bench runs the phases and collects the report.
type bench struct {
	o     options
	pin   pinning
	sut   sutRuntime // every system under test's CPU and runtime settings
	dir   string
	shm   string // the tmpfs directory of the node-outbox-tmpfs variant's outbox, or ""
	prov  *child // fake provider + MQTT broker
	proxy *child // SOCKS5 + CONNECT proxies
	env   []string
	// noise is the time spent so far waiting for a quiet machine and on
	// discarded runs; at o.noiseBudget the harness stops doing either.
	noise  time.Duration
	rep    *report
	egress string // the egress URL every system under test uses
	broker string // the embedded broker's host:port
	sink   *otlpSink
	stalls *stallTracer // nil: host stalls are not traced
	quota  *cpuQuota    // nil: no CPU quota (-cpu-quota 0)
	// wrap, when set, rewrites each system under test's command (count.go
	// runs it under valgrind).
	wrap func(*exec.Cmd) *exec.Cmd
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// run is the whole harness: start, measure, report.
func run(ctx context.Context, o options, pin pinning) (*report, error) {
	ctx, cancel := context.WithTimeout(ctx, o.maxTime)
	defer cancel()
	if _, err := raiseFDLimit(1 << 18); err != nil {
		return nil, fmt.Errorf("fd limit: %w", err)
	}
	dir, err := os.MkdirTemp("", "scootgate-load-")
	if err != nil {
		return nil, err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	var shm string
	if slices.Contains(o.variants, keyTmpfs) {
		// Removed whatever -keep says: it holds memory, not disk.
		if shm, err = os.MkdirTemp(tmpfsRoot, "scootgate-load-"); err != nil {
			return nil, fmt.Errorf("%s needs a tmpfs at %s: %w", keyTmpfs, tmpfsRoot, err)
		}
		defer os.RemoveAll(shm)
	}
	debug.SetMemoryLimit(genMemoryLimit)
	b := &bench{
		o: o, pin: pin, dir: dir, shm: shm,
		env: []string{providerKeyEnv + "=fake-provider-key-for-load"},
		sut: newSUTRuntime(pin, o.sutGOGC, o.sutMemLimitMiB),
	}
	if o.cpuQuota > 0 {
		mounts, err := os.Open("/proc/self/mounts")
		if err != nil {
			return nil, fmt.Errorf("-cpu-quota: %w", err)
		}
		b.quota, err = newCPUQuota(mounts, o.cpuQuota)
		mounts.Close()
		if err != nil {
			return nil, fmt.Errorf("-cpu-quota: %w", err)
		}
		defer func() {
			if err := b.quota.close(); err != nil {
				b.logf("%v", err)
			}
		}()
		if err := b.quota.joinLoad(); err != nil { // before the provider and the proxy start
			return nil, fmt.Errorf("-cpu-quota: %w", err)
		}
	}
	b.rep = newReport(o, pin, b.sut)
	b.logf("scootgate-load: %s; systems under test: %s; work dir %s", pin, b.sut, dir)
	var why string
	if b.stalls, why, err = newStallTracer(ctx, o.stalls, pin, dir); err != nil {
		return nil, err
	}
	defer b.stalls.close()
	b.rep.Setup.Stalls = "perf sched:sched_switch on the harness's CPUs; a stall is another process holding one for ≥ " + stallMin.String()
	if b.stalls == nil {
		b.rep.Setup.Stalls = why
		b.logf("host stalls: not traced: %s", why)
	}

	cmd, err := childCommand(pin, pin.side, "provider", []string{
		"-delay", o.delay.String(), "-events", fmt.Sprint(o.events), "-event-gap", o.eventGap.String(),
	}, b.env)
	if err != nil {
		return nil, err
	}
	if b.prov, err = startChild(ctx, "provider", cmd, dir); err != nil {
		return nil, err
	}
	defer b.prov.stop()
	if cmd, err = childCommand(pin, pin.side, "proxy", nil, b.env); err != nil {
		return nil, err
	}
	if b.proxy, err = startChild(ctx, "proxy", cmd, dir); err != nil {
		return nil, err
	}
	defer b.proxy.stop()
	b.egress = "socks5://" + b.proxy.ready.SOCKS
	if o.egress == "connect" {
		b.egress = "http://" + b.proxy.ready.Connect
	}
	b.broker = b.prov.ready.Broker
	b.sink, err = startOTLPSink()
	if err != nil {
		return nil, fmt.Errorf("trace sink: %w", err)
	}
	defer b.sink.close()

	if err := b.rounds(ctx); err != nil {
		return b.rep, err
	}
	for i, n := range o.idleStreams {
		keys := []string{keyBaseline, keyNode}
		if i%2 == 1 { // alternate which system goes first
			keys[0], keys[1] = keys[1], keys[0]
		}
		for _, key := range keys {
			if err := b.idle(ctx, key, n); err != nil {
				return b.rep, err
			}
		}
	}
	b.rep.finish()
	return b.rep, nil
}

// startTarget starts one system under test on the SUT CPU and checks
// that it runs with the runtime settings every system under test has.
func (b *bench) startTarget(ctx context.Context, key, tag string) (*target, error) {
	name := key + tag
	cmd, err := b.targetCommand(key, tag)
	if err != nil {
		return nil, err
	}
	if b.wrap != nil {
		cmd = b.wrap(cmd)
	}
	c, err := startChild(ctx, name, cmd, b.dir)
	if err != nil {
		return nil, err
	}
	if err := b.sut.check(c.ready.Runtime); err != nil {
		c.stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t := &target{key: key, proc: c, client: newClient(), base: "http://" + c.ready.API}
	if b.quota != nil {
		if t.group, err = b.quota.add(name, c.pid()); err != nil {
			c.stop()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return t, nil
}

// targetCommand is the command of one system under test: its role and
// flags differ by key, its CPU and runtime settings (b.sut) never do.
func (b *bench) targetCommand(key, tag string) (*exec.Cmd, error) {
	name := key + tag
	role := "node"
	var args []string
	switch key {
	case keyBaseline:
		role = "baseline"
		args = []string{"-provider", b.prov.ready.Provider, "-egress", b.egress, "-first-byte", b.o.firstByte.String()}
	default:
		s := nodeSetup{NodeID: "load-" + name, Provider: b.prov.ready.Provider, Egress: b.egress, Broker: b.broker, Usage: true, CommitInterval: b.o.commit, FirstByte: b.o.firstByte, Limits: strings.ReplaceAll(b.o.nodeLimits, ";", "\n")}
		switch key {
		case keyBrokerDown:
			dead, err := deadPort()
			if err != nil {
				return nil, err
			}
			s.Broker = dead
		case keyUsageOff:
			s.Usage, s.Broker = false, ""
		case keyTmpfs:
			// fsync free: what the outbox's disk costs, apart from the
			// rest of an event's life in the process.
			if b.shm == "" {
				return nil, fmt.Errorf("%s: no tmpfs directory (%s)", name, tmpfsRoot)
			}
			s.OutboxPath = filepath.Join(b.shm, name+".db")
		case keyTracing:
			s.Tracing = b.sink.url()
		case keyBatched:
			s.BatchMax = batchedMax
		case keyTwin:
			// Nothing differs but its node id and directory: node ÷
			// twin is what the yardstick reads when nothing changed.
		}
		cfg, err := writeNodeDir(filepath.Join(b.dir, name), s)
		if err != nil {
			return nil, err
		}
		args = []string{"-config", cfg}
		if b.o.nodeLog {
			args = append(args, "-log", filepath.Join(b.dir, name, "node.log"))
		}
	}
	if b.o.profile != "" && tag == "" { // every system under test, node variants too
		args = append(args,
			"-cpuprofile", filepath.Join(b.o.profile, key+".cpu.pprof"),
			"-memprofile", filepath.Join(b.o.profile, key+".allocs.pprof"))
	}
	if tag == "-idle" {
		args = append(args, "-idle-profile")
	}
	return childCommand(b.pin, b.pin.sut, role, args, append(slices.Clone(b.env), b.sut.env()...))
}

func newClient() *http.Client {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:           &protocols,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     30 * time.Second,
	}}
}

// throttle is t's CPU quota's throttling so far; zero without a quota.
func (t *target) throttle() (cpuThrottle, error) {
	if t.group == nil {
		return cpuThrottle{}, nil
	}
	return t.group.throttle()
}

func (t *target) close() {
	t.client.CloseIdleConnections()
	t.proc.stop()
	if t.group != nil {
		_ = t.group.remove() // what is left, cpuQuota.close reports
	}
}

// idleRequest is the idle-stream test's chat completion stream.
func (b *bench) idleRequest(t *target) loadgen.Request {
	p := apiPaths[pathOpenAI]
	return loadgen.Request{URL: t.base + p.url, Header: p.header, Body: []byte(p.stream(idleMarker + " hold"))}
}

// scenario is one kind of run in a round: a path, a rate, stream or not,
// and the systems it runs against.
type scenario struct {
	name    string
	path    *apiPath
	rate    float64
	stream  bool
	targets []*target
}

// scenarioName names a scenario in the report; the checks find cells by it.
func scenarioName(p *apiPath, stream bool, rate float64) string {
	kind := "non-stream"
	if stream {
		kind = "stream"
	}
	return fmt.Sprintf("%s, %s @ %g/s", p.label, kind, rate)
}

// scenarios lists a round's runs: on every path every non-stream rate and
// every stream rate against the baseline and the node, and on the first
// path the variants (broker down, usage events off, tracing on) at the
// first non-stream and the first stream rate too. all holds the targets
// by key; a variant missing from it is left out.
func scenarios(o options, all map[string]*target) []scenario {
	pair := []*target{all[keyBaseline], all[keyNode]}
	withVariants := slices.Clone(pair)
	for _, key := range o.variants {
		withVariants = append(withVariants, all[key])
	}
	var out []scenario
	for i, key := range o.paths {
		p := apiPaths[key]
		add := func(stream bool, rates []float64) {
			for j, rate := range rates {
				ts := pair
				if i == 0 && j == 0 {
					ts = withVariants
				}
				out = append(out, scenario{name: scenarioName(p, stream, rate), path: p, rate: rate, stream: stream, targets: ts})
			}
		}
		add(false, o.rates)
		add(true, o.streamRates)
	}
	return out
}

// sample is one attack and the counters around it.
type sample struct {
	res     loadgen.Result
	cpu     time.Duration // the system under test
	side    time.Duration // provider, proxy and generator
	wall    time.Duration
	mallocs uint64
	bytes   uint64
	sysr    uint64 // read-family system calls of the system under test
	sysw    uint64 // write-family system calls
	csw     uint64 // context switches of the system under test
	gcs     uint32 // its garbage collections
	tunnels int64
	sent    int
	// foreignSUT and foreignSide are the CPU time that processes outside
	// the harness used during the run on the SUT CPU and on the side CPU
	// (unpinned: on the whole machine, in foreignSUT); burst is the largest
	// share of a CPU they took in any burstWindow.
	foreignSUT, foreignSide time.Duration
	burst                   float64
	// after is the CPU time the system under test used after the run's
	// last answer, until it was idle again (deferred work; not in cpu).
	after time.Duration
	// stalls counts the host stalls in the run (see stalls.go).
	stalls int
	// genGCs counts the generator's own garbage collections in the run.
	genGCs uint64
	// keptDisturbed marks a disturbed run kept because the retries or the
	// noise budget ran out.
	keptDisturbed bool
}

// disturbed reports whether processes outside the harness took more than
// quiet of a CPU over the run, or more than burst in a burstWindow.
func (s sample) disturbed(quiet, burst float64) bool {
	return busy(s.foreignSUT, s.wall) > quiet || busy(s.foreignSide, s.wall) > quiet || s.burst > burst
}

// burstWindow is the window over which foreign load is checked against
// -burst. Process CPU times come from the scheduler's precise run time,
// /proc/stat from 100 Hz tick sampling: over shorter windows their
// difference is mostly sampling noise.
const burstWindow = 500 * time.Millisecond

// reading is one reading of every CPU counter the harness charges.
type reading struct {
	at       time.Time
	sut      time.Duration // CPU time of the system under test
	side     time.Duration // CPU time of the provider, the proxy and the generator
	gen      time.Duration // of which the generator's (this process)
	busySUT  time.Duration // busy time of the SUT CPU (unpinned: all CPUs)
	busySide time.Duration // busy time of the side CPU (unpinned: 0)
}

func (b *bench) read(t *target) (reading, error) {
	r := reading{at: time.Now()}
	var errs [5]error
	if t != nil {
		r.sut, errs[0] = loadgen.CPUTime(t.proc.pid())
	}
	var p, x, g time.Duration
	p, errs[1] = loadgen.CPUTime(b.prov.pid())
	x, errs[2] = loadgen.CPUTime(b.proxy.pid())
	g, errs[3] = loadgen.CPUTime(os.Getpid())
	r.side, r.gen = p+x+g, g
	if b.pin.on() {
		var e1, e2 error
		r.busySUT, e1 = loadgen.CPUBusy(b.pin.sut)
		r.busySide, e2 = loadgen.CPUBusy(b.pin.side)
		errs[4] = errors.Join(e1, e2)
	} else {
		r.busySUT, errs[4] = loadgen.CPUBusy(-1)
	}
	return r, errors.Join(errs[:]...)
}

// foreign returns the CPU time that processes outside the harness used
// between two readings, on the SUT CPU and on the side CPU.
func (b *bench) foreign(r0, r1 reading) (sut, side time.Duration) {
	cpu, sideCPU := r1.sut-r0.sut, r1.side-r0.side
	if !b.pin.on() {
		return max(r1.busySUT-r0.busySUT-cpu-sideCPU, 0), 0
	}
	return max(r1.busySUT-r0.busySUT-cpu, 0), max(r1.busySide-r0.busySide-sideCPU, 0)
}

// waitQuiet waits, up to quietWait and within the noise budget, until
// processes outside the harness use at most quiet of each CPU over 300 ms
// (the harness's own processes are idle between runs).
func (b *bench) waitQuiet(ctx context.Context) error {
	start := time.Now()
	end := start.Add(b.o.quietWait)
	defer func() { b.noise += max(time.Since(start)-300*time.Millisecond, 0) }()
	for {
		r0, err := b.read(nil)
		if err != nil {
			return err
		}
		if err := b.pause(ctx, 300*time.Millisecond); err != nil {
			return err
		}
		r1, err := b.read(nil)
		if err != nil {
			return err
		}
		fs, fd := b.foreign(r0, r1)
		wall := r1.at.Sub(r0.at)
		if busy(fs, wall) <= b.o.quiet && busy(fd, wall) <= b.o.quiet {
			return nil
		}
		if now := time.Now(); now.After(end) || b.noise+now.Sub(start) >= b.o.noiseBudget {
			return nil
		}
	}
}

// measure is attack with the machine-noise guard: it waits for a quiet
// machine and runs again, up to retries times, when processes outside the
// harness disturbed the run; both within the noise budget. It returns the
// last run and how many were discarded.
func (b *bench) measure(ctx context.Context, t *target, a loadgen.Attack, fire loadgen.Fire) (sample, int, error) {
	discarded := 0
	for {
		if err := b.waitQuiet(ctx); err != nil {
			return sample{}, discarded, err
		}
		tr, err := b.stalls.start(ctx)
		if err != nil {
			return sample{}, discarded, err
		}
		s, err := b.attackWithoutGC(ctx, t, a, fire)
		stalls, terr := tr.stop()
		if err = errors.Join(err, terr); err == nil {
			loadgen.MarkStalls(s.res.Shots, stalls)
			s.stalls = len(stalls)
		}
		if err != nil || !s.disturbed(b.o.quiet, b.o.burst) {
			return s, discarded, err
		}
		if discarded >= b.o.retries || b.noise >= b.o.noiseBudget {
			s.keptDisturbed = true
			return s, discarded, nil
		}
		discarded++
		b.noise += s.wall
		b.logf("  %s: discarded a run disturbed by other processes (%.0f%% / %.0f%% of a CPU, %.0f%% at peak)",
			t.key, 100*busy(s.foreignSUT, s.wall), 100*busy(s.foreignSide, s.wall), 100*s.burst)
		t.client.CloseIdleConnections()
	}
}

// attackWithoutGC is attack with the generator's garbage collector held
// off. The generator is this process, and it keeps every shot so far
// (100-250 MiB late in a full run): a collection's mark phase then takes
// up to ~180 ms of the side CPU, during which the generator reads the
// answers more slowly and the system under test's latency shows it. So
// it collects before the run and not during it, unless its heap reaches
// genMemoryLimit.
func (b *bench) attackWithoutGC(ctx context.Context, t *target, a loadgen.Attack, fire loadgen.Fire) (s sample, err error) {
	withoutGC(func() { s, err = b.attack(ctx, t, a, fire) })
	return s, err
}

// withoutGC collects, then runs f with the collector off (but for the
// memory limit), and turns it back on.
func withoutGC(f func()) {
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	f()
}

// genMemoryLimit bounds the generator's heap while its collector is held
// off (attackWithoutGC): far above what a run allocates.
const genMemoryLimit = 4 << 30

// quiesce waits until t uses less than 5 % of a CPU over 250 ms (at most
// 15 s) and returns the CPU time it used meanwhile.
func (b *bench) quiesce(ctx context.Context, t *target) (time.Duration, error) {
	start, err := loadgen.CPUTime(t.proc.pid())
	if err != nil {
		return 0, err
	}
	prev, end := start, time.Now().Add(15*time.Second)
	for {
		t0 := time.Now()
		if err := b.pause(ctx, 250*time.Millisecond); err != nil {
			return 0, err
		}
		cur, err := loadgen.CPUTime(t.proc.pid())
		if err != nil {
			return 0, err
		}
		if busy(cur-prev, time.Since(t0)) < 0.05 || time.Now().After(end) {
			return cur - start, nil
		}
		prev = cur
	}
}

// upstream reads and adds up the provider's and the proxy's counters.
func (b *bench) upstream(ctx context.Context) (upstreamStats, error) {
	var p, x upstreamStats
	err := errors.Join(b.prov.stats(ctx, &p), b.proxy.stats(ctx, &x))
	return p.plus(x), err
}

// attack runs one attack against t and charges CPU, allocations and
// egress tunnels to it, sampling the machine's load every burstWindow.
func (b *bench) attack(ctx context.Context, t *target, a loadgen.Attack, fire loadgen.Fire) (sample, error) {
	var s sample
	if err := errors.Join(t.proc.alive(), b.prov.alive(), b.proxy.alive()); err != nil {
		return s, fmt.Errorf("%w: %s", err, t.proc.tail())
	}
	var st0, stEnd, st1 sutStats
	up0, err := b.upstream(ctx)
	if err != nil {
		return s, err
	}
	if err := t.proc.stats(ctx, &st0); err != nil {
		return s, err
	}
	r0, err := b.read(t)
	if err != nil {
		return s, err
	}

	stop, sampled := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(burstWindow)
		defer tick.Stop()
		prev := r0
		for {
			select {
			case <-stop:
				sampled <- nil
				return
			case <-tick.C:
			}
			cur, err := b.read(t)
			if err != nil {
				sampled <- err
				return
			}
			fs, fd := b.foreign(prev, cur)
			w := cur.at.Sub(prev.at)
			s.burst = max(s.burst, busy(fs, w), busy(fd, w))
			prev = cur
		}
	}()
	gc0 := gcCycles()
	res, err := loadgen.Run(ctx, a, fire)
	s.genGCs = gcCycles() - gc0
	close(stop)
	if serr := <-sampled; err == nil {
		err = serr
	}
	if err != nil {
		return s, err
	}

	r1, err := b.read(t)
	if err != nil {
		return s, err
	}
	if err := t.proc.stats(ctx, &stEnd); err != nil {
		return s, err
	}
	// Work the system does after its last answer (the node delivering the
	// run's usage events from its outbox to the broker) is part of what
	// the run cost, and must not spill into the next system's run.
	after, err := b.quiesce(ctx, t)
	if err != nil {
		return s, err
	}
	up1, err := b.upstream(ctx)
	if err != nil {
		return s, err
	}
	if err := t.proc.stats(ctx, &st1); err != nil {
		return s, err
	}
	s.res, s.wall = res, r1.at.Sub(r0.at)
	s.cpu, s.side, s.after = r1.sut-r0.sut, r1.side-r0.side, after
	if st0.CPU > 0 { // getrusage: microseconds instead of ticks
		s.cpu, s.after = stEnd.CPU-st0.CPU, st1.CPU-stEnd.CPU
	}
	s.foreignSUT, s.foreignSide = b.foreign(r0, r1)
	s.mallocs, s.bytes = st1.Mallocs-st0.Mallocs, st1.TotalAlloc-st0.TotalAlloc
	s.sysr, s.sysw = st1.SysReads-st0.SysReads, st1.SysWrites-st0.SysWrites
	s.csw, s.gcs = st1.Switches-st0.Switches, st1.NumGC-st0.NumGC
	s.tunnels = (up1.SOCKSTunnels + up1.ConnectTunnels) - (up0.SOCKSTunnels + up0.ConnectTunnels)
	for i := range res.Shots {
		if res.Shots[i].Err != loadgen.ErrOverload {
			s.sent++
		}
	}
	return s, nil
}

func (b *bench) fire(t *target, p *apiPath, stream bool) loadgen.Fire {
	if stream {
		return loadgen.Stream(t.client, p.streamRequest(t.base, b.o.events), p.format)
	}
	return loadgen.NonStream(t.client, p.wholeRequest(t.base))
}

func (b *bench) plan(rate float64, d time.Duration) loadgen.Attack {
	return loadgen.Attack{Rate: rate, Duration: d, MaxInFlight: 4000, Timeout: 10 * time.Second}
}

// pause lets connections, timers and the scheduler settle between attacks.
func (b *bench) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// rounds runs the interleaved rounds and the maximum-rate search against
// the baseline and the node variants, all started once.
func (b *bench) rounds(ctx context.Context) error {
	targets := map[string]*target{}
	defer func() {
		for _, t := range targets {
			t.close()
		}
	}()
	for _, key := range append([]string{keyBaseline, keyNode}, b.o.variants...) {
		t, err := b.startChecked(ctx, key, "")
		if err != nil {
			return err
		}
		targets[key] = t
	}
	scenarios := scenarios(b.o, targets)

	// Warm up every target at every rate and on every path it will see:
	// connection pools, tunnels, heap, the outbox file's first growth.
	for _, sc := range scenarios {
		for _, t := range sc.targets {
			if _, err := b.attack(ctx, t, b.plan(sc.rate, b.o.warmup), b.fire(t, sc.path, sc.stream)); err != nil {
				return err
			}
		}
	}
	up0, err := b.upstream(ctx)
	if err != nil {
		return err
	}
	tr0 := b.sink.counts()

	for r := range b.o.rounds {
		for _, sc := range scenarios {
			for i := range sc.targets {
				t := sc.targets[(i+r)%len(sc.targets)] // rotate who goes first
				if err := b.pause(ctx, b.o.settle); err != nil {
					return err
				}
				s, discarded, err := b.measure(ctx, t, b.plan(sc.rate, b.o.duration), b.fire(t, sc.path, sc.stream))
				if err != nil {
					return err
				}
				m := b.rep.add(sc.name, sc.path.key, sc.rate, sc.stream, t.key, s, discarded)
				b.logf("round %d/%d %-36s %-18s %s", r+1, b.o.rounds, sc.name, t.key, m.brief(s))
			}
		}
	}
	up1, err := b.upstream(ctx)
	if err != nil {
		return err
	}
	b.rep.MQTT = mqttFinding{Received: up1.MQTTReceived - up0.MQTTReceived, ClientsAtEnd: up1.MQTTClients}
	tr1 := b.sink.counts()
	b.rep.Traces = traceFinding{Exports: tr1.Exports - tr0.Exports, Bytes: tr1.Bytes - tr0.Bytes, Refused: tr1.Refused - tr0.Refused}

	if b.o.search {
		var ts []*target
		for _, key := range b.o.searchTargets {
			ts = append(ts, targets[key])
		}
		if err := b.searchMax(ctx, ts); err != nil {
			return err
		}
		if b.o.overload && b.o.overloadRate == 0 {
			return b.overloads(ctx, ts)
		}
	}
	if b.o.overload && b.o.overloadRate > 0 {
		return b.overloadsAt(ctx, targets[keyNode], targets[keyBaseline])
	}
	return nil
}

// startChecked is startTarget, then check: a target that fails its
// check is stopped, and the error returned.
func (b *bench) startChecked(ctx context.Context, key, tag string) (*target, error) {
	t, err := b.startTarget(ctx, key, tag)
	if err != nil {
		return nil, err
	}
	if err := b.check(ctx, t); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// check sends one request and one stream on every path to t; a harness
// that measures errors would otherwise report a broken setup as a fast one.
func (b *bench) check(ctx context.Context, t *target) error {
	for _, key := range b.o.paths {
		p := apiPaths[key]
		for _, stream := range []bool{false, true} {
			var s loadgen.Shot
			s.Intended = time.Now()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			b.fire(t, p, stream)(cctx, &s)
			cancel()
			if s.Err != nil {
				return fmt.Errorf("%s does not answer on %s (stream=%t): %w\n%s", t.key, p.url, stream, s.Err, t.proc.tail())
			}
			if stream && s.Events < b.o.events {
				return fmt.Errorf("%s: stream on %s had %d events, want at least %d", t.key, p.url, s.Events, b.o.events)
			}
		}
	}
	return nil
}

// sideSaturated is the side CPU's use at which a failed search step says
// more about the load side (generator, provider, proxy) than about the
// system under test.
const sideSaturated = 0.9

// searchMax steps the non-stream rate up by searchFactor, both systems at
// each step, until a step fails (errors, achieved rate below 95 % of the
// target, or p99 over the bound); then it bisects between the last pass
// and the first failure searchRefine times. Every step is bounded.
func (b *bench) searchMax(ctx context.Context, targets []*target) error {
	type state struct {
		t             *target
		pass, fail    float64
		lastDisturbed bool // the last try ran while other processes were busy
		failDisturbed bool // the failure at fail was measured while they were
		lastSideBound bool // the last try saturated the side CPU
		failSideBound bool // the failure at fail did
	}
	var st []*state
	for _, t := range targets {
		st = append(st, &state{t: t})
	}
	// try runs one step and says whether it passed.
	try := func(s *state, rate float64) (bool, error) {
		smp, _, err := b.measure(ctx, s.t, b.plan(rate, b.o.searchDuration), b.fire(s.t, apiPaths[b.o.paths[0]], false))
		if err != nil {
			return false, err
		}
		lat := loadgen.Summarize(loadgen.Latencies(smp.res.Shots))
		errs := len(smp.res.Shots) - smp.res.OK()
		kinds := map[string]int{}
		for i := range smp.res.Shots {
			if err := smp.res.Shots[i].Err; err != nil {
				kinds[errorKind(err)]++
			}
		}
		ok := errs == 0 && smp.res.Achieved() >= 0.95*rate && lat.P99 <= b.o.searchP99
		s.lastDisturbed = smp.keptDisturbed
		s.lastSideBound = busy(smp.side, smp.wall) >= sideSaturated
		b.rep.addStep(searchStep{
			Disturbed: smp.keptDisturbed,
			Target:    s.t.key, Rate: rate, Achieved: smp.res.Achieved(), P99: lat.P99, Errors: errs, ErrorKinds: kinds, Pass: ok,
			SUTBusy: busy(smp.cpu, smp.wall), SideBusy: busy(smp.side, smp.wall),
			Foreign: busy(smp.foreignSUT, smp.wall) + busy(smp.foreignSide, smp.wall),
			Tunnels: smp.tunnels,
		})
		b.logf("search %-16s %7.0f/s: achieved %7.0f/s p99 %v errors %d → %v", s.t.key, rate, smp.res.Achieved(), lat.P99.Round(time.Microsecond), errs, map[bool]string{true: "pass", false: "FAIL"}[ok])
		// A failed step leaves a backlog; let it drain before the next.
		s.t.client.CloseIdleConnections()
		wait := b.o.settle
		if !ok {
			wait += time.Second
		}
		return ok, b.pause(ctx, wait)
	}
	// step tries a rate, and once more if it fails: near capacity one
	// transient stall (a disk flush, a burst elsewhere on the machine)
	// leaves a backlog that two seconds cannot drain.
	step := func(s *state, rate float64) error {
		ok, err := try(s, rate)
		for n := 0; err == nil && !ok && n < b.o.searchConfirm; n++ {
			ok, err = try(s, rate)
		}
		if err != nil {
			return err
		}
		if ok {
			s.pass = max(s.pass, rate)
		} else if s.fail == 0 || rate < s.fail {
			s.fail, s.failDisturbed, s.failSideBound = rate, s.lastDisturbed, s.lastSideBound
		}
		return nil
	}
	rate := b.o.searchStart
	for i := 0; i < b.o.searchSteps; i++ {
		active := false
		for k := range st {
			s := st[(k+i)%len(st)]
			if s.fail != 0 {
				continue
			}
			active = true
			if err := step(s, rate); err != nil {
				return err
			}
		}
		if !active {
			break
		}
		rate *= b.o.searchFactor
	}
	for range b.o.searchRefine {
		for _, s := range st {
			if s.fail == 0 || s.pass == 0 {
				continue
			}
			if err := step(s, math.Round(math.Sqrt(s.pass*s.fail))); err != nil {
				return err
			}
		}
	}
	for _, s := range st {
		b.rep.MaxRate[s.t.key] = maxRate{Rate: s.pass, FirstFail: s.fail, Disturbed: s.failDisturbed, SideBound: s.failSideBound}
	}
	return nil
}

func busy(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return cpu.Seconds() / wall.Seconds()
}

// idle opens n streams that send one event and then stay silent against a
// fresh process of key, reads its resident memory before and while they
// are open, and asks the process where the difference went (memory.go).
func (b *bench) idle(ctx context.Context, key string, n int) error {
	t, err := b.startChecked(ctx, key, "-idle")
	if err != nil {
		return err
	}
	defer t.close()
	// Warm the process like a serving one: pools, tunnels, a few streams.
	if _, err := b.attack(ctx, t, b.plan(200, time.Second), b.fire(t, apiPaths[pathOpenAI], false)); err != nil {
		return err
	}
	if _, err := b.attack(ctx, t, b.plan(50, 500*time.Millisecond), b.fire(t, apiPaths[pathOpenAI], true)); err != nil {
		return err
	}
	if err := b.pause(ctx, time.Second); err != nil {
		return err
	}
	if err := b.waitQuiet(ctx); err != nil {
		return err
	}
	res := idleResult{Target: key, Requested: n, Streams: n}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	// Every child has this hard limit too (raiseFDLimit lifts the soft one).
	// A stream holds two sockets in the system under test and in the proxy;
	// keep 1000 for everything else.
	res.FDLimit = lim.Max
	if fit := int(min(lim.Max, 1<<30)-1000) / 2; res.Streams > fit {
		res.Streams = max(fit, 0)
	}
	if res.RSSBefore, err = loadgen.RSS(t.proc.pid()); err != nil {
		return err
	}
	var st0 sutStats
	if err := t.proc.stats(ctx, &st0); err != nil {
		return err
	}
	mem0, err := t.proc.memory(ctx)
	if err != nil {
		return err
	}

	holdCtx, release := context.WithCancel(ctx)
	defer release()
	var (
		wg       sync.WaitGroup
		opened   atomic.Int64
		failed   atomic.Int64
		firstErr atomic.Value
		settled  = make(chan struct{}, res.Streams)
	)
	req := b.idleRequest(t)
	start := time.Now()
	interval := time.Duration(float64(time.Second) / b.o.idleRate)
	ticker := time.NewTicker(interval)
	for i := 0; i < res.Streams; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
			case <-ticker.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			loadgen.HoldStream(holdCtx, t.client, req, func(err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else {
					opened.Add(1)
				}
				settled <- struct{}{}
			})
		})
	}
	ticker.Stop()
	// Wait until every stream has its first event or failed (bounded).
	deadline := time.NewTimer(30 * time.Second)
	for n := 0; n < res.Streams; n++ {
		select {
		case <-settled:
			continue
		case <-deadline.C:
		case <-ctx.Done():
		}
		break
	}
	deadline.Stop()
	res.OpenTime = time.Since(start)
	res.Opened, res.Failed = int(opened.Load()), int(failed.Load())
	if v := firstErr.Load(); v != nil {
		res.FirstError = v.(string)
	}
	// Hold them open, sampling the resident set.
	for end := time.Now().Add(b.o.idleHold); time.Now().Before(end); {
		rss, err := loadgen.RSS(t.proc.pid())
		if err != nil {
			return err
		}
		res.RSSPeak = max(res.RSSPeak, rss)
		if err := b.pause(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	var st1 sutStats
	if err := t.proc.stats(ctx, &st1); err != nil {
		return err
	}
	mem1, err := t.proc.memory(ctx)
	if err != nil {
		return err
	}
	if b.o.profile != "" {
		if err := t.proc.saveHeap(ctx, filepath.Join(b.o.profile, fmt.Sprintf("%s.idle-%d-heap.pprof", key, n))); err != nil {
			return err
		}
		if err := t.proc.saveProfile(ctx, "goroutine", filepath.Join(b.o.profile, fmt.Sprintf("%s.idle-%d-goroutines.txt", key, n))); err != nil {
			return err
		}
	}
	rel, err := t.proc.release(ctx) // last: it changes what it measures
	if err != nil {
		return err
	}
	res.Breakdown = breakdown(mem0, mem1, rel, res.perStreamKiB(), res.Opened)
	res.Goroutines = st1.Goroutines - st0.Goroutines
	res.HeapInuse = int64(st1.HeapInuse) - int64(st0.HeapInuse)
	release()
	wg.Wait()
	b.rep.Idle = append(b.rep.Idle, res)
	b.logf("idle %-10s %d/%d streams open (%d failed, first error: %s) in %v; RSS %d MiB → %d MiB (%.1f KiB per stream)",
		key, res.Opened, res.Streams, res.Failed, res.FirstError, res.OpenTime.Round(time.Millisecond), res.RSSBefore>>20, res.RSSPeak>>20, res.perStreamKiB())
	return nil
}

// writeFiles saves the report as Markdown and JSON under dir.
func writeFiles(dir string, r *report) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	stamp := r.Started.UTC().Format("20060102T150405Z")
	base := filepath.Join(dir, "load-"+stamp)
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".json", data, 0o644); err != nil {
		return "", err
	}
	return base + ".md", os.WriteFile(base+".md", []byte(r.markdown()), 0o644)
}

// gcCycles is how many garbage collections this process has completed.
func gcCycles() uint64 {
	m := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}
