package clock

import (
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	f := NewFake(time.Time{})
	t0 := f.Now()
	f.Advance(3 * time.Second)
	if got := f.Now().Sub(t0); got != 3*time.Second {
		t.Fatalf("advanced %v, want 3s", got)
	}
	f.Set(t0)
	if !f.Now().Equal(t0) {
		t.Fatal("Set did not move the clock")
	}
}
