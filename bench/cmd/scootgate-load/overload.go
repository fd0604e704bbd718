package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
)

// overloadResult is one system overloaded and then loaded below its
// maximum sustainable rate, back to back (docs/performance.md "Overload
// and recovery").
type overloadResult struct {
	Target   string         `json:"target"`
	MaxRate  float64        `json:"max_rate"` // the search's maximum passing rate, which the rates below multiply
	Rate     float64        `json:"overload_rate"`
	Sent     int            `json:"overload_requests"`
	Failed   int            `json:"overload_failed"`
	Kinds    map[string]int `json:"overload_errors_by_kind,omitempty"`
	After    float64        `json:"recovery_rate"`
	AfterN   int            `json:"recovery_requests"`
	AfterBad int            `json:"recovery_failed"`
	// AfterKinds are the recovery run's errors by kind ("status 503": the
	// node refused for want of an available target).
	AfterKinds map[string]int `json:"recovery_errors_by_kind,omitempty"`
	// Rep is the repetition of an absolute schedule (-overload-rate),
	// from 1; 0 for a schedule relative to the searched maximum. Try
	// counts the runs of this system in this repetition, from 1.
	Rep int `json:"rep,omitempty"`
	Try int `json:"try,omitempty"`
	// Cold says the run was the first overload of its process: egress
	// tunnels, heap and goroutine stacks sized by the warm-up alone. A
	// repetition compares node and baseline only when both ran alike.
	Cold bool `json:"cold"`
	// Discarded says why the run does not count (discardReason); empty
	// when it does.
	Discarded string `json:"discarded,omitempty"`
	// Lag is the most a shot of either schedule was sent after its
	// intended time: a lagging generator overloads no one on schedule.
	Lag time.Duration `json:"generator_lag_ns"`
	// SUTBusy is the system under test's CPU use during the overload,
	// in CPUs; SideBusy the load side's (provider, proxy, generator) and
	// GenBusy the generator's alone, the larger of the overload's and the
	// recovery run's.
	SUTBusy  float64 `json:"sut_cpu_busy"`
	SideBusy float64 `json:"side_cpu_busy"`
	GenBusy  float64 `json:"generator_cpu_busy"`
	// Throttle is how often the kernel held the system under test back
	// for its CPU quota during both runs (-cpu-quota; zero without).
	Throttle cpuThrottle `json:"throttle"`
	// Tunnels is how many egress tunnels the system opened through the
	// proxy during both runs: one per connection it could not reuse.
	Tunnels int64 `json:"tunnels"`
	// Recovery runs from the end of the overload (the recovery run's
	// first intended send) to the intended send of the first request from
	// which every later one succeeded; 0 when none failed, -1 when the
	// last one failed.
	Recovery time.Duration `json:"recovery_ns"`
	// SettledP99 is the 99th percentile latency (from the intended send)
	// of the recovery run's requests sent recoveryGoal or more after the
	// overload's end, failed ones included: "normal again" by time, where
	// Recovery says it by failures.
	SettledP99 time.Duration `json:"settled_p99_ns"`
}

// overloads overloads each target in turn at overloadFactor × its
// maximum sustainable rate for overloadDuration, and from the moment
// that schedule ends loads it at recoveryFactor × that rate for
// recoveryDuration: the two schedules overlap while the overload's
// backlog drains, as they would for a node in service.
func (b *bench) overloads(ctx context.Context, targets []*target) error {
	for _, t := range targets {
		m := b.rep.MaxRate[t.key]
		if m.Rate == 0 {
			continue
		}
		if err := b.pause(ctx, 2*time.Second); err != nil {
			return err
		}
		res, err := b.overload(ctx, t, m.Rate)
		if err != nil {
			return err
		}
		res.Cold = t.overloads == 0
		t.overloads++
		b.rep.Overload = append(b.rep.Overload, res)
		b.logf("overload %-16s %7.0f/s: %d of %d failed; then %7.0f/s: %d of %d failed %v, recovered after %v",
			t.key, res.Rate, res.Failed, res.Sent, res.After, res.AfterBad, res.AfterN, res.AfterKinds, res.Recovery)
		t.client.CloseIdleConnections()
	}
	return nil
}

// sideMax is the most CPU the load side (provider, proxy, generator) may
// use in an overload run that counts: beyond it the provider and the
// generator are no longer on time for both systems alike.
const sideMax = 0.8

// discardReason says why an overload run does not count, or "" when it
// does: its generator sent a request more than maxLag after its intended
// time (it overloaded no one on schedule), or the load side used more
// than sideMax of its CPU.
func (o overloadResult) discardReason(maxLag time.Duration) string {
	var why []string
	if o.Lag > maxLag {
		why = append(why, fmt.Sprintf("generator lag %v > %v", o.Lag.Round(time.Millisecond), maxLag))
	}
	if o.SideBusy > sideMax {
		why = append(why, fmt.Sprintf("load side CPU %.0f%% > %.0f%%", 100*o.SideBusy, 100*sideMax))
	}
	return strings.Join(why, ", ")
}

// overloadsAt overloads node and baseline on the same absolute schedule
// (-overload-rate, then -recovery-rate), -overload-reps times,
// alternating which of the two goes first, with idle connections closed
// on the load side between runs, after warming the load side up
// (warmLoadSide). A run that does not count (discardReason) is run
// again, up to -overload-tries runs of a system in a repetition; every
// run is reported. A cold run (a process's first overload) is run again
// on a fresh process (restartCold): run again on the same one, it would
// start with the tunnels, heap and stacks the discarded run left, and be
// compared with the other system's cold run.
func (b *bench) overloadsAt(ctx context.Context, node, baseline *target) error {
	return overloadSchedule(ctx, node, baseline, b.o.overloadReps, b.o.overloadTries, overloadSteps{
		warmLoadSide: b.warmLoadSide,
		run:          b.overloadTry,
		restart:      b.restartCold,
	})
}

// overloadSteps are what overloadSchedule runs: the real ones in
// overloadsAt, recorded ones in tests.
type overloadSteps struct {
	warmLoadSide func(context.Context) error
	run          func(ctx context.Context, t *target, rep, try int) (overloadResult, error)
	restart      func(context.Context, *target) error
}

// overloadSchedule is overloadsAt's order of runs.
func overloadSchedule(ctx context.Context, node, baseline *target, reps, tries int, s overloadSteps) error {
	if err := s.warmLoadSide(ctx); err != nil {
		return err
	}
	for rep := 1; rep <= reps; rep++ {
		order := []*target{node, baseline}
		if rep%2 == 0 {
			order = []*target{baseline, node}
		}
		for _, t := range order {
			for try := 1; try <= tries; try++ {
				res, err := s.run(ctx, t, rep, try)
				if err != nil {
					return err
				}
				if res.Discarded == "" {
					break
				}
				if res.Cold && try < tries {
					if err := s.restart(ctx, t); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// warmLoadSide overloads a spare node process once on the repetitions'
// schedule and stops it, unreported: the load side's first burst (the
// generator's goroutines and heap, the proxy's, the provider's and its
// MQTT broker's) is then behind it for node and baseline alike, where it
// was the first system's alone. A node, not a baseline, so that the
// broker takes its first burst of usage events too: a spare baseline
// left it to the node's first run (cold node failed 0-473 requests after
// a spare baseline, 0-58 after a spare node, 0 with usage events off).
func (b *bench) warmLoadSide(ctx context.Context) error {
	spare, err := b.startChecked(ctx, keyNode, "-spare")
	if err != nil {
		return err
	}
	defer spare.close()
	if err := b.pause(ctx, 2*time.Second); err != nil {
		return err
	}
	res, err := b.overloadAt(ctx, spare, b.o.overloadRate, b.o.recoveryRate)
	if err != nil {
		return err
	}
	b.logf("overload: load side warmed up on a spare node (%d + %d failed, generator %.0f%% of a CPU)", res.Failed, res.AfterBad, 100*res.GenBusy)
	return nil
}

// restartCold replaces t's process with a fresh one of the same system,
// taken through what the first had before its first overload: the
// warm-up on every path and rate, and one measured run's length of each.
// Only the quiet-machine checks of the rounds are left out.
func (b *bench) restartCold(ctx context.Context, t *target) error {
	t.close()
	fresh, err := b.startChecked(ctx, t.key, fmt.Sprintf("-fresh%d", t.restarts+1))
	if err != nil {
		return err
	}
	fresh.restarts = t.restarts + 1
	*t = *fresh
	for _, key := range b.o.paths {
		for _, stream := range []bool{false, true} {
			rates := b.o.rates
			if stream {
				rates = b.o.streamRates
			}
			for _, rate := range rates {
				if _, err := b.attack(ctx, t, b.plan(rate, b.o.warmup+b.o.duration), b.fire(t, apiPaths[key], stream)); err != nil {
					return err
				}
			}
		}
	}
	b.logf("overload: %s restarted, so that its run again is a cold one too", t.key)
	return nil
}

// overloadTry is one run of overloadsAt.
func (b *bench) overloadTry(ctx context.Context, t *target, rep, try int) (overloadResult, error) {
	if err := b.pause(ctx, 2*time.Second); err != nil {
		return overloadResult{}, err
	}
	res, err := b.overloadAt(ctx, t, b.o.overloadRate, b.o.recoveryRate)
	if err != nil {
		return overloadResult{}, err
	}
	res.Rep, res.Try, res.Cold = rep, try, t.overloads == 0
	t.overloads++
	res.Discarded = res.discardReason(b.o.maxLag)
	b.rep.Overload = append(b.rep.Overload, res)
	verdict := "counts"
	if res.Discarded != "" {
		verdict = "discarded: " + res.Discarded
	}
	b.logf("overload %d/%d %-16s %s %7.0f/s: %d of %d failed %v; then %7.0f/s: %d of %d failed %v, recovered after %v, p99 from %v on %v (generator lag up to %v; CPU: SUT %.0f%%, side %.0f%%, generator %.0f%%; throttled %d of %d periods; %d egress tunnels opened): %s",
		rep, b.o.overloadReps, t.key, res.state(), res.Rate, res.Failed, res.Sent, res.Kinds, res.After, res.AfterBad, res.AfterN, res.AfterKinds, res.Recovery, recoveryGoal, res.SettledP99.Round(time.Millisecond), res.Lag,
		100*res.SUTBusy, 100*res.SideBusy, 100*res.GenBusy, res.Throttle.Throttled, res.Throttle.Periods, res.Tunnels, verdict)
	t.client.CloseIdleConnections()
	return res, nil
}

func (b *bench) overload(ctx context.Context, t *target, maxRate float64) (overloadResult, error) {
	res, err := b.overloadAt(ctx, t, maxRate*b.o.overloadFactor, maxRate*b.o.recoveryFactor)
	res.MaxRate = maxRate
	return res, err
}

func (b *bench) overloadAt(ctx context.Context, t *target, overRate, afterRate float64) (overloadResult, error) {
	fire := b.fire(t, apiPaths[b.o.paths[0]], false)
	over := loadgen.Attack{Rate: overRate, Duration: b.o.overloadDuration, MaxInFlight: 4000, Timeout: 10 * time.Second}
	after := loadgen.Attack{Rate: afterRate, Duration: b.o.recoveryDuration, MaxInFlight: 2000, Timeout: 10 * time.Second}
	th0, err := t.throttle()
	if err != nil {
		return overloadResult{}, err
	}
	up0, err := b.upstream(ctx)
	if err != nil {
		return overloadResult{}, err
	}
	r0, err := b.read(t)
	if err != nil {
		return overloadResult{}, err
	}
	var (
		wg                         sync.WaitGroup
		overRes, afterRes          loadgen.Result
		overErr, afterErr, readErr error
		r1, r2                     reading
	)
	pauseErr := error(nil)
	withoutGC(func() {
		wg.Go(func() { overRes, overErr = loadgen.Run(ctx, over, fire) })
		if pauseErr = b.pause(ctx, over.Duration); pauseErr == nil {
			r1, readErr = b.read(t)
			afterRes, afterErr = loadgen.Run(ctx, after, fire)
		}
		wg.Wait()
	})
	r2, err = b.read(t)
	th1, terr := t.throttle()
	up1, uerr := b.upstream(ctx)
	if err := errors.Join(overErr, pauseErr, afterErr, readErr, err, terr, uerr); err != nil {
		return overloadResult{}, err
	}
	res := overloadResult{
		Target: t.key, Lag: max(maxLate(overRes), maxLate(afterRes)),
		Rate: over.Rate, Sent: len(overRes.Shots), Failed: len(overRes.Shots) - overRes.OK(), Kinds: errorKinds(overRes.Shots),
		After: after.Rate, AfterN: len(afterRes.Shots), AfterBad: len(afterRes.Shots) - afterRes.OK(), AfterKinds: errorKinds(afterRes.Shots),
		SUTBusy:  busy(r1.sut-r0.sut, r1.at.Sub(r0.at)),
		SideBusy: max(busy(r1.side-r0.side, r1.at.Sub(r0.at)), busy(r2.side-r1.side, r2.at.Sub(r1.at))),
		GenBusy:  max(busy(r1.gen-r0.gen, r1.at.Sub(r0.at)), busy(r2.gen-r1.gen, r2.at.Sub(r1.at))),
		Throttle: th1.minus(th0),
		Tunnels:  (up1.SOCKSTunnels + up1.ConnectTunnels) - (up0.SOCKSTunnels + up0.ConnectTunnels),
	}
	res.Recovery = recoveredAfter(afterRes)
	res.SettledP99 = settledP99(afterRes)
	return res, nil
}

// settledP99 is the 99th percentile latency of r's shots intended
// recoveryGoal or more after r's start; 0 when there are none.
func settledP99(r loadgen.Result) time.Duration {
	var lat []time.Duration
	for i := range r.Shots {
		if r.Shots[i].Intended.Sub(r.Start) >= recoveryGoal {
			lat = append(lat, r.Shots[i].Latency)
		}
	}
	slices.Sort(lat)
	return quantile(lat, 0.99)
}

// recoveredAfter is the time from r's start to the intended send of the
// first shot from which every later one succeeded: 0 when none failed, -1
// when the last one did.
func recoveredAfter(r loadgen.Result) time.Duration {
	last := -1
	for i := range r.Shots {
		if r.Shots[i].Err != nil {
			last = i
		}
	}
	switch {
	case last < 0:
		return 0
	case last == len(r.Shots)-1:
		return -1
	}
	return r.Shots[last+1].Intended.Sub(r.Start)
}

func maxLate(r loadgen.Result) time.Duration {
	var late time.Duration
	for i := range r.Shots {
		late = max(late, r.Shots[i].Late)
	}
	return late
}

func errorKinds(shots []loadgen.Shot) map[string]int {
	var kinds map[string]int
	for i := range shots {
		if err := shots[i].Err; err != nil {
			if kinds == nil {
				kinds = map[string]int{}
			}
			kinds[errorKind(err)]++
		}
	}
	return kinds
}

// state is "cold" for a process's first overload, else "warm".
func (o overloadResult) state() string {
	if o.Cold {
		return "cold"
	}
	return "warm"
}

// overloadMarkdown renders the overload phase.
func (r *report) overloadMarkdown(p func(string, ...any)) {
	s := r.Setup
	p("## Overload and recovery")
	p("")
	if s.OverloadRate > 0 {
		p("Node and baseline alike at %.0f/s for %v, then from the end of that schedule at %.0f/s for %v (the two overlap while the backlog drains), %d repetitions alternating which goes first; the nodes' first-byte timeout %s. Recovery: from the end of the overload to the first request after which every request succeeded. A run counts when no request was sent more than %v after its intended time and the load side (provider, proxy, generator) used at most %.0f%% of its CPU; a run that does not is run again (a cold one on a fresh process), up to %d runs of a system in a repetition.",
			s.OverloadRate, s.OverloadDuration, s.RecoveryRate, s.RecoveryDuration, s.OverloadReps, firstByteName(s.FirstByte), s.MaxLag, 100*sideMax, s.OverloadTries)
	} else {
		p("Each system at %g× its maximum passing rate for %v, then from the end of that schedule at %g× it for %v (the two overlap while the backlog drains); the nodes' first-byte timeout %s. Recovery: from the end of the overload to the first request after which every request succeeded.",
			s.OverloadFactor, s.OverloadDuration, s.RecoveryFactor, s.RecoveryDuration, firstByteName(s.FirstByte))
	}
	p("")
	p("| rep | system | state | overload | failed | errors | then | failed | errors | recovered after | p99 from %v on | generator lag | CPU: system, load side | throttled | egress tunnels opened | counts |", recoveryGoal)
	p("|---:|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
	for _, o := range r.Overload {
		rec := "not within the run"
		if o.Recovery >= 0 {
			rec = o.Recovery.Round(time.Millisecond).String()
		}
		counts := "yes"
		if o.Discarded != "" {
			counts = "no: " + o.Discarded
		}
		p("| %d | %s | %s | %.0f/s × %d | %d | %s | %.0f/s × %d | %d | %s | %s | %v | %v | %.0f%%, %.0f%% | %d of %d periods | %d | %s |", o.Rep, targetNames[o.Target], o.state(), o.Rate, o.Sent, o.Failed, kindsText(o.Kinds), o.After, o.AfterN, o.AfterBad, kindsText(o.AfterKinds), rec, o.SettledP99.Round(time.Millisecond), o.Lag.Round(time.Millisecond),
			100*o.SUTBusy, 100*o.SideBusy, o.Throttle.Throttled, o.Throttle.Periods, o.Tunnels, counts)
	}
	p("")
	if s.OverloadRate > 0 {
		v := r.overloadVerdict()
		p("Repetitions in which a run of each system counts, both cold or both warm (cold: a process's first overload; a cold run that does not count is run again on a fresh process): %d of %d. Of those, the node failed no more requests than the baseline (during and after the overload) in %d and served normally again within %v of the overload's end in %d.",
			v.reps, s.OverloadReps, v.fewerFailures, recoveryGoal, v.recovered)
		p("")
	}
}

// recoveryGoal is how soon after an overload's end a node should serve
// normally again (docs/performance.md "Overload and recovery").
const recoveryGoal = time.Second

// overloadVerdict counts, over the repetitions in which a run of both
// systems counts (the last of each) and both were cold or both warm,
// those in which the node failed no more requests than the baseline, and
// those in which it recovered within recoveryGoal. A cold run fails
// hundreds of requests more than a warm one, so a cold run of one system
// against a warm run of the other says nothing about the two.
type overloadVerdict struct {
	reps, fewerFailures, recovered int
}

func (r *report) overloadVerdict() overloadVerdict {
	type pair struct{ node, base *overloadResult }
	byRep := map[int]*pair{}
	for i := range r.Overload {
		o := &r.Overload[i]
		if o.Rep == 0 || o.Discarded != "" {
			continue
		}
		p := byRep[o.Rep]
		if p == nil {
			p = &pair{}
			byRep[o.Rep] = p
		}
		switch o.Target {
		case keyNode:
			p.node = o
		case keyBaseline:
			p.base = o
		}
	}
	var v overloadVerdict
	for _, p := range byRep {
		if p.node == nil || p.base == nil || p.node.Cold != p.base.Cold {
			continue
		}
		v.reps++
		if p.node.Failed+p.node.AfterBad <= p.base.Failed+p.base.AfterBad {
			v.fewerFailures++
		}
		if p.node.Recovery >= 0 && p.node.Recovery <= recoveryGoal {
			v.recovered++
		}
	}
	return v
}

func firstByteName(d time.Duration) string {
	if d == 0 {
		return "the shipped default"
	}
	return d.String()
}

func kindsText(kinds map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, kinds[k]))
	}
	return strings.Join(parts, ", ")
}
