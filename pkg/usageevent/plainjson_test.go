package usageevent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzPlainJSON holds plainJSON to its promise: whatever it takes is valid
// JSON (what it refuses, json.Valid decides).
func FuzzPlainJSON(f *testing.F) {
	for _, s := range plainSamples {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		"", " ", "{", "}", `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a":1 "b":2}`,
		"01", "-", "-0", "1.", ".5", "1e", "1e+", "1E-7", "-0.0e0", "+1", "0x10", "1_000",
		`"\u0041"`, `"\x"`, "\"a\tb\"", `"a\"`, `"\/"`, "\"\xff\"", "tru", "nulll", "true false",
		`{"a":{"b":{"c":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}}}`, "\v{}", "{}\v", "{}\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if plainJSON(b) && !json.Valid(b) {
			t.Errorf("plainJSON(%q) = true, but json.Valid says it is not JSON", b)
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

// TestPlainJSONTakesProviderUsage checks that the fast path takes the usage
// objects providers send, those of the shared usage examples included:
// else every event would pay for json.Valid again.
func TestPlainJSONTakesProviderUsage(t *testing.T) {
	samples := append([]string(nil), plainSamples...)
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "usage", "*.json"))
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
		if !plainJSON([]byte(s)) {
			t.Errorf("plainJSON(%s) = false; want true", strings.ReplaceAll(s, "\n", " "))
		}
	}
	for _, s := range []string{`{"a":"\u00e9"}`, `{"a":1,}`, "{\"a\":1}\v"} {
		if plainJSON([]byte(s)) {
			t.Errorf("plainJSON(%q) = true; want false (left to json.Valid)", s)
		}
	}
}

// BenchmarkPlainJSON compares the fast path with json.Valid on a usage
// object as OpenAI sends it.
func BenchmarkPlainJSON(b *testing.B) {
	usage := []byte(plainSamples[0])
	b.Run("plainJSON", func(b *testing.B) {
		b.SetBytes(int64(len(usage)))
		for b.Loop() {
			if !plainJSON(usage) {
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
