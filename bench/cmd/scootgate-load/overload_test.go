package main

import (
	"errors"
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
