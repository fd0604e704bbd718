package plainjson

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzSeeds are inputs near the edges of plain JSON.
var fuzzSeeds = []string{
	"", " ", "{", "}", `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a":1 "b":2}`,
	"01", "-", "-0", "1.", ".5", "1e", "1e+", "1E-7", "-0.0e0", "+1", "0x10", "1_000",
	`"\u0041"`, `"\x"`, "\"a\tb\"", `"a\"`, `"\/"`, "\"\xff\"", "tru", "nulll", "true false",
	`{"a":{"b":{"c":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}}}`, "\v{}", "{}\v", "{}\x00",
	`{"a":"<b>&\u2028"}`, "{\"a\":\"\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\xaa\xe2\x80\"}", " { \"x\" : [ 1 , \"<\" ] } ",
}

// FuzzValid holds Valid to its promise: whatever it takes is valid JSON
// (what it refuses, json.Valid decides).
func FuzzValid(f *testing.F) {
	for _, s := range append(plainSamples, fuzzSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if Valid(b) && !json.Valid(b) {
			t.Errorf("Valid(%q) = true, but json.Valid says it is not JSON", b)
		}
	})
}

// FuzzAppendObject holds AppendObject to encoding/json: what it takes is a
// JSON object, and it appends the bytes json.Compact and json.HTMLEscape
// make of it (what encoding/json writes for a json.RawMessage), after dst
// as it was; what it refuses it leaves dst as it was.
func FuzzAppendObject(f *testing.F) {
	for _, s := range append(plainSamples, fuzzSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		dst := []byte("prefix:")
		out, ok := AppendObject(dst, src)
		if !bytes.HasPrefix(out, []byte("prefix:")) {
			t.Fatalf("AppendObject(%q) lost dst: %q", src, out)
		}
		if !ok {
			if len(out) != len(dst) {
				t.Errorf("AppendObject(%q) refused it but appended %q", src, out[len(dst):])
			}
			return
		}
		if !json.Valid(src) || bytes.TrimLeft(src, " \t\r\n")[0] != '{' {
			t.Fatalf("AppendObject(%q) took what is not a JSON object", src)
		}
		if !Valid(src) {
			t.Errorf("AppendObject took %q, Valid did not", src)
		}
		var compact, want bytes.Buffer
		if err := json.Compact(&compact, src); err != nil {
			t.Fatal(err)
		}
		json.HTMLEscape(&want, compact.Bytes())
		if got := out[len(dst):]; !bytes.Equal(got, want.Bytes()) {
			t.Errorf("AppendObject(%q) = %q, want %q", src, got, want.Bytes())
		}
	})
}

// plainSamples are usage objects as the providers send them.
var plainSamples = []string{
	`{"prompt_tokens":615,"completion_tokens":153,"total_tokens":768,"prompt_tokens_details":{"cached_tokens":512}}`,
	`{"input_tokens":12,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,"cache_creation":{"ephemeral_5m_input_tokens":2048,"ephemeral_1h_input_tokens":0},"output_tokens":153,"service_tier":"standard"}`,
	"{\n    \"promptTokenCount\": 8,\n    \"candidatesTokenCount\": 12,\n    \"totalTokenCount\": 20,\n    \"promptTokensDetails\": [\n      {\n        \"modality\": \"TEXT\",\n        \"tokenCount\": 8\n      }\n    ]\n  }",
	`{"inputTokens":30,"outputTokens":628,"totalTokens":658,"cacheReadInputTokens":0,"cacheWriteInputTokens":0}`,
	`{"total_tokens":0.5e3,"ratio":-1.25E-2,"tier":null,"flag":true,"off":false,"note":"a \"quoted\" \\ word"}`,
}

// TestTakesProviderUsage checks that the fast paths take the usage
// objects providers send, those of the shared usage examples included:
// else every event would pay for encoding/json again.
func TestTakesProviderUsage(t *testing.T) {
	samples := append([]string(nil), plainSamples...)
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "testdata", "usage", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the shared usage examples: %d files, %v", len(files), err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			ProviderUsage json.RawMessage `json:"provider_usage"`
		}
		if json.Unmarshal(data, &ev) != nil || len(ev.ProviderUsage) == 0 || string(ev.ProviderUsage) == "null" {
			continue
		}
		samples = append(samples, string(ev.ProviderUsage))
	}
	for _, s := range samples {
		if !Valid([]byte(s)) {
			t.Errorf("Valid(%s) = false; want true", strings.ReplaceAll(s, "\n", " "))
		}
		if _, ok := AppendObject(nil, []byte(s)); !ok {
			t.Errorf("AppendObject(%s) refused it", strings.ReplaceAll(s, "\n", " "))
		}
	}
	for _, s := range []string{`{"a":"\u00e9"}`, `{"a":1,}`, "{\"a\":1}\v"} {
		if Valid([]byte(s)) {
			t.Errorf("Valid(%q) = true; want false (left to json.Valid)", s)
		}
		if _, ok := AppendObject(nil, []byte(s)); ok {
			t.Errorf("AppendObject(%q) took it; want it left to encoding/json", s)
		}
	}
	// Valid takes any plain value, AppendObject objects only.
	for _, s := range []string{`[1,2]`, `"a"`, ` 7 `, `null`} {
		if !Valid([]byte(s)) {
			t.Errorf("Valid(%q) = false; want true", s)
		}
		if _, ok := AppendObject(nil, []byte(s)); ok {
			t.Errorf("AppendObject(%q) took what is not an object", s)
		}
	}
}

// BenchmarkValid compares the fast path with json.Valid on a usage
// object as OpenAI sends it.
func BenchmarkValid(b *testing.B) {
	usage := []byte(plainSamples[0])
	b.Run("Valid", func(b *testing.B) {
		b.SetBytes(int64(len(usage)))
		for b.Loop() {
			if !Valid(usage) {
				b.Fatal("not plain")
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(usage)))
		for b.Loop() {
			if !json.Valid(usage) {
				b.Fatal("not valid")
			}
		}
	})
}
