package sse_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/scootgate/scootgate/internal/sse"
)

// openAIStream returns a realistic chat completion stream of n events: a
// role chunk, content chunks, a finish chunk, a usage chunk and [DONE].
func openAIStream(n int) []byte {
	const head = `data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[`
	var b bytes.Buffer
	b.WriteString(head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	for i := range n - 4 {
		fmt.Fprintf(&b, head+`{"index":0,"delta":{"content":" token%d"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	b.WriteString(head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n")
	b.WriteString(head + `],"usage":{"prompt_tokens":19,"completion_tokens":196,"total_tokens":215,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

var anthropicSample = []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25}}}\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
	": keepalive\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")

func BenchmarkReader(b *testing.B) {
	stream := openAIStream(200)

	// One op is a whole 200-event stream, including NewReader.
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(stream)))
		for b.Loop() {
			rd := sse.NewReader(bytes.NewReader(stream), 0)
			n := 0
			for {
				_, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
			if n != 200 {
				b.Fatalf("read %d events, want 200", n)
			}
		}
	})

	// One op is one event of an endless stream of named events (event:
	// and data: lines, a comment), as Anthropic sends them.
	b.Run("named", func(b *testing.B) {
		rd := sse.NewReader(&loopReader{b: anthropicSample}, 0)
		b.ReportAllocs()
		b.SetBytes(int64(len(anthropicSample) / 5))
		for b.Loop() {
			if _, err := rd.Next(); err != nil {
				b.Fatal(err)
			}
		}
	})

	// One op is one event of an endless stream: the steady state.
	b.Run("event", func(b *testing.B) {
		rd := sse.NewReader(&loopReader{b: stream}, 0)
		b.ReportAllocs()
		b.SetBytes(int64(len(stream) / 200))
		for b.Loop() {
			if _, err := rd.Next(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRelay is the gateway's use of a stream whose events come
// apart (a provider writes each as it is ready): each read brings one
// event, and after each Next the relay asks Buffered whether to flush.
// One op is one event.
func BenchmarkRelay(b *testing.B) {
	var events [][]byte
	rd := sse.NewReader(bytes.NewReader(openAIStream(200)), 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, bytes.Clone(ev.Raw))
	}
	rd = sse.NewReader(&eventReader{events: events}, 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(openAIStream(200)) / 200))
	for b.Loop() {
		if _, err := rd.Next(); err != nil {
			b.Fatal(err)
		}
		if rd.Buffered() {
			b.Fatal("an event arrived early")
		}
	}
}

// eventReader returns one of events per Read, in a loop.
type eventReader struct {
	events [][]byte
	i      int
}

func (e *eventReader) Read(p []byte) (int, error) {
	n := copy(p, e.events[e.i%len(e.events)])
	e.i++
	return n, nil
}
