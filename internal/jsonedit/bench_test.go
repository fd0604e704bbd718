package jsonedit_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/jsonedit"
)

// smallBody is a typical ~300 byte chat completion request.
const smallBody = `{"model":"gpt-4o","messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"Summarise the plot of Hamlet in two sentences, please. Mention \"Ophelia\"."}],` +
	`"temperature":0.7,"max_tokens":256,"stream":true,"stream_options":{"include_usage":true},"user":"u-42"}`

// largeBody returns a chat request of at least size bytes (a long
// conversation) with the model member first or last.
func largeBody(size int, modelFirst bool) []byte {
	var b strings.Builder
	b.WriteString("{")
	if modelFirst {
		b.WriteString(`"model":"gpt-4o",`)
	}
	b.WriteString(`"messages":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"role":"user","content":"Message %d: %s \"quoted\" \u00e9\n","name":"n%d","meta":{"model":"nested","n":[1,2.5,true,null]}}`,
			i, strings.Repeat("lorem ipsum dolor sit amet ", 30), i)
	}
	b.WriteString(`],"temperature":0.2,"stream":true`)
	if !modelFirst {
		b.WriteString(`,"model":"gpt-4o"`)
	}
	b.WriteString("}")
	return []byte(b.String())
}

var benchBodies = []struct {
	name string
	doc  []byte
}{
	{"small", []byte(smallBody)},
	{"1MiB/model-first", largeBody(1<<20, true)},
	{"1MiB/model-last", largeBody(1<<20, false)},
}

var sink []byte

func BenchmarkReplace(b *testing.B) {
	value := []byte(`"gpt-4o-2024-08-06"`)
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.doc)))
			for b.Loop() {
				out, n, err := jsonedit.Replace(bb.doc, "model", value)
				if err != nil || n != 1 {
					b.Fatalf("Replace: n=%d err=%v", n, err)
				}
				sink = out
			}
		})
	}
}

// BenchmarkReplaceBaseline is what jsonedit replaces: decode the body into
// a map, set the model and encode it again (which also loses member order,
// number spelling and duplicate keys).
func BenchmarkReplaceBaseline(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.doc)))
			for b.Loop() {
				var m map[string]any
				if err := json.Unmarshal(bb.doc, &m); err != nil {
					b.Fatal(err)
				}
				m["model"] = "gpt-4o-2024-08-06"
				out, err := json.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				sink = out
			}
		})
	}
}

func BenchmarkLookup(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.doc)))
			for b.Loop() {
				raw, ok, err := jsonedit.Lookup(bb.doc, "model")
				if err != nil || !ok {
					b.Fatalf("Lookup: ok=%v err=%v", ok, err)
				}
				sink = raw
			}
		})
	}
}

// answerBody is a non-stream chat completion answer as OpenAI writes it,
// with a paragraph of content: what the node reads the usage from.
var answerBody = []byte(`{"id":"chatcmpl-AbC123dEf456GhI789jKl","object":"chat.completion","created":1764590400,` +
	`"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"` +
	strings.Repeat("Hamlet, prince of Denmark, feigns madness to avenge his father's murder by his uncle Claudius; ", 6) +
	`\n\nOphelia, caught between them, drowns.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":25,"completion_tokens":120,"total_tokens":145,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},` +
	`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},` +
	`"service_tier":"default","system_fingerprint":"fp_0ba0d124f1"}`)

// BenchmarkLookupUsage is the read of a whole answer's usage object.
func BenchmarkLookupUsage(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(answerBody)))
	for b.Loop() {
		raw, ok, err := jsonedit.Lookup(answerBody, "usage")
		if err != nil || !ok {
			b.Fatalf("Lookup: ok=%v err=%v", ok, err)
		}
		sink = raw
	}
}

// BenchmarkMembers walks every top-level member, comparing each key with
// four names, as the request path's scans do.
func BenchmarkMembers(b *testing.B) {
	names := []string{"model", "stream", "max_tokens", "messages"}
	for _, bb := range []struct {
		name string
		doc  []byte
	}{{"request", []byte(smallBody)}, {"answer", answerBody}} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.doc)))
			for b.Loop() {
				it, err := jsonedit.Members(bb.doc)
				if err != nil {
					b.Fatal(err)
				}
				for {
					m, ok, err := it.Next()
					if err != nil {
						b.Fatal(err)
					}
					if !ok {
						break
					}
					for _, n := range names {
						if m.KeyIs(n) {
							sink = m.Value
						}
					}
				}
			}
		})
	}
}
