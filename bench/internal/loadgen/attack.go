package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrOverload is the error of a shot that was not sent because MaxInFlight
// shots were still waiting for their answers.
var ErrOverload = errors.New("loadgen: too many shots in flight; not sent")

// Attack is one constant-rate run.
type Attack struct {
	// Rate is the arrival rate in shots per second (> 0).
	Rate float64
	// Duration is how long the schedule runs: Rate × Duration shots, at
	// least one.
	Duration time.Duration
	// MaxInFlight bounds the shots waiting for an answer; a shot due while
	// the bound is reached is not sent and fails with ErrOverload.
	MaxInFlight int
	// Timeout bounds each shot, from its intended send time.
	Timeout time.Duration
}

// Shot is one request's outcome. Fire fills everything but Intended.
type Shot struct {
	// Intended is when the schedule meant to send the shot.
	Intended time.Time
	// Late is how long after Intended the request was handed to the client
	// (generator lag, included in Latency and TTFB).
	Late time.Duration
	// Latency runs from Intended to the end of the response body.
	Latency time.Duration
	// TTFB runs from Intended to the first complete SSE event (streams only).
	TTFB time.Duration
	// Gaps are the times between consecutive SSE events (streams only).
	Gaps []time.Duration
	// Events counts SSE events (streams only); Bytes the response body.
	Events int
	Bytes  int64
	// Err is nil for a complete 200 answer.
	Err error
	// Stalled marks a stream shot that waited for its first event while
	// something outside the test held a CPU the test runs on, and
	// StalledGaps the indices of its Gaps that overlapped such a stall
	// (see MarkStalls). Both stay empty unless the caller marks them.
	Stalled     bool
	StalledGaps []int
}

// Fire sends one shot. It sets every field of s except Intended, which Run
// has set, and must return once ctx ends.
type Fire func(ctx context.Context, s *Shot)

// Result is the outcome of an attack.
type Result struct {
	// Shots lists every scheduled shot in schedule order (fewer than
	// Rate × Duration only when ctx ended early).
	Shots []Shot
	// Start is the first shot's intended time; Elapsed runs from Start
	// until the last shot ended.
	Start   time.Time
	Elapsed time.Duration
}

// OK counts shots without an error.
func (r Result) OK() int {
	n := 0
	for i := range r.Shots {
		if r.Shots[i].Err == nil {
			n++
		}
	}
	return n
}

// Achieved is the rate of successful shots over the whole attack, from the
// first intended send until the last answer.
func (r Result) Achieved() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK()) / r.Elapsed.Seconds()
}

// Run fires a's schedule until it is done or ctx ends, each shot on its own
// goroutine, and returns when every fired shot has returned.
func Run(ctx context.Context, a Attack, fire Fire) (Result, error) {
	if a.Rate <= 0 || a.Duration <= 0 || a.MaxInFlight < 1 || a.Timeout <= 0 {
		return Result{}, fmt.Errorf("loadgen: attack needs a positive rate, duration, in-flight bound and timeout: %+v", a)
	}
	n := max(int(a.Rate*a.Duration.Seconds()), 1)
	interval := time.Duration(float64(time.Second) / a.Rate)
	shots := make([]Shot, n)
	slots := make(chan struct{}, a.MaxInFlight)
	var (
		wg      sync.WaitGroup
		endMu   sync.Mutex
		lastEnd time.Time // guarded by endMu
	)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()

	start := time.Now()
	sent := 0
schedule:
	for i := range shots {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				break schedule
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			break
		}
		s := &shots[i]
		s.Intended = due
		sent++
		select {
		case slots <- struct{}{}:
		default:
			s.Err = ErrOverload
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithDeadline(ctx, due.Add(a.Timeout))
			fire(sctx, s)
			cancel()
			<-slots
			now := time.Now()
			endMu.Lock()
			if now.After(lastEnd) {
				lastEnd = now
			}
			endMu.Unlock()
		}()
	}
	wg.Wait()
	res := Result{Shots: shots[:sent], Start: start}
	if !lastEnd.IsZero() {
		res.Elapsed = lastEnd.Sub(start)
	}
	return res, nil
}
