package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
)

// report is what a run found; it is saved as JSON and rendered as Markdown.
type report struct {
	Started   time.Time          `json:"started"`
	Finished  time.Time          `json:"finished"`
	Commit    string             `json:"commit"`
	GoVersion string             `json:"go_version"`
	CPUModel  string             `json:"cpu_model"`
	Setup     setup              `json:"setup"`
	Cells     []*cell            `json:"measurements"`
	Steps     []searchStep       `json:"search_steps"`
	MaxRate   map[string]maxRate `json:"max_rate"`
	Overload  []overloadResult   `json:"overload,omitempty"`
	Idle      []idleResult       `json:"idle_streams"`
	MQTT      mqttFinding        `json:"mqtt"`
	Traces    traceFinding       `json:"traces"` // what "node, tracing on" exported during the rounds
	Checks    []check            `json:"checks"`
	byKey     map[string]*cell   // scenario + "\x00" + target → cell
}

type setup struct {
	Pinning       string        `json:"pinning"`
	SUTRuntime    sutRuntime    `json:"sut_runtime"` // every system under test's, node and baseline alike
	Egress        string        `json:"egress"`
	ProviderDelay time.Duration `json:"provider_delay_ns"`
	Rounds        int           `json:"rounds"`
	Duration      time.Duration `json:"run_duration_ns"`
	Paths         []string      `json:"paths"`
	Rates         []float64     `json:"rates"`
	StreamRates   []float64     `json:"stream_rates"`
	Events        int           `json:"stream_content_events"`
	EventGap      time.Duration `json:"event_gap_ns"`
	NodeLog       bool          `json:"node_log"`
	IdleStreams   []int         `json:"idle_streams"`
	SearchStep    time.Duration `json:"search_step_ns"`
	SearchP99     time.Duration `json:"search_p99_bound_ns"`
	SearchFactor  float64       `json:"search_factor"`
	SearchConfirm int           `json:"search_confirm"`
	FirstByte     time.Duration `json:"first_byte_ns"` // the nodes' timeouts.first_byte; 0 = the shipped default
	// The overload phase's, when it ran.
	OverloadFactor   float64       `json:"overload_factor,omitempty"`
	OverloadDuration time.Duration `json:"overload_duration_ns,omitempty"`
	OverloadRate     float64       `json:"overload_rate,omitempty"` // absolute schedule (-overload-rate); 0 = relative to the search
	RecoveryRate     float64       `json:"recovery_rate,omitempty"`
	OverloadReps     int           `json:"overload_reps,omitempty"`
	OverloadTries    int           `json:"overload_tries,omitempty"`
	MaxLag           time.Duration `json:"max_lag_ns,omitempty"`
	RecoveryFactor   float64       `json:"recovery_factor,omitempty"`
	RecoveryDuration time.Duration `json:"recovery_duration_ns,omitempty"`
	Stalls           string        `json:"host_stalls"` // how host stalls were traced, or why not
	// CPUQuota is every system under test's CFS quota, a share of one CPU
	// each in a cgroup of its own (-cpu-quota); 0: none.
	CPUQuota float64 `json:"cpu_quota,omitempty"`
}

// cell is one scenario × target, over every round.
type cell struct {
	Scenario   string          `json:"scenario"`
	Path       string          `json:"path"` // an apiPaths key
	Rate       float64         `json:"rate"`
	Stream     bool            `json:"stream"`
	Target     string          `json:"target"`
	Runs       int             `json:"runs"`
	Sent       int             `json:"sent"`
	OK         int             `json:"ok"`
	Errors     map[string]int  `json:"errors,omitempty"`
	Achieved   []float64       `json:"achieved_per_run"`
	Latency    loadgen.Summary `json:"latency"`      // from the intended send time
	Service    loadgen.Summary `json:"service"`      // from the actual send
	TTFB       loadgen.Summary `json:"ttfb"`         // from the intended send time
	ServTTFB   loadgen.Summary `json:"service_ttfb"` // from the actual send
	Gap        loadgen.Summary `json:"event_gap"`
	Late       loadgen.Summary `json:"send_lateness"`
	CPUPerReq  time.Duration   `json:"cpu_per_request_ns"`         // during the run and after it, until idle
	CPUPerRun  []time.Duration `json:"cpu_per_request_per_run_ns"` // the same, each run (round) alone
	AfterReq   time.Duration   `json:"cpu_after_per_request_ns"`   // of which after the last answer
	SUTBusy    float64         `json:"sut_cpu_busy"`
	SideBusy   float64         `json:"side_cpu_busy"`
	AllocsReq  float64         `json:"allocs_per_request"`
	ReadsReq   float64         `json:"read_syscalls_per_request"`    // read-family system calls of the SUT
	WritesReq  float64         `json:"write_syscalls_per_request"`   // write-family system calls of the SUT
	SwitchReq  float64         `json:"context_switches_per_request"` // the SUT's context switches (getrusage)
	GCPer1k    float64         `json:"gc_cycles_per_1k_requests"`    // the SUT's garbage collections
	BytesReq   float64         `json:"alloc_bytes_per_request"`
	TunnelsReq float64         `json:"tunnels_per_1k_requests"`
	Foreign    float64         `json:"foreign_cpu_busy"`            // other processes, CPUs
	Discarded  int             `json:"discarded_runs"`              // re-run because of foreign load
	Disturbed  int             `json:"disturbed_runs"`              // kept although disturbed (retries or budget exhausted)
	ClearTTFB  loadgen.Summary `json:"service_ttfb_outside_stalls"` // the first-event waits no host stall overlapped (stalls.go)
	ClearGap   loadgen.Summary `json:"event_gap_outside_stalls"`    // the gaps no host stall overlapped
	Stalls     int             `json:"host_stalls"`                 // host stalls during its runs
	StallTTFBs int             `json:"stalled_ttfbs"`               // first-event waits they overlapped
	StallGaps  int             `json:"stalled_gaps"`                // gaps they overlapped
	GenGCs     uint64          `json:"generator_gcs"`               // the generator's collections during its runs

	shots   []loadgen.Shot
	runEnd  []int // shots[runEnd[i-1]:runEnd[i]] are run i's
	cpu     time.Duration
	after   time.Duration
	side    time.Duration
	wall    time.Duration
	mallocs uint64
	bytes   uint64
	sysr    uint64
	sysw    uint64
	csw     uint64
	gcs     uint64
	tunnels int64
	foreign time.Duration
}

type searchStep struct {
	Target     string         `json:"target"`
	ErrorKinds map[string]int `json:"errors_by_kind,omitempty"`
	Rate       float64        `json:"rate"`
	Achieved   float64        `json:"achieved"`
	P99        time.Duration  `json:"p99_ns"`
	Errors     int            `json:"errors"`
	Pass       bool           `json:"pass"`
	SUTBusy    float64        `json:"sut_cpu_busy"`
	SideBusy   float64        `json:"side_cpu_busy"`
	Foreign    float64        `json:"foreign_cpu_busy"`
	Disturbed  bool           `json:"disturbed"` // kept although other processes were busy
	// Tunnels is how many egress tunnels the step opened: a system whose
	// pool outgrows its idle bound pays the proxy a handshake per request.
	Tunnels int64 `json:"tunnels"`
}

type maxRate struct {
	Rate      float64 `json:"max_passing_rate"`
	FirstFail float64 `json:"lowest_failing_rate"` // 0: none failed within the steps
	Disturbed bool    `json:"failure_disturbed"`   // that failure ran while other processes were busy
	SideBound bool    `json:"failure_side_bound"`  // that failure saturated the side CPU: a lower bound
}

type idleResult struct {
	Target     string        `json:"target"`
	Requested  int           `json:"requested"` // -idle-streams
	FDLimit    uint64        `json:"fd_limit"`  // RLIMIT_NOFILE of every process
	Streams    int           `json:"streams"`   // attempted: Requested, or fewer to fit FDLimit
	Opened     int           `json:"opened"`
	Failed     int           `json:"failed"`
	FirstError string        `json:"first_error,omitempty"`
	OpenTime   time.Duration `json:"open_time_ns"`
	RSSBefore  int64         `json:"rss_before_bytes"`
	RSSPeak    int64         `json:"rss_peak_bytes"`
	Goroutines int           `json:"extra_goroutines"`
	HeapInuse  int64         `json:"extra_heap_inuse_bytes"`
	Breakdown  memBreakdown  `json:"per_stream"` // where it went, from inside the process
}

func (r idleResult) perStreamKiB() float64 {
	if r.Opened == 0 {
		return 0
	}
	return float64(r.RSSPeak-r.RSSBefore) / float64(r.Opened) / 1024
}

// rssAt returns the resident set with n streams: measured when n streams
// were open, else extrapolated linearly from the streams that were.
func (r idleResult) rssAt(n int) (rss int64, measured bool) {
	if r.Opened >= n {
		return r.RSSPeak, true
	}
	return r.RSSBefore + int64(r.perStreamKiB()*1024*float64(n)), false
}

type mqttFinding struct {
	Received     int64 `json:"events_received_by_broker"`
	ClientsAtEnd int64 `json:"clients_connected_at_end"`
}

// check is one of the harness's targets: node ÷ baseline (or an absolute bound).
type check struct {
	Name     string   `json:"name"`
	Node     string   `json:"node"`
	Baseline string   `json:"baseline"`
	Ratio    *float64 `json:"ratio"` // nil for an absolute bound
	Limit    string   `json:"limit"`
	Pass     bool     `json:"pass"`
	// Target marks the performance targets (docs/performance.md); the
	// other checks are looser bounds kept for what they add.
	Target bool `json:"target"`
	// Spread is the same comparison in each round alone, "min…max".
	Spread string `json:"per_round,omitempty"`
	// Note says why a verdict may not mean what it says: a saturated
	// CPU, disturbed runs.
	Note string `json:"note,omitempty"`
}

func newReport(o options, p pinning, sut sutRuntime) *report {
	r := &report{
		Started:   time.Now(),
		Commit:    gitDescribe(),
		GoVersion: runtime.Version(),
		CPUModel:  cpuModel(),
		Setup: setup{
			Pinning: p.String(), SUTRuntime: sut, Egress: o.egress, ProviderDelay: o.delay, Rounds: o.rounds, Duration: o.duration,
			Paths: o.paths, Rates: o.rates, StreamRates: o.streamRates, Events: o.events, EventGap: o.eventGap, NodeLog: o.nodeLog,
			IdleStreams: o.idleStreams, SearchStep: o.searchDuration, SearchP99: o.searchP99,
			SearchFactor: o.searchFactor, SearchConfirm: o.searchConfirm, FirstByte: o.firstByte,
			CPUQuota: o.cpuQuota,
		},
		MaxRate: map[string]maxRate{},
		byKey:   map[string]*cell{},
	}
	if o.overload {
		r.Setup.OverloadFactor, r.Setup.OverloadDuration = o.overloadFactor, o.overloadDuration
		if o.overloadRate > 0 {
			r.Setup.OverloadRate, r.Setup.RecoveryRate, r.Setup.OverloadReps = o.overloadRate, o.recoveryRate, o.overloadReps
			r.Setup.OverloadTries, r.Setup.MaxLag = o.overloadTries, o.maxLag
		}
		r.Setup.RecoveryFactor, r.Setup.RecoveryDuration = o.recoveryFactor, o.recoveryDuration
	}
	return r
}

func gitDescribe() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// cpuModel reads the model and the number of CPUs from /proc/cpuinfo
// (runtime.NumCPU counts only the CPUs this pinned process may use).
func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	model, n := "unknown CPU", 0
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(line, ":")
		switch strings.TrimSpace(k) {
		case "model name":
			model = strings.TrimSpace(v)
		case "processor":
			n++
		}
	}
	return fmt.Sprintf("%s × %d", model, n)
}

// add accounts one attack to its cell and returns the cell.
func (r *report) add(scenario, path string, rate float64, stream bool, target string, s sample, discarded int) *cell {
	k := scenario + "\x00" + target
	c := r.byKey[k]
	if c == nil {
		c = &cell{Scenario: scenario, Path: path, Rate: rate, Stream: stream, Target: target, Errors: map[string]int{}}
		r.byKey[k] = c
		r.Cells = append(r.Cells, c)
	}
	c.Runs++
	c.shots = append(c.shots, s.res.Shots...)
	c.runEnd = append(c.runEnd, len(c.shots))
	c.CPUPerRun = append(c.CPUPerRun, perReq(s.cpu+s.after, s.sent))
	c.Achieved = append(c.Achieved, s.res.Achieved())
	c.cpu += s.cpu
	c.after += s.after
	c.side += s.side
	c.wall += s.wall
	c.mallocs += s.mallocs
	c.sysr += s.sysr
	c.sysw += s.sysw
	c.csw += s.csw
	c.gcs += uint64(s.gcs)
	c.bytes += s.bytes
	c.tunnels += s.tunnels
	c.foreign += s.foreignSUT + s.foreignSide
	c.Stalls += s.stalls
	c.GenGCs += s.genGCs
	c.Discarded += discarded
	if s.keptDisturbed {
		c.Disturbed++
	}
	c.Sent += s.sent
	for i := range s.res.Shots {
		if err := s.res.Shots[i].Err; err != nil {
			c.Errors[errorKind(err)]++
		} else {
			c.OK++
		}
	}
	return c
}

func (r *report) addStep(s searchStep) { r.Steps = append(r.Steps, s) }

// errorKind names an error's class for the report.
func errorKind(err error) string {
	var se *loadgen.StatusError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("status %d", se.Code)
	case errors.Is(err, loadgen.ErrOverload):
		return "not sent (in-flight bound)"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, loadgen.ErrNoEvent):
		return "stream without events"
	case errors.Is(err, loadgen.ErrNoTerminator):
		return "stream without its terminator"
	case errors.Is(err, loadgen.ErrNoUsage):
		return "stream without usage"
	}
	return "transport"
}

// brief is one progress line for the attack s that was just added to c.
func (c *cell) brief(s sample) string {
	lat := loadgen.Summarize(loadgen.ServiceLatencies(s.res.Shots))
	line := fmt.Sprintf("%7.1f/s p50 %s p99 %s errors %d cpu %s/req (after: %s)",
		s.res.Achieved(), ms(lat.P50), ms(lat.P99), len(s.res.Shots)-s.res.OK(), us(perReq(s.cpu+s.after, s.sent)), us(perReq(s.after, s.sent)))
	if c.Stream {
		ttfb := loadgen.Summarize(loadgen.ServiceTTFBs(s.res.Shots))
		line += fmt.Sprintf(" ttfb p50 %s p99 %s host stalls %d", ms(ttfb.P50), ms(ttfb.P99), s.stalls)
	}
	if s.genGCs > 0 {
		line += fmt.Sprintf(" generator GCs %d", s.genGCs)
	}
	return line
}

func perReq(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}

// finish computes the summaries and the checks.
func (r *report) finish() {
	r.Finished = time.Now()
	for _, c := range r.Cells {
		c.Latency = loadgen.Summarize(loadgen.Latencies(c.shots))
		c.Service = loadgen.Summarize(loadgen.ServiceLatencies(c.shots))
		c.Late = loadgen.Summarize(loadgen.Lateness(c.shots))
		if c.Stream {
			c.TTFB = loadgen.Summarize(loadgen.TTFBs(c.shots))
			c.ServTTFB = loadgen.Summarize(loadgen.ServiceTTFBs(c.shots))
			c.Gap = loadgen.Summarize(loadgen.Gaps(c.shots))
			c.ClearTTFB = loadgen.Summarize(loadgen.UnstalledServiceTTFBs(c.shots))
			c.ClearGap = loadgen.Summarize(loadgen.UnstalledGaps(c.shots))
			c.StallTTFBs = c.ServTTFB.Count - c.ClearTTFB.Count
			c.StallGaps = c.Gap.Count - c.ClearGap.Count
		}
		c.CPUPerReq, c.AfterReq = perReq(c.cpu+c.after, c.Sent), perReq(c.after, c.Sent)
		c.SUTBusy, c.SideBusy, c.Foreign = busy(c.cpu, c.wall), busy(c.side, c.wall), busy(c.foreign, c.wall)
		if c.Sent > 0 {
			c.AllocsReq = float64(c.mallocs) / float64(c.Sent)
			c.ReadsReq = float64(c.sysr) / float64(c.Sent)
			c.WritesReq = float64(c.sysw) / float64(c.Sent)
			c.SwitchReq = float64(c.csw) / float64(c.Sent)
			c.GCPer1k = 1000 * float64(c.gcs) / float64(c.Sent)
			c.BytesReq = float64(c.bytes) / float64(c.Sent)
			c.TunnelsReq = 1000 * float64(c.tunnels) / float64(c.Sent)
		}
	}
	r.Checks = r.checks()
}

func (r *report) cell(scenario, target string) *cell { return r.byKey[scenario+"\x00"+target] }

// Bounds of the checks (docs/performance.md "Checks").
const (
	targetRatio  = 1.2                   // node ÷ baseline: CPU per request and per stream, TTFB p99, gap p99
	brokerBudget = 5 * time.Microsecond  // CPU per request the attached MQTT broker may cost
	eventsBudget = 10 * time.Microsecond // CPU per request a usage event's whole life may cost
)

// metric is one quantity of a cell, pooled over its runs and per run.
type metric struct {
	pooled func(c *cell) float64
	run    func(c *cell, i int) float64
	show   func(float64) string
}

// runShots returns the shots of c's run i.
func (c *cell) runShots(i int) []loadgen.Shot {
	start := 0
	if i > 0 {
		start = c.runEnd[i-1]
	}
	return c.shots[start:c.runEnd[i]]
}

// cpuPerRequest is the system under test's CPU per request (or stream).
var cpuPerRequest = metric{
	pooled: func(c *cell) float64 { return float64(c.CPUPerReq) },
	run:    func(c *cell, i int) float64 { return float64(c.CPUPerRun[i]) },
	show:   func(v float64) string { return us(time.Duration(v)) },
}

// checks turns the measurements into the harness's targets and its looser
// checks (docs/performance.md).
func (r *report) checks() []check {
	var out []check
	delay, gap := float64(r.Setup.ProviderDelay), float64(r.Setup.EventGap)
	msf := func(v float64) string { return ms(time.Duration(v)) }
	usf := func(v float64) string { return us(time.Duration(v)) }
	cpu := cpuPerRequest
	// pct is a percentile of some durations of the shots, less off.
	pct := func(of func([]loadgen.Shot) []time.Duration, q float64, off float64) metric {
		v := func(shots []loadgen.Shot) float64 {
			s := slices.Clone(of(shots))
			slices.Sort(s)
			return float64(loadgen.Quantile(s, q)) - off
		}
		return metric{
			pooled: func(c *cell) float64 { return v(c.shots) },
			run:    func(c *cell, i int) float64 { return v(c.runShots(i)) },
			show:   msf,
		}
	}
	// The tail targets are read outside host stalls; the ...All metrics
	// are the same reads of every sample, for withStalls's note.
	ttfb99, ttfb99All := pct(loadgen.UnstalledServiceTTFBs, 0.99, delay), pct(loadgen.ServiceTTFBs, 0.99, delay)
	gap99, gap99All := pct(loadgen.UnstalledGaps, 0.99, gap), pct(loadgen.Gaps, 0.99, gap)
	gap99.show, gap99All.show = usf, usf
	lat50, lat99 := pct(loadgen.ServiceLatencies, 0.50, delay), pct(loadgen.ServiceLatencies, 0.99, delay)
	svc50, svc99 := pct(loadgen.ServiceLatencies, 0.50, 0), pct(loadgen.ServiceLatencies, 0.99, 0)

	// The targets, path by path: CPU at every rate, the stream latencies.
	for _, c := range r.sortedCells(false) {
		if b := r.cell(c.Scenario, keyBaseline); c.Target == keyNode && b != nil {
			out = append(out, ratioCheck("CPU per request, "+c.Scenario, c, b, cpu, targetRatio, true))
		}
	}
	for _, c := range r.sortedCells(true) {
		if b := r.cell(c.Scenario, keyBaseline); c.Target == keyNode && b != nil {
			out = append(out,
				ratioCheck("CPU per stream, "+c.Scenario, c, b, cpu, targetRatio, true),
				withStalls(ratioCheck("stream TTFB p99 (over provider delay), "+c.Scenario, c, b, ttfb99, targetRatio, true), c, b, ttfb99All),
				withStalls(ratioCheck("event gap p99 over the provider's gap, "+c.Scenario, c, b, gap99, targetRatio, true), c, b, gap99All))
		}
	}
	if up, down := r.variantCells(keyBrokerDown); up != nil {
		out = append(out, differenceCheck("broker attached: CPU per request, node − node with broker down, "+up.Scenario, up, down, cpu, brokerBudget))
	}
	if on, off := r.variantCells(keyUsageOff); on != nil {
		// All of an event's life: building, encoding, the outbox and
		// its commits, delivery and the deletes after PUBACK.
		out = append(out, differenceCheck("usage events: CPU per request, node − node with usage events off, "+on.Scenario, on, off, cpu, eventsBudget))
	}

	// Looser checks, for what the targets do not cover.
	for _, c := range r.sortedCells(false) {
		if b := r.cell(c.Scenario, keyBaseline); c.Target == keyNode && b != nil {
			out = append(out,
				ratioCheck("added latency p50, "+c.Scenario, c, b, lat50, 1.5, false),
				ratioCheck("added latency p99, "+c.Scenario, c, b, lat99, 2, false))
		}
	}
	if n, b := r.MaxRate[keyNode], r.MaxRate[keyBaseline]; n.Rate > 0 || b.Rate > 0 {
		c := check{Name: "maximum sustainable non-stream rate", Node: fmt.Sprintf("%.0f/s", n.Rate), Baseline: fmt.Sprintf("%.0f/s", b.Rate), Limit: "≥ 0.7×"}
		if b.Rate > 0 {
			v := n.Rate / b.Rate
			c.Ratio, c.Pass = &v, v >= 0.7
		}
		var notes []string
		if n.Disturbed || b.Disturbed {
			notes = append(notes, "a deciding step ran while other processes were busy: re-run")
		}
		if n.SideBound || b.SideBound {
			notes = append(notes, "the load side's CPU was saturated at a deciding step: a lower bound for that system")
		}
		c.Note = strings.Join(notes, "; ")
		out = append(out, c)
	}
	if up, down := r.variantCells(keyBrokerDown); up != nil {
		// Here the "baseline" column is the node with its broker up.
		out = append(out,
			ratioCheck("broker down ÷ broker up, latency p50, "+up.Scenario, down, up, svc50, 1.2, false),
			ratioCheck("broker down ÷ broker up, latency p99, "+up.Scenario, down, up, svc99, 1.5, false))
	}
	for _, c := range r.Cells {
		if c.Target != keyTracing {
			continue
		}
		if n := r.cell(c.Scenario, keyNode); n != nil {
			// Informational, with a generous bound: the "baseline" column
			// is the node with tracing off.
			out = append(out, ratioCheck("tracing on ÷ node, CPU per request, "+c.Scenario, c, n, cpu, 2, false))
		}
	}
	for _, c := range r.Cells {
		if c.Target != keyBatched {
			continue
		}
		if b := r.cell(c.Scenario, keyBaseline); b != nil {
			// What the node costs when its usage events share broker
			// messages ([mqtt] batch_max), against the same hop.
			out = append(out, ratioCheck("CPU per request, node with usage events batched ÷ baseline, "+c.Scenario, c, b, cpu, 1.1, false))
		}
	}
	if on, off := r.variantCells(keyUsageOff); on != nil {
		// Beside the twin's noise floor: events cost more than noise
		// when this ratio is further from 1 than node ÷ twin.
		out = append(out, ratioCheck("usage events on ÷ off, CPU per request, "+on.Scenario, on, off, cpu, twinMargin, false))
	}
	if node, tmpfs := r.variantCells(keyTmpfs); node != nil {
		// Informational: what the outbox's disk (its fsyncs) costs,
		// apart from the rest of an event's life in the process.
		out = append(out, ratioCheck("outbox on tmpfs ÷ node, CPU per request, "+node.Scenario, tmpfs, node, cpu, 1, false))
	}
	for _, c := range r.Cells {
		if c.Target != keyTwin {
			continue
		}
		if n := r.cell(c.Scenario, keyNode); n != nil {
			// The noise floor: two identical nodes in the same rounds.
			// A run whose twins differ by more than a target's margin
			// cannot tell that target's pass from its failure.
			out = append(out, twinCheck(c.Scenario, n, c))
		}
	}
	// Idle streams: node ÷ baseline per stream at each count, and the
	// 10,000-stream bound from the largest count.
	var largest *idleResult
	for k, i := range r.Idle {
		if i.Target != keyNode {
			continue
		}
		if largest == nil || i.Opened > largest.Opened {
			largest = &r.Idle[k]
		}
		b := r.idleBaseline(i.Requested)
		if b == nil {
			continue
		}
		nv, bv := i.perStreamKiB(), b.perStreamKiB()
		c := check{Name: fmt.Sprintf("resident memory per idle stream (%d streams)", i.Opened),
			Node: fmt.Sprintf("%.1f KiB", nv), Baseline: fmt.Sprintf("%.1f KiB", bv), Limit: "≤ 1.1×", Target: true}
		if bv > 0 {
			v := nv / bv
			// A stream that did not open holds nothing: all must open.
			c.Ratio, c.Pass = &v, v <= 1.1 && i.Opened > 0 && i.Opened == i.Streams && b.Opened == b.Streams
		}
		out = append(out, c)
	}
	if i := largest; i != nil {
		const goal = 10000
		rss, measured := i.rssAt(goal)
		name := fmt.Sprintf("resident memory with %d idle streams", goal)
		if !measured {
			name += fmt.Sprintf(" (extrapolated from %d)", i.Opened)
		}
		base := "–"
		if b := r.idleBaseline(i.Requested); b != nil {
			v, _ := b.rssAt(goal)
			base = mib(v)
		}
		out = append(out, check{Name: name, Node: mib(rss), Baseline: base, Limit: "≤ 1024 MiB",
			Pass: i.Opened > 0 && i.Opened == i.Streams && rss <= 1<<30})
	}
	return out
}

// variantCells returns the node's and the variant key's cells of the
// non-stream scenario the variant ran in (nil when it did not run).
func (r *report) variantCells(key string) (node, variant *cell) {
	for _, c := range r.sortedCells(false) {
		if c.Target == key {
			if n := r.cell(c.Scenario, keyNode); n != nil {
				return n, c
			}
		}
	}
	return nil, nil
}

// ratioCheck compares n to b on m: pooled over every round for the
// verdict, and round by round for the spread.
func ratioCheck(name string, n, b *cell, m metric, limit float64, target bool) check {
	nv, bv := m.pooled(n), m.pooled(b)
	c := check{Name: name, Node: m.show(nv), Baseline: m.show(bv), Limit: fmt.Sprintf("≤ %.1f×", limit), Target: target, Note: note(n, b)}
	if bv > 0 {
		v := nv / bv
		c.Ratio, c.Pass = &v, v <= limit
	}
	var per []float64
	for i := range min(n.Runs, b.Runs, len(n.runEnd), len(b.runEnd)) {
		if d := m.run(b, i); d > 0 {
			per = append(per, m.run(n, i)/d)
		}
	}
	c.Spread = spread(per, func(v float64) string { return fmt.Sprintf("%.2f", v) }, "×")
	return c
}

// withStalls notes on a tail check read outside host stalls what the
// stalls were and what the ratio is with every sample (m).
func withStalls(ch check, n, b *cell, m metric) check {
	if n.Stalls+b.Stalls == 0 {
		return ch
	}
	s := fmt.Sprintf("host stalls: node %d, baseline %d", n.Stalls, b.Stalls)
	if nv, bv := m.pooled(n), m.pooled(b); bv > 0 {
		s += fmt.Sprintf("; with the samples they overlapped %.2f× (%s ÷ %s)", nv/bv, m.show(nv), m.show(bv))
	}
	ch.Note = strings.TrimPrefix(ch.Note+"; "+s, "; ")
	return ch
}

// differenceCheck bounds n − b on m (a duration) by limit, pooled and
// round by round.
func differenceCheck(name string, n, b *cell, m metric, limit time.Duration) check {
	d := m.pooled(n) - m.pooled(b)
	c := check{Name: name, Node: m.show(m.pooled(n)), Baseline: m.show(m.pooled(b)), Limit: "≤ " + us(limit) + " more",
		Pass: d <= float64(limit), Target: true, Note: note(n, b)}
	var per []float64
	for i := range min(n.Runs, b.Runs, len(n.runEnd), len(b.runEnd)) {
		per = append(per, m.run(n, i)-m.run(b, i))
	}
	c.Node += fmt.Sprintf(" (%+.1f µs)", d/1e3)
	c.Spread = spread(per, func(v float64) string { return fmt.Sprintf("%+.1f", v/1e3) }, " µs")
	return c
}

// twinCheck compares the node's CPU per request with its twin's, the
// same configuration in the same rounds: it passes while the two agree
// within twinMargin either way.
func twinCheck(scenario string, n, twin *cell) check {
	c := ratioCheck("noise floor: node ÷ its twin, CPU per request, "+scenario, n, twin, cpuPerRequest, twinMargin, false)
	c.Limit = fmt.Sprintf("%.2f–%.2f×", 1/twinMargin, twinMargin)
	c.Pass = c.Ratio != nil && *c.Ratio >= 1/twinMargin && *c.Ratio <= twinMargin
	return c
}

// twinMargin is the closest CPU target's margin (≤ 1.1× the hop).
const twinMargin = 1.1

// spread is a per-round series as min…max (one value alone; "" for
// none), with its median from three rounds on: one round's ratio is not a
// result, and the median is what several of them agree on.
func spread(per []float64, show func(float64) string, unit string) string {
	switch len(per) {
	case 0:
		return ""
	case 1:
		return show(per[0]) + unit
	}
	s := show(slices.Min(per)) + "…" + show(slices.Max(per)) + unit
	if len(per) >= 3 {
		s += ", median " + show(median(per)) + unit
	}
	return s
}

// median of vs (not modified).
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// note says what limited a comparison's runs, if anything: a system
// under test or the load side (generator, provider, proxy on one CPU) busy
// for sideSaturated of their CPU over the runs, disturbed runs kept, or
// failed requests (the figures are of the successful ones).
// A saturated side delays requests and events for both systems alike and
// is reached first by the one that needs less CPU; the rate asked for was
// then not what either system got.
func note(cells ...*cell) string {
	var notes []string
	for _, c := range cells {
		name := targetNames[c.Target]
		if c.SideBusy >= sideSaturated {
			notes = append(notes, fmt.Sprintf("load side CPU %.0f%% with %s: saturated, the rate was not reached", 100*c.SideBusy, name))
		}
		if c.SUTBusy >= sideSaturated {
			notes = append(notes, fmt.Sprintf("%s CPU %.0f%%: saturated", name, 100*c.SUTBusy))
		}
		if c.Disturbed > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d disturbed run(s) kept", name, c.Disturbed))
		}
		failed := 0
		for _, n := range c.Errors {
			failed += n
		}
		if failed > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d of %d requests failed (not in the figures)", name, failed, failed+c.OK))
		}
	}
	return strings.Join(notes, "; ")
}

// stalledShare is the share of a stream cell's first-event waits and gaps
// that host stalls overlapped.
func stalledShare(c *cell) string {
	share := func(n, of int) float64 {
		if of == 0 {
			return 0
		}
		return 100 * float64(n) / float64(of)
	}
	return fmt.Sprintf("%.1f%% / %.1f%%", share(c.StallTTFBs, c.ServTTFB.Count), share(c.StallGaps, c.Gap.Count))
}

// idleBaseline is the baseline's idle result for the same count, or nil.
func (r *report) idleBaseline(requested int) *idleResult {
	for k, i := range r.Idle {
		if i.Target == keyBaseline && i.Requested == requested {
			return &r.Idle[k]
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }
func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/1e3) }
func mib(b int64) string        { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// markdown renders the report.
func (r *report) markdown() string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format+"\n", args...) }
	s := r.Setup
	p("# ScootGate load run %s", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	p("")
	quota := ""
	if s.CPUQuota > 0 {
		quota = fmt.Sprintf(", capped at %.0f %% of one CPU in a cgroup of its own (CFS period %v); the load side in a group that outweighs every other process", 100*s.CPUQuota, cpuQuotaPeriod)
	}
	p("Commit `%s`, %s, %s. %s. Every system under test, node and baseline alike: %s%s.", r.Commit, r.GoVersion, r.CPUModel, s.Pinning, s.SUTRuntime, quota)
	p("Egress through a loopback %s proxy; provider latency %v before headers; streams: %d content events %v apart, with each API's own events around them (chat completions: role, finish, usage, [DONE]; messages: message_start … message_stop; responses: response.created … response.completed).",
		s.Egress, s.ProviderDelay, s.Events, s.EventGap)
	var labels []string
	for _, k := range s.Paths {
		labels = append(labels, fmt.Sprintf("%s (`%s`)", apiPaths[k].label, apiPaths[k].url))
	}
	p("Paths: %s; the node routes each to a backend of its protocol, the baseline forwards it to the same fake provider. Variants (broker down, usage events off, outbox on tmpfs, tracing on, usage events batched, the node's twin) on the first path, at the first rate of each kind.", strings.Join(labels, ", "))
	p("%d interleaved rounds of %v per run; node request log %s. Latency runs from the intended send time (open loop).",
		s.Rounds, s.Duration, map[bool]string{true: "on (JSON lines to a file)", false: "off"}[s.NodeLog])
	p("Host stalls: %s. The stream tail targets (TTFB and gap p99) are read without the waits and gaps a host stall overlapped; their notes give the ratio with them.", s.Stalls)
	p("")
	checkTable := func(target bool) {
		p("| check | node | baseline | ratio | per round | target | | note |")
		p("|---|---:|---:|---:|---:|---|---|---|")
		for _, c := range r.Checks {
			if c.Target != target {
				continue
			}
			q := "–"
			if c.Ratio != nil {
				q = fmt.Sprintf("%.2f×", *c.Ratio)
			}
			spread := c.Spread
			if spread == "" {
				spread = "–"
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s |", c.Name, c.Node, c.Baseline, q, spread, c.Limit, map[bool]string{true: "pass", false: "**FAIL**"}[c.Pass], c.Note)
		}
		p("")
	}
	p("## Targets (node ÷ baseline)")
	p("")
	p("Ratio: pooled over the %d rounds; per round: the same comparison in each round alone (min…max). The broker row is the node's CPU per request less the node's with its MQTT broker down, in absolute terms.", s.Rounds)
	p("")
	checkTable(true)
	p("## Other checks")
	p("")
	p("Looser bounds, kept for what the targets do not cover. The broker rows compare the node with its MQTT broker down (outbox absorbing) to the node with it up, not to the baseline; the tracing rows compare the node with tracing on to the node (informational, with a generous bound).")
	p("")
	checkTable(false)
	p("## Non-stream")
	p("")
	p("Latency from the actual send (p50…p99.9), then from the intended send time (open-loop schedule, includes the generator's own lag).")
	p("")
	p("| scenario | system | achieved/s | errors | p50 | p90 | p99 | p99.9 | intended p50 | intended p99 | intended p99.9 | CPU/req | of which after | allocs/req | KiB alloc/req | reads/req | writes/req | tunnels/1k req | SUT CPU | side CPU | other procs |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range r.sortedCells(false) {
		p("| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.1f | %.1f | %.1f | %.2f | %.0f%% | %.0f%% | %s |",
			c.Scenario, targetNames[c.Target], mean(c.Achieved), errs(c), ms(c.Service.P50), ms(c.Service.P90), ms(c.Service.P99), ms(c.Service.P999),
			ms(c.Latency.P50), ms(c.Latency.P99), ms(c.Latency.P999),
			us(c.CPUPerReq), us(c.AfterReq), c.AllocsReq, c.BytesReq/1024, c.ReadsReq, c.WritesReq, c.TunnelsReq, 100*c.SUTBusy, 100*c.SideBusy, other(c))
	}
	p("")
	p("## Streams")
	p("")
	p("TTFB: from the actual send to the first complete event (intended p99: from the intended send time); gaps: between consecutive events as the client reads them.")
	p("")
	p("| scenario | system | streams/s | errors | TTFB p50 | p90 | p99 | p99.9 | intended p99 | gap p50 | gap p99 | gap p99.9 | gap max | host stalls | TTFB p99 outside them | gap p99 outside them | stalled TTFBs / gaps | CPU/stream | of which after | allocs/stream | reads/stream | writes/stream | SUT CPU | side CPU | other procs |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range r.sortedCells(true) {
		p("| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %.0f | %.1f | %.1f | %.0f%% | %.0f%% | %s |",
			c.Scenario, targetNames[c.Target], mean(c.Achieved), errs(c), ms(c.ServTTFB.P50), ms(c.ServTTFB.P90), ms(c.ServTTFB.P99), ms(c.ServTTFB.P999), ms(c.TTFB.P99),
			ms(c.Gap.P50), ms(c.Gap.P99), ms(c.Gap.P999), ms(c.Gap.Max), c.Stalls, ms(c.ClearTTFB.P99), ms(c.ClearGap.P99), stalledShare(c),
			us(c.CPUPerReq), us(c.AfterReq), c.AllocsReq, c.ReadsReq, c.WritesReq, 100*c.SUTBusy, 100*c.SideBusy, other(c))
	}
	p("")
	p("CPU/req: the system under test's CPU time during the run and after its last answer until it was idle again (\"of which after\": deferred work, e.g. usage delivery to the broker), per request. SUT CPU: its CPU time during the run over wall time (1 = its CPU fully used); side CPU: the provider, the proxy and the generator; other procs: everything else on the two CPUs (processes outside the harness), with the number of runs discarded and re-run because of them.")
	p("")
	p("## Usage events and the critical path")
	p("")
	if r.MQTT.Received > 0 {
		p("The broker received %d usage events during the rounds (node with the broker up); %d MQTT clients were connected at the end.", r.MQTT.Received, r.MQTT.ClientsAtEnd)
	} else {
		p("The embedded broker received **no** usage events during the rounds (%d clients connected): in this build the node does not publish to MQTT, so events stayed in the disk outbox for every node variant, and \"broker down\" differs from \"broker up\" only in the configured address.", r.MQTT.ClientsAtEnd)
	}
	p("\"node, usage events off\" runs with `usage.enabled = false` (no outbox), for the cost of usage events themselves; \"node, outbox on tmpfs\" keeps its outbox in %s, where fsync costs nothing, for what the disk adds to it.", tmpfsRoot)
	p("")
	p("## Traces")
	p("")
	p("\"node, tracing on\" samples every request (`sample_ratio = 1`) and exports every 100 ms over OTLP/HTTP to a loopback sink in the generator's process that answers 200 and decodes nothing (its CPU is on the side CPU, not the node's). During the rounds it accepted %d export requests, %s, and refused %d.",
		r.Traces.Exports, mib(r.Traces.Bytes), r.Traces.Refused)
	p("")
	if len(r.Steps) > 0 {
		p("## Maximum sustainable rate")
		p("")
		p("Non-stream, %v per step, every system at each rate, rising by ×%g; a step passes with no errors, at least 95%% of the rate achieved and p99 (from the intended send time) ≤ %v. A failed step is tried %d more time(s) before it counts; then the rate is bisected between the last pass and the first failure.", s.SearchStep, s.SearchFactor, s.SearchP99, s.SearchConfirm)
		p("")
		p("| system | max passing rate | lowest failing rate | steps (rate: p99, SUT CPU, side CPU, new egress tunnels if any) |")
		p("|---|---:|---:|---|")
		for _, key := range append([]string{keyBaseline, keyNode}, variantOrder...) {
			if _, ok := r.MaxRate[key]; !ok {
				continue
			}
			var steps []string
			for _, st := range r.Steps {
				if st.Target == key {
					mark := "✓"
					if !st.Pass {
						mark = "✗"
					}
					if st.Disturbed {
						mark += "(disturbed)"
					}
					step := fmt.Sprintf("%.0f %s %s %.0f%%/%.0f%%", st.Rate, mark, ms(st.P99), 100*st.SUTBusy, 100*st.SideBusy)
					if st.Tunnels > 0 {
						step += fmt.Sprintf(" +%d tunnels", st.Tunnels)
					}
					steps = append(steps, step)
				}
			}
			m := r.MaxRate[key]
			fail := "none"
			if m.FirstFail > 0 {
				fail = fmt.Sprintf("%.0f/s", m.FirstFail)
			}
			p("| %s | %.0f/s | %s | %s |", targetNames[key], m.Rate, fail, strings.Join(steps, "; "))
		}
		p("")
	}
	if len(r.Overload) > 0 {
		r.overloadMarkdown(p)
	}
	if len(r.Idle) > 0 {
		r.idleMarkdown(p)
	}
	return w.String()
}

func (r *report) sortedCells(stream bool) []*cell {
	var out []*cell
	for _, c := range r.Cells {
		if c.Stream == stream {
			out = append(out, c)
		}
	}
	order := append([]string{keyBaseline, keyNode}, variantOrder...)
	slices.SortStableFunc(out, func(a, b *cell) int {
		if pa, pb := slices.Index(r.Setup.Paths, a.Path), slices.Index(r.Setup.Paths, b.Path); pa != pb {
			return pa - pb
		}
		if a.Rate != b.Rate {
			if a.Rate < b.Rate {
				return -1
			}
			return 1
		}
		return slices.Index(order, a.Target) - slices.Index(order, b.Target)
	})
	return out
}

func other(c *cell) string {
	v := fmt.Sprintf("%.0f%%", 100*c.Foreign)
	if c.Discarded > 0 {
		v += fmt.Sprintf(" (%d re-run)", c.Discarded)
	}
	if c.Disturbed > 0 {
		v += fmt.Sprintf(" **%d disturbed run(s) kept**", c.Disturbed)
	}
	return v
}

func errs(c *cell) string {
	n := 0
	var kinds []string
	for k, v := range c.Errors {
		n += v
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, v))
	}
	if n == 0 {
		return "0"
	}
	slices.Sort(kinds)
	return fmt.Sprintf("%d (%s)", n, strings.Join(kinds, ", "))
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
