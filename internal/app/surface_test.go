package app

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestCompletionsSDK: the legacy Completions endpoint (fill-in-the-middle
// clients) works through the node with the official SDK, whole and
// streamed; the provider sees its own model, the prompt and suffix as sent,
// and, for the stream, include_usage the node asked for. Each call leaves
// a usage event with the provider's counts.
func TestCompletionsSDK(t *testing.T) {
	s := startStack(t, stackOptions{})
	oc := openAIClient(s, clientKey)
	ctx := t.Context()
	params := openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel(openAIModel),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("def add(a, b):")},
		Suffix: openai.String("\nprint(add(1, 2))"),
	}

	res, err := oc.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("Completions.New: %v", err)
	}
	if len(res.Choices) != 1 || res.Choices[0].Text != "echo: def add(a, b):" || res.Choices[0].FinishReason != "stop" {
		t.Errorf("choices = %+v", res.Choices)
	}
	if res.Usage.PromptTokens != 3 {
		t.Errorf("usage = %+v", res.Usage)
	}
	last := lastRequest(t, s)
	if last.Path != "/v1/completions" || last.Model != openAIProvModel || !strings.Contains(last.Body, `"suffix":"\nprint(add(1, 2))"`) {
		t.Errorf("provider saw %s model %q body %s", last.Path, last.Model, last.Body)
	}

	st := oc.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	chunks := 0
	for st.Next() {
		c := st.Current()
		chunks++
		if len(c.Choices) == 0 {
			t.Errorf("chunk %d without choices reached the client: %+v", chunks, c)
			continue
		}
		text.WriteString(c.Choices[0].Text)
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if text.String() != "echo: def add(a, b):" {
		t.Errorf("streamed text %q", text.String())
	}
	if last := lastRequest(t, s); !last.Stream || !strings.Contains(last.Body, `"include_usage":true`) {
		t.Errorf("provider stream body %s, want include_usage asked for", last.Body)
	}

	s.shutdown()
	var got []string
	for _, ev := range s.outboxEvents(t) {
		if ev.Endpoint != usageevent.EndpointCompletions {
			continue
		}
		if ev.Usage == nil || ev.Usage.InputTokens != 3 || ev.Usage.OutputTokens != 3 {
			t.Errorf("event stream=%v usage %+v, want 3 in, 3 out", ev.Stream, ev.Usage)
		}
		got = append(got, ev.Protocol+" "+ev.PublicModel+" "+ev.ProviderModel)
	}
	if len(got) != 2 {
		t.Errorf("completions events %q, want 2", got)
	}
}
