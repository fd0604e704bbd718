package loadgen

import (
	"math"
	"slices"
	"time"
)

// Summary is a distribution of durations reduced to nearest-rank
// percentiles. The zero value describes no samples.
type Summary struct {
	Count int           `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Summarize returns the percentiles of ds, which it does not modify.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		Count: len(s),
		Mean:  sum / time.Duration(len(s)),
		P50:   Quantile(s, 0.50),
		P90:   Quantile(s, 0.90),
		P99:   Quantile(s, 0.99),
		P999:  Quantile(s, 0.999),
		Max:   s[len(s)-1],
	}
}

// Quantile returns the nearest-rank q-quantile (0 < q <= 1) of sorted: the
// smallest sample with at least q of the samples at or below it. It is 0
// for no samples.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// Latencies returns the Latency of every successful shot.
func Latencies(shots []Shot) []time.Duration {
	return collect(shots, func(s *Shot) []time.Duration { return []time.Duration{s.Latency} })
}

// TTFBs returns the TTFB of every successful shot.
func TTFBs(shots []Shot) []time.Duration {
	return collect(shots, func(s *Shot) []time.Duration { return []time.Duration{s.TTFB} })
}

// Gaps returns the event gaps of every successful shot.
func Gaps(shots []Shot) []time.Duration {
	return collect(shots, func(s *Shot) []time.Duration { return s.Gaps })
}

// ServiceLatencies returns the Latency of every successful shot less its
// Late: the time from the actual send to the end of the answer.
func ServiceLatencies(shots []Shot) []time.Duration {
	return collect(shots, func(s *Shot) []time.Duration { return []time.Duration{s.Latency - s.Late} })
}

// ServiceTTFBs returns the TTFB of every successful shot less its Late.
func ServiceTTFBs(shots []Shot) []time.Duration {
	return collect(shots, func(s *Shot) []time.Duration { return []time.Duration{s.TTFB - s.Late} })
}

// Lateness returns how late every shot that was sent left (errors included:
// lateness is the generator's, not the server's).
func Lateness(shots []Shot) []time.Duration {
	out := make([]time.Duration, 0, len(shots))
	for i := range shots {
		if shots[i].Err != ErrOverload {
			out = append(out, shots[i].Late)
		}
	}
	return out
}

func collect(shots []Shot, f func(*Shot) []time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(shots))
	for i := range shots {
		if shots[i].Err == nil {
			out = append(out, f(&shots[i])...)
		}
	}
	return out
}
