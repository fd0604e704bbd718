package usage

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// checkAppendJSON holds appendJSON to its references: json.Marshal for
// the bytes (the same bytes, or both an error), and Validate for the
// events it vouches for (valid: Validate accepts them). appendJSON must
// append after prefix and leave prefix alone, also on error. It returns
// whether appendJSON vouched for e.
func checkAppendJSON(t *testing.T, e *usageevent.Event, prefix []byte) bool {
	t.Helper()
	keep := bytes.Clone(prefix)
	got, valid, err := appendJSON(prefix, e)
	if valid {
		if verr := e.Validate(); verr != nil {
			t.Fatalf("appendJSON vouched for an event Validate refuses: %v\nevent: %#v", verr, e)
		}
		if err != nil {
			t.Fatalf("appendJSON vouched for an event and failed: %v", err)
		}
	}
	want, wantErr := json.Marshal(e)
	switch {
	case (err != nil) != (wantErr != nil):
		t.Fatalf("appendJSON error %v, json.Marshal error %v\nevent: %#v", err, wantErr, e)
	case !bytes.Equal(got[:len(keep)], keep):
		t.Fatalf("appendJSON changed the bytes before dst's end: %q, want %q", got[:len(keep)], keep)
	case err != nil:
		if len(got) != len(keep) {
			t.Fatalf("appendJSON failed (%v) but returned %q after dst", err, got[len(keep):])
		}
	case !bytes.Equal(got[len(keep):], want):
		t.Fatalf("appendJSON differs from json.Marshal\n got: %q\nwant: %q", got[len(keep):], want)
	}
	return valid
}

// TestAppendJSONExamples: the contract examples encode as json.Marshal
// encodes them.
func TestAppendJSONExamples(t *testing.T) {
	for name, data := range usageExamples(t) {
		t.Run(name, func(t *testing.T) {
			e, err := usageevent.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			checkAppendJSON(t, e, nil)
		})
	}
}

// TestAppendJSONCases covers each corner by name, so a failure says which.
func TestAppendJSONCases(t *testing.T) {
	base := func() *usageevent.Event {
		return &usageevent.Event{
			EventID: "01a226bf-497b-7f65-860e-1f8aa3e75316", Schema: usageevent.Schema,
			NodeID: "node-a", RequestID: "sg-1", TenantID: "t_9", KeyID: "k_123",
			PublicModel: "demo-gpt", ProviderModel: "gpt-4o", Backend: "openai-1",
			Protocol: usageevent.ProtocolOpenAI, Stream: true, Attempt: 1,
			SendState: usageevent.SendResponseReceived, HTTPStatus: 200,
			RequestBytes: 312, ResponseBytes: 689, TTFBMs: 412.5, DurationMs: 418.1,
			StartedAt:     time.Date(2026, 11, 29, 10, 0, 0, 123000000, time.UTC),
			Usage:         &usageevent.Usage{InputTokens: 1200, OutputTokens: 85, CacheReadTokens: 1024},
			ProviderUsage: json.RawMessage(`{"prompt_tokens":1200}`),
		}
	}
	for _, tc := range []struct {
		name   string
		change func(e *usageevent.Event)
	}{
		{"plain", func(*usageevent.Event) {}},
		{"html", func(e *usageevent.Event) { e.NodeID = "<a href='x'>&amp;</a>" }},
		{"line separators", func(e *usageevent.Event) { e.TenantID = "a\u2028b\u2029c\u2027" }},
		{"invalid utf-8", func(e *usageevent.Event) { e.KeyID = "a\xffb\xe2\x80c\xed\xa0\x80\xf4\x90\x80\x80" }},
		{"invalid utf-8 at end", func(e *usageevent.Event) { e.KeyID = "ab\xe2\x80" }},
		{"controls", func(e *usageevent.Event) { e.Backend = "\x00\x01\b\f\n\r\t\x1f\x7f\"\\/" }},
		{"unicode", func(e *usageevent.Event) { e.PublicModel = "日本語 é 😀 \ufffd" }},
		{"empty strings", func(e *usageevent.Event) { *e = usageevent.Event{} }},
		{"extreme ints", func(e *usageevent.Event) {
			e.Schema, e.Attempt, e.HTTPStatus = math.MinInt, math.MaxInt, -1
			e.RequestBytes, e.ResponseBytes = math.MinInt64, math.MaxInt64
			e.Usage = &usageevent.Usage{InputTokens: math.MinInt64, OutputTokens: -5, ReasoningTokens: math.MaxInt64}
		}},
		{"zero floats", func(e *usageevent.Event) { e.TTFBMs, e.DurationMs = 0, math.Copysign(0, -1) }},
		{"float cutoffs low", func(e *usageevent.Event) { e.TTFBMs, e.DurationMs = 1e-6, math.Nextafter(1e-6, 0) }},
		{"float cutoffs high", func(e *usageevent.Event) { e.TTFBMs, e.DurationMs = 1e21, math.Nextafter(1e21, 0) }},
		{"float exponents", func(e *usageevent.Event) { e.TTFBMs, e.DurationMs = 1e-7, -1.5e-300 }},
		{"float extremes", func(e *usageevent.Event) { e.TTFBMs, e.DurationMs = math.SmallestNonzeroFloat64, math.MaxFloat64 }},
		{"float fractions", func(e *usageevent.Event) { e.TTFBMs, e.DurationMs = 0.1+0.2, 1234.5678901234567 }},
		{"NaN", func(e *usageevent.Event) { e.TTFBMs = math.NaN() }},
		{"Inf", func(e *usageevent.Event) { e.DurationMs = math.Inf(-1) }},
		{"zero time", func(e *usageevent.Event) { e.StartedAt = time.Time{} }},
		{"zone", func(e *usageevent.Event) { e.StartedAt = e.StartedAt.In(time.FixedZone("X", -(9*3600 + 30*60))) }},
		{"zone seconds", func(e *usageevent.Event) { e.StartedAt = e.StartedAt.In(time.FixedZone("LMT", 17*60+30)) }},
		{"zone 24h", func(e *usageevent.Event) { e.StartedAt = e.StartedAt.In(time.FixedZone("X", 24*3600)) }},
		{"year 10000", func(e *usageevent.Event) { e.StartedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"year -1", func(e *usageevent.Event) { e.StartedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"nanoseconds", func(e *usageevent.Event) { e.StartedAt = time.Date(2026, 1, 2, 3, 4, 5, 1, time.UTC) }},
		{"monotonic", func(e *usageevent.Event) { e.StartedAt = time.Now() }},
		{"no usage", func(e *usageevent.Event) { e.Usage, e.ProviderUsage = nil, nil }},
		{"raw empty", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage{} }},
		{"raw spaces", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(" \n") }},
		{"raw null", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(" null ") }},
		{"raw pretty", func(e *usageevent.Event) {
			e.ProviderUsage = json.RawMessage("{\n  \"a\" : [ 1 , 2.5e-3 ,\ttrue,null ] ,\r\n \"b\": { \"c d\":\"e f\" }\n}\n")
		}},
		{"raw html", func(e *usageevent.Event) {
			e.ProviderUsage = json.RawMessage(`{"x":"<b>&\u2028</b>","y":"` + "<\u2028\u2029>" + `"}`)
		}},
		{"raw escapes", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(`{"a\"b":"c\\","d":"\"  \\\" "}`) }},
		{"raw invalid utf-8", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage("{\"a\":\"\xff \xe2\x80\"}") }},
		{"raw number", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(" -1.5e3 ") }},
		{"raw invalid", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(`{"a":}`) }},
		{"raw trailing", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(`{} {}`) }},
		{"raw truncated", func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(`{"a":"<`) }},
		{"raw depth 10000", func(e *usageevent.Event) { e.ProviderUsage = nestedRaw(10000) }},
		{"raw depth 10001", func(e *usageevent.Event) { e.ProviderUsage = nestedRaw(10001) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := base()
			tc.change(e)
			checkAppendJSON(t, e, nil)
			checkAppendJSON(t, e, []byte("prefix"))
		})
	}
	t.Run("nil", func(t *testing.T) { checkAppendJSON(t, nil, []byte("x")) })
}

// nestedRaw returns an object holding arrays nested depth deep in all.
func nestedRaw(depth int) json.RawMessage {
	return json.RawMessage(`{"a":` + strings.Repeat("[ ", depth-1) + "1" + strings.Repeat(" ]", depth-1) + "}")
}

// TestAppendJSONGenerated compares appendJSON with json.Marshal on many
// generated events, each member drawn from values that exercise a corner.
func TestAppendJSONGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2026))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	var buf []byte
	for range n {
		e := genEvent(r)
		checkAppendJSON(t, e, nil)
		// Reuse one buffer as the recorder does: stale bytes past len
		// must not leak into the output.
		checkAppendJSON(t, e, buf[:0])
		buf, _, _ = appendJSON(buf[:0], e)
	}
}

// strParts are the pieces generated strings are made of.
var strParts = []string{
	"a", "Z", "0", "-", "_", " ", "/", "'", "sg-", "node", "gpt-4o",
	"<", ">", "&", `"`, `\`, "\u2028", "\u2029", "\u2027", "\u202a",
	"\x00", "\x01", "\b", "\f", "\n", "\r", "\t", "\x1b", "\x1f", "\x7f",
	"\xff", "\xc3", "\xe2\x80", "\xe2\x80\xa8"[:2], "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80",
	"é", "日本", "😀", "\ufffd", "\u00a0",
}

func genString(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return ""
	}
	var b strings.Builder
	for range r.IntN(12) + 1 {
		if r.IntN(3) == 0 {
			b.WriteString(strParts[r.IntN(len(strParts))])
		} else {
			b.WriteByte(byte(r.IntN(256)))
		}
	}
	return b.String()
}

func genInt64(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return pick[int64](r, 0, 1, -1, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32)
	case 1:
		return int64(r.Uint64())
	case 2:
		return -r.Int64N(1000)
	default:
		return r.Int64N(100000)
	}
}

func genFloat(r *rand.Rand) float64 {
	switch r.IntN(10) {
	case 0:
		return pick[float64](r, 0, math.Copysign(0, -1), 1e-7, 1e-6, 9.999999e-7, 1e20, 1e21, 999999999999999999999.0, 1e22,
			math.SmallestNonzeroFloat64, math.MaxFloat64, -1e-9, 123456789012345678901234.0, 0.1, 1.0/3)
	case 1:
		return math.Float64frombits(r.Uint64()) // NaN and ±Inf too, now and then
	case 2:
		return pick[float64](r, math.NaN(), math.Inf(1), math.Inf(-1))
	case 3:
		return math.Ldexp(r.Float64(), r.IntN(200)-100)
	case 4:
		return float64(r.IntN(100000)) // whole milliseconds
	default:
		// Fractional milliseconds, as from a time.Duration.
		return float64(r.Int64N(int64(10*time.Minute))) / float64(time.Millisecond)
	}
}

func genTime(r *rand.Rand) time.Time {
	var t time.Time
	switch r.IntN(6) {
	case 0:
		t = time.Time{}
	case 1:
		// Any year from -2000 to 12000: some cannot be RFC 3339.
		t = time.Date(r.IntN(14001)-2000, time.Month(r.IntN(12)+1), r.IntN(28)+1, r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e9), time.UTC)
	case 2:
		t = time.Now()
	default:
		t = time.Unix(1700000000+r.Int64N(1e9), r.Int64N(1e9))
		if r.IntN(2) == 0 {
			t = t.Truncate(time.Duration(pick[int64](r, 1, 1e3, 1e6, 1e9)))
		}
	}
	switch r.IntN(5) {
	case 0:
		return t.UTC()
	case 1:
		// Offsets in whole quarter hours, in seconds, and beyond ±24h.
		off := pick[int](r, 0, 3600, -3600, 5*3600+1800, -(9*3600 + 30*60), 14*3600, 17*60+30, -(3*3600 + 17), 24*3600, -25*3600, 23*3600+59*60)
		return t.In(time.FixedZone("Z", off))
	case 2:
		return t.In(time.FixedZone("R", r.IntN(2*26*3600)-26*3600))
	case 3:
		return t.Local()
	}
	return t
}

// genRaw returns provider usage: nil, empty, or JSON with random white
// space, now and then broken.
func genRaw(r *rand.Rand) json.RawMessage {
	switch r.IntN(8) {
	case 0:
		return nil
	case 1:
		return json.RawMessage(pick(r, "", " ", "null", " null\n", "\t{}\r\n", "[]", `"<&>"`, "0"))
	}
	var b []byte
	b = genValue(r, b, 0)
	b = genSpace(r, b)
	if r.IntN(6) == 0 {
		// Break it: cut it short, or put a stray byte somewhere.
		if r.IntN(2) == 0 && len(b) > 0 {
			b = b[:r.IntN(len(b))]
		} else {
			i := r.IntN(len(b) + 1)
			const stray = "}]\",:x\x00<"
			b = append(b[:i], append([]byte{stray[r.IntN(len(stray))]}, b[i:]...)...)
		}
	}
	return b
}

func genSpace(r *rand.Rand, b []byte) []byte {
	for r.IntN(3) == 0 {
		b = append(b, " \t\r\n"[r.IntN(4)])
	}
	return b
}

func genValue(r *rand.Rand, b []byte, depth int) []byte {
	b = genSpace(r, b)
	k := r.IntN(8)
	if depth == 0 {
		k = 0 // provider usage is an object
	} else if depth > 3 {
		k = 2 + r.IntN(6)
	}
	switch k {
	case 0:
		b = append(b, '{')
		for i := range r.IntN(5) {
			if i > 0 {
				b = genSpace(r, b)
				b = append(b, ',')
			}
			b = genSpace(r, b)
			b = genJSONString(r, b)
			b = genSpace(r, b)
			b = append(b, ':')
			b = genValue(r, b, depth+1)
		}
		b = genSpace(r, b)
		return append(b, '}')
	case 1:
		b = append(b, '[')
		for i := range r.IntN(4) {
			if i > 0 {
				b = genSpace(r, b)
				b = append(b, ',')
			}
			b = genValue(r, b, depth+1)
		}
		b = genSpace(r, b)
		return append(b, ']')
	case 2, 3:
		return genJSONString(r, b)
	case 4:
		if r.IntN(8) == 0 {
			return append(b, pick(r, "tru", "nul", "True", "nulll", "falsey", "f", "n")...)
		}
		return append(b, pick(r, "true", "false", "null")...)
	default:
		if r.IntN(4) == 0 { // not JSON numbers, or only just
			return append(b, pick(r, "01", "-01", "1.", ".5", "-", "+1", "1e", "1e+", "1.e3", "0x1", "1E-0", "-0",
				"0.0e0", "Infinity", "NaN", "1_0", "2.", "-.1", "00")...)
		}
		return append(b, pick(r, "0", "-1", "1200", "2.5", "-0.0", "1e-7", "3E+21", "18446744073709551616")...)
	}
}

// genJSONString writes a string token whose content may hold escapes,
// HTML characters, line separators, and invalid UTF-8 (which JSON
// scanning lets through).
func genJSONString(r *rand.Rand, b []byte) []byte {
	b = append(b, '"')
	for range r.IntN(8) {
		if r.IntN(10) == 0 { // bad escapes and raw controls
			b = append(b, pick(r, `\x`, `\u12`, `\u12g4`, `\U1234`, `\'`, "\x01", "\t", "\x1f", `\`, `\uABCD`, `\ud800`)...)
			continue
		}
		b = append(b, pick(r, "a", "input_tokens", " ", "<", ">", "&", "\u2028", "\u2029", `\"`, `\\`, `\n`, `\u2028`, `\u003c`, "é", "\xff", "\xe2\x80", "/", `\/`, "\x7f", `\b\f\r\t`)...)
	}
	return append(b, '"')
}

func genEvent(r *rand.Rand) *usageevent.Event {
	e := &usageevent.Event{
		EventID: genString(r), Schema: int(genInt64(r)), Authoritative: r.IntN(2) == 0,
		NodeID: genString(r), RequestID: genString(r), TenantID: genString(r), KeyID: genString(r),
		PublicModel: genString(r), ProviderModel: genString(r), Backend: genString(r),
		Protocol: genString(r), Stream: r.IntN(2) == 0, Attempt: int(genInt64(r)),
		ModelPattern: genOptional(r), ServedModel: genOptional(r), Endpoint: genOptional(r),
		Platform: genOptional(r), Region: genOptional(r), Placement: genOptional(r),
		SendState: genString(r), FailureStage: genString(r), HTTPStatus: int(genInt64(r)),
		RequestBytes: genInt64(r), ResponseBytes: genInt64(r),
		TTFBMs: genFloat(r), DurationMs: genFloat(r),
		StartedAt:     genTime(r),
		ProviderUsage: genRaw(r),
	}
	if r.IntN(2) == 0 {
		e.Cost = &usageevent.Cost{USD: genString(r), PriceVersion: uint64(genInt64(r)), Estimated: r.IntN(2) == 0}
	}
	if r.IntN(3) > 0 {
		e.Usage = &usageevent.Usage{
			InputTokens: genInt64(r), OutputTokens: genInt64(r), CacheReadTokens: genInt64(r),
			CacheWriteTokens: genInt64(r), ReasoningTokens: genInt64(r),
		}
	}
	return e
}

// genOptional is an omitempty member: absent half the time.
func genOptional(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return ""
	}
	return genString(r)
}

// TestAppendJSONEveryMember sets every member of an event (found by
// reflection, so a member added to usageevent.Event later is set too) and
// holds appendJSON to json.Marshal: an encoder that misses a new member
// fails here.
func TestAppendJSONEveryMember(t *testing.T) {
	e := &usageevent.Event{}
	fill(t, reflect.ValueOf(e).Elem(), "event")
	checkAppendJSON(t, e, nil)
}

// fill sets every field of v, recursively, to a value json.Marshal writes
// (a distinct string per field, non-zero numbers, true, a JSON object for
// a raw message).
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 12, 6, 8, 0, 0, 1234, time.UTC)))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(`{"` + path + `":1}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(len(path)))
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		v.SetUint(uint64(len(path)))
	case reflect.Float64:
		v.SetFloat(float64(len(path)) + 0.25)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	default:
		t.Fatalf("%s: fill does not know %s; teach it and appendJSON", path, v.Type())
	}
}

// FuzzAppendJSON compares appendJSON with json.Marshal on events built from
// fuzzed strings, numbers, times and provider usage.
func FuzzAppendJSON(f *testing.F) {
	f.Add("01a226bf-497b-7f65-860e-1f8aa3e75316", "node-a", "<model>&", "stream", int64(200), int64(-1),
		412.5, 1e-7, int64(1764410400), int64(123000000), 0, true, int64(1200), []byte(`{"prompt_tokens":1200}`), false)
	f.Add("\u2028\u2029", "\xff\xe2\x80", "\x00\n\t\x7f", "", int64(math.MinInt64), int64(math.MaxInt64),
		1e21, math.Copysign(0, -1), int64(-62135596801), int64(0), 5*3600+1800, false, int64(0), []byte("{\n \"a\" : \"<\u2028>\" }\n"), false)
	f.Add("", "", "", "", int64(0), int64(0), math.NaN(), 0.0, int64(253402300800), int64(1), 24*3600, false, int64(0), []byte{}, false)
	f.Add("x", "y", "z", "w", int64(1), int64(2), 3.0, 4.0, int64(0), int64(0), -(9*3600 + 30*60 + 17), true, int64(-3), []byte(`{"a":}`), true)
	f.Fuzz(func(t *testing.T, id, node, model, stage string, status, nbytes int64, ttfb, dur float64,
		sec, nsec int64, offset int, hasUsage bool, tokens int64, raw []byte, rawNil bool,
	) {
		e := &usageevent.Event{
			EventID: id, Schema: usageevent.Schema, NodeID: node, RequestID: node + model, TenantID: stage, KeyID: id,
			PublicModel: model, ProviderModel: model + node, Backend: stage + id, Protocol: usageevent.ProtocolOpenAI,
			Stream: hasUsage, Attempt: int(status), SendState: usageevent.SendResponseReceived, FailureStage: stage,
			HTTPStatus: int(status), RequestBytes: nbytes, ResponseBytes: -nbytes, TTFBMs: ttfb, DurationMs: dur,
			StartedAt:     time.Unix(sec, nsec).In(time.FixedZone("F", offset%(30*3600))),
			ProviderUsage: raw,
		}
		if rawNil {
			e.ProviderUsage = nil
		}
		if hasUsage {
			e.Usage = &usageevent.Usage{InputTokens: tokens, OutputTokens: -tokens, CacheReadTokens: nbytes, CacheWriteTokens: status, ReasoningTokens: sec}
		}
		checkAppendJSON(t, e, []byte("x"))
	})
}

// FuzzProviderUsage compares appendJSON with json.Marshal on fuzzed
// provider_usage alone: validation (json.Valid's grammar exactly),
// compaction and escaping.
func FuzzProviderUsage(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":1200,"completion_tokens_details":{"reasoning_tokens":0}}`,
		"{\n  \"a\" : [ 1 , -2.5e-3 ,\ttrue,null,false ] ,\r\n \"b\": { \"c d\":\"e<f>&\u2028\" }\n}\n",
		`{"a\"b":"c\\","d":"\"  \\\" ","u":"\u00e9\uD834\uDD1E"}`,
		"{\"a\":\"\xff \xe2\x80\"}", `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, `{"a":tru}`, `[1,]`, `{"a":1,}`,
		" null ", "", " ", `"s"`, "-0", "1e+9", `{} {}`, `{"a":}`,
	} {
		f.Add([]byte(s))
	}
	e := benchEvent()
	f.Fuzz(func(t *testing.T, raw []byte) {
		e.ProviderUsage = raw
		checkAppendJSON(t, e, nil)
	})
}

// TestAppendJSONAllocs pins the point of appendJSON: into a buffer with
// room, it does not allocate.
func TestAppendJSONAllocs(t *testing.T) {
	e := benchEvent()
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := appendJSON(buf[:0], e); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("appendJSON: %v allocations, want 0", n)
	}
}

// BenchmarkAppendJSON runs appendJSON beside json.Marshal, its reference,
// on the same event.
func BenchmarkAppendJSON(b *testing.B) {
	e := benchEvent()
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			var err error
			if buf, _, err = appendJSON(buf[:0], e); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			out, err := json.Marshal(e)
			if err != nil {
				b.Fatal(err)
			}
			n = len(out)
		}
		b.SetBytes(int64(n))
	})
}

// usageExamples returns the contract examples in testdata/usage by file
// name.
func usageExamples(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/usage/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 5 {
		t.Fatalf("found %d examples in testdata/usage, want at least 5", len(paths))
	}
	out := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// pick returns one of vs.
func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

// TestAppendFloatMilliseconds holds appendFloat's fast path (milliseconds
// to the microsecond) to encoding/json on its edges and on many values.
func TestAppendFloatMilliseconds(t *testing.T) {
	check := func(f float64) {
		t.Helper()
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFloat(nil, f); !bytes.Equal(got, want) {
			t.Fatalf("appendFloat(%v) = %s, want %s", f, got, want)
		}
	}
	for _, f := range []float64{0, 0.001, 0.0009, 0.01, 0.1, 0.5, 1, 1.5, 10.25, 999.999, 1000, 1234.5678, 240,
		1e9 - 0.001, 1e9, 1e9 + 0.001, 999999999.999, 123456789.012, math.Nextafter(0.001, 1), math.Nextafter(1.5, 2)} {
		check(f)
	}
	r := rand.New(rand.NewPCG(3, 2026))
	for range 200000 {
		us := r.Int64N(int64(1e12)) // microseconds, past the fast path's bound
		if r.IntN(2) == 0 {
			us = r.Int64N(int64(10 * time.Minute / time.Microsecond))
		}
		check(ms(time.Duration(us) * time.Microsecond))
	}
}
