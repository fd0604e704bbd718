package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// problems collects every Problem found while reading a file.
type problems struct {
	list []Problem
}

func (ps *problems) add(path, format string, args ...any) {
	ps.list = append(ps.list, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// table reads one TOML table (as decoded into map[string]any) and type-checks
// each value it is asked for. Every key asked for is remembered, present or
// not, so that done can report the rest as unknown keys, listing the keys
// that would have been accepted.
//
// Reading the generic map instead of decoding into a struct is deliberate: a
// struct decode stops at the first type mismatch (in map order, so not even
// deterministically) and cannot name array indices, while this reports every
// problem with its full path.
type table struct {
	ps    *problems
	path  string // path of this table; "" for the root
	m     map[string]any
	asked map[string]bool
}

func newTable(ps *problems, path string, m map[string]any) *table {
	return &table{ps: ps, path: path, m: m, asked: make(map[string]bool)}
}

// at returns the path of key inside this table.
func (t *table) at(key string) string { return join(t.path, key) }

// join appends key to path, quoting the key when it is not a bare TOML key.
func join(path, key string) string {
	k := toml.Key{key}.String()
	if path == "" {
		return k
	}
	return path + "." + k
}

// index returns path[i].
func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// get returns the raw value of key. A missing key is a problem only when
// need is not "": need says what was expected ("a string like ...").
func (t *table) get(key, need string) (any, bool) {
	t.asked[key] = true
	v, ok := t.m[key]
	if !ok && need != "" {
		t.ps.add(t.at(key), "missing; expected %s", need)
	}
	return v, ok
}

// has reports whether key is present (and counts it as asked).
func (t *table) has(key string) bool {
	t.asked[key] = true
	_, ok := t.m[key]
	return ok
}

func (t *table) mismatch(key, want string, v any) {
	t.ps.add(t.at(key), "expected %s, got %s", want, typeName(v))
}

// str returns the string at key; ok is false when it is missing or not a
// string (the latter is reported).
func (t *table) str(key, need string) (string, bool) {
	v, ok := t.get(key, need)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		t.mismatch(key, "a string", v)
	}
	return s, ok
}

// strs returns the array of strings at key; ok is false when it is
// missing or not such an array (the latter is reported, naming the
// element).
func (t *table) strs(key, need string) ([]string, bool) {
	v, ok := t.get(key, "")
	if !ok {
		return nil, false
	}
	list, ok := v.([]any)
	if !ok {
		t.mismatch(key, need, v)
		return nil, false
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			t.ps.add(index(t.at(key), i), "expected a string, got %s", typeName(e))
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// integer returns the integer at key, checked against [lo, hi].
func (t *table) integer(key, need string, lo, hi int64) (int64, bool) {
	v, ok := t.get(key, need)
	if !ok {
		return 0, false
	}
	n, ok := v.(int64)
	if !ok {
		t.mismatch(key, "an integer", v)
		return 0, false
	}
	if n < lo || n > hi {
		t.ps.add(t.at(key), "%d is out of range; expected %d..%d", n, lo, hi)
		return 0, false
	}
	return n, true
}

// boolean returns the boolean at key; absent is false.
func (t *table) boolean(key string) (bool, bool) {
	v, ok := t.get(key, "")
	if !ok {
		return false, false
	}
	b, ok := v.(bool)
	if !ok {
		t.mismatch(key, "a boolean", v)
	}
	return b, ok
}

// duration returns the Go duration string at key, which must be at least
// lo.
func (t *table) duration(key string, lo time.Duration) (time.Duration, bool) {
	s, ok := t.str(key, "")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.ps.add(t.at(key), "expected a Go duration like \"10s\" or \"15m\", got %q", s)
		return 0, false
	}
	if d < lo {
		t.ps.add(t.at(key), "%s is too small; expected at least %s", d, lo)
		return 0, false
	}
	return d, true
}

// sub returns the table at key.
func (t *table) sub(key, need string) (*table, bool) {
	v, ok := t.get(key, need)
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.mismatch(key, "a table", v)
		return nil, false
	}
	return newTable(t.ps, t.at(key), m), true
}

// list returns the array of tables at key ([[key]] or key = [{...}, ...]).
func (t *table) list(key, need string) ([]*table, bool) {
	v, ok := t.get(key, need)
	if !ok {
		return nil, false
	}
	var ms []map[string]any
	switch v := v.(type) {
	case []map[string]any:
		ms = v
	case []any:
		for _, e := range v {
			m, ok := e.(map[string]any)
			if !ok {
				t.mismatch(key, "an array of tables", e)
				return nil, false
			}
			ms = append(ms, m)
		}
	default:
		t.mismatch(key, "an array of tables", v)
		return nil, false
	}
	out := make([]*table, len(ms))
	for i, m := range ms {
		out[i] = newTable(t.ps, index(t.at(key), i), m)
	}
	return out, true
}

// named is one entry of a table of tables, such as [backends.<id>].
type named struct {
	name string
	t    *table
}

// entries returns the tables inside the table at key, sorted by name. An
// entry that is not a table is reported and returned with a nil t, so that
// references to its name still resolve (one problem, not a cascade).
func (t *table) entries(key, need string) ([]named, bool) {
	outer, ok := t.sub(key, need)
	if !ok {
		return nil, false
	}
	var out []named
	for _, name := range slices.Sorted(maps.Keys(outer.m)) {
		outer.asked[name] = true
		v := outer.m[name]
		m, ok := v.(map[string]any)
		if !ok {
			outer.mismatch(name, "a table", v)
			out = append(out, named{name: name})
			continue
		}
		out = append(out, named{name: name, t: newTable(t.ps, outer.at(name), m)})
	}
	return out, true
}

// done reports every key of the table that nobody asked for.
func (t *table) done() {
	var unknown []string
	for k := range t.m {
		if !t.asked[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return
	}
	known := slices.Sorted(maps.Keys(t.asked))
	for _, k := range slices.Sorted(slices.Values(unknown)) {
		t.ps.add(t.at(k), "unknown key; expected one of: %s", strings.Join(known, ", "))
	}
}

// typeName names a decoded TOML value's type without showing the value,
// which could be a secret pasted where a reference belongs.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date/time"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		return fmt.Sprintf("%T", v)
	}
}
