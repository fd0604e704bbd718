package app

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/upstream"
)

// TestUpstreamOptionsMatchDefaults: the config's defaults are the hot
// state's own, and slow_start = 0 turns slow start off.
func TestUpstreamOptionsMatchDefaults(t *testing.T) {
	cfg := config.Defaults()
	got := upstreamOptions(&cfg).WithDefaults()
	want := upstream.Options{}.WithDefaults()
	got.SlowStart, want.SlowStart = 0, 0 // compared below
	ignore := cmp.FilterPath(func(p cmp.Path) bool {
		f := p.Last().String()
		return f == ".Clock" || f == ".Rand"
	}, cmp.Ignore())
	if diff := cmp.Diff(got, want, ignore); diff != "" {
		t.Errorf("config defaults differ from upstream defaults (-config +upstream):\n%s", diff)
	}
	if o := upstreamOptions(&cfg); o.SlowStart != upstream.DefaultSlowStart {
		t.Errorf("SlowStart = %v, want %v", o.SlowStart, upstream.DefaultSlowStart)
	}
	cfg.Balance.SlowStart = 0
	if o := upstreamOptions(&cfg).WithDefaults(); o.SlowStart >= 0 {
		t.Errorf("slow_start = 0 must turn slow start off, got %v", o.SlowStart)
	}
}
