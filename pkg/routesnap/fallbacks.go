package routesnap

import (
	"slices"
	"strconv"
	"strings"
)

// window checks a target's context window members (schema 2).
func (v *validator) window(path string, t Target) {
	for _, m := range [...]struct {
		name string
		n    *int
	}{{"context_window", t.ContextWindow}, {"max_output_tokens", t.MaxOutputTokens}} {
		if m.n == nil {
			continue
		}
		v.since(2, path+"."+m.name)
		if *m.n < 1 || *m.n > MaxContextTokens {
			v.add(path+"."+m.name, "must be 1..%d, got %d", MaxContextTokens, *m.n)
		}
	}
	if w, o := t.ContextWindow, t.MaxOutputTokens; w != nil && o != nil && *o > *w && *w >= 1 {
		v.add(path+".max_output_tokens", "must be at most context_window (%d), got %d", *w, *o)
	}
}

// fallbacks checks every model's fallbacks (schema 2): each names an exact
// model of the list other than the model itself, once, of the same one
// protocol, and no chain comes back to a model it left (docs/routing.md
// "Fallbacks"). A cycle is reported once, at the first model on it in
// document order.
func (v *validator) fallbacks(bs []Backend, ms []Model) {
	protocols := make(map[string]string, len(bs))
	for _, b := range bs {
		protocols[b.ID] = b.Protocol
	}
	// protocol returns the one protocol of m's targets whose backends are
	// known, "" when they have none, or all of them joined by ", " when
	// there are several.
	protocol := func(m *Model) string {
		var ps []string
		for _, t := range m.Targets {
			if p := protocols[t.Backend]; p != "" && !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
		slices.Sort(ps)
		return strings.Join(ps, ", ")
	}
	index := make(map[string]int, len(ms))
	for i := range ms {
		if _, dup := index[ms[i].Name]; !dup && !IsPattern(ms[i].Name) {
			index[ms[i].Name] = i
		}
	}
	edges := make([][]int, len(ms)) // the valid fallbacks, by index
	for i := range ms {
		m := &ms[i]
		if m.Fallbacks == nil {
			continue
		}
		path := "models[" + strconv.Itoa(i) + "].fallbacks"
		v.since(2, path)
		if len(m.Fallbacks) == 0 {
			v.add(path, "must list at least one model, or be left out")
			continue
		}
		own := protocol(m)
		if strings.Contains(own, ",") {
			v.add(path, "a model with fallbacks must have targets of one protocol; this one has %s", own)
		}
		for j, name := range m.Fallbacks {
			at := path + "[" + strconv.Itoa(j) + "]"
			k, ok := index[name]
			switch {
			case CheckModelName(name) != "":
				v.add(at, "%s", CheckModelName(name))
			case IsPattern(name):
				v.add(at, "must name a model, not a pattern: a fallback serves under one name of the routes")
			case name == m.Name:
				v.add(at, "names this model itself")
			case slices.Index(m.Fallbacks, name) < j:
				v.add(at, "duplicate of fallbacks[%d]", slices.Index(m.Fallbacks, name))
			case !ok:
				v.add(at, "unknown model %q", clip(name))
			default:
				other := protocol(&ms[k])
				if own != "" && other != "" && other != own && !strings.Contains(own, ",") {
					v.add(at, "model %q speaks %s, this model %s; a fallback never converts between protocols", clip(name), other, own)
					continue
				}
				edges[i] = append(edges[i], k)
			}
		}
	}
	v.cycles(ms, edges)
}

// cycles reports each cycle of the fallback graph once, at the fallbacks
// of the first model on it in document order, naming the chain from there.
// Each back edge a depth-first walk meets closes one cycle: whenever the
// graph has a cycle, at least one is reported.
func (v *validator) cycles(ms []Model, edges [][]int) {
	const (
		unseen = iota
		open   // on the current walk
		closed // every chain from it is done
	)
	state := make([]uint8, len(ms))
	var stack []int
	var walk func(i int)
	walk = func(i int) {
		state[i] = open
		stack = append(stack, i)
		for _, k := range edges[i] {
			switch state[k] {
			case unseen:
				walk(k)
			case open:
				// The cycle is stack[start:], told from its first model in
				// document order.
				cycle := stack[slices.Index(stack, k):]
				first := slices.Index(cycle, slices.Min(cycle))
				names := make([]string, 0, len(cycle)+1)
				for n := range len(cycle) + 1 {
					names = append(names, strconv.Quote(clip(ms[cycle[(first+n)%len(cycle)]].Name)))
				}
				v.add("models["+strconv.Itoa(cycle[first])+"].fallbacks", "cycle: %s; a chain is walked once and must end", strings.Join(names, " → "))
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = closed
	}
	for i := range ms {
		if state[i] == unseen {
			walk(i)
		}
	}
}
