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
