package app

import (
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestResponsesCompactAndInputTokens drives the stateless Responses
// helpers through a whole node with the official OpenAI SDK: the provider
// gets the target's model at its own path, the client gets the answer as
// the provider wrote it, and each attempt's usage event names its
// endpoint, with the compaction's usage and none for the count.
func TestResponsesCompactAndInputTokens(t *testing.T) {
	s := startStack(t, stackOptions{})
	ctx := t.Context()
	oc := openAIClient(s, clientKey)

	c, err := oc.Responses.Compact(ctx, responses.ResponseCompactParams{
		Model: openAIModel,
		Input: responses.ResponseCompactParamsInputUnion{OfString: openai.String("one two three")},
	})
	if err != nil {
		t.Fatalf("Responses.Compact: %v", err)
	}
	if c.Object != "response.compaction" || len(c.Output) != 2 || c.Usage.InputTokens != 3 {
		t.Errorf("compaction = object %q, %d items, usage %+v", c.Object, len(c.Output), c.Usage)
	}
	if last := lastRequest(t, s); last.Model != openAIProvModel || last.Path != "/v1/responses/compact" {
		t.Errorf("provider saw %s model %q", last.Path, last.Model)
	}

	n, err := oc.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{
		Model: openai.String(openAIModel),
		Input: responses.InputTokenCountParamsInputUnion{OfString: openai.String("one two three four")},
	})
	if err != nil {
		t.Fatalf("Responses.InputTokens.Count: %v", err)
	}
	if n.InputTokens != 4 || n.Object != "response.input_tokens" {
		t.Errorf("count = %+v", n)
	}
	if last := lastRequest(t, s); last.Model != openAIProvModel || last.Path != "/v1/responses/input_tokens" {
		t.Errorf("provider saw %s model %q", last.Path, last.Model)
	}

	s.shutdown()
	evs := s.outboxEvents(t)
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	if ev := evs[0]; ev.Endpoint != usageevent.EndpointResponsesCompact || ev.HTTPStatus != 200 || ev.Usage == nil || ev.Usage.InputTokens != 3 || ev.ProviderModel != openAIProvModel {
		t.Errorf("compact event: endpoint %q status %d usage %+v model %q", ev.Endpoint, ev.HTTPStatus, ev.Usage, ev.ProviderModel)
	}
	if ev := evs[1]; ev.Endpoint != usageevent.EndpointResponsesInputTokens || ev.HTTPStatus != 200 || ev.Usage != nil {
		t.Errorf("input_tokens event: endpoint %q status %d usage %+v", ev.Endpoint, ev.HTTPStatus, ev.Usage)
	}
}
