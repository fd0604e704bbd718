package provider_test

import (
	"bytes"
	"testing"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

var usageKey = provider.NewKey("usage")

func TestMayHaveMember(t *testing.T) {
	tests := []struct {
		name, data string
		want       bool
	}{
		{"usage null last", `{"id":"x","choices":[{"delta":{"content":"Hi"}}],"usage":null}`, false},
		{"usage null last, spaced", "{\"choices\":[] , \"usage\" :\n null }\r\n", false},
		{"usage null first", `{"usage":null,"choices":[]}`, false},
		{"no usage", `{"id":"x","object":"chat.completion.chunk","choices":[]}`, false},
		{"usage object", `{"choices":[],"usage":{"prompt_tokens":1}}`, true},
		{"usage object first", `{"usage":{"prompt_tokens":1},"choices":[]}`, true},
		{"usage number", `{"usage":0}`, true},
		{"nested null only", `{"a":{"usage":null}}`, false},
		{"string value usage", `{"a":"usage"}`, true},
		{"name ending in usage", `{"ausage":{},"usage":null}`, false},
		// Lookup returns the last member of a name: a null one settles
		// what came before it.
		{"duplicate, null last", `{"usage":{"prompt_tokens":1},"usage":null}`, false},
		{"duplicate, object last", `{"usage":null,"usage":{"prompt_tokens":1}}`, true},
		// The last member's name is x"usage, not usage: the usage object
		// before it is the one Lookup returns.
		{"escaped quote before the last name", `{"usage":{"prompt_tokens":1},"x\"usage":null}`, true},
		{"escaped quote before the last name, spaced", `{"usage":{"prompt_tokens":1},"x\"usage" : null }`, true},
		{"null inside a nested last member", `{"usage":{},"a":{"usage":null}}`, true},
		{"not JSON", `usage":null}`, false},
		{"only the usage member", `{"usage":null}`, false},
		{"no object around it", `"usage":null}`, false},
		{"empty", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := provider.MayHaveMember([]byte(tt.data), usageKey); got != tt.want {
				t.Errorf("MayHaveMember(%s) = %v, want %v", tt.data, got, tt.want)
			}
		})
	}
}

// mayHaveValueRef is the definition MayHaveValue implements, written the
// plain way: every occurrence of key is followed by :null.
func mayHaveValueRef(data, key []byte) bool {
	for {
		i := bytes.Index(data, key)
		if i < 0 {
			return false
		}
		data = bytes.TrimLeft(data[i+len(key):], " \t\r\n")
		if len(data) == 0 || data[0] != ':' {
			return true
		}
		data = bytes.TrimLeft(data[1:], " \t\r\n")
		if !bytes.HasPrefix(data, []byte("null")) {
			return true
		}
		data = data[len("null"):]
	}
}

// FuzzMayHaveMember checks both filters against their definitions:
// MayHaveValue says what the plain search says, and MayHaveMember never
// says no where jsonedit.Lookup finds a value other than null under a
// name spelled without escapes.
func FuzzMayHaveMember(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","choices":[{"delta":{"content":"Hi"}}],"usage":null}`,
		`{"usage":{"prompt_tokens":1},"x\"usage":null}`,
		`{"usage":null,"usage":{"prompt_tokens":1}}`,
		`{"ausage":{},"usage" : null}`,
		`{"a":"usage","b":{"usage":null},"usage":[]}`,
		`{"candidates":[{"finishReason":"STOP"}],"usageMetadata":null}`,
		`{"":null,"""":1}`,
		`{"usageMetadata":null,"x":"usageMetadata","usageMetadata" :{"promptTokenCount":1}}`,
		`{"choices":[{"finish_reason":null},{"finish_reason":"stop"}]}`,
	} {
		for k := range byte(7) {
			f.Add([]byte(s), k)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, k byte) {
		// The names the providers search for, and short ones.
		names := []string{"usage", "finishReason", "usageMetadata", "finish_reason", "error", "a", ""}
		name := names[int(k)%len(names)]
		key, quoted := provider.NewKey(name), []byte(`"`+name+`"`)
		if got, want := provider.MayHaveValue(data, key), mayHaveValueRef(data, quoted); got != want {
			t.Fatalf("MayHaveValue(%q, %s) = %v, the plain search says %v", data, quoted, got, want)
		}
		may := provider.MayHaveMember(data, key)
		if may && !provider.MayHaveValue(data, key) {
			t.Fatalf("MayHaveMember(%q, %s) is true where MayHaveValue is false", data, quoted)
		}
		it, err := jsonedit.Members(data)
		if err != nil {
			return
		}
		var last jsonedit.Member
		found := false
		for {
			m, ok, err := it.Next()
			if err != nil {
				return // Lookup fails too
			}
			if !ok {
				break
			}
			if m.KeyIs(name) {
				last, found = m, true
			}
		}
		if found && string(last.RawKey) == name && string(last.Value) != "null" && !may {
			t.Fatalf("MayHaveMember(%q, %s) = false, but Lookup finds %s", data, quoted, last.Value)
		}
	})
}

// BenchmarkMayHaveMember is the filter on the chunks of a chat completion
// stream that asked for usage (each ends with "usage":null), on chunks
// without a usage member, and on a Responses delta.
func BenchmarkMayHaveMember(b *testing.B) {
	const head = `{"id":"chatcmpl-C1xQ7fR2kLmN8pVb3sT9uW0yZ","object":"chat.completion.chunk","created":1764410400,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]`
	for _, c := range []struct{ name, data string }{
		{"usage-null", head + `,"usage":null}`},
		{"no-usage-member", head + `}`},
		{"responses-delta", `{"type":"response.output_text.delta","item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":" word","sequence_number":5}`},
		{"responses-created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_67c9fdcecf488190bdd9a0a201cbd9ba","object":"response","created_at":1741290958,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":"You are a helpful assistant.","max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4.1-2025-04-14","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"auto","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}`},
	} {
		data := []byte(c.data)
		b.Run(c.name+"/member", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if provider.MayHaveMember(data, usageKey) {
					b.Fatal("found usage")
				}
			}
		})
		b.Run(c.name+"/value", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if provider.MayHaveValue(data, usageKey) {
					b.Fatal("found usage")
				}
			}
		})
	}
}

// FuzzLookup4 holds Lookup4 to its definition: for each key, what
// jsonedit.Lookup returns.
func FuzzLookup4(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":19,"completion_tokens":196,"total_tokens":215,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`,
		`{"pr\u006fmpt_tokens":1,"":2,"prompt_tokens":3,"\u0070rompt_tokens":4}`,
		`{"input_tokens":5,"INPUT_TOKENS":6,"input_tokens ":7,"\ufffdnput_tokens":8}`,
		"{\"\xffput_tokens\":9,\"output_tokens\":1}",
	} {
		f.Add([]byte(s))
	}
	keys := [][4]string{
		{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"},
		{"input_tokens", "output_tokens", "", ""},
		{"", "\ufffdnput_tokens", "a", "é"},
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		for _, ks := range keys {
			got := provider.Lookup4(obj, ks)
			for i, k := range ks {
				want, _, _ := jsonedit.Lookup(obj, k)
				if !bytes.Equal(got[i], want) || (got[i] == nil) != (want == nil) {
					t.Fatalf("Lookup4(%q)[%q] = %q, Lookup says %q", obj, k, got[i], want)
				}
			}
		}
	})
}

// BenchmarkLookup4 is the read of OpenAI's usage object as normalize
// reads it.
func BenchmarkLookup4(b *testing.B) {
	obj := []byte(`{"prompt_tokens":19,"completion_tokens":196,"total_tokens":215,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`)
	keys := [4]string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"}
	b.ReportAllocs()
	for b.Loop() {
		if v := provider.Lookup4(obj, keys); v[3] == nil {
			b.Fatal("no completion_tokens_details")
		}
	}
}

// FuzzUsageFormRead holds UsageForm.Read and FindUsage to their
// definition: each count looked up on its own with jsonedit.Lookup (and
// Inner for a count inside an object), after a Lookup of the usage object.
func FuzzUsageFormRead(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":19,"completion_tokens":196,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":5,"reasoning_tokens":6}}`,
		`{"pr\u006fmpt_tokens":1,"":2,"prompt_tokens":3,"prompt_tokens_details":[1],"x":{"y":{}}}`,
		`{"completion_tokens_details":{"reasoning_tokens":1},"completion_tokens_details":null}`,
		`{"prompt_tokens_details":{"cached_tokens":1,}}`,
	} {
		f.Add([]byte(s))
	}
	form := provider.UsageForm{
		Names: [5]string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details", ""},
		Inner: [5]string{2: "cached_tokens", 3: "reasoning_tokens"},
		Normalize: func(c [5]int64) usageevent.Usage {
			return usageevent.Usage{InputTokens: c[0], OutputTokens: c[1], CacheReadTokens: c[2], ReasoningTokens: c[3], CacheWriteTokens: c[4]}
		},
	}
	read := func(obj []byte) usageevent.Usage {
		var c [5]int64
		for i, name := range form.Names {
			if name == "" {
				continue
			}
			v, ok, err := jsonedit.Lookup(obj, name)
			switch {
			case err != nil || !ok:
			case form.Inner[i] == "":
				c[i] = provider.Count(v)
			default:
				c[i] = provider.Inner(v, form.Inner[i])
			}
		}
		return form.Normalize(c)
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		if got, want := form.Read(obj), read(obj); got != want {
			t.Fatalf("Read(%q) = %+v, Lookup per count says %+v", obj, got, want)
		}
		doc := append(append([]byte(`{"usage":`), obj...), '}')
		u, raw, ok := provider.FindUsage(doc, "usage", &form)
		wantRaw, wantOK, err := jsonedit.Lookup(doc, "usage")
		wantOK = err == nil && wantOK && provider.Usable(wantRaw)
		if ok != wantOK || (ok && (!bytes.Equal(raw, wantRaw) || u != read(wantRaw))) {
			t.Fatalf("FindUsage(%q) = %+v, %q, %v; Lookup and Read say %q, %v", doc, u, raw, ok, wantRaw, wantOK)
		}
	})
}
