package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
)

// inject is the old one-shot form of asking for stream usage, built from
// what Inspect does: scan stream and stream_options once, compute the
// AskUsage edit, apply it with Request.Rewrite. The cases below were
// written for it.
func inject(body []byte) (out []byte, injected bool, err error) {
	var v [2][]byte
	var at [2]int
	f := provider.Found{Vals: v[:], At: at[:]}
	berr, err := provider.Scan(body, "", injectNames, &f)
	switch {
	case err != nil:
		return nil, false, err
	case berr != nil:
		return nil, false, berr
	case string(v[0]) != "true":
		return body, false, nil
	}
	e, berr := askUsage(v[1], at[1], f.Tail)
	if berr != nil {
		return nil, false, berr
	}
	if e.Value == nil {
		return body, false, nil
	}
	r := provider.Request{AskUsage: e}
	return r.Rewrite(body, nil, nil, true), true, nil
}

var injectNames = provider.NewNames("stream", "stream_options")

var injectCases = []struct {
	name     string
	in       string
	want     string // "" = unchanged
	injected bool
}{
	{name: "not streaming", in: `{"model":"m","messages":[]}`},
	{name: "stream false", in: `{"model":"m","stream":false}`},
	{name: "stream null", in: `{"model":"m","stream":null}`},
	{name: "stream not a boolean", in: `{"model":"m","stream":"true"}`},
	{name: "stream only nested", in: `{"model":"m","metadata":{"stream":true}}`},
	{name: "empty object", in: `{}`},
	{
		name:     "no stream_options",
		in:       `{"model":"m","stream":true}`,
		want:     `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		injected: true,
	},
	{
		name:     "no stream_options, pretty-printed",
		in:       "{\n  \"stream\" : true ,\n  \"n\": 1.50e2\n}\n",
		want:     "{\n  \"stream\" : true ,\n  \"n\": 1.50e2,\"stream_options\":{\"include_usage\":true}\n}\n",
		injected: true,
	},
	{
		name:     "stream key spelled with an escape",
		in:       `{"stre\u0061m":true}`,
		want:     `{"stre\u0061m":true,"stream_options":{"include_usage":true}}`,
		injected: true,
	},
	{
		name:     "stream_options nested elsewhere is data",
		in:       `{"metadata":{"stream_options":null},"stream":true}`,
		want:     `{"metadata":{"stream_options":null},"stream":true,"stream_options":{"include_usage":true}}`,
		injected: true,
	},
	{
		name:     "stream_options null",
		in:       `{"stream":true,"stream_options":null,"user":"u"}`,
		want:     `{"stream":true,"stream_options":{"include_usage":true},"user":"u"}`,
		injected: true,
	},
	{
		name:     "stream_options empty",
		in:       `{"stream_options": { },"stream":true}`,
		want:     `{"stream_options": {"include_usage":true },"stream":true}`,
		injected: true,
	},
	{
		name:     "stream_options with another member",
		in:       `{"stream":true,"stream_options":{"include_obfuscation":false , "x":[1,{"include_usage":false}]},"z":"\u00e9"}`,
		want:     `{"stream":true,"stream_options":{"include_obfuscation":false , "x":[1,{"include_usage":false}],"include_usage":true},"z":"\u00e9"}`,
		injected: true,
	},
	{
		name:     "include_usage false",
		in:       `{"stream":true,"stream_options":{ "include_usage" : false, "a":1 }}`,
		want:     `{"stream":true,"stream_options":{ "include_usage" : true, "a":1 }}`,
		injected: true,
	},
	{
		name:     "include_usage null",
		in:       `{"stream":true,"stream_options":{"include_usage":null}}`,
		want:     `{"stream":true,"stream_options":{"include_usage":true}}`,
		injected: true,
	},
	{name: "include_usage true", in: `{"stream":true,"stream_options":{"include_usage":true}}`},
	{name: "include_usage true with spaces", in: `{"stream":true,"stream_options":{ "include_usage" :true }}`},
}

// TestAskUsageRefusesTwins: stream_options and include_usage decide
// whether the client sees usage, so a second one, or a twin in another
// letter case, is refused as every member the node reads is: a provider
// could read the other one.
func TestAskUsageRefusesTwins(t *testing.T) {
	for _, in := range []string{
		`{"model":"m","stream_options":{"include_usage":true},"stream":true,"stream_options":{"include_usage":false}}`,
		`{"model":"m","stream":true,"Stream_Options":{"include_usage":false}}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true,"include_usage":false}}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":false,"Include_Usage":true}}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage\u0000":true}}`,
	} {
		_, berr := inspectChat([]byte(in), "")
		if berr == nil || berr.Code != "ambiguous_member" {
			t.Errorf("inspectChat(%s) = %v, want an ambiguous_member refusal", in, berr)
		}
	}
}

// TestAskUsageRefusesOddTypes: a stream_options that is not an object or
// null, or an include_usage that is not a boolean or null, is a 400: a lax
// provider reads "include_usage":0 as false and sends no usage, so the
// node could not keep its promise to ask for it.
func TestAskUsageRefusesOddTypes(t *testing.T) {
	for _, in := range []string{
		`{"model":"m","stream":true,"stream_options":{"include_usage":"yes"}}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":0}}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":1}}`,
		`{"model":"m","stream":true,"stream_options":[]}`,
		`{"model":"m","stream":true,"stream_options":"include_usage"}`,
	} {
		_, berr := inspectChat([]byte(in), "")
		if berr == nil || berr.Code != "invalid_stream_options" {
			t.Errorf("inspectChat(%s) = %v, want an invalid_stream_options refusal", in, berr)
		}
	}
}

// TestRewriteIsOneCopy: an attempt's body is the client's with the model
// replaced and the usage edit applied, in one allocation.
func TestRewriteIsOneCopy(t *testing.T) {
	body := []byte(`{"model":"public","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	r, berr := inspectChat(body, "")
	if berr != nil {
		t.Fatal(berr)
	}
	model := []byte(`"gpt-4o-2024-08-06"`)
	want := `{"model":"gpt-4o-2024-08-06","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`
	if got := string(r.Rewrite(body, model, nil, true)); got != want {
		t.Errorf("Rewrite = %s, want %s", got, want)
	}
	if got, want := string(r.Rewrite(body, model, nil, false)), `{"model":"gpt-4o-2024-08-06","messages":[{"role":"user","content":"hi"}],"stream":true}`; got != want {
		t.Errorf("Rewrite without usage = %s, want %s", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { r.Rewrite(body, model, nil, true) }); n != 1 {
		t.Errorf("Rewrite: %v allocations, want 1", n)
	}
}

func TestInjectIncludeUsage(t *testing.T) {
	for _, tc := range injectCases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			out, injected, err := inject(in)
			if err != nil {
				t.Fatalf("inject: %v", err)
			}
			if string(in) != tc.in {
				t.Fatalf("InjectIncludeUsage modified its input")
			}
			want := tc.want
			if want == "" {
				want = tc.in
				if &out[0] != &in[0] {
					t.Errorf("an unchanged body must be returned as is, not copied")
				}
			}
			if diff := cmp.Diff(string(out), want); diff != "" {
				t.Errorf("body (-got +want):\n%s", diff)
			}
			if injected != tc.injected {
				t.Errorf("injected = %v, want %v", injected, tc.injected)
			}
			if !json.Valid(out) {
				t.Errorf("output is not valid JSON")
			}
		})
	}
}

func TestInjectIncludeUsageErrors(t *testing.T) {
	var se *jsonedit.SyntaxError
	for _, tc := range []struct {
		name  string
		in    string
		match func(error) bool
	}{
		{"malformed", `{"stream":true,`, func(err error) bool { return errors.As(err, &se) }},
		{"malformed after stream", `{"stream":true,"stream_options":{]}`, func(err error) bool { return errors.As(err, &se) }},
		{"not an object", `[{"stream":true}]`, func(err error) bool { return errors.Is(err, jsonedit.ErrNotObject) }},
		{"empty", ``, func(err error) bool { return errors.As(err, &se) || errors.Is(err, jsonedit.ErrNotObject) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, injected, err := inject([]byte(tc.in))
			if !tc.match(err) || out != nil || injected {
				t.Fatalf("InjectIncludeUsage = %q, %v, %v; want nil, false and a jsonedit error", out, injected, err)
			}
		})
	}
}

// members lists the top-level members of a valid JSON object in order,
// with the exact bytes of each value, using encoding/json as an
// independent parser.
func members(t *testing.T, doc []byte) (keys []string, vals [][]byte, spans [][2]int, ok bool) {
	t.Helper()
	if !json.Valid(doc) {
		return nil, nil, nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("decoder: key of a valid document: %v", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("decoder: value of a valid document: %v", err)
		}
		end := int(dec.InputOffset())
		keys = append(keys, tok.(string))
		vals = append(vals, raw)
		spans = append(spans, [2]int{end - len(raw), end})
	}
	return keys, vals, spans, true
}

func FuzzInjectIncludeUsage(f *testing.F) {
	for _, tc := range injectCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi \"stream_options\""}],"stream":true,"temperature":0.7}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		out, injected, err := inject(body)
		if !bytes.Equal(body, orig) {
			t.Fatal("InjectIncludeUsage modified its input")
		}
		inKeys, inVals, inSpans, isObject := members(t, body)
		if !isObject {
			if err == nil && injected {
				t.Fatalf("injected into %q, which is not a JSON object", body)
			}
			return
		}
		var berr *provider.BodyError
		if errors.As(err, &berr) && (berr.Code == "ambiguous_member" || berr.Code == "invalid_stream_options") {
			return // refused on purpose: a twin, or a type a lax provider would misread
		}
		if err != nil {
			t.Fatalf("InjectIncludeUsage rejected a valid object %q: %v", body, err)
		}
		if !injected {
			if !bytes.Equal(out, body) {
				t.Fatalf("not injected, but the body changed: %q -> %q", body, out)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}

		// The member a provider's parser keeps (the last) asks for usage.
		opts, _, _ := jsonedit.Lookup(out, "stream_options")
		if inc, ok, _ := jsonedit.Lookup(opts, "include_usage"); !ok || string(inc) != "true" {
			t.Fatalf("stream_options.include_usage is not true in %q", out)
		}

		// Every other member is byte-identical and in the same order; the
		// bytes between members are unchanged.
		outKeys, outVals, outSpans, _ := members(t, out)
		var inOther, outOther []string
		for i, k := range inKeys {
			if k != "stream_options" {
				inOther = append(inOther, k+"="+string(inVals[i]))
			}
		}
		for i, k := range outKeys {
			if k != "stream_options" {
				outOther = append(outOther, k+"="+string(outVals[i]))
			}
		}
		if diff := cmp.Diff(outOther, inOther); diff != "" {
			t.Fatalf("other members changed (-got +want):\n%s", diff)
		}
		if !bytes.Equal(blank(body, inKeys, inSpans), blank(out, outKeys, outSpans)) {
			added := len(outKeys) == len(inKeys)+1 && outKeys[len(outKeys)-1] == "stream_options"
			if !added {
				t.Fatalf("bytes outside stream_options changed: %q -> %q", body, out)
			}
			// The member was added after the last one: the output is the
			// input with one insertion.
			last := outSpans[len(outSpans)-1]
			start := bytes.LastIndex(out[:last[0]], []byte(`"stream_options"`))
			if start < 1 {
				t.Fatalf("added member not found in %q", out)
			}
			if len(inKeys) > 0 {
				start-- // the separating comma
			}
			if !bytes.Equal(append(bytes.Clone(out[:start]), out[last[1]:]...), body) {
				t.Fatalf("output is not the input plus one member: %q -> %q", body, out)
			}
		}
	})
}

// blank returns doc with the value of every stream_options member replaced
// by a placeholder.
func blank(doc []byte, keys []string, spans [][2]int) []byte {
	var out []byte
	prev := 0
	for i, k := range keys {
		if k == "stream_options" {
			out = append(out, doc[prev:spans[i][0]]...)
			out = append(out, '#')
			prev = spans[i][1]
		}
	}
	return append(out, doc[prev:]...)
}
