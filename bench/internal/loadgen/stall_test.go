package loadgen

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMarkStalls(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	// Every shot: sent 1 ms after it was due, first event at 3 ms, then
	// events 5 ms apart: gaps [3,8), [8,13), [13,18) after Intended.
	shot := func(intended float64) Shot {
		return Shot{Intended: at(intended), Late: ms(1), TTFB: ms(3), Gaps: []time.Duration{ms(5), ms(5), ms(5)}}
	}
	shots := []Shot{
		shot(0),   // a stall at 2–2.5 ms: while it waited for its first event
		shot(100), // a stall at 109–110: in its second gap
		shot(200), // stalls at 200.2–200.9 (before it was sent) and 218–219 (after its last event)
		shot(300), // a stall at 290–301.5 that began before it was due, overlapping the wait
		{Intended: at(400), TTFB: ms(3), Err: errors.New("broken")},             // failed shots are left alone
		{Intended: at(500), Late: ms(1), Latency: ms(4), Stalled: false},        // not a stream (no TTFB)
		{Intended: at(600), Late: ms(1), TTFB: ms(3), StalledGaps: []int{0, 1}}, // marks from an earlier call are replaced
	}
	stalls := []Interval{
		{at(218), at(219)}, // out of order on purpose
		{at(2), at(2.5)},
		{at(109), at(110)},
		{at(200.2), at(200.9)},
		{at(290), at(301.5)},
		{at(399), at(420)},
		{at(500), at(510)},
	}
	MarkStalls(shots, stalls)
	type mark struct {
		Stalled bool
		Gaps    []int
	}
	var got []mark
	for _, s := range shots {
		got = append(got, mark{s.Stalled, s.StalledGaps})
	}
	want := []mark{{true, nil}, {false, []int{1}}, {false, nil}, {true, nil}, {false, nil}, {false, nil}, {false, []int{}}}
	if d := cmp.Diff(want, got, cmpEmpty); d != "" {
		t.Errorf("marks (-want +got):\n%s", d)
	}

	if got, want := UnstalledServiceTTFBs(shots[:4]), []time.Duration{ms(2), ms(2)}; !cmp.Equal(got, want) {
		t.Errorf("UnstalledServiceTTFBs = %v, want %v", got, want)
	}
	if got, want := len(ServiceTTFBs(shots[:4])), 4; got != want {
		t.Errorf("ServiceTTFBs kept %d, want all %d", got, want)
	}
	if got, want := len(UnstalledGaps(shots[:4])), 11; got != want {
		t.Errorf("UnstalledGaps kept %d gaps, want %d (12 less the stalled one)", got, want)
	}
}

func TestMarkStallsWithoutStalls(t *testing.T) {
	shots := []Shot{{Intended: time.Now(), TTFB: time.Millisecond, Gaps: []time.Duration{time.Millisecond}}}
	MarkStalls(shots, nil)
	if shots[0].Stalled || len(shots[0].StalledGaps) != 0 {
		t.Errorf("marked %+v with no stalls", shots[0])
	}
}

// cmpEmpty treats a nil and an empty slice alike.
var cmpEmpty = cmp.Comparer(func(a, b []int) bool { return len(a) == len(b) && (len(a) == 0 || cmp.Equal(a, b)) })
