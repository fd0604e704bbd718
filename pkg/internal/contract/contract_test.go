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
