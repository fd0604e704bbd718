package jsonedit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/jsonedit"
)

// oracleSpans finds the value of every top-level member named key with
// encoding/json's decoder, independently of this package's scanner. ok is
// false when encoding/json does not accept doc as an object.
func oracleSpans(t *testing.T, doc []byte, key string) (spans [][2]int, insertAt int, ok bool) {
	t.Helper()
	if !json.Valid(doc) {
		return nil, 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, 0, false
	}
	insertAt = int(dec.InputOffset())
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("decoder: key of a valid document: %v", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("decoder: value of a valid document: %v", err)
		}
		insertAt = int(dec.InputOffset())
		if tok.(string) == key {
			spans = append(spans, [2]int{insertAt - len(raw), insertAt})
		}
	}
	return spans, insertAt, true
}

// splice replaces each span of doc with value.
func splice(doc []byte, spans [][2]int, value []byte) []byte {
	var out []byte
	prev := 0
	for _, s := range spans {
		out = append(out, doc[prev:s[0]]...)
		out = append(out, value...)
		prev = s[1]
	}
	return append(out, doc[prev:]...)
}

func FuzzReplace(f *testing.F) {
	for _, tc := range replaceCases {
		doc, key, value := tc.args()
		f.Add(doc, key, value)
	}
	f.Add([]byte(smallBody), "model", []byte(`"x"`))
	f.Add([]byte(`{"a":[{"b":{"c":[[]]}}],"model":"\ud83d\ude00"}`), "model", []byte(`[{}]`))

	f.Fuzz(func(t *testing.T, doc []byte, key string, value []byte) {
		orig := bytes.Clone(doc)
		out, n, err := jsonedit.Replace(doc, key, value)
		if !bytes.Equal(doc, orig) {
			t.Fatalf("Replace modified its input")
		}
		// The value is checked as a member value, one level deep, and
		// must be one value: `null,"":0` makes a valid object too.
		valueOK := json.Valid(value) && json.Valid(slices.Concat([]byte(`{"k":`), value, []byte(`}`)))
		if !valueOK {
			if !errors.Is(err, jsonedit.ErrInvalidValue) {
				t.Fatalf("Replace with invalid value %q: error %v, want ErrInvalidValue", value, err)
			}
			return
		}

		spans, insertAt, isObject := oracleSpans(t, doc, key)
		if !isObject {
			if err == nil {
				t.Fatalf("Replace accepted %q, which encoding/json rejects as an object", doc)
			}
			// A valid non-object is ErrNotObject. An invalid document is a
			// *SyntaxError, except that one not starting with '{' may be
			// reported as ErrNotObject without being read further.
			var se *jsonedit.SyntaxError
			switch {
			case json.Valid(doc) && !errors.Is(err, jsonedit.ErrNotObject),
				!json.Valid(doc) && !errors.As(err, &se) && !errors.Is(err, jsonedit.ErrNotObject),
				!json.Valid(doc) && errors.Is(err, jsonedit.ErrNotObject) && bytes.HasPrefix(bytes.TrimLeft(doc, " \t\r\n"), []byte("{")):
				t.Fatalf("Replace(%q): error %v; json.Valid = %v", doc, err, json.Valid(doc))
			}
			return
		}
		if err != nil {
			t.Fatalf("Replace rejected a valid object %q: %v", doc, err)
		}
		// Every byte outside the replaced values is unchanged.
		if diff := cmp.Diff(string(out), string(splice(doc, spans, value))); diff != "" {
			t.Fatalf("Replace output (-got +want):\n%s", diff)
		}
		if n != len(spans) {
			t.Fatalf("Replace count = %d, encoding/json found %d", n, len(spans))
		}
		if !json.Valid(out) {
			t.Fatalf("Replace output is not valid JSON: %q", out)
		}

		raw, ok, err := jsonedit.Lookup(doc, key)
		if err != nil || ok != (n > 0) {
			t.Fatalf("Lookup = %q, %v, %v; want the member found iff n > 0 (n = %d)", raw, ok, err, n)
		}
		if ok {
			last := spans[len(spans)-1]
			if !bytes.Equal(raw, doc[last[0]:last[1]]) {
				t.Fatalf("Lookup = %q, want the last member's value %q", raw, doc[last[0]:last[1]])
			}
		}

		ins, err := jsonedit.Insert(doc, key, value)
		if !utf8.ValidString(key) {
			if !errors.Is(err, jsonedit.ErrInvalidKey) {
				t.Fatalf("Insert of key %q: error %v, want ErrInvalidKey", key, err)
			}
			return
		}
		if n > 0 {
			if !errors.Is(err, jsonedit.ErrKeyExists) {
				t.Fatalf("Insert of an existing key: error %v, want ErrKeyExists", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Insert into a valid object: %v", err)
		}
		if !bytes.HasPrefix(ins, doc[:insertAt]) || !bytes.HasSuffix(ins, doc[insertAt:]) {
			t.Fatalf("Insert changed bytes outside the new member: %q -> %q", doc, ins)
		}
		if spans, _, ok := oracleSpans(t, ins, key); !ok || len(spans) != 1 || !bytes.Equal(ins[spans[0][0]:spans[0][1]], bytes.TrimSpace(value)) {
			t.Fatalf("Insert output %q: want one member %q with the value", ins, key)
		}
	})
}
