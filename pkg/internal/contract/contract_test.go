package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestProblemsText(t *testing.T) {
	var ps []Problem
	for i := range 12 {
		ps = append(ps, Problem{Path: strings.Repeat("x", i), Msg: "bad"})
	}
	got := ProblemsText("p: ", ps[:2])
	if got != "p: bad; x: bad" {
		t.Errorf("two problems: %q", got)
	}
	got = ProblemsText("p: ", ps)
	if !strings.HasSuffix(got, "xxxxxxxxx: bad; and 2 more") || strings.Count(got, "bad") != 10 {
		t.Errorf("twelve problems: %q", got)
	}
}

func TestJSONError(t *testing.T) {
	var v struct {
		N int `json:"n"`
	}
	doc := []byte("{\n  \"n\": x\n}")
	err := json.Unmarshal(doc, &v)
	if l := JSONError(doc, "", err); l.Line != 2 || l.Column != 8 || l.Path != "" {
		t.Errorf("syntax error located at %+v, want line 2 column 8", l)
	}
	err = json.Unmarshal([]byte(`{"n":"s"}`), &v)
	if l := JSONError(nil, "items[3]", err); l.Path != "items[3].n" || l.Msg != "expected an integer, got string" || l.Line != 0 {
		t.Errorf("type error = %+v", l)
	}
	if got := (Located{Path: "a", Line: 1, Column: 2, Msg: "m"}).Text("x: "); got != "x: line 1, column 2: a: m" {
		t.Errorf("Text = %q", got)
	}
}

// TestJSONErrorNumbers: a number its field cannot hold is described by
// what the field takes, with the range when the number is a plainly
// written integer out of it.
func TestJSONErrorNumbers(t *testing.T) {
	var v struct {
		I64 int64   `json:"i64"`
		I8  int8    `json:"i8"`
		U64 uint64  `json:"u64"`
		F   float64 `json:"f"`
	}
	for _, tc := range []struct {
		doc, want string
	}{
		{`{"i64": 1E87}`, "i64: expected an integer, got number 1E87"},
		{`{"i64": 1.0}`, "i64: expected an integer, got number 1.0"},
		{`{"i64": 9223372036854775808}`, "i64: expected an integer from -9223372036854775808 to 9223372036854775807, got number 9223372036854775808"},
		{`{"i8": -129}`, "i8: expected an integer from -128 to 127, got number -129"},
		{`{"u64": -1}`, "u64: expected a non-negative integer, got number -1"},
		{`{"u64": 18446744073709551616}`, "u64: expected a non-negative integer up to 18446744073709551615, got number 18446744073709551616"},
		{`{"f": 1e400}`, "f: expected a number within the range of a float64, got number 1e400"},
		{`{"f": "x"}`, "f: expected a number, got string"},
	} {
		err := json.Unmarshal([]byte(tc.doc), &v)
		if got := JSONError(nil, "", err).Text(""); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.doc, got, tc.want)
		}
	}
}

func TestOneOf(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"a"}, `"a"`},
		{[]string{"a", "b"}, `"a" or "b"`},
		{[]string{"a", "b", "c"}, `"a", "b" or "c"`},
	} {
		if got := OneOf(tt.in); got != tt.want {
			t.Errorf("OneOf(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
