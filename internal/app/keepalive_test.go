package app

import (
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
)

// TestSDKStreamsAfterKeepaliveBeforeFirstEvent: both official SDKs read a
// stream whose 200 and first bytes were a keepalive sent while the
// provider thought before its first event (stream_keepalive 1s, first
// event after 1.5s), and accumulate the whole answer.
func TestSDKStreamsAfterKeepaliveBeforeFirstEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("waits through a 1.5 s provider silence per SDK")
	}
	s := startStack(t, stackOptions{keepalive: "1s", firstByte: "10s"})
	ctx := t.Context()
	t.Run("openai", func(t *testing.T) {
		oc := openAIClient(s, clientKey)
		st := oc.Chat.Completions.NewStreaming(ctx, openAIParams("think [[first_event_delay_ms=1500]] [[chunks=3]]"))
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if got := acc.Choices[0].Message.Content; got != "echo: think" {
			t.Errorf("content = %q, want %q", got, "echo: think")
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		ac := anthropicClient(s, clientKey)
		st := ac.Messages.NewStreaming(ctx, anthropicParams("think [[first_event_delay_ms=1500]] [[chunks=3]]"))
		var msg anthropic.Message
		for st.Next() {
			if err := msg.Accumulate(st.Current()); err != nil {
				t.Fatalf("Accumulate: %v", err)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if len(msg.Content) == 0 || msg.Content[0].Text != "echo: think" || msg.StopReason != "end_turn" {
			t.Errorf("message = %+v, want echo: think, end_turn", msg)
		}
	})
}
