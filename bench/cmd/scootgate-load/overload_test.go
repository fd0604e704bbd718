package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
)

func TestRecoveredAfter(t *testing.T) {
	t0 := time.Unix(100, 0)
	bad := errors.New("503")
	shots := func(errs ...error) loadgen.Result {
		r := loadgen.Result{Start: t0}
		for i, err := range errs {
			r.Shots = append(r.Shots, loadgen.Shot{Intended: t0.Add(time.Duration(i) * time.Second), Err: err})
		}
		return r
	}
	tests := []struct {
		name string
		r    loadgen.Result
		want time.Duration
	}{
		{"none failed", shots(nil, nil, nil), 0},
		{"failed, then served", shots(bad, nil, bad, nil, nil), 3 * time.Second},
		{"still failing at the end", shots(nil, bad), -1},
		{"no shots", shots(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := recoveredAfter(tt.r); got != tt.want {
				t.Errorf("recoveredAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSettledP99: the settled p99 counts only the shots intended a
// second or more after the recovery run's start, failed ones too.
func TestSettledP99(t *testing.T) {
	t0 := time.Unix(100, 0)
	r := loadgen.Result{Start: t0}
	add := func(at, lat time.Duration, err error) {
		r.Shots = append(r.Shots, loadgen.Shot{Intended: t0.Add(at), Latency: lat, Err: err})
	}
	add(0, 9*time.Second, nil) // before the goal: not counted
	add(999*time.Millisecond, 8*time.Second, nil)
	for i := range 98 {
		add(time.Second+time.Duration(i)*time.Millisecond, time.Millisecond, nil)
	}
	add(2*time.Second, 3*time.Second, errors.New("504"))
	add(2*time.Second, 4*time.Second, nil)
	if got := settledP99(r); got != 3*time.Second {
		t.Errorf("settled p99 = %v, want 3s (99th of 100 counted)", got)
	}
	if got := settledP99(loadgen.Result{Start: t0}); got != 0 {
		t.Errorf("no shots: %v, want 0", got)
	}
}

func TestDiscardReason(t *testing.T) {
	tests := []struct {
		name string
		o    overloadResult
		want string
	}{
		{"on time, room to spare", overloadResult{Lag: 40 * time.Millisecond, SideBusy: 0.62}, ""},
		{"at the bounds", overloadResult{Lag: 100 * time.Millisecond, SideBusy: 0.8}, ""},
		{"late", overloadResult{Lag: 180 * time.Millisecond, SideBusy: 0.5}, "generator lag 180ms > 100ms"},
		{"late and busy", overloadResult{Lag: 2 * time.Second, SideBusy: 0.84}, "generator lag 2s > 100ms, load side CPU 84% > 80%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.o.discardReason(100 * time.Millisecond); got != tt.want {
				t.Errorf("discardReason = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestOverloadVerdict: only repetitions in which a run of each system
// counts are judged, each by its runs that count.
func TestOverloadVerdict(t *testing.T) {
	r := &report{Overload: []overloadResult{
		// 1: the node's first run discarded, its second fails less and recovers in time.
		{Rep: 1, Target: keyNode, Failed: 5000, Recovery: -1, Discarded: "generator lag 2s > 100ms"},
		{Rep: 1, Target: keyNode, Failed: 10, AfterBad: 2, Recovery: 300 * time.Millisecond},
		{Rep: 1, Target: keyBaseline, Failed: 12, Recovery: 250 * time.Millisecond},
		// 2: the node fails more and recovers late.
		{Rep: 2, Target: keyBaseline, Failed: 0},
		{Rep: 2, Target: keyNode, Failed: 1, Recovery: 2 * time.Second},
		// 3: the baseline never counted.
		{Rep: 3, Target: keyNode},
		{Rep: 3, Target: keyBaseline, Discarded: "load side CPU 90% > 80%"},
	}}
	if got, want := r.overloadVerdict(), (overloadVerdict{reps: 2, fewerFailures: 1, recovered: 1}); got != want {
		t.Errorf("overloadVerdict = %+v, want %+v", got, want)
	}
}

// TestOverloadVerdictColdAgainstWarm: a repetition whose counted runs
// are a cold run of one system and a warm run of the other (the cold run
// discarded and run again on the same process) is not judged; cold
// against cold is.
func TestOverloadVerdictColdAgainstWarm(t *testing.T) {
	r := &report{Overload: []overloadResult{
		// 1: the node cold and failing more; the baseline's cold run
		// discarded, its second warm.
		{Rep: 1, Target: keyNode, Cold: true, Failed: 700},
		{Rep: 1, Target: keyBaseline, Cold: true, Failed: 9000, Recovery: -1, Discarded: "load side CPU 92% > 80%"},
		{Rep: 1, Target: keyBaseline, Failed: 30},
		// 2: both cold (the baseline's second run on a fresh process).
		{Rep: 2, Target: keyNode, Cold: true, Failed: 700},
		{Rep: 2, Target: keyBaseline, Cold: true, Failed: 9000, Discarded: "generator lag 300ms > 100ms"},
		{Rep: 2, Target: keyBaseline, Cold: true, Failed: 1300, Recovery: 3 * time.Second},
		// 3: both warm.
		{Rep: 3, Target: keyBaseline, Failed: 100},
		{Rep: 3, Target: keyNode},
	}}
	if got, want := r.overloadVerdict(), (overloadVerdict{reps: 2, fewerFailures: 2, recovered: 2}); got != want {
		t.Errorf("overloadVerdict = %+v, want %+v", got, want)
	}
}

// TestOverloadSchedule: the load side is warmed up before the first
// run; repetitions alternate which system goes first; a discarded cold
// run is run again on a fresh process, a discarded warm one on the same
// process, and no restart follows a system's last try.
func TestOverloadSchedule(t *testing.T) {
	node, base := &target{key: keyNode}, &target{key: keyBaseline}
	var calls []string
	overloads := map[*target]int{}
	discard := map[string]bool{"node 1/1": true, "baseline 1/1": true, "baseline 1/2": true, "baseline 2/1": true}
	steps := overloadSteps{
		warmLoadSide: func(context.Context) error {
			calls = append(calls, "warm load side")
			return nil
		},
		run: func(_ context.Context, tg *target, rep, try int) (overloadResult, error) {
			name := fmt.Sprintf("%s %d/%d", tg.key, rep, try)
			res := overloadResult{Rep: rep, Try: try, Cold: overloads[tg] == 0}
			overloads[tg]++
			if discard[name] {
				res.Discarded = "generator lag 300ms > 100ms"
			}
			calls = append(calls, name+" "+res.state())
			return res, nil
		},
		restart: func(_ context.Context, tg *target) error {
			overloads[tg] = 0
			calls = append(calls, "restart "+tg.key)
			return nil
		},
	}
	if err := overloadSchedule(context.Background(), node, base, 3, 2, steps); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"warm load side",
		"node 1/1 cold", "restart node", "node 1/2 cold",
		"baseline 1/1 cold", "restart baseline", "baseline 1/2 cold",
		"baseline 2/1 warm", "baseline 2/2 warm",
		"node 2/1 warm",
		"node 3/1 warm",
		"baseline 3/1 warm",
	}
	if !slices.Equal(calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
}
