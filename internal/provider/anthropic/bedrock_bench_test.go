package anthropic

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
)

// benchEvents is a Messages stream of n events: start, n-2 text deltas,
// stop.
func benchEvents(n int) []string {
	evs := []string{evStart}
	for range n - 2 {
		evs = append(evs, evDelta)
	}
	return append(evs, evStop)
}

// BenchmarkStreamReframe is the cost of reading one 20-event Messages
// stream as the request path reads it (sse.Reader over the answer):
// plain, as Anthropic sends it, and from Bedrock's event stream through
// EventStream (the SDK's CRC-checked decode, JSON and base64 of each
// chunk, the SSE framing). ns/event is per event.
func BenchmarkStreamReframe(b *testing.B) {
	const n = 20
	var plain, frames []byte
	for _, ev := range benchEvents(n) {
		plain = append(plain, "event: x\ndata: "+ev+"\n\n"...)
		frames = append(frames, chunkFrame(b, ev)...)
	}
	read := func(b *testing.B, open func() io.Reader) {
		b.ReportAllocs()
		for b.Loop() {
			r := sse.NewReader(open(), 1<<20)
			got := 0
			for {
				_, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				got++
			}
			r.Release()
			if got != n {
				b.Fatalf("%d events, want %d", got, n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
	}
	b.Run("anthropic", func(b *testing.B) { read(b, func() io.Reader { return bytes.NewReader(plain) }) })
	b.Run("bedrock", func(b *testing.B) { read(b, func() io.Reader { return NewEventStream(bytes.NewReader(frames)) }) })
}

// BenchmarkBedrockBody is the body edit of one request (model member out,
// anthropic_version and anthropic_beta in) beside the first-party model
// rewrite (Request.Split).
func BenchmarkBedrockBody(b *testing.B) {
	body := []byte(`{"model":"claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("hello ", 300) + `"}]}`)
	r, berr := inspectMessages(body, "")
	if berr != nil {
		b.Fatal(berr)
	}
	b.Run("anthropic", func(b *testing.B) {
		b.ReportAllocs()
		var p provider.Pieces
		for b.Loop() {
			r.Split(body, []byte(`"claude-sonnet-4-5"`), nil, false, &p)
		}
	})
	b.Run("bedrock", func(b *testing.B) {
		b.ReportAllocs()
		var p provider.Pieces
		h := map[string][]string{}
		for b.Loop() {
			if err := bedrockBody(&r, body, h, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
