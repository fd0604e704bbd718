package openai

import (
	"strings"
	"testing"
)

// BenchmarkInspectChat is the inspection of a chat completion request:
// a plain one, and a stream whose client asks for usage itself
// (stream_options read in the same pass as the body).
func BenchmarkInspectChat(b *testing.B) {
	words := strings.Repeat("the quick brown fox jumps over the lazy dog ", 8)
	for _, tc := range []struct{ name, body string }{
		{"json", `{"model":"demo-gpt","messages":[{"role":"system","content":"be brief"},` +
			`{"role":"user","content":"hello from the load generator"}],"temperature":0.2}`},
		{"stream", `{"model":"demo-gpt","stream":true,"stream_options":{"include_usage":true},` +
			`"messages":[{"role":"user","content":"` + words + `"}]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if r, berr := inspectChat(body, ""); berr != nil || r.Model != "demo-gpt" {
					b.Fatalf("inspectChat = %+v, %v", r, berr)
				}
			}
		})
	}
}
