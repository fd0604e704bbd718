package jsonedit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/jsonedit"
)

// errKind classifies an error the way callers do: by sentinel and type.
func errKind(err error) string {
	var se *jsonedit.SyntaxError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, jsonedit.ErrNotObject):
		return "not-object"
	case errors.Is(err, jsonedit.ErrKeyExists):
		return "key-exists"
	case errors.Is(err, jsonedit.ErrInvalidValue):
		return "invalid-value"
	case errors.Is(err, jsonedit.ErrInvalidKey):
		return "invalid-key"
	case errors.As(err, &se):
		return "syntax"
	}
	return "unclassified: " + err.Error()
}

type replaceCase struct {
	name    string
	doc     string
	key     string // "model" when empty
	value   string // `"new"` when empty
	want    string
	wantN   int
	wantErr string // errKind of the expected error
}

func (tc replaceCase) args() (doc []byte, key string, value []byte) {
	key, value = tc.key, []byte(tc.value)
	if key == "" {
		key = "model"
	}
	if tc.value == "" {
		value = []byte(`"new"`)
	}
	return []byte(tc.doc), key, value
}

var replaceCases = []replaceCase{
	{name: "simple", doc: `{"model":"gpt","x":1}`, want: `{"model":"new","x":1}`, wantN: 1},
	{name: "last member", doc: `{"x":1,"model":"gpt"}`, want: `{"x":1,"model":"new"}`, wantN: 1},
	{
		name:  "whitespace kept",
		doc:   " \t\r\n{\n  \"x\" : [ 1 , 2 ] ,\r\n  \"model\"\t:\t\"gpt\"  ,\n  \"y\":{ }\n}\n ",
		want:  " \t\r\n{\n  \"x\" : [ 1 , 2 ] ,\r\n  \"model\"\t:\t\"new\"  ,\n  \"y\":{ }\n}\n ",
		wantN: 1,
	},
	{name: "escaped key", doc: `{"mod\u0065l":"gpt"}`, want: `{"mod\u0065l":"new"}`, wantN: 1},
	{name: "escaped key upper hex", doc: `{"MOD\u0045L":"gpt","mo\u0064el":1}`, want: `{"MOD\u0045L":"gpt","mo\u0064el":"new"}`, wantN: 1},
	{name: "escaped slash key", doc: `{"a\/b":1}`, key: "a/b", want: `{"a\/b":"new"}`, wantN: 1},
	{name: "escaped control key", doc: `{"a\nb":1,"a\\nb":2}`, key: "a\nb", want: `{"a\nb":"new","a\\nb":2}`, wantN: 1},
	{name: "surrogate pair key", doc: `{"\ud83d\ude00":1}`, key: "😀", want: `{"\ud83d\ude00":"new"}`, wantN: 1},
	{name: "lone surrogate key", doc: `{"\ud800":1,"\udc00x":2}`, key: "\ufffd", want: `{"\ud800":"new","\udc00x":2}`, wantN: 1},
	{name: "invalid utf8 key", doc: "{\"\xff\":1}", key: "\ufffd", want: "{\"\xff\":\"new\"}", wantN: 1},
	{name: "invalid utf8 search key", doc: `{"\ufffd":1,"\ud800":2}`, key: "\xff", want: `{"\ufffd":1,"\ud800":2}`},
	{name: "unicode key", doc: `{"modèle":"a","模型":"b"}`, key: "模型", want: `{"modèle":"a","模型":"new"}`, wantN: 1},
	{name: "unicode value kept", doc: `{"s":"h\u00e9 \"é\" 😀","model":"a"}`, want: `{"s":"h\u00e9 \"é\" 😀","model":"new"}`, wantN: 1},
	{name: "duplicates all replaced", doc: `{"model":"a","x":1,"model":"b"}`, want: `{"model":"new","x":1,"model":"new"}`, wantN: 2},
	{name: "escaped duplicate replaced", doc: `{"model":"a","m\u006fdel":"b"}`, want: `{"model":"new","m\u006fdel":"new"}`, wantN: 2},
	{
		name:  "nested model keys untouched",
		doc:   `{"messages":[{"model":"x","content":{"model":"y"}}],"meta":{"model":"z"},"model":"a"}`,
		want:  `{"messages":[{"model":"x","content":{"model":"y"}}],"meta":{"model":"z"},"model":"new"}`,
		wantN: 1,
	},
	{name: "model inside string value", doc: `{"x":"\"model\":\"a\"","model":1}`, want: `{"x":"\"model\":\"a\"","model":"new"}`, wantN: 1},
	{name: "model as value", doc: `{"x":"model"}`, want: `{"x":"model"}`},
	{name: "absent", doc: `{"x":1}`, want: `{"x":1}`},
	{name: "case sensitive", doc: `{"Model":"a","MODEL":"b"}`, want: `{"Model":"a","MODEL":"b"}`},
	{name: "prefixes", doc: `{"models":1,"mode":2,"model_":3}`, want: `{"models":1,"mode":2,"model_":3}`},
	{name: "empty object", doc: `{}`, want: `{}`},
	{name: "empty object spaces", doc: " { \n } ", want: " { \n } "},
	{name: "object value", doc: `{"model":{"a":[1,{"b":[]}]},"y":2}`, want: `{"model":"new","y":2}`, wantN: 1},
	{name: "array value", doc: `{"model":[],"y":2}`, want: `{"model":"new","y":2}`, wantN: 1},
	{name: "number values", doc: `{"a":-0.5e+10,"model":0,"b":1E-3}`, want: `{"a":-0.5e+10,"model":"new","b":1E-3}`, wantN: 1},
	{name: "literal values", doc: `{"a":true,"model":null,"b":false}`, want: `{"a":true,"model":"new","b":false}`, wantN: 1},
	{name: "longer value", doc: `{"model":1}`, value: `{"deep":["x",true]}`, want: `{"model":{"deep":["x",true]}}`, wantN: 1},
	{name: "shorter value", doc: `{"model":"a-very-long-model-name"}`, value: `1`, want: `{"model":1}`, wantN: 1},
	{name: "value with spaces", doc: `{"model":1}`, value: ` "x" `, want: `{"model": "x" }`, wantN: 1},
	{name: "empty key", doc: `{"":1,"a":2}`, key: "", want: `{"":1,"a":2}`}, // "" means "model" in these cases

	{name: "top-level array", doc: `[{"model":"a"}]`, wantErr: "not-object"},
	{name: "top-level string", doc: `"model"`, wantErr: "not-object"},
	{name: "top-level number", doc: ` 1`, wantErr: "not-object"},
	{name: "top-level null", doc: `null`, wantErr: "not-object"},
	{name: "empty input", doc: ``, wantErr: "syntax"},
	{name: "only whitespace", doc: " \n\t", wantErr: "syntax"},
	{name: "byte order mark", doc: "\ufeff{}", wantErr: "syntax"},
	{name: "garbage", doc: `model`, wantErr: "syntax"},
	{name: "truncated after value", doc: `{"model":"a"`, wantErr: "syntax"},
	{name: "truncated after colon", doc: `{"model":`, wantErr: "syntax"},
	{name: "truncated after key", doc: `{"model"`, wantErr: "syntax"},
	{name: "truncated in key", doc: `{"mod`, wantErr: "syntax"},
	{name: "truncated in escape", doc: `{"a":"\u00`, wantErr: "syntax"},
	{name: "truncated open", doc: `{`, wantErr: "syntax"},
	{name: "truncated after comma", doc: `{"a":1,`, wantErr: "syntax"},
	{name: "truncated nested", doc: `{"a":[{"b":1}`, wantErr: "syntax"},
	{name: "truncated literal", doc: `{"a":tr`, wantErr: "syntax"},
	{name: "truncated number", doc: `{"a":-`, wantErr: "syntax"},
	{name: "mismatched brackets", doc: `{"a":[1,2}}`, wantErr: "syntax"},
	{name: "bad literal", doc: `{"a":tru}`, wantErr: "syntax"},
	{name: "literal suffix", doc: `{"a":truex}`, wantErr: "syntax"},
	{name: "leading zero", doc: `{"a":01}`, wantErr: "syntax"},
	{name: "bare fraction", doc: `{"a":1.}`, wantErr: "syntax"},
	{name: "bare exponent", doc: `{"a":1e}`, wantErr: "syntax"},
	{name: "plus sign", doc: `{"a":+1}`, wantErr: "syntax"},
	{name: "control character", doc: "{\"a\":\"\x01\"}", wantErr: "syntax"},
	{name: "raw newline in string", doc: "{\"a\":\"x\ny\"}", wantErr: "syntax"},
	{name: "bad escape", doc: `{"a":"\q"}`, wantErr: "syntax"},
	{name: "bad unicode escape", doc: `{"a":"\u12g4"}`, wantErr: "syntax"},
	{name: "bad escape in key", doc: `{"mod\el":1}`, wantErr: "syntax"},
	{name: "trailing comma", doc: `{"a":1,}`, wantErr: "syntax"},
	{name: "trailing comma nested", doc: `{"a":[1,]}`, wantErr: "syntax"},
	{name: "leading comma", doc: `{,"a":1}`, wantErr: "syntax"},
	{name: "missing colon", doc: `{"a" 1}`, wantErr: "syntax"},
	{name: "missing comma", doc: `{"a":1 "model":2}`, wantErr: "syntax"},
	{name: "single quotes", doc: `{'model':1}`, wantErr: "syntax"},
	{name: "unquoted key", doc: `{model:1}`, wantErr: "syntax"},
	{name: "non-string key nested", doc: `{"a":{1:2}}`, wantErr: "syntax"},
	{name: "trailing garbage", doc: `{"model":1}x`, wantErr: "syntax"},
	{name: "second object", doc: `{"model":1}{}`, wantErr: "syntax"},
	{name: "extra brace", doc: `{"model":1}}`, wantErr: "syntax"},
	{name: "nul after object", doc: "{}\x00", wantErr: "syntax"},
	{name: "invalid value", doc: `{"model":1}`, value: `"unterminated`, wantErr: "invalid-value"},
	{name: "two values", doc: `{"model":1}`, value: `1 2`, wantErr: "invalid-value"},
	{name: "blank value", doc: `{"model":1}`, value: ` `, wantErr: "invalid-value"},
}

func TestReplace(t *testing.T) {
	for _, tc := range replaceCases {
		t.Run(tc.name, func(t *testing.T) {
			doc, key, value := tc.args()
			orig := bytes.Clone(doc)
			got, n, err := jsonedit.Replace(doc, key, value)
			if diff := cmp.Diff(errKind(err), tc.wantErr); diff != "" {
				t.Fatalf("Replace error kind (-got +want):\n%s\nerr: %v", diff, err)
			}
			if diff := cmp.Diff(string(got), tc.want); diff != "" {
				t.Errorf("Replace output (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(n, tc.wantN); diff != "" {
				t.Errorf("Replace count (-got +want):\n%s", diff)
			}
			if !bytes.Equal(doc, orig) {
				t.Errorf("Replace modified its input: %q", doc)
			}
			if err == nil && len(got) > 0 && &got[0] == &doc[0] {
				t.Errorf("Replace returned its input, want a new slice")
			}
			if err == nil && cap(got) != len(got) {
				t.Errorf("Replace output cap %d, len %d: want an exactly sized slice", cap(got), len(got))
			}
			// Our validation and encoding/json's must agree on every case.
			if valid := json.Valid(doc); tc.wantErr == "" && !valid || tc.wantErr == "syntax" && valid {
				t.Errorf("json.Valid(doc) = %v, disagrees with error kind %q", valid, tc.wantErr)
			}
		})
	}
}

func TestSyntaxErrorOffset(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want int
	}{
		{name: "bad literal", doc: `{"a":tru}`, want: 8},
		{name: "end of input", doc: `{"a":`, want: 5},
		{name: "trailing garbage", doc: `{} x`, want: 3},
		{name: "nested", doc: `{"a":[1,{"b":2,}]}`, want: 15},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := jsonedit.Replace([]byte(tc.doc), "model", []byte(`1`))
			var se *jsonedit.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Replace error = %v, want a *SyntaxError", err)
			}
			if diff := cmp.Diff(se.Offset, tc.want); diff != "" {
				t.Errorf("Offset (-got +want):\n%s", diff)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		key     string
		want    string
		wantOK  bool
		wantErr string
	}{
		{name: "string", doc: `{"model":"gpt-4o"}`, key: "model", want: `"gpt-4o"`, wantOK: true},
		{name: "raw escapes kept", doc: `{"model":"gpt\u002d4o"}`, key: "model", want: `"gpt\u002d4o"`, wantOK: true},
		{name: "whitespace excluded", doc: "{ \"model\" :\n \"a\" \n}", key: "model", want: `"a"`, wantOK: true},
		{name: "object", doc: `{"stream_options":{"include_usage":true},"x":1}`, key: "stream_options", want: `{"include_usage":true}`, wantOK: true},
		{name: "last duplicate wins", doc: `{"model":"a","model":"b"}`, key: "model", want: `"b"`, wantOK: true},
		{name: "last escaped duplicate wins", doc: `{"model":"a","\u006dodel":"b","x":1}`, key: "model", want: `"b"`, wantOK: true},
		{name: "nested ignored", doc: `{"m":{"model":"a"}}`, key: "model"},
		{name: "empty object", doc: `{}`, key: "model"},
		{name: "empty key", doc: `{"":7}`, key: "", want: `7`, wantOK: true},
		{name: "not object", doc: `[]`, key: "model", wantErr: "not-object"},
		{name: "malformed after match", doc: `{"model":"a",}`, key: "model", wantErr: "syntax"},
		{name: "trailing garbage", doc: `{"model":"a"} 1`, key: "model", wantErr: "syntax"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := jsonedit.Lookup([]byte(tc.doc), tc.key)
			if diff := cmp.Diff(errKind(err), tc.wantErr); diff != "" {
				t.Fatalf("Lookup error kind (-got +want):\n%s\nerr: %v", diff, err)
			}
			if diff := cmp.Diff(string(got), tc.want); diff != "" {
				t.Errorf("Lookup raw (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(ok, tc.wantOK); diff != "" {
				t.Errorf("Lookup ok (-got +want):\n%s", diff)
			}
		})
	}
}

func TestInsert(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		key     string
		value   string
		want    string
		wantErr string
	}{
		{name: "empty object", doc: `{}`, key: "k", value: `1`, want: `{"k":1}`},
		{name: "empty object spaces", doc: "{ \n}", key: "k", value: `1`, want: "{\"k\":1 \n}"},
		{name: "after last member", doc: `{"a":1}`, key: "k", value: `{"include_usage":true}`, want: `{"a":1,"k":{"include_usage":true}}`},
		{name: "whitespace after last member kept", doc: " {\"a\":[1] \n}\n", key: "k", value: `true`, want: " {\"a\":[1],\"k\":true \n}\n"},
		{name: "key quoted", doc: `{}`, key: "a\"b\\c\nd\x01é", value: `0`, want: `{"a\"b\\c\u000ad\u0001é":0}`},
		{name: "invalid utf8 key", doc: `{}`, key: "a\xffb", value: `0`, wantErr: "invalid-key"},
		{name: "long key", doc: `{}`, key: strings.Repeat("k", 100), value: `0`, want: `{"` + strings.Repeat("k", 100) + `":0}`},
		{name: "key exists", doc: `{"k":1}`, key: "k", value: `2`, wantErr: "key-exists"},
		{name: "escaped key exists", doc: `{"a":0,"\u006b":1}`, key: "k", value: `2`, wantErr: "key-exists"},
		{name: "nested key does not count", doc: `{"a":{"k":1}}`, key: "k", value: `2`, want: `{"a":{"k":1},"k":2}`},
		{name: "not object", doc: `[]`, key: "k", value: `1`, wantErr: "not-object"},
		{name: "malformed", doc: `{"a":1`, key: "k", value: `1`, wantErr: "syntax"},
		{name: "trailing garbage", doc: `{}]`, key: "k", value: `1`, wantErr: "syntax"},
		{name: "invalid value", doc: `{}`, key: "k", value: `{`, wantErr: "invalid-value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := []byte(tc.doc)
			got, err := jsonedit.Insert(doc, tc.key, []byte(tc.value))
			if diff := cmp.Diff(errKind(err), tc.wantErr); diff != "" {
				t.Fatalf("Insert error kind (-got +want):\n%s\nerr: %v", diff, err)
			}
			if diff := cmp.Diff(string(got), tc.want); diff != "" {
				t.Errorf("Insert output (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(string(doc), tc.doc); diff != "" {
				t.Errorf("Insert modified its input (-got +want):\n%s", diff)
			}
			if err != nil {
				return
			}
			if cap(got) != len(got) {
				t.Errorf("Insert output cap %d, len %d: want an exactly sized slice", cap(got), len(got))
			}
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatalf("Insert output is not valid JSON: %v", err)
			}
			if _, ok := m[tc.key]; !ok {
				t.Errorf("Insert output has no key %q: %s", tc.key, got)
			}
		})
	}
}

// TestNestingLimit pins the depth bound to encoding/json's: both accept the
// deepest document the other accepts, and both reject one level more.
func TestNestingLimit(t *testing.T) {
	nested := func(depth int) []byte { // a top-level object holding depth-1 arrays
		return []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
	}
	for _, tc := range []struct {
		depth   int
		wantErr string
	}{
		{depth: 10000, wantErr: ""},
		{depth: 10001, wantErr: "syntax"},
	} {
		t.Run(fmt.Sprint(tc.depth), func(t *testing.T) {
			doc := nested(tc.depth)
			_, _, err := jsonedit.Replace(doc, "model", []byte(`1`))
			if diff := cmp.Diff(errKind(err), tc.wantErr); diff != "" {
				t.Errorf("Replace error kind (-got +want):\n%s\nerr: %v", diff, err)
			}
			if got, want := json.Valid(doc), tc.wantErr == ""; got != want {
				t.Errorf("json.Valid = %v, want %v: the limits disagree", got, want)
			}
		})
	}
	// A replacement value is nested one level below the top-level object.
	deep := []byte(strings.Repeat("[", 9999) + strings.Repeat("]", 9999))
	if _, _, err := jsonedit.Replace([]byte(`{"model":1}`), "model", deep); err != nil {
		t.Errorf("Replace with a value 9999 deep: %v", err)
	}
	deeper := []byte("[" + string(deep) + "]")
	if _, _, err := jsonedit.Replace([]byte(`{"model":1}`), "model", deeper); !errors.Is(err, jsonedit.ErrInvalidValue) {
		t.Errorf("Replace with a value 10000 deep: error %v, want ErrInvalidValue", err)
	}
}

// TestReplaceProperty checks, over random documents, that decoding the
// output with encoding/json yields the input's members with only key changed.
func TestReplaceProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	value := []byte(`{"replaced":["x",1]}`)
	var wantValue any
	if err := json.Unmarshal(value, &wantValue); err != nil {
		t.Fatal(err)
	}
	replaced := 0
	for i := range 2000 {
		doc := randObject(rng, 0)
		out, n, err := jsonedit.Replace(doc, "model", value)
		if err != nil {
			t.Fatalf("doc %d: Replace(%s): %v", i, doc, err)
		}
		var in, got map[string]any
		if err := json.Unmarshal(doc, &in); err != nil {
			t.Fatalf("doc %d: generator made invalid JSON %s: %v", i, doc, err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("doc %d: output is not valid JSON %s: %v", i, out, err)
		}
		_, had := in["model"]
		if diff := cmp.Diff(n > 0, had); diff != "" {
			t.Fatalf("doc %d: replaced anything (-got +want):\n%s\ndoc: %s", i, diff, doc)
		}
		if had {
			replaced++
			if diff := cmp.Diff(got["model"], wantValue); diff != "" {
				t.Fatalf("doc %d: model (-got +want):\n%s", i, diff)
			}
			in["model"] = wantValue
		}
		if diff := cmp.Diff(got, in); diff != "" {
			t.Fatalf("doc %d: members (-got +want):\n%s\ndoc: %s\nout: %s", i, diff, doc, out)
		}
		raw, ok, err := jsonedit.Lookup(out, "model")
		if err != nil || ok != had || (had && !bytes.Equal(raw, value)) {
			t.Fatalf("doc %d: Lookup after Replace = %s, %v, %v", i, raw, ok, err)
		}
	}
	if replaced < 500 {
		t.Fatalf("only %d of 2000 random documents had a model key; the generator is too weak", replaced)
	}
}

// randObject returns a random JSON object with random whitespace, escaped
// and duplicate keys, and nested "model" keys.
func randObject(rng *rand.Rand, depth int) []byte {
	keys := []string{`"model"`, `"mod\u0065l"`, `"messages"`, `"model "`, `"stream"`, `"\ud83d\ude00"`, `"x"`, `""`}
	var b bytes.Buffer
	b.WriteString(randSpace(rng))
	b.WriteByte('{')
	for i := range rng.IntN(5) {
		if i > 0 {
			b.WriteString(randSpace(rng) + ",")
		}
		b.WriteString(randSpace(rng) + keys[rng.IntN(len(keys))] + randSpace(rng) + ":" + randSpace(rng))
		b.Write(randValue(rng, depth+1))
	}
	b.WriteString(randSpace(rng) + "}" + randSpace(rng))
	return b.Bytes()
}

func randValue(rng *rand.Rand, depth int) []byte {
	scalars := []string{`"gpt-4o"`, `"a\"b\\c\n\u00e9\ud83d\ude00"`, `0`, `-1.5e+3`, `true`, `false`, `null`, `"model"`, `"é"`}
	switch k := rng.IntN(10); {
	case k < 6 || depth > 3:
		return []byte(scalars[rng.IntN(len(scalars))])
	case k < 8:
		return randObject(rng, depth)
	default:
		var b bytes.Buffer
		b.WriteByte('[')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(randSpace(rng))
			b.Write(randValue(rng, depth+1))
		}
		b.WriteString(randSpace(rng) + "]")
		return b.Bytes()
	}
}

func randSpace(rng *rand.Rand) string {
	return []string{"", "", "", " ", "\n  ", "\t", "\r\n"}[rng.IntN(7)]
}

func TestAllocs(t *testing.T) {
	doc := []byte(smallBody)
	value := []byte(`"gpt-4o-mini-2024-07-18"`)
	if got := testing.AllocsPerRun(100, func() {
		if _, _, err := jsonedit.Replace(doc, "model", value); err != nil {
			t.Fatal(err)
		}
	}); got != 1 {
		t.Errorf("Replace allocations = %v, want 1 (the output)", got)
	}
	if got := testing.AllocsPerRun(100, func() {
		if _, _, err := jsonedit.Lookup(doc, "model"); err != nil {
			t.Fatal(err)
		}
	}); got != 0 {
		t.Errorf("Lookup allocations = %v, want 0", got)
	}
	if got := testing.AllocsPerRun(100, func() {
		if _, err := jsonedit.Insert(doc, "n", []byte(`2`)); err != nil {
			t.Fatal(err)
		}
	}); got != 1 {
		t.Errorf("Insert allocations = %v, want 1 (the output)", got)
	}
}
