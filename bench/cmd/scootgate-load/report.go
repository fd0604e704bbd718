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
	Idle      []idleResult       `json:"idle_streams"`
	MQTT      mqttFinding        `json:"mqtt"`
	Traces    traceFinding       `json:"traces"` // what "node, tracing on" exported during the rounds
	Checks    []check            `json:"checks"`
	byKey     map[string]*cell   // scenario + "\x00" + target → cell
}

type setup struct {
	Pinning       string        `json:"pinning"`
	Egress        string        `json:"egress"`
	ProviderDelay time.Duration `json:"provider_delay_ns"`
	Rounds        int           `json:"rounds"`
	Duration      time.Duration `json:"run_duration_ns"`
	Rates         []float64     `json:"rates"`
	StreamRate    float64       `json:"stream_rate"`
	Events        int           `json:"stream_content_events"`
	EventGap      time.Duration `json:"event_gap_ns"`
	NodeLog       bool          `json:"node_log"`
	IdleStreams   int           `json:"idle_streams"`
	SearchStep    time.Duration `json:"search_step_ns"`
	SearchP99     time.Duration `json:"search_p99_bound_ns"`
	SearchFactor  float64       `json:"search_factor"`
	SearchConfirm int           `json:"search_confirm"`
}

// cell is one scenario × target, over every round.
type cell struct {
	Scenario   string          `json:"scenario"`
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
	CPUPerReq  time.Duration   `json:"cpu_per_request_ns"`       // during the run and after it, until idle
	AfterReq   time.Duration   `json:"cpu_after_per_request_ns"` // of which after the last answer
	SUTBusy    float64         `json:"sut_cpu_busy"`
	SideBusy   float64         `json:"side_cpu_busy"`
	AllocsReq  float64         `json:"allocs_per_request"`
	ReadsReq   float64         `json:"read_syscalls_per_request"`  // read-family system calls of the SUT
	WritesReq  float64         `json:"write_syscalls_per_request"` // write-family system calls of the SUT
	BytesReq   float64         `json:"alloc_bytes_per_request"`
	TunnelsReq float64         `json:"tunnels_per_1k_requests"`
	Foreign    float64         `json:"foreign_cpu_busy"` // other processes, CPUs
	Discarded  int             `json:"discarded_runs"`   // re-run because of foreign load
	Disturbed  int             `json:"disturbed_runs"`   // kept although disturbed (retries or budget exhausted)

	shots   []loadgen.Shot
	cpu     time.Duration
	after   time.Duration
	side    time.Duration
	wall    time.Duration
	mallocs uint64
	bytes   uint64
	sysr    uint64
	sysw    uint64
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
}

func newReport(o options, p pinning) *report {
	return &report{
		Started:   time.Now(),
		Commit:    gitDescribe(),
		GoVersion: runtime.Version(),
		CPUModel:  cpuModel(),
		Setup: setup{
			Pinning: p.String(), Egress: o.egress, ProviderDelay: o.delay, Rounds: o.rounds, Duration: o.duration,
			Rates: o.rates, StreamRate: o.streamRate, Events: o.events, EventGap: o.eventGap, NodeLog: o.nodeLog,
			IdleStreams: o.idleStreams, SearchStep: o.searchDuration, SearchP99: o.searchP99,
			SearchFactor: o.searchFactor, SearchConfirm: o.searchConfirm,
		},
		MaxRate: map[string]maxRate{},
		byKey:   map[string]*cell{},
	}
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
func (r *report) add(scenario string, rate float64, stream bool, target string, s sample, discarded int) *cell {
	k := scenario + "\x00" + target
	c := r.byKey[k]
	if c == nil {
		c = &cell{Scenario: scenario, Rate: rate, Stream: stream, Target: target, Errors: map[string]int{}}
		r.byKey[k] = c
		r.Cells = append(r.Cells, c)
	}
	c.Runs++
	c.shots = append(c.shots, s.res.Shots...)
	c.Achieved = append(c.Achieved, s.res.Achieved())
	c.cpu += s.cpu
	c.after += s.after
	c.side += s.side
	c.wall += s.wall
	c.mallocs += s.mallocs
	c.sysr += s.sysr
	c.sysw += s.sysw
	c.bytes += s.bytes
	c.tunnels += s.tunnels
	c.foreign += s.foreignSUT + s.foreignSide
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
		line += fmt.Sprintf(" ttfb p50 %s p99 %s", ms(ttfb.P50), ms(ttfb.P99))
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
		}
		c.CPUPerReq, c.AfterReq = perReq(c.cpu+c.after, c.Sent), perReq(c.after, c.Sent)
		c.SUTBusy, c.SideBusy, c.Foreign = busy(c.cpu, c.wall), busy(c.side, c.wall), busy(c.foreign, c.wall)
		if c.Sent > 0 {
			c.AllocsReq = float64(c.mallocs) / float64(c.Sent)
			c.ReadsReq = float64(c.sysr) / float64(c.Sent)
			c.WritesReq = float64(c.sysw) / float64(c.Sent)
			c.BytesReq = float64(c.bytes) / float64(c.Sent)
			c.TunnelsReq = 1000 * float64(c.tunnels) / float64(c.Sent)
		}
	}
	r.Checks = r.checks()
}

func (r *report) cell(scenario, target string) *cell { return r.byKey[scenario+"\x00"+target] }

// checks turns the measurements into the harness's targets (docs/performance.md).
func (r *report) checks() []check {
	var out []check
	ratio := func(name string, node, base float64, show func(float64) string, limit float64, atMost bool) {
		var q *float64
		pass := false
		if base > 0 {
			v := node / base
			q, pass = &v, (atMost && v <= limit) || (!atMost && v >= limit)
		}
		op := "≤"
		if !atMost {
			op = "≥"
		}
		out = append(out, check{Name: name, Node: show(node), Baseline: show(base), Ratio: q, Limit: fmt.Sprintf("%s %.1f×", op, limit), Pass: pass})
	}
	msf := func(v float64) string { return ms(time.Duration(v)) }
	usf := func(v float64) string { return us(time.Duration(v)) }
	delay := float64(r.Setup.ProviderDelay)
	added := func(d time.Duration) float64 { return float64(d) - delay }
	for _, c := range r.Cells {
		if c.Target != keyNode {
			continue
		}
		b := r.cell(c.Scenario, keyBaseline)
		if b == nil {
			continue
		}
		if !c.Stream {
			ratio("added latency p50, "+c.Scenario, added(c.Service.P50), added(b.Service.P50), msf, 1.5, true)
			ratio("added latency p99, "+c.Scenario, added(c.Service.P99), added(b.Service.P99), msf, 2, true)
		} else {
			gap := float64(r.Setup.EventGap)
			ratio("stream TTFB p50 (over provider delay)", added(c.ServTTFB.P50), added(b.ServTTFB.P50), msf, 1.5, true)
			ratio("stream TTFB p99 (over provider delay)", added(c.ServTTFB.P99), added(b.ServTTFB.P99), msf, 1.5, true)
			ratio("event gap p50 over the provider's gap", float64(c.Gap.P50)-gap, float64(b.Gap.P50)-gap, usf, 1.5, true)
			ratio("event gap p99 over the provider's gap", float64(c.Gap.P99)-gap, float64(b.Gap.P99)-gap, usf, 1.5, true)
		}
		ratio("CPU per request, "+c.Scenario, float64(c.CPUPerReq), float64(b.CPUPerReq), usf, 1.5, true)
	}
	if n, b := r.MaxRate[keyNode], r.MaxRate[keyBaseline]; n.Rate > 0 || b.Rate > 0 {
		name := "maximum sustainable non-stream rate"
		if n.Disturbed || b.Disturbed {
			name += " (a deciding step ran while other processes were busy: re-run)"
		}
		if n.SideBound || b.SideBound {
			name += " (the load side's CPU was saturated at a deciding step: a lower bound for that system)"
		}
		ratio(name, n.Rate, b.Rate, func(v float64) string { return fmt.Sprintf("%.0f/s", v) }, 0.7, false)
	}
	if len(r.Setup.Rates) > 0 {
		sc := fmt.Sprintf("non-stream @ %g/s", r.Setup.Rates[0])
		if up, down := r.cell(sc, keyNode), r.cell(sc, keyBrokerDown); up != nil && down != nil {
			// Here the "baseline" column is the node with its broker up.
			ratio("broker down ÷ broker up, latency p50", float64(down.Service.P50), float64(up.Service.P50), msf, 1.2, true)
			ratio("broker down ÷ broker up, latency p99", float64(down.Service.P99), float64(up.Service.P99), msf, 1.5, true)
		}
	}
	for _, c := range r.Cells {
		if c.Target != keyTracing {
			continue
		}
		if n := r.cell(c.Scenario, keyNode); n != nil {
			// Informational, with a generous bound: the "baseline" column
			// is the node with tracing off.
			ratio("tracing on ÷ node, CPU per request, "+c.Scenario, float64(c.CPUPerReq), float64(n.CPUPerReq), usf, 2, true)
		}
	}
	for _, i := range r.Idle {
		if i.Target != keyNode {
			continue
		}
		kib := i.perStreamKiB()
		const goal = 10000
		rss, measured := i.rssAt(goal)
		name := fmt.Sprintf("resident memory with %d idle streams", goal)
		if !measured {
			name += fmt.Sprintf(" (extrapolated from %d)", i.Opened)
		}
		complete := i.Opened > 0 && i.Opened == i.Streams
		out = append(out,
			check{Name: fmt.Sprintf("resident memory per idle stream (%d streams)", i.Opened), Node: fmt.Sprintf("%.1f KiB", kib),
				Baseline: r.idleBaseline(func(b idleResult) string { return fmt.Sprintf("%.1f KiB", b.perStreamKiB()) }),
				Limit:    "≤ 100 KiB", Pass: complete && kib <= 100},
			check{Name: name, Node: mib(rss),
				Baseline: r.idleBaseline(func(b idleResult) string { v, _ := b.rssAt(goal); return mib(v) }),
				Limit:    "≤ 1024 MiB", Pass: complete && rss <= 1<<30})
	}
	return out
}

func (r *report) idleBaseline(f func(idleResult) string) string {
	for _, i := range r.Idle {
		if i.Target == keyBaseline {
			return f(i)
		}
	}
	return "–"
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
	p("Commit `%s`, %s, %s. %s.", r.Commit, r.GoVersion, r.CPUModel, s.Pinning)
	p("Egress through a loopback %s proxy; provider latency %v before headers; streams: %d content events %v apart (+ role, finish, usage and [DONE] events).",
		s.Egress, s.ProviderDelay, s.Events, s.EventGap)
	p("%d interleaved rounds of %v per run; node request log %s. Latency runs from the intended send time (open loop).",
		s.Rounds, s.Duration, map[bool]string{true: "on (JSON lines to a file)", false: "off"}[s.NodeLog])
	p("")
	p("## Targets (node ÷ baseline)")
	p("")
	p("| check | node | baseline | ratio | target | |")
	p("|---|---:|---:|---:|---|---|")
	for _, c := range r.Checks {
		q := "–"
		if c.Ratio != nil {
			q = fmt.Sprintf("%.2f×", *c.Ratio)
		}
		p("| %s | %s | %s | %s | %s | %s |", c.Name, c.Node, c.Baseline, q, c.Limit, map[bool]string{true: "pass", false: "**FAIL**"}[c.Pass])
	}
	p("")
	p("The broker rows compare the node with its MQTT broker down (outbox absorbing) to the node with it up, not to the baseline; the tracing rows compare the node with tracing on to the node (informational, with a generous bound).")
	p("")
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
	p("| scenario | system | streams/s | errors | TTFB p50 | p90 | p99 | p99.9 | intended p99 | gap p50 | gap p99 | gap p99.9 | gap max | CPU/stream | of which after | allocs/stream | reads/stream | writes/stream | SUT CPU | side CPU | other procs |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range r.sortedCells(true) {
		p("| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.1f | %.1f | %.0f%% | %.0f%% | %s |",
			c.Scenario, targetNames[c.Target], mean(c.Achieved), errs(c), ms(c.ServTTFB.P50), ms(c.ServTTFB.P90), ms(c.ServTTFB.P99), ms(c.ServTTFB.P999), ms(c.TTFB.P99),
			ms(c.Gap.P50), ms(c.Gap.P99), ms(c.Gap.P999), ms(c.Gap.Max), us(c.CPUPerReq), us(c.AfterReq), c.AllocsReq, c.ReadsReq, c.WritesReq, 100*c.SUTBusy, 100*c.SideBusy, other(c))
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
	p("\"node, usage events off\" runs with `usage.enabled = false` (no outbox), for the cost of usage events themselves.")
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
		p("| system | max passing rate | lowest failing rate | steps (rate: p99, SUT CPU, side CPU) |")
		p("|---|---:|---:|---|")
		for _, key := range []string{keyBaseline, keyNode, keyBrokerDown, keyUsageOff, keyTracing} {
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
					steps = append(steps, fmt.Sprintf("%.0f %s %s %.0f%%/%.0f%%", st.Rate, mark, ms(st.P99), 100*st.SUTBusy, 100*st.SideBusy))
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
	if len(r.Idle) > 0 {
		p("## Idle streams")
		p("")
		p("A fresh process per system; each stream sends one event, then stays silent while the client holds it open.")
		if i := r.Idle[0]; i.Streams < i.Requested {
			p("%d streams were asked for; %d fit the descriptor limit of %d per process (a stream holds two sockets in the system under test and two in the proxy; the limit here cannot be raised).",
				i.Requested, i.Streams, i.FDLimit)
		}
		p("")
		p("| system | streams open | failed | open time | RSS before | RSS peak | per stream | extra goroutines | extra heap in use |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, i := range r.Idle {
			p("| %s | %d / %d | %d | %v | %s | %s | %.1f KiB | %d | %s |", targetNames[i.Target], i.Opened, i.Streams, i.Failed,
				i.OpenTime.Round(time.Millisecond), mib(i.RSSBefore), mib(i.RSSPeak), i.perStreamKiB(), i.Goroutines, mib(i.HeapInuse))
		}
		p("")
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
	rank := map[string]int{keyBaseline: 0, keyNode: 1, keyBrokerDown: 2, keyUsageOff: 3, keyTracing: 4}
	slices.SortStableFunc(out, func(a, b *cell) int {
		if a.Rate != b.Rate {
			if a.Rate < b.Rate {
				return -1
			}
			return 1
		}
		return rank[a.Target] - rank[b.Target]
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
