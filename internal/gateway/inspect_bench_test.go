package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/openai"
)

// smallChatBody is a typical ~300 byte chat completion request.
const smallChatBody = `{"model":"gpt-4o","messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"Summarise the plot of Hamlet in two sentences, please. Mention \"Ophelia\"."}],` +
	`"temperature":0.7,"max_tokens":256,"stream":true,"stream_options":{"include_usage":true},"user":"u-42"}`

// largeChatBody returns a chat request of at least size bytes: a long
// conversation, a tool definition and a JSON schema response format, with
// the model last.
func largeChatBody(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"messages":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"role":"user","content":"Message %d: %s \"quoted\" \u00e9\n","name":"n%d","meta":{"model":"nested","n":[1,2.5,true,null]}}`,
			i, strings.Repeat("lorem ipsum dolor sit amet ", 30), i)
	}
	b.WriteString(`],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],`)
	b.WriteString(`"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"}}},`)
	b.WriteString(`"temperature":0.2,"stream":true,"model":"gpt-4o"}`)
	return []byte(b.String())
}

var inspectBenchBodies = []struct {
	name    string
	body    []byte
	invalid bool
}{
	{name: "small", body: []byte(smallChatBody)},
	{name: "100KiB", body: largeChatBody(100 << 10)},
	{name: "1MiB", body: largeChatBody(1 << 20)},
	// The error path asks encoding/json for its message: a second scan.
	{name: "1MiB-invalid-at-end", body: append(largeChatBody(1<<20), ','), invalid: true},
}

var inspectSink request

// BenchmarkInspect compares inspect with the encoding/json implementation
// it replaced (refInspect), on the same bodies in the same run:
//
//	go test -run '^$' -bench Inspect -benchmem -count 6 ./internal/gateway | benchstat -col /impl -
func BenchmarkInspect(b *testing.B) {
	impls := []struct {
		name string
		fn   func(provider.Protocol, []byte) (request, *apierr.Error)
	}{
		{"old", refInspect},
		{"new", inspect},
	}
	for _, bb := range inspectBenchBodies {
		for _, impl := range impls {
			b.Run("body="+bb.name+"/impl="+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(bb.body)))
				for b.Loop() {
					r, err := impl.fn(provider.OpenAI, bb.body)
					if (err != nil) != bb.invalid || (!bb.invalid && r.model != "gpt-4o") {
						b.Fatalf("inspect = %+v, %v", r, err)
					}
					inspectSink = r
				}
			})
		}
	}
}

// TestInspectAllocs pins the single-pass scan's one allocation, the model
// string, whatever capabilities the body asks for.
func TestInspectAllocs(t *testing.T) {
	for _, tc := range []struct {
		proto provider.Protocol
		body  string
	}{
		{provider.OpenAI, smallChatBody},
		{provider.OpenAI, `{"model":"gpt-4o","tools":[{"type":"function"}],"response_format":{"type":"json_schema","json_schema":{}}}`},
		{provider.Anthropic, `{"model":"claude","stream":true,"output_config":{"format":{"type":"json_schema"}},"output_format":{"type":"text"}}`},
	} {
		body := []byte(tc.body)
		if got := testing.AllocsPerRun(100, func() {
			if _, err := inspect(tc.proto, body); err != nil {
				t.Fatal(err.Msg)
			}
		}); got != 1 {
			t.Errorf("inspect(%s) allocations = %v, want 1 (the model)", body, got)
		}
	}
}

// BenchmarkPrepare is what an attempt does to the client's body before it
// is sent: inspect it once (Spec.Inspect, which notes where the model and
// stream_options are), then split it into the pieces it is sent as, the
// model replaced and usage asked for (Request.Split), without a copy. Two
// walks of the body: the read and the inspection.
func BenchmarkPrepare(b *testing.B) {
	model := []byte(`"gpt-4o-2024-08-06"`)
	for _, bb := range inspectBenchBodies {
		if bb.invalid {
			continue
		}
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.body)))
			for b.Loop() {
				r, berr := openai.Chat.Inspect(bb.body, "")
				if berr != nil {
					b.Fatal(berr)
				}
				var body piecesBody
				if r.Split(bb.body, model, nil, true, &body.p); body.p.Len() <= len(bb.body) {
					b.Fatal("no edit")
				}
			}
		})
	}
}
