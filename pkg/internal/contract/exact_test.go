package contract_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/scootgate/scootgate/pkg/internal/contract"
)

// doc is a small contract of the kind the pkg packages describe.
type doc struct {
	Version uint64          `json:"version"`
	When    time.Time       `json:"when,omitzero"`
	Items   []*item         `json:"items"`
	Raw     json.RawMessage `json:"raw,omitempty"`
	Skipped string          `json:"-"`
	Plain   int
}

type item struct {
	Name  string   `json:"name"`
	Tags  []string `json:"tags,omitempty"`
	Child *item    `json:"child,omitempty"`
}

var docShape = contract.ShapeOf(reflect.TypeFor[doc]())

func TestExact(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		open bool
		want contract.Located // zero: accepted
	}{
		{name: "exact", doc: `{"version":1,"when":"2026-01-01T00:00:00Z","items":[{"name":"a","tags":["x"],"child":{"name":"b"}}],"raw":{"any":{"thing":[1]}},"Plain":2}`},
		{name: "empty object and array", doc: ` { "items" : [ ] , "raw" : { } } `},
		{name: "scalars everywhere", doc: `{"version":-1.5e+3,"items":[null,true,false,"s\"\\"]}`},
		{name: "the same name in two objects", doc: `{"items":[{"name":"a"},{"name":"b"}]}`},
		{
			name: "duplicate at the top",
			doc:  `{"version":100,"version":1}`,
			want: contract.Located{Path: "version", Line: 1, Column: 16, Msg: "duplicate member (each name may appear once)"},
		},
		{
			name: "duplicate through an escape",
			doc:  `{"version":100,"vers\u0069on":1}`,
			want: contract.Located{Path: "version", Line: 1, Column: 16, Msg: "duplicate member (each name may appear once)"},
		},
		{
			name: "duplicate deep in a raw value",
			doc:  "{\"raw\":{\"a\":[{\"b\":1,\n\"b\":2}]}}",
			want: contract.Located{Path: "raw.a[0].b", Line: 2, Column: 1, Msg: "duplicate member (each name may appear once)"},
		},
		{
			name: "duplicate of an odd name",
			doc:  `{"raw":{"a b":1,"a b":2}}`,
			want: contract.Located{Path: `raw["a b"]`, Line: 1, Column: 17, Msg: "duplicate member (each name may appear once)"},
		},
		{
			name: "letter case",
			doc:  `{"items":[{"name":"a"},{"name":"b","child":{"Name":"c"}}]}`,
			want: contract.Located{Path: "items[1].child.Name", Line: 1, Column: 45, Msg: `unknown member; did you mean "name"?`},
		},
		{
			name: "letter case of a Go-named member",
			doc:  `{"plain":2}`,
			want: contract.Located{Path: "plain", Line: 1, Column: 2, Msg: `unknown member; did you mean "Plain"?`},
		},
		{
			name: "Unicode folding (U+017F LATIN SMALL LETTER LONG S)",
			doc:  `{"items":[{"tagſ":[]}]}`,
			want: contract.Located{Path: `items[0]["tag\u017f"]`, Line: 1, Column: 12, Msg: `unknown member; did you mean "tags"?`},
		},
		{
			name: "unknown member",
			doc:  `{"items":[{"nmae":"a"}]}`,
			want: contract.Located{Path: "items[0].nmae", Line: 1, Column: 12, Msg: "unknown member"},
		},
		{
			name: "skipped field is unknown",
			doc:  `{"Skipped":"x"}`,
			want: contract.Located{Path: "Skipped", Line: 1, Column: 2, Msg: "unknown member"},
		},
		{
			name: "unpaired high surrogate in a value",
			doc:  `{"items":[{"name":"a\ud800b"}]}`,
			want: contract.Located{Path: "items[0].name", Line: 1, Column: 21, Msg: "unpaired surrogate escape in a string"},
		},
		{
			name: "unpaired low surrogate in a name",
			doc:  `{"raw":{"\udc00":1}}`,
			want: contract.Located{Path: "raw", Line: 1, Column: 10, Msg: "unpaired surrogate escape in a string"},
		},
		{
			name: "high surrogate then an escape that is not a low one",
			doc:  `{"raw":"\ud83d\u0041"}`,
			want: contract.Located{Path: "raw", Line: 1, Column: 9, Msg: "unpaired surrogate escape in a string"},
		},
		{name: "surrogate pair", doc: `{"raw":"\ud83d\ude00 \u00e9 \\ud800"}`},
		{
			name: "invalid UTF-8",
			doc:  "{\"raw\":\"a\xffb\"}",
			want: contract.Located{Path: "raw", Line: 1, Column: 10, Msg: "invalid UTF-8 in a string"},
		},
		{name: "open: unknown member allowed", doc: `{"future":{"x":1},"items":[{"later":true}]}`, open: true},
		{
			name: "open: letter case still refused",
			doc:  `{"future":1,"VERSION":2}`,
			open: true,
			want: contract.Located{Path: "VERSION", Line: 1, Column: 13, Msg: `unknown member; did you mean "version"?`},
		},
		{
			name: "open: duplicate unknown member refused",
			doc:  `{"future":1,"future":2}`,
			open: true,
			want: contract.Located{Path: "future", Line: 1, Column: 13, Msg: "duplicate member (each name may appear once)"},
		},
		{
			name: "wrong type: object where a scalar goes is still checked for duplicates",
			doc:  `{"version":{"a":1,"a":2}}`,
			want: contract.Located{Path: "version.a", Line: 1, Column: 19, Msg: "duplicate member (each name may appear once)"},
		},
		{
			name: "long name shortened",
			doc:  `{"raw":{"` + strings.Repeat("é", 40) + `":1,"` + strings.Repeat("é", 40) + `":1}}`,
			want: contract.Located{Path: `raw["` + strings.Repeat(`\u00e9`, 32) + `"…]`, Line: 1, Column: 94, Msg: "duplicate member (each name may appear once)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := docShape
			if tt.open {
				s = s.Open()
			}
			got, ok, syntax := contract.Exact([]byte(tt.doc), s)
			if syntax {
				t.Fatalf("Exact reported a syntax error in %s", tt.doc)
			}
			if ok != (tt.want == contract.Located{}) || got != tt.want {
				t.Errorf("Exact = %+v, %v; want %+v", got, ok, tt.want)
			}
		})
	}
}

func TestExactSyntax(t *testing.T) {
	for _, d := range []string{``, ` `, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,}`, `[1,]`, `{"a" 1}`, `{1:2}`, `"abc`, "\"a\x01\"", `tru`, `nul`, `{"a":1]`, `[1}`, strings.Repeat("[", 10001)} {
		if _, ok, syntax := contract.Exact([]byte(d), nil); ok || !syntax {
			t.Errorf("Exact(%q) = ok %v, syntax %v; want a syntax error", d, ok, syntax)
		}
	}
	// Exact stops after the first value.
	if _, ok, _ := contract.Exact([]byte(`{} {"a":1,"a":1}`), nil); !ok {
		t.Errorf("Exact read past the first value")
	}
}

func TestShapeOfRecursive(t *testing.T) {
	_, ok, _ := contract.Exact([]byte(`{"name":"a","child":{"name":"b","child":{"name":"c","CHILD":null}}}`), contract.ShapeOf(reflect.TypeFor[item]()))
	if ok {
		t.Errorf("a recursive type is not checked at depth")
	}
}

// oracle decides what Exact should, with encoding/json's tokenizer: ok is
// false when an object has a duplicate name (at any depth) or, in an object
// of shape s, a name s does not list (when closed) or that folds to one it
// lists without being it. valid is false when doc is not one JSON value.
func oracle(doc []byte, s *oracleShape) (ok, valid bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	ok = true
	var walk func(s *oracleShape) error
	walk = func(s *oracleShape) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				name := k.(string)
				if seen[name] {
					ok = false
				}
				seen[name] = true
				var child *oracleShape
				if s != nil && s.object {
					var known bool
					child, known = s.fields[name]
					if !known {
						for n := range s.fields {
							if strings.EqualFold(n, name) {
								ok = false
							}
						}
						if !s.open {
							ok = false
						}
					}
				}
				if err := walk(child); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			var elem *oracleShape
			if s != nil && !s.object {
				elem = s.elem
			}
			for dec.More() {
				if err := walk(elem); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk(s); err != nil {
		return false, false
	}
	if !utf8.Valid(doc) || loneSurrogate(doc) {
		ok = false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return false, false
	}
	return ok, true
}

// loneSurrogate reports whether a string of the valid document doc has a
// \uD800-\uDFFF escape that is not half of a pair, tokenizing each string
// with regular expressions rather than Exact's scanner.
func loneSurrogate(doc []byte) bool {
	str := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	part := regexp.MustCompile(`\\u[0-9a-fA-F]{4}|\\.|[^\\]`)
	half := func(p []byte) (lo, hi bool) {
		if len(p) != 6 || p[1] != 'u' {
			return false, false
		}
		v, _ := strconv.ParseUint(string(p[2:]), 16, 32)
		return v >= 0xdc00 && v <= 0xdfff, v >= 0xd800 && v <= 0xdbff
	}
	for _, lit := range str.FindAll(doc, -1) {
		ps := part.FindAll(lit[1:len(lit)-1], -1)
		for i := 0; i < len(ps); i++ {
			lo, hi := half(ps[i])
			if lo {
				return true
			}
			if hi {
				if i+1 == len(ps) {
					return true
				}
				if lo2, _ := half(ps[i+1]); !lo2 {
					return true
				}
				i++
			}
		}
	}
	return false
}

// oracleShape is docShape, written out by hand.
type oracleShape struct {
	object bool
	open   bool
	fields map[string]*oracleShape
	elem   *oracleShape
}

func docOracleShape(open bool) *oracleShape {
	it := &oracleShape{object: true, open: open}
	it.fields = map[string]*oracleShape{"name": nil, "tags": {}, "child": it}
	return &oracleShape{object: true, open: open, fields: map[string]*oracleShape{
		"version": nil, "when": nil, "raw": nil, "Plain": nil,
		"items": {elem: it},
	}}
}

// FuzzExact checks Exact against a decision made with encoding/json's own
// tokenizer, on the documents encoding/json accepts; on the others Exact
// must not panic, and a document it calls well-formed and exact can only be
// one encoding/json rejects for its grammar.
func FuzzExact(f *testing.F) {
	for _, d := range []string{
		`{"version":1,"items":[{"name":"a","tags":["x"],"child":{"name":"b"}}],"raw":{"any":1}}`,
		`{"version":100,"version":1}`,
		`{"vers\u0069on":1,"version":2}`,
		`{"items":[{"NAME":"a"}]}`,
		`{"items":[{"\u017fags":[]}]}`,
		`{"raw":{"a":{"b":1,"b":2}}}`,
		`{"future":true}`,
		`{"raw":"\ud800","raw":1}`,
		`{"raw":"\ud83d\ude00\\ud800"}`,
		`{"raw":"\udc00"}`,
		"{\"raw\":{\"\xff\":1,\"\ufffd\":2}}",
		`[{"a":1,"a":2}]`,
	} {
		f.Add([]byte(d), false)
		f.Add([]byte(d), true)
	}
	f.Fuzz(func(t *testing.T, doc []byte, open bool) {
		s := docShape
		if open {
			s = s.Open()
		}
		l, ok, syntax := contract.Exact(doc, s)
		want, valid := oracle(doc, docOracleShape(open))
		if !valid {
			return // encoding/json rejects it; the callers report that
		}
		if syntax {
			t.Fatalf("Exact called a valid document malformed: %q", doc)
		}
		if ok != want {
			t.Fatalf("Exact(%q) = %v (%+v), encoding/json's tokens say %v", doc, ok, l, want)
		}
		if !ok && (l.Msg == "" || l.Line < 1) {
			t.Fatalf("Exact(%q): an error without a message or position: %+v", doc, l)
		}
	})
}

// FuzzParseTime: ParseTime accepts exactly the strings TimePattern matches
// that name a real instant, and reads them as time.Parse does.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-11-29T10:00:00Z", "2026-11-29T10:00:00.123456789+05:30", "2026-11-29t10:00:00z",
		"2026-11-29T1:00:00Z", "2026-12-31T23:59:60Z", "2026-02-30T00:00:00Z", "2026-11-29T10:00:00,5Z", "2026-11-29T10:00:00+24:00", "0000-01-01T00:00:00-23:59"} {
		f.Add(s)
	}
	pattern := regexp.MustCompile(contract.TimePattern)
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := json.Marshal(s)
		if err != nil {
			return
		}
		got, ok := contract.ParseTime(raw)
		want, err := time.Parse(time.RFC3339, s)
		if ok != (pattern.MatchString(s) && err == nil) {
			t.Fatalf("ParseTime(%q) = %v; pattern %v, time.Parse %v", s, ok, pattern.MatchString(s), err)
		}
		if ok && !got.Equal(want) {
			t.Fatalf("ParseTime(%q) = %v, time.Parse = %v", s, got, want)
		}
	})
}

func TestExactRequired(t *testing.T) {
	s := contract.ShapeOf(reflect.TypeFor[doc]()).Required()
	for _, tt := range []struct {
		doc  string
		want contract.Located
	}{
		{doc: `{"version":1,"items":[{"name":"a"}],"Plain":1}`},
		{doc: `{"version":1,"items":null,"Plain":1}`},
		{doc: `{"version":1,"items":[],"Plain":1,"raw":{}}`},
		{doc: `{"items":[],"Plain":1}`, want: contract.Located{Line: 1, Column: 1, Msg: `missing member "version"`}},
		{doc: `{"version":1,"items":[{"name":"a"},{"tags":[]}],"Plain":1}`, want: contract.Located{Path: "items[1]", Line: 1, Column: 36, Msg: `missing member "name"`}},
		{doc: `{}`, want: contract.Located{Line: 1, Column: 1, Msg: `missing member "version"`}},
	} {
		got, ok, _ := contract.Exact([]byte(tt.doc), s)
		if ok != (tt.want == contract.Located{}) || got != tt.want {
			t.Errorf("Exact(%s) = %+v, %v; want %+v", tt.doc, got, ok, tt.want)
		}
	}
}
