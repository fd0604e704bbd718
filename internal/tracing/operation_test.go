package tracing

import (
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
)

// TestOperationNames: every client endpoint has a gen_ai.operation.name
// from the OpenTelemetry GenAI conventions' list or, where the list has
// none (rerank, speech), the plain name of what it does; chat is only for
// the endpoints that chat.
func TestOperationNames(t *testing.T) {
	want := map[provider.Endpoint]string{
		provider.Chat: "chat", provider.Messages: "chat", provider.Responses: "chat",
		provider.Embeddings: "embeddings", provider.CountTokens: "count_tokens",
		provider.Completions: "text_completion", provider.Rerank: "rerank",
		provider.AudioSpeech: "text_to_speech", provider.AudioTranscriptions: "speech_to_text",
		provider.AudioTranslations: "speech_to_text", provider.ImageGenerations: "image_generation",
		provider.ImageEdits: "image_generation",
	}
	for e, op := range want {
		if got := operation(e.String()); got != op {
			t.Errorf("%s: operation %q, want %q", e, got, op)
		}
	}
}
