package jsonedit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/jsonedit"
)

type kv struct{ Key, Value string }

// collect runs the iterator to the end.
func collect(doc []byte) ([]kv, error) {
	it, err := jsonedit.Members(doc)
	if err != nil {
		return nil, err
	}
	var got []kv
	for {
		m, ok, err := it.Next()
		if err != nil {
			return got, err
		}
		if !ok {
			return got, nil
		}
		got = append(got, kv{string(m.RawKey), string(m.Value)})
	}
}

func TestMembers(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    []kv
		wantErr string
	}{
		{name: "empty", doc: ` { } `},
		{name: "in order with duplicates", doc: "{\"b\":1, \"a\" :\n[1, {}],\"b\":\"x\"}", want: []kv{{"b", "1"}, {"a", "[1, {}]"}, {"b", `"x"`}}},
		{name: "raw key", doc: `{"mod\u0065l":null}`, want: []kv{{`mod\u0065l`, "null"}}},
		{name: "not object", doc: `[]`, wantErr: "not-object"},
		{name: "empty doc", doc: ``, wantErr: "syntax"},
		{name: "error after members", doc: `{"a":1,"b":}`, want: []kv{{"a", "1"}}, wantErr: "syntax"},
		{name: "trailing garbage", doc: `{"a":1} {}`, want: []kv{{"a", "1"}}, wantErr: "syntax"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collect([]byte(tc.doc))
			if diff := cmp.Diff(errKind(err), tc.wantErr); diff != "" {
				t.Fatalf("error kind (-got +want):\n%s\nerr: %v", diff, err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("members (-got +want):\n%s", diff)
			}
		})
	}
}

func TestKeyFold(t *testing.T) {
	tests := []struct {
		key, name string
		want      bool
	}{
		{`stream`, "stream", true},
		{`Stream`, "stream", true},
		{`STREAM`, "stream", true},
		{`stream`, "STREAM", true},
		{`\u0053tream`, "stream", true},
		{`ſtream`, "stream", true}, // U+017F LATIN SMALL LETTER LONG S
		{`\u017ftream`, "stream", true},
		{`Kelvin`, "kelvin", true},   // U+212A KELVIN SIGN
		{`straße`, "STRASSE", false}, // simple folding only, as encoding/json
		{`Σσς`, "σσσ", true},
		{`stream `, "stream", false},
		{`strea`, "stream", false},
		{`stream_`, "stream", false},
		{`response_format`, "response_format", true},
		{`RESPONSE_FORMAT`, "response_format", true},
		{`response-format`, "response_format", false},
		{`@`, "`", false}, // not letters: no folding
		{"\xff", "\ufffd", true},
		{`\ud800`, "\ufffd", true},
		{`\ud800`, "\xff", true},
		{``, "", true},
	}
	for _, tc := range tests {
		doc := []byte(`{"` + tc.key + `":0}`)
		it, err := jsonedit.Members(doc)
		if err != nil {
			t.Fatalf("Members(%q): %v", doc, err)
		}
		m, _, err := it.Next()
		if err != nil {
			t.Fatalf("Next(%q): %v", doc, err)
		}
		if got := m.KeyFold(tc.name); got != tc.want {
			t.Errorf("key %q KeyFold(%q) = %v, want %v", tc.key, tc.name, got, tc.want)
		}
		if want, ok := structMatches(doc, tc.name); ok && want != tc.want {
			t.Errorf("key %q name %q: encoding/json says %v, the table %v", tc.key, tc.name, want, tc.want)
		}
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		raw    string
		want   string
		wantOK bool
	}{
		{`"gpt-4o"`, "gpt-4o", true},
		{`""`, "", true},
		{`"a\"b\\c\/\b\f\n\r\t"`, "a\"b\\c/\b\f\n\r\t", true},
		{`"\u00e9\ud83d\ude00"`, "é😀", true},
		{`"\ud800x"`, "\ufffdx", true},
		{`"\ud800\u0041"`, "\ufffdA", true},
		{"\"a\xffb\"", "a\ufffdb", true},
		{`"\u0000"`, "\x00", true},
		{`"a`, "", false},
		{`"a"x`, "", false},
		{`"a""b"`, "", false},
		{"\"a\x01\"", "", false},
		{`"\x"`, "", false},
		{`1`, "", false},
		{``, "", false},
	}
	for _, tc := range tests {
		got, ok := jsonedit.Unquote([]byte(tc.raw))
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("Unquote(%q) = %q, %v; want %q, %v", tc.raw, got, ok, tc.want, tc.wantOK)
		}
		if eq := jsonedit.EqualString([]byte(tc.raw), tc.want); eq != tc.wantOK {
			t.Errorf("EqualString(%q, %q) = %v, want %v", tc.raw, tc.want, eq, tc.wantOK)
		}
		var s string
		if err := json.Unmarshal([]byte(tc.raw), &s); (err == nil) != tc.wantOK || s != tc.want {
			t.Errorf("encoding/json disagrees on %q: %q, %v", tc.raw, s, err)
		}
	}
}

// structMatches reports whether encoding/json, decoding doc into a struct
// with one field named name, sets the field. ok is false when name is not a
// usable struct tag name, or doc is not a one-member object.
func structMatches(doc []byte, name string) (match, ok bool) {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", r)
	}) {
		return false, false
	}
	typ := reflect.StructOf([]reflect.StructField{{
		Name: "F", Type: reflect.TypeFor[json.RawMessage](), Tag: reflect.StructTag(`json:"` + name + `"`),
	}})
	v := reflect.New(typ)
	if err := json.Unmarshal(doc, v.Interface()); err != nil {
		return false, false
	}
	return v.Elem().Field(0).Len() > 0, true
}

// FuzzMembers checks the iterator against encoding/json: the same members
// in the same order for every document encoding/json accepts as an object,
// an error for every other; KeyIs as map keys match, KeyFold as struct
// fields match, and Unquote and EqualString as a string decodes.
func FuzzMembers(f *testing.F) {
	for _, tc := range replaceCases {
		doc, key, _ := tc.args()
		f.Add(doc, key)
	}
	for _, s := range []string{"stream", "STREAM", "kelvin", "σσσ", "type", ""} {
		f.Add([]byte(`{"ſtream":"a\ud800","Kelvin":"\u017f","ΣΣΣ":[{"x":1}],"type":null,"\ud83d\ude00":"é"}`), s)
	}
	f.Fuzz(func(t *testing.T, doc []byte, name string) {
		got, err := collect(doc)
		if !json.Valid(doc) || !bytes.HasPrefix(bytes.TrimLeft(doc, " \t\r\n"), []byte("{")) {
			if err == nil {
				t.Fatalf("iterated %q, which encoding/json rejects as an object", doc)
			}
			return
		}
		if err != nil {
			t.Fatalf("Members(%q): %v", doc, err)
		}
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.Token() // '{'
		var keys []string
		var want []kv
		for i := 0; dec.More(); i++ {
			tok, err := dec.Token()
			if err != nil {
				t.Fatalf("decoder: key of a valid document: %v", err)
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatalf("decoder: value of a valid document: %v", err)
			}
			keys = append(keys, tok.(string))
			if i < len(got) {
				want = append(want, kv{got[i].Key, string(raw)}) // keys are compared below
			}
		}
		if len(got) != len(keys) {
			t.Fatalf("iterated %d members, encoding/json %d", len(got), len(keys))
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Fatalf("member values (-got +want):\n%s", diff)
		}

		it, _ := jsonedit.Members(doc)
		for i := 0; ; i++ {
			m, ok, err := it.Next()
			if err != nil || !ok {
				break
			}
			if !m.KeyIs(keys[i]) || m.KeyIs(name) != (keys[i] == name) {
				t.Fatalf("member %d key %q: KeyIs(%q) = %v, KeyIs(%q) = %v", i, keys[i], keys[i], m.KeyIs(keys[i]), name, m.KeyIs(name))
			}
			one := []byte(`{"` + string(m.RawKey) + `":0}`)
			if want, ok := structMatches(one, name); ok && m.KeyFold(name) != want {
				t.Fatalf("key %q: KeyFold(%q) = %v, encoding/json struct match %v", m.RawKey, name, !want, want)
			}
			if !m.KeyFold(keys[i]) {
				t.Fatalf("key %q does not fold-match its own decoding", m.RawKey)
			}
			var s string
			serr := json.Unmarshal(m.Value, &s)
			u, ok := jsonedit.Unquote(m.Value)
			if ok != (serr == nil && m.Value[0] == '"') || u != s {
				t.Fatalf("Unquote(%q) = %q, %v; encoding/json %q, %v", m.Value, u, ok, s, serr)
			}
			if ok && jsonedit.EqualString(m.Value, name) != (s == name) {
				t.Fatalf("EqualString(%q, %q) = %v, decoded %q", m.Value, name, !(s == name), s)
			}
		}
	})
}

func TestIterAllocs(t *testing.T) {
	doc := []byte(smallBody)
	if got := testing.AllocsPerRun(100, func() {
		it, err := jsonedit.Members(doc)
		if err != nil {
			t.Fatal(err)
		}
		for {
			m, ok, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if m.KeyFold("stream") && !jsonedit.EqualString([]byte(`"x"`), "x") {
				t.Fatal("EqualString")
			}
		}
	}); got != 0 {
		t.Errorf("iteration allocations = %v, want 0", got)
	}
}

func TestKeyLike(t *testing.T) {
	tests := []struct {
		key, name string
		want      bool
	}{
		{`stream`, "stream", true},
		{`Stream`, "stream", true},       // KeyFold's folding
		{`stream\u0000`, "stream", true}, // a C string ends at the NUL
		{`stream\u0000x`, "stream", true},
		{`strea\u0000m`, "stream", false},
		{`\u0000stream`, "stream", false},
		{`funct\u0131ons`, "functions", true}, // U+0131 LATIN SMALL LETTER DOTLESS I
		{`funct\u0130ons`, "functions", true}, // U+0130 LATIN CAPITAL LETTER I WITH DOT ABOVE
		{`functıons`, "functions", true},
		{`funct\u0131ons\u0000`, "functions", true},
		{`streams`, "stream", false},
		{`strea`, "stream", false},
		{`tools`, "stream", false},
	}
	for _, tc := range tests {
		doc := []byte(`{"` + tc.key + `":0}`)
		it, err := jsonedit.Members(doc)
		if err != nil {
			t.Fatalf("Members(%q): %v", doc, err)
		}
		m, _, err := it.Next()
		if err != nil {
			t.Fatalf("Next(%q): %v", doc, err)
		}
		if got := m.KeyLike(tc.name); got != tc.want {
			t.Errorf("KeyLike(%q, %q) = %v, want %v", tc.key, tc.name, got, tc.want)
		}
	}
}

// TestKeyIsLengths: KeyIs as encoding/json matches map keys, for keys
// shorter, as long as and longer than the raw key, with and without
// escapes and invalid UTF-8 (which reads as U+FFFD, three bytes for one).
func TestKeyIsLengths(t *testing.T) {
	for _, raw := range []string{`model`, `mod\u0065l`, "a\xffb", "a\xff\xfeb", "a\uFFFDb", "é", ""} {
		doc := []byte(`{"` + raw + `":0}`)
		var m map[string]int
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatalf("encoding/json: %q: %v", doc, err)
		}
		var decoded string
		for k := range m {
			decoded = k
		}
		it, err := jsonedit.Members(doc)
		if err != nil {
			t.Fatal(err)
		}
		mem, ok, err := it.Next()
		if err != nil || !ok {
			t.Fatalf("Members(%q): %v, %v", doc, ok, err)
		}
		for _, key := range []string{decoded, "model", "mode", "models", "a\xffb", "a\uFFFDb", "a\uFFFD\uFFFDb", "ab", "é", ""} {
			if got, want := mem.KeyIs(key), key == decoded; got != want {
				t.Errorf("key %q (decodes to %q): KeyIs(%q) = %v, want %v", raw, decoded, key, got, want)
			}
		}
	}
}

// walkNested lists every member of doc at every depth of nested objects,
// as depth, key and value, entering each object value with Object and
// Leave (one pass).
func walkNested(it *jsonedit.Iter, depth int, out *[]string) error {
	for {
		m, ok, err := it.NextKey()
		if err != nil || !ok {
			return err
		}
		var v []byte
		if child, ok := it.Object(); ok {
			if err := walkNested(&child, depth+1, out); err != nil {
				return err
			}
			if v, err = it.Leave(&child); err != nil {
				return err
			}
		} else if v, err = it.Value(); err != nil {
			return err
		}
		*out = append(*out, fmt.Sprintf("%d %q=%s@%d", depth, m.RawKey, v, m.At))
	}
}

// walkTwice lists what walkNested lists, reading each object value again
// with Members after Next has read it whole (the definition).
func walkTwice(doc []byte, base, depth int, out *[]string) error {
	it, err := jsonedit.Members(doc)
	if err != nil {
		return err
	}
	for {
		m, ok, err := it.Next()
		if err != nil || !ok {
			return err
		}
		if len(m.Value) > 0 && m.Value[0] == '{' {
			if err := walkTwice(m.Value, base+m.At, depth+1, out); err != nil {
				return err
			}
		}
		*out = append(*out, fmt.Sprintf("%d %q=%s@%d", depth, m.RawKey, m.Value, base+m.At))
	}
}

func FuzzNextKeyObject(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":{}}`, `{"a":{"b":1,"c":{"d":[{"e":2}]}},"f":"x"}`,
		`{"a":{"b":1,}}`, `{"a":{"b":1}} x`, `{"a":{"b":1}`, `{"a":{"b" 1}}`,
		` { "a" : { "b" : { } } , "c" : null } `, `{"a":[}`, `[1]`, `{"a":{"b":1}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var got, want []string
		it, err := jsonedit.Members(doc)
		if err == nil {
			err = walkNested(&it, 0, &got)
		}
		wantErr := walkTwice(doc, 0, 0, &want)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: one pass says %v, Next and Members say %v", doc, err, wantErr)
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%q: one pass differs from Next and Members (-want +got):\n%s", doc, diff)
		}
		// Seek finds what Next finds with KeyIs, values read or not.
		for _, key := range []string{"a", "b"} {
			var sought, nexted []string
			it, err := jsonedit.Members(doc)
			for i := 0; err == nil; i++ {
				var ok bool
				if ok, err = it.Seek(key); err != nil || !ok {
					break
				}
				if i%2 == 0 { // every other value is left for Seek to skip
					var v []byte
					v, err = it.Value()
					sought = append(sought, string(v))
				}
			}
			it2, err2 := jsonedit.Members(doc)
			for i := 0; err2 == nil; {
				m, ok, err := it2.Next()
				if err2 = err; err != nil || !ok {
					break
				}
				if m.KeyIs(key) {
					if i%2 == 0 {
						nexted = append(nexted, string(m.Value))
					}
					i++
				}
			}
			if (err != nil) != (err2 != nil) || (err == nil && !slices.Equal(sought, nexted)) {
				t.Fatalf("%q: Seek(%q) finds %q (%v), Next finds %q (%v)", doc, key, sought, err, nexted, err2)
			}
		}
		// Value without a member from NextKey is a caller bug.
		if _, err := it.Value(); err == nil {
			t.Fatalf("%q: Value after the end succeeded", doc)
		}
	})
}
