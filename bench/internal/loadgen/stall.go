package loadgen

import (
	"slices"
	"sort"
	"time"
)

// Interval is the span of time from From to To.
type Interval struct{ From, To time.Time }

// MarkStalls sets Stalled and StalledGaps on the successful stream shots
// whose wait for the first event (from the actual send to the first
// event) or whose gaps between events overlap any of stalls.
func MarkStalls(shots []Shot, stalls []Interval) {
	if len(stalls) == 0 {
		return
	}
	stalls = slices.Clone(stalls)
	slices.SortFunc(stalls, func(a, b Interval) int { return a.From.Compare(b.From) })
	// reach[i] is the latest end among stalls[:i+1]: a span [from, to)
	// overlaps a stall iff the last stall starting before to has
	// reach[i] after from.
	reach := make([]time.Time, len(stalls))
	for i, s := range stalls {
		reach[i] = s.To
		if i > 0 && reach[i-1].After(s.To) {
			reach[i] = reach[i-1]
		}
	}
	overlaps := func(from, to time.Time) bool {
		i := sort.Search(len(stalls), func(i int) bool { return !stalls[i].From.Before(to) }) - 1
		return i >= 0 && reach[i].After(from)
	}
	for i := range shots {
		s := &shots[i]
		if s.Err != nil || s.TTFB == 0 {
			continue
		}
		first := s.Intended.Add(s.TTFB)
		s.Stalled = overlaps(s.Intended.Add(s.Late), first)
		s.StalledGaps = s.StalledGaps[:0]
		at := first
		for k, g := range s.Gaps {
			if overlaps(at, at.Add(g)) {
				s.StalledGaps = append(s.StalledGaps, k)
			}
			at = at.Add(g)
		}
	}
}

// UnstalledServiceTTFBs is ServiceTTFBs without the Stalled shots.
func UnstalledServiceTTFBs(shots []Shot) []time.Duration {
	return collect(shots, func(s *Shot) []time.Duration {
		if s.Stalled {
			return nil
		}
		return []time.Duration{s.TTFB - s.Late}
	})
}

// UnstalledGaps is Gaps without the gaps listed in StalledGaps.
func UnstalledGaps(shots []Shot) []time.Duration {
	return collect(shots, func(s *Shot) []time.Duration {
		if len(s.StalledGaps) == 0 {
			return s.Gaps
		}
		out := make([]time.Duration, 0, len(s.Gaps))
		for k, g := range s.Gaps {
			if !slices.Contains(s.StalledGaps, k) {
				out = append(out, g)
			}
		}
		return out
	})
}
