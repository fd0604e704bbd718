package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
)

func TestInspect(t *testing.T) {
	tests := []struct {
		name     string
		proto    provider.Protocol
		body     string
		want     request
		wantCode string // apierr code; "" = success
		wantMsg  string // fragment of the message
	}{
		{name: "plain", body: `{"model":"m","messages":[]}`, want: request{model: "m"}},
		{name: "stream", body: `{"model":"m","stream":true}`, want: request{model: "m", stream: true, need: routes.CapStream}},
		{name: "stream false", body: `{"model":"m","stream":false}`, want: request{model: "m"}},
		{name: "stream null", body: `{"model":"m","stream":null}`, want: request{model: "m"}},
		{name: "tools", body: `{"model":"m","tools":[{"type":"function"}]}`, want: request{model: "m", need: routes.CapTools}},
		{name: "empty tools", body: `{"model":"m","tools":[]}`, want: request{model: "m"}},
		{name: "legacy functions", body: `{"model":"m","functions":[{"name":"f"}]}`, want: request{model: "m", need: routes.CapTools}},
		{name: "openai json_schema", body: `{"model":"m","response_format":{"type":"json_schema","json_schema":{}}}`, want: request{model: "m", need: routes.CapJSONSchema}},
		{name: "openai json_object is not json_schema", body: `{"model":"m","response_format":{"type":"json_object"}}`, want: request{model: "m"}},
		{name: "anthropic output_config", proto: provider.Anthropic, body: `{"model":"m","output_config":{"format":{"type":"json_schema","schema":{}}}}`, want: request{model: "m", need: routes.CapJSONSchema}},
		{name: "anthropic beta output_format", proto: provider.Anthropic, body: `{"model":"m","output_format":{"type":"json_schema","schema":{}}}`, want: request{model: "m", need: routes.CapJSONSchema}},
		{name: "anthropic ignores response_format", proto: provider.Anthropic, body: `{"model":"m","response_format":{"type":"json_schema"}}`, want: request{model: "m"}},
		{name: "all caps", body: `{"model":"m","stream":true,"tools":[1],"response_format":{"type":"json_schema"}}`, want: request{model: "m", stream: true, need: routes.CapStream | routes.CapTools | routes.CapJSONSchema}},
		{name: "duplicate model", body: `{"model":"a","model":"b"}`, wantCode: "invalid_model", wantMsg: "only once"},
		{name: "escaped key", body: `{"mod\u0065l":"m"}`, want: request{model: "m"}},
		{name: "nested model ignored", body: `{"metadata":{"model":"x"}}`, wantCode: "missing_model"},
		{name: "missing model", body: `{"messages":[]}`, wantCode: "missing_model", wantMsg: `"model"`},
		{name: "model not a string", body: `{"model":42}`, wantCode: "invalid_model"},
		{name: "empty model", body: `{"model":""}`, wantCode: "invalid_model"},
		{name: "stream not bool", body: `{"model":"m","stream":"yes"}`, wantCode: "invalid_stream"},
		{name: "stream NUL twin", body: `{"model":"m","stream\u0000":true}`, wantCode: "ambiguous_member", wantMsg: `"stream"`},
		{name: "functions dotless i twin", body: `{"model":"m","funct\u0131ons":[{"name":"f"}]}`, wantCode: "ambiguous_member", wantMsg: `"functions"`},
		{name: "a dotted I elsewhere is no twin", body: `{"model":"m","T\u0130ools":[]}`, want: request{model: "m"}},
		{name: "model NUL twin", body: `{"model":"m","model\u0000x":"n"}`, wantCode: "invalid_model"},
		{name: "metadata.user_id dotless i twin", proto: provider.Anthropic, body: `{"model":"m","metadata":{"user_\u0131d":"u"}}`, wantCode: "ambiguous_member", wantMsg: `"metadata.user_id"`},
		{name: "include_usage not a boolean", body: `{"model":"m","stream":true,"stream_options":{"include_usage":0}}`, wantCode: "invalid_stream_options"},
		{name: "stream_options not an object", body: `{"model":"m","stream":true,"stream_options":[]}`, wantCode: "invalid_stream_options"},
		{name: "stream_options of a non-stream request", body: `{"model":"m","stream_options":{"include_usage":0}}`, want: request{model: "m"}},
		{name: "array body", body: `[1,2]`, wantCode: "invalid_json", wantMsg: "JSON object"},
		{name: "empty body", body: ``, wantCode: "invalid_json", wantMsg: "empty"},
		{name: "syntax error with position", body: "{\n  \"model\": \"m\",\n  oops\n}", wantCode: "invalid_json", wantMsg: "line 3, column 3"},
		{name: "truncated", body: `{"model":"m"`, wantCode: "invalid_json"},
		{name: "trailing garbage", body: `{"model":"m"} x`, wantCode: "invalid_json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := inspect(tt.proto, []byte(tt.body))
			if tt.wantCode != "" {
				if err == nil {
					t.Fatalf("inspect = %+v, want error %s", got, tt.wantCode)
				}
				if err.Status != 400 || err.Code != tt.wantCode || !strings.Contains(err.Msg, tt.wantMsg) {
					t.Fatalf("error = %d %s %q, want 400 %s containing %q", err.Status, err.Code, err.Msg, tt.wantCode, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("inspect error: %v", err.Msg)
			}
			if diff := cmp.Diff(got, tt.want, cmp.AllowUnexported(request{})); diff != "" {
				t.Fatalf("inspect (-got +want):\n%s", diff)
			}
		})
	}
}

// TestInspectAmbiguous: every member the node reads to decide that
// appears twice, or in another letter case, is a 400. encoding/json (and
// other parsers) would let the last duplicate win or match the other
// spelling, so the node and the provider could read different values:
// {"stream":true,"Stream":false} was a non-stream request to the node and
// a stream to the provider. Each case here was accepted before.
func TestInspectAmbiguous(t *testing.T) {
	tests := []struct {
		name  string
		proto provider.Protocol
		body  string
		path  string // the member the message names
	}{
		{name: "model twice", body: `{"model":"a","model":"b"}`, path: "model"},
		{name: "model twice, one escaped", body: `{"model":"a","mod\u0065l":"b"}`, path: "model"},
		{name: "stream true then false", body: `{"model":"m","stream":true,"stream":false}`, path: "stream"},
		{name: "stream false then true", body: `{"model":"m","stream":false,"stream":true}`, path: "stream"},
		{name: "stream true then null", body: `{"model":"m","stream":true,"stream":null}`, path: "stream"},
		{name: "stream cased", body: `{"model":"m","stream":true,"Stream":false}`, path: "stream"},
		{name: "stream folded", body: `{"model":"m","stream":false,"STREAM":true}`, path: "stream"},
		{name: "stream long s", body: `{"model":"m","\u017ftream":true}`, path: "stream"},
		{name: "tools full then empty", body: `{"model":"m","tools":[1],"tools":[]}`, path: "tools"},
		{name: "tools cased", body: `{"model":"m","tools":[1],"Tools":[]}`, path: "tools"},
		{name: "functions twice", body: `{"model":"m","functions":[1],"functions":null}`, path: "functions"},
		{name: "functions cased", body: `{"model":"m","Functions":[{}]}`, path: "functions"},
		{name: "response_format twice", body: `{"model":"m","response_format":{"type":"json_schema"},"response_format":{"type":"text"}}`, path: "response_format"},
		{name: "response_format upper", body: `{"model":"m","RESPONSE_FORMAT":{"type":"json_schema"}}`, path: "response_format"},
		{name: "response_format.type cased", body: `{"model":"m","response_format":{"type":"json_schema","Type":"text"}}`, path: "response_format.type"},
		{name: "response_format.type twice", body: `{"model":"m","response_format":{"type":"json_schema","type":null}}`, path: "response_format.type"},
		{name: "prompt_cache_key twice", body: `{"model":"m","prompt_cache_key":"a","prompt_cache_key":"b"}`, path: "prompt_cache_key"},
		{name: "prompt_cache_key cased", body: `{"model":"m","Prompt_Cache_Key":"a"}`, path: "prompt_cache_key"},
		{name: "anthropic stream", proto: provider.Anthropic, body: `{"model":"m","stream":true,"Stream":false}`, path: "stream"},
		{name: "anthropic tools", proto: provider.Anthropic, body: `{"model":"m","Tools":[]}`, path: "tools"},
		{name: "output_config twice", proto: provider.Anthropic, body: `{"model":"m","output_config":{"format":{"type":"json_schema"}},"output_config":{"format":{"type":"text"}}}`, path: "output_config"},
		{name: "output_config.format cased", proto: provider.Anthropic, body: `{"model":"m","output_config":{"format":{"type":"json_schema"},"Format":{"schema":{}}}}`, path: "output_config.format"},
		{name: "output_config.format.type cased", proto: provider.Anthropic, body: `{"model":"m","output_config":{"format":{"type":"json_schema","TYPE":"text"}}}`, path: "output_config.format.type"},
		{name: "output_format twice", proto: provider.Anthropic, body: `{"model":"m","output_format":{"type":"json_schema"},"output_format":{"type":"text"}}`, path: "output_format"},
		{name: "output_format cased", proto: provider.Anthropic, body: `{"model":"m","output_format":{"type":"text"},"OUTPUT_FORMAT":{"type":"json_schema"}}`, path: "output_format"},
		{name: "output_format.type twice", proto: provider.Anthropic, body: `{"model":"m","output_format":{"type":"json_schema","type":"text"}}`, path: "output_format.type"},
		{name: "metadata twice", proto: provider.Anthropic, body: `{"model":"m","metadata":{"user_id":"a"},"metadata":{}}`, path: "metadata"},
		{name: "metadata.user_id cased", proto: provider.Anthropic, body: `{"model":"m","metadata":{"user_id":"a","User_Id":"b"}}`, path: "metadata.user_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			for name, fn := range map[string]func(provider.Protocol, []byte) (request, *apierr.Error){"inspect": inspect, "reference": refInspect} {
				_, err := fn(tt.proto, body)
				if err == nil || err.Status != 400 || !strings.Contains(err.Msg, `"`+tt.path+`"`) {
					t.Errorf("%s(%s) = %v; want a 400 naming %q", name, tt.body, err, tt.path)
				}
			}
		})
	}
}

// A "model" key in another letter case is refused: the node rewrites only
// "model", and a provider that matched keys case-insensitively could read
// the client's own value instead of the rewritten one.
func TestInspectModelCase(t *testing.T) {
	for _, tt := range []struct {
		body   string
		refuse bool
	}{
		{`{"model":"a","Model":"b"}`, true},
		{`{"Model":"b","model":"a"}`, true},
		{`{"MODEL":"b"}`, true}, // refused as ambiguous, not reported missing
		{`{"model":"a","mod\u0045l":"b"}`, true},
		{`{"model":"a","mod\u0065l":"b"}`, false}, // the same key twice: TestInspectAmbiguous
		{`{"model":"a","models":"b","x":{"Model":"b"}}`, false},
	} {
		_, err := inspect(provider.OpenAI, []byte(tt.body))
		refused := err != nil && err.Code == "invalid_model" && strings.Contains(err.Msg, "lower case")
		if refused != tt.refuse {
			t.Errorf("inspect(%s) = %v; want refused %t", tt.body, err, tt.refuse)
		}
	}
}

// TestInspectEquivalence runs inspect and the encoding/json implementation
// it replaced (refInspect) over generated bodies, valid and broken, and
// requires the same request or the same error, message included.
func TestInspectEquivalence(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var bodies [][]byte
	for range 20000 {
		body := genBody(rng)
		if rng.IntN(3) == 0 {
			body = mutate(rng, body)
		}
		bodies = append(bodies, body)
	}
	for _, s := range equivalenceSeeds {
		bodies = append(bodies, []byte(s))
	}
	bodies = append(bodies, corpusBodies(t)...)
	accepted := 0
	for _, body := range bodies {
		for _, p := range []provider.Protocol{provider.OpenAI, provider.Anthropic} {
			if checkInspectEquivalent(t, p, body) {
				accepted++
			}
		}
	}
	// Guard against a generator that only produces errors (or only successes).
	if accepted < len(bodies)/4 || accepted > len(bodies)*2-len(bodies)/4 {
		t.Fatalf("%d of %d inspections accepted; the generator is unbalanced", accepted, 2*len(bodies))
	}
}

// FuzzInspectEquivalence is TestInspectEquivalence driven by the fuzzer.
func FuzzInspectEquivalence(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 50 {
		f.Add(genBody(rng), rng.IntN(2) == 0)
	}
	for _, s := range equivalenceSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, anthropic bool) {
		p := provider.OpenAI
		if anthropic {
			p = provider.Anthropic
		}
		checkInspectEquivalent(t, p, body)
	})
}

// equivalenceSeeds are the corners where encoding/json and a hand-written
// scanner could disagree.
var equivalenceSeeds = []string{
	``, ` `, "\v", "\u00a0", "\ufeff{}", `null`, ` null `, `true`, `"s"`, `1`, `-`, `01`, `1.`, `[`, `[1,`, `{`, `{"model"`,
	`{"model":"m"`, `{"model":"m"} x`, `{"model":"m"}{}`, `{"model":"m",}`, `{"model":"m" "x":1}`, `{'model':'m'}`,
	`{"model":"m","n":01}`, `{"model":"m","n":-}`, `{"model":"m","n":1.}`, `{"model":"m","n":1e}`, `{"model":"m","n":.5}`,
	`{"model":"m","n":tru}`, `{"model":"m","n":nul}`, `{"model":"m","n":NaN}`,
	"{\"model\":\"m\x01\"}", "{\"model\":\"m\xff\"}", "{\"model\":\"\xff\"}", `{"model":"\ud800"}`, `{"model":"\ud83d\ude00"}`,
	`{"model":"\u0000"}`, `{"model":"\x"}`, `{"model":"\u12"}`, "{\"mod\xffel\":\"m\"}", `{"model":"m","\ud800":1}`,
	`{"model":"m","stream":"true"}`, `{"model":"m","stream":1}`, `{"model":"m","stream":[]}`, `{"model":"m","stream":{}}`,
	`{"model":"m","Stream":true}`, `{"model":"m","STREAM":true}`, `{"model":"m","\u017ftream":true}`, "{\"model\":\"m\",\"\xc5\xbftream\":true}",
	`{"model":"m","stream ":true}`, `{"model":"m","streamm":true}`, `{"model":"m","strea":true}`,
	`{"model":"m","tools":{}}`, `{"model":"m","tools":"x"}`, `{"model":"m","tools":[ ]}`, `{"model":"m","tools":[null]}`, `{"model":"m","toolſ":[1]}`,
	`{"model":"m","response_format":"json_schema"}`, `{"model":"m","response_format":{"type":"json\u005fschema"}}`,
	`{"model":"m","response_format":{"Type":"json_schema","x":[1,{"type":2}]}}`, `{"model":"m","response_format":[{"type":"json_schema"}]}`,
	`{"model":"m","response_format":{"type":["json_schema"]}}`, `{"model":"m","response_format":{"type":"json_schema","type":{}}}`,
	`{"model":"m","output_config":{"format":null}}`, `{"model":"m","output_config":{"format":"json_schema"}}`,
	`{"model":"m","output_config":{"format":{"type":"json_schema"},"format":null}}`, `{"model":"m","output_config":{"format":{"type":"json_schema"},"format":[]}}`,
	`{"model":"m","output_config":[]}`, `{"model":"m","output_config":{"format":{"type":"json_schema"}},"output_config":null}`,
	`{"model":"m","output_format":{"type":"json_schema"},"response_format":{"type":"json_schema"}}`,
	`{"model":"m","OUTPUT_CONFIG":{"FORMAT":{"TYPE":"json_schema"}}}`, `{"model":"m","output_config":{"format":{"type":"JSON_SCHEMA"}}}`,
	`{"model":"m","a":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"model":"m","a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	"{\n\t\"model\": \"m\",\n\t\"x\": [1,\n 2,,]\n}", "{\r\n\"model\":\"m\"\r\n", "{\"model\":\"m\"}\n\n x",
}

// checkInspectEquivalent fails t unless inspect and refInspect agree on
// body. It reports whether the body was accepted.
func checkInspectEquivalent(t *testing.T, p provider.Protocol, body []byte) bool {
	t.Helper()
	orig := bytes.Clone(body)
	want, wantErr := refInspect(p, body)
	got, gotErr := inspect(p, body)
	if !bytes.Equal(body, orig) {
		t.Fatalf("inspect modified its input")
	}
	if diff := cmp.Diff(gotErr, wantErr); diff != "" {
		t.Fatalf("inspect(%v, %q) error (-got +want):\n%s", p, body, diff)
	}
	if diff := cmp.Diff(got, want, cmp.AllowUnexported(request{})); diff != "" {
		t.Fatalf("inspect(%v, %q) (-got +want):\n%s", p, body, diff)
	}
	return gotErr == nil
}

// genBody returns a request body built from the members inspect reads,
// spelled every way encoding/json would match them, with duplicates, nested
// look-alikes, odd whitespace and values of every type.
func genBody(rng *rand.Rand) []byte {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	// key is mostly the exact spelling: a variant or a repeat makes the
	// body ambiguous, which is refused, and the generator must still
	// produce bodies that are accepted.
	key := func(canon string, variants ...string) string {
		if rng.IntN(6) != 0 {
			return canon
		}
		return pick(variants...)
	}
	typeVal := func() string {
		return pick(`"json_schema"`, `"json\u005fschema"`, `"json_object"`, `"text"`, `"JSON_SCHEMA"`, `null`, `1`, `true`, `[]`, `{}`, `"json_schema "`)
	}
	typeObj := func() string {
		var b strings.Builder
		b.WriteString("{")
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(pick(key(`"type"`, `"Type"`, `"TYPE"`, `"typ\u0065"`), `"schema"`, `"typee"`, `"json_schema"`) + ":")
			if rng.IntN(4) == 0 {
				b.WriteString(pick(`{"type":"json_schema"}`, `{"schema":{}}`, `[1]`))
			} else {
				b.WriteString(typeVal())
			}
		}
		b.WriteString("}")
		return b.String()
	}
	formatObj := func() string {
		var b strings.Builder
		b.WriteString("{")
		for i := range rng.IntN(3) {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(pick(key(`"format"`, `"Format"`, `"FORMAT"`), `"effort"`) + ":")
			if rng.IntN(5) == 0 {
				b.WriteString(pick(`null`, `"json_schema"`, `[]`, `1`))
			} else {
				b.WriteString(typeObj())
			}
		}
		b.WriteString("}")
		return b.String()
	}
	array := func() string {
		return pick(`[]`, `[ ]`, "[\n]", `[{"type":"function"}]`, `[null]`, `[1,2]`, ` [ 1 ]`[1:])
	}
	anyVal := func() string {
		return pick(`null`, `true`, `false`, `0`, `-1.5e+3`, `"x"`, `""`, `[]`, `{}`, `{"model":"nested","stream":true}`, `"\ud83d\ude00"`, "\"\xff\"")
	}
	members := []func() string{
		func() string {
			return key(`"model"`, `"mod\u0065l"`, `"Model"`, `"mod\u0045l"`) + ":" + pick(`"gpt-4o"`, `"m"`, `""`, `1`, `null`, `"g\u00e9"`, "\"\xffx\"", `"\ud800"`, `["m"]`)
		},
		func() string {
			return pick(key(`"stream"`, `"Stream"`, `"STREAM"`, `"\u017ftream"`, `"str\u0065am"`), `"stream_options"`) + ":" + pick(`true`, `false`, `null`, `"true"`, `1`, `[]`, `{}`)
		},
		func() string {
			return pick(key(`"tools"`, `"Tools"`, `"tool\u017f"`), key(`"functions"`, `"Functions"`)) + ":" + pick(array(), anyVal())
		},
		func() string {
			return pick(key(`"response_format"`, `"Response_Format"`), key(`"output_format"`, `"Output_Format"`)) + ":" + pick(typeObj(), typeObj(), anyVal())
		},
		func() string {
			return key(`"output_config"`, `"OUTPUT_CONFIG"`) + ":" + pick(formatObj(), formatObj(), anyVal())
		},
		func() string {
			return pick(`"messages"`, `"x"`, `""`, `"\ud83d\ude00"`, `"max_tokens"`) + ":" + pick(anyVal(), `[{"role":"user","content":"hi"}]`)
		},
	}
	space := func() string { return pick("", "", "", " ", "\n  ", "\t", "\r\n") }
	var parts []string
	if rng.IntN(8) != 0 {
		parts = append(parts, members[0]())
	}
	for range rng.IntN(4) {
		parts = append(parts, members[rng.IntN(len(members))]())
	}
	rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	var b strings.Builder
	b.WriteString(space() + "{")
	for i, m := range parts {
		if i > 0 {
			b.WriteString(space() + ",")
		}
		b.WriteString(space() + m)
	}
	b.WriteString(space() + "}" + space())
	return []byte(b.String())
}

// mutate breaks body in one of the ways clients do: truncation, a stray or
// missing byte, or a different top level.
func mutate(rng *rand.Rand, body []byte) []byte {
	out := bytes.Clone(body)
	switch rng.IntN(6) {
	case 0:
		return out[:rng.IntN(len(out)+1)]
	case 1:
		i := rng.IntN(len(out))
		return append(out[:i], out[i+1:]...)
	case 2:
		i := rng.IntN(len(out) + 1)
		const stray = "{}[],:\"\\ 0-.eE+tfnx\x00\x1f\xff\n"
		c := stray[rng.IntN(len(stray))]
		return slices.Insert(out, i, c)
	case 3:
		out[rng.IntN(len(out))] = byte(rng.IntN(256))
		return out
	case 4:
		return []byte("[" + string(out) + "]")
	default:
		return append(out, []byte(pick(rng, " x", "{}", ",", "\x00", " \n", "null"))...)
	}
}

func pick(rng *rand.Rand, s ...string) string { return s[rng.IntN(len(s))] }

// corpusBodies returns the first []byte of every stored fuzz input in the
// jsonedit corpus, plus any directories listed in INSPECT_CORPUS
// (colon-separated; for example a local fuzz cache).
func corpusBodies(t *testing.T) [][]byte {
	t.Helper()
	dirs := []string{filepath.Join("..", "jsonedit", "testdata", "fuzz", "FuzzReplace")}
	if extra := os.Getenv("INSPECT_CORPUS"); extra != "" {
		dirs = append(dirs, filepath.SplitList(extra)...)
	}
	var out [][]byte
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("corpus: %v", err)
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatalf("corpus: %v", err)
			}
			for line := range strings.Lines(string(data)) {
				line = strings.TrimSpace(line)
				if s, ok := strings.CutPrefix(line, "[]byte("); ok {
					q, err := strconv.Unquote(strings.TrimSuffix(s, ")"))
					if err != nil {
						t.Fatalf("corpus %s: %v", e.Name(), err)
					}
					out = append(out, []byte(q))
					break
				}
			}
		}
	}
	return out
}

// The reference implementation: inspect as it was before the single-pass
// scan (a reflective encoding/json decode of the whole body, then a second
// jsonedit.Lookup pass for the model), kept verbatim as the oracle for the
// equivalence tests and as the benchmark baseline.

type refBodyFields struct {
	Stream         json.RawMessage `json:"stream"`
	Tools          json.RawMessage `json:"tools"`
	Functions      json.RawMessage `json:"functions"`
	ResponseFormat json.RawMessage `json:"response_format"`
	OutputConfig   json.RawMessage `json:"output_config"`
	OutputFormat   json.RawMessage `json:"output_format"`
}

func refInspect(p provider.Protocol, body []byte) (request, *apierr.Error) {
	var f refBodyFields
	if err := json.Unmarshal(body, &f); err != nil {
		return request{}, apierr.BadRequest("invalid_json", provider.JSONProblem(body, err))
	}
	if string(bytes.TrimSpace(body)) == "null" {
		return request{}, apierr.BadRequest("invalid_json", "request body must be a JSON object")
	}
	// The intended changes since this implementation: a member the node
	// decides on that appears twice or in another letter case is refused
	// (first at the top level, in document order), then, after the
	// model and stream checks, the same in the nested members it reads.
	// The conversation and its instructions joined them when they began
	// to place requests (prefix affinity).
	top := []string{"model", "stream", "tools", "functions", "response_format", "prompt_cache_key", "stream_options", "messages", "max_tokens", "max_completion_tokens"}
	if p == provider.Anthropic {
		top = []string{"model", "stream", "tools", "output_config", "output_format", "metadata", "system", "messages", "max_tokens"}
	}
	if err := refAmbiguous(body, "", top); err != nil {
		return request{}, err
	}
	raw, ok, err := jsonedit.Lookup(body, "model")
	if err != nil {
		return request{}, apierr.BadRequest("invalid_json", "request body must be a JSON object")
	}
	if !ok {
		return request{}, apierr.BadRequest("missing_model", `missing required field "model"`)
	}
	var r request
	if err := json.Unmarshal(raw, &r.model); err != nil || r.model == "" {
		return request{}, apierr.BadRequest("invalid_model", `field "model" must be a non-empty string`)
	}
	if !refIsNull(f.Stream) {
		if err := json.Unmarshal(f.Stream, &r.stream); err != nil {
			return request{}, apierr.BadRequest("invalid_stream", `field "stream" must be a boolean`)
		}
	}
	if r.stream {
		r.need |= routes.CapStream
		// A stream's include_usage decides whether the node asks for usage.
		var so struct {
			StreamOptions json.RawMessage `json:"stream_options"`
		}
		_ = json.Unmarshal(body, &so)
		if p == provider.OpenAI {
			if err := refAmbiguous(so.StreamOptions, "stream_options", []string{"include_usage"}); err != nil {
				return request{}, err
			}
			// What decides whether the client sees usage must be what it
			// seems: an object (or null) with a boolean (or null).
			var opts map[string]json.RawMessage
			if !refIsNull(so.StreamOptions) && json.Unmarshal(so.StreamOptions, &opts) != nil {
				return request{}, apierr.BadRequest("invalid_stream_options", `field "stream_options" must be an object`)
			}
			if inc, ok := opts["include_usage"]; ok && !refIsNull(inc) && string(inc) != "true" && string(inc) != "false" {
				return request{}, apierr.BadRequest("invalid_stream_options", `field "stream_options.include_usage" must be a boolean`)
			}
		}
	}
	// Anthropic has no legacy "functions": only OpenAI reads it.
	if refNonEmptyArray(f.Tools) || p == provider.OpenAI && refNonEmptyArray(f.Functions) {
		r.need |= routes.CapTools
	}
	if p == provider.OpenAI {
		if err := refAmbiguous(f.ResponseFormat, "response_format", []string{"type"}); err != nil {
			return request{}, err
		}
	} else {
		if err := refAmbiguous(f.OutputConfig, "output_config", []string{"format"}); err != nil {
			return request{}, err
		}
		var oc struct {
			Format json.RawMessage `json:"format"`
		}
		_ = json.Unmarshal(f.OutputConfig, &oc)
		if err := refAmbiguous(oc.Format, "output_config.format", []string{"type"}); err != nil {
			return request{}, err
		}
		if err := refAmbiguous(f.OutputFormat, "output_format", []string{"type"}); err != nil {
			return request{}, err
		}
		var md struct {
			Metadata json.RawMessage `json:"metadata"`
		}
		_ = json.Unmarshal(body, &md)
		if err := refAmbiguous(md.Metadata, "metadata", []string{"user_id"}); err != nil {
			return request{}, err
		}
	}
	if refWantsJSONSchema(p, &f) {
		r.need |= routes.CapJSONSchema
	}
	// The output cap decides which targets hold the request: read
	// exactly, a whole number of tokens or nothing (docs/routing.md
	// "Context windows").
	caps := []string{"max_tokens", "max_completion_tokens"}
	if p == provider.Anthropic {
		caps = caps[:1]
	}
	var members map[string]json.RawMessage
	_ = json.Unmarshal(body, &members)
	for _, name := range caps {
		v, ok := members[name]
		if !ok || refIsNull(v) {
			continue
		}
		var n float64
		if len(v) == 0 || v[0] == '-' || json.Unmarshal(v, &n) != nil || n != math.Trunc(n) {
			return request{}, apierr.BadRequest("invalid_output_cap", `field "`+name+`" must be a whole number of tokens, at least 0`)
		}
	}
	return r, nil
}

// refAmbiguous walks the members of the object raw (anything else passes)
// with encoding/json's tokenizer and reports the first one that repeats a
// name or spells it in another case (strings.EqualFold), with the message
// provider.Scan gives.
// laxKey is key as a C-string reader (cut at the first NUL) and a
// locale-aware lower-casing (the Turkish dotless and dotted I as "i") read
// it.
func laxKey(key string) string {
	key, _, _ = strings.Cut(key, "\x00")
	return strings.NewReplacer("\u0131", "i", "\u0130", "i").Replace(key)
}

func refAmbiguous(raw json.RawMessage, parent string, names []string) *apierr.Error {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key := tok.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
		for _, name := range names {
			what := ""
			switch {
			case key == name && seen[name]:
				what = "appears more than once"
			case key == name:
				seen[name] = true
			case strings.EqualFold(key, name):
				what = "has a differently cased twin"
			case strings.EqualFold(laxKey(key), name):
				what = "has a twin that some readers take for it"
			}
			if what == "" {
				continue
			}
			path := name
			if parent != "" {
				path = parent + "." + name
			}
			if path == "model" && what == "appears more than once" {
				return apierr.BadRequest("invalid_model", `field "model" must appear only once`)
			}
			if path == "model" {
				return apierr.BadRequest("invalid_model", `field "model" must appear only in lower case; the body also has a differently cased "model" member`)
			}
			return apierr.BadRequest("ambiguous_member", fmt.Sprintf("field %q %s in the body (a member spelled the same in another letter case counts); it must appear exactly once, spelled exactly so, because the provider might read the other one", path, what))
		}
	}
	return nil
}

func refWantsJSONSchema(p provider.Protocol, f *refBodyFields) bool {
	var typed struct {
		Type string `json:"type"`
	}
	if p == provider.OpenAI {
		return !refIsNull(f.ResponseFormat) && json.Unmarshal(f.ResponseFormat, &typed) == nil && typed.Type == "json_schema"
	}
	var oc struct {
		Format struct {
			Type string `json:"type"`
		} `json:"format"`
	}
	if !refIsNull(f.OutputConfig) && json.Unmarshal(f.OutputConfig, &oc) == nil && oc.Format.Type == "json_schema" {
		return true
	}
	return !refIsNull(f.OutputFormat) && json.Unmarshal(f.OutputFormat, &typed) == nil && typed.Type == "json_schema"
}

func refIsNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

func refNonEmptyArray(raw json.RawMessage) bool {
	if refIsNull(raw) {
		return false
	}
	var items []json.RawMessage
	return json.Unmarshal(raw, &items) == nil && len(items) > 0
}
