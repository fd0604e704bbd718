package routes

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// TestCompileChain: a model's chain is each fallback followed by its own
// chain, depth first, every model once; models without fallbacks have
// none, and a pattern may name fallbacks too.
func TestCompileChain(t *testing.T) {
	tg := func(m string) []routesnap.Target {
		return []routesnap.Target{{Backend: "oa-a", Model: m, Weight: 1}}
	}
	ms := []routesnap.Model{
		{Name: "a", Targets: tg("a"), Fallbacks: []string{"b", "c"}},
		{Name: "b", Targets: tg("b"), Fallbacks: []string{"d", "c"}},
		{Name: "c", Targets: tg("c"), Fallbacks: []string{"d"}},
		{Name: "d", Targets: tg("d")},
		{Name: "p-*", Targets: tg("p-*"), Fallbacks: []string{"c"}},
	}
	bs := staticDoc().Backends
	if err := routesnap.ValidateRoutes(bs, ms, nil); err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(bs, ms, testCreds, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	names := func(name string) []string {
		m, ok := tab.Model(name)
		if !ok {
			t.Fatalf("no model %q", name)
		}
		var out []string
		for _, x := range m.Chain {
			out = append(out, x.Name)
		}
		return out
	}
	for _, tc := range []struct {
		asked string
		want  []string
	}{
		{"a", []string{"b", "d", "c"}},
		{"b", []string{"d", "c"}},
		{"c", []string{"d"}},
		{"d", nil},
		{"p-x", []string{"c", "d"}},
	} {
		if diff := cmp.Diff(names(tc.asked), tc.want); diff != "" {
			t.Errorf("chain of %q (-got +want):\n%s", tc.asked, diff)
		}
	}
}

// TestHolds: a target holds a request whose input and output fit its
// window together and whose output fits its cap; an undeclared limit
// holds anything.
func TestHolds(t *testing.T) {
	for _, tc := range []struct {
		window, maxOut, in, out int64
		want                    bool
	}{
		{0, 0, 1 << 40, 1 << 40, true},
		{1000, 0, 900, 100, true},
		{1000, 0, 901, 100, false},
		{1000, 0, 1001, 0, false},
		{0, 100, 1 << 40, 100, true},
		{0, 100, 0, 101, false},
		{1000, 100, 800, 200, false},
		{1000, 100, 800, 100, true},
	} {
		tg := &Target{ContextWindow: tc.window, MaxOutput: tc.maxOut}
		if got := tg.Holds(tc.in, tc.out); got != tc.want {
			t.Errorf("window %d, max output %d: Holds(%d, %d) = %v, want %v", tc.window, tc.maxOut, tc.in, tc.out, got, tc.want)
		}
	}
}

// TestCompileWindowed: a model is Windowed when any target declares a
// context window or an output cap, and its targets carry them.
func TestCompileWindowed(t *testing.T) {
	ms := []routesnap.Model{
		{Name: "w", Targets: []routesnap.Target{
			{Backend: "oa-a", Model: "x", Weight: 1, ContextWindow: new(131072), MaxOutputTokens: new(16384)},
			{Backend: "oa-b", Model: "x", Weight: 1},
		}},
		{Name: "plain", Targets: []routesnap.Target{{Backend: "oa-a", Model: "y", Weight: 1}}},
	}
	tab, err := Compile(staticDoc().Backends, ms, testCreds, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := tab.Model("w")
	p, _ := tab.Model("plain")
	if !w.Windowed || p.Windowed {
		t.Errorf("Windowed: w %v, plain %v; want true, false", w.Windowed, p.Windowed)
	}
	pool := w.Pools[provider.Chat]
	got := [][2]int64{{pool[0].ContextWindow, pool[0].MaxOutput}, {pool[1].ContextWindow, pool[1].MaxOutput}}
	if diff := cmp.Diff(got, [][2]int64{{131072, 16384}, {0, 0}}); diff != "" {
		t.Errorf("targets' limits (-got +want):\n%s", diff)
	}
}
