package app

import (
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
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

// patternTOML adds two patterns on the Anthropic backend: claude-*
// passes the asked name through, claude-haiku-* sends one fixed model.
const patternTOML = `
[models."claude-*"]
[[models."claude-*".targets]]
backend = "an"
model = "claude-*"
weight = 1
stream = true
tools = true
[models."claude-haiku-*"]
[[models."claude-haiku-*".targets]]
backend = "an"
model = "claude-haiku-4-5-20251001"
weight = 1
stream = true
`

// TestModelPatterns drives a node whose routes hold patterns with the
// official Anthropic SDK, asking for the names Claude Code asks for: the
// provider sees the model the pattern's target makes of the name, the
// exact name still wins, the model list holds no pattern, a retrieve of
// a patterned name answers, and each usage event names the asked name
// and the pattern that matched.
func TestModelPatterns(t *testing.T) {
	s := startStack(t, stackOptions{extraTOML: patternTOML})
	ctx := t.Context()
	ac := anthropicClient(s, clientKey)

	ask := func(model string, stream bool) string {
		t.Helper()
		p := anthropicParams("one two")
		p.Model = anthropic.Model(model)
		if stream {
			st := ac.Messages.NewStreaming(ctx, p)
			var msg anthropic.Message
			for st.Next() {
				if err := msg.Accumulate(st.Current()); err != nil {
					t.Fatalf("%s: Accumulate: %v", model, err)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatalf("%s stream: %v", model, err)
			}
		} else if _, err := ac.Messages.New(ctx, p); err != nil {
			t.Fatalf("%s: Messages.New: %v", model, err)
		}
		return lastRequest(t, s).Model
	}
	got := map[string]string{
		"claude-sonnet-4-5-20250929": ask("claude-sonnet-4-5-20250929", true),
		"claude-haiku-4-5-20251001":  ask("claude-haiku-4-5-20251001", false),
		"claude-haiku-4-5":           ask("claude-haiku-4-5", false),
		anthropicModel:               ask(anthropicModel, false),
	}
	want := map[string]string{
		"claude-sonnet-4-5-20250929": "claude-sonnet-4-5-20250929", // claude-*: the name as asked
		"claude-haiku-4-5-20251001":  "claude-haiku-4-5-20251001",  // claude-haiku-*: its fixed model
		"claude-haiku-4-5":           "claude-haiku-4-5-20251001",
		anthropicModel:               anthProvModel, // an exact name is not a pattern's
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("models the provider saw (-got +want):\n%s", diff)
	}

	// "claude-" has nothing after the prefix: no pattern matches it.
	p := anthropicParams("x")
	p.Model = "claude-"
	_, err := ac.Messages.New(ctx, p)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 {
		t.Errorf("claude-: %v, want a 404", err)
	}

	page, err := ac.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil {
		t.Fatalf("Models.List: %v", err)
	}
	var listed []string
	for _, m := range page.Data {
		listed = append(listed, m.ID)
	}
	if diff := cmp.Diff(listed, []string{anthropicModel}); diff != "" {
		t.Errorf("model list (-got +want): patterns are not listed\n%s", diff)
	}
	if m, err := ac.Models.Get(ctx, "claude-opus-4-1", anthropic.ModelGetParams{}); err != nil || m.ID != "claude-opus-4-1" {
		t.Errorf("Models.Get of a name claude-* matches = %+v, %v", m, err)
	}

	s.shutdown()
	type named struct{ Public, Pattern, Provider string }
	var events []named
	for _, ev := range s.outboxEvents(t) {
		events = append(events, named{ev.PublicModel, ev.ModelPattern, ev.ProviderModel})
	}
	if diff := cmp.Diff(events, []named{
		{"claude-sonnet-4-5-20250929", "claude-*", "claude-sonnet-4-5-20250929"},
		{"claude-haiku-4-5-20251001", "claude-haiku-*", "claude-haiku-4-5-20251001"},
		{"claude-haiku-4-5", "claude-haiku-*", "claude-haiku-4-5-20251001"},
		{anthropicModel, "", anthProvModel},
	}); diff != "" {
		t.Errorf("usage events (-got +want):\n%s", diff)
	}
}
