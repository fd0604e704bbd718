package tracing

import (
	"context"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// operation is gen_ai.operation.name for a client endpoint.
func operation(endpoint string) string {
	switch endpoint {
	case usageevent.EndpointEmbeddings:
		return "embeddings"
	case usageevent.EndpointCountTokens, usageevent.EndpointResponsesInputTokens:
		return "count_tokens"
	case usageevent.EndpointResponsesCompact:
		return "compact"
	case usageevent.EndpointCompletions:
		return "text_completion"
	case usageevent.EndpointRerank:
		return "rerank"
	case usageevent.EndpointAudioSpeech:
		return "text_to_speech"
	case usageevent.EndpointAudioTranscriptions, usageevent.EndpointAudioTranslations:
		return "speech_to_text"
	case usageevent.EndpointImageGenerations, usageevent.EndpointImageEdits:
		return "image_generation"
	}
	return "chat" // chat completions, messages, responses
}

// Recording reports whether ctx carries a request span (the request is
// sampled and tracing is on).
func (t *Tracer) Recording(ctx context.Context) bool {
	return t != nil && FromContext(ctx) != nil
}

// Attempt records one finished provider attempt, from its usage event
// and the outcome its answer reported, as a child span of the request
// span in ctx; without one (the request is not sampled, or tracing is
// off) it does nothing. It reads ev and keeps nothing of it; only ids,
// model names, counts and the closed-set words of the event, and the
// outcome's bounded response model and finish reasons, reach the span.
func (t *Tracer) Attempt(ctx context.Context, ev *usageevent.Event, out provider.Outcome) {
	q := FromContext(ctx)
	if t == nil || q == nil || ev == nil {
		return
	}
	op := operation(ev.Endpoint)
	s := &span{
		name: op + " " + ev.ProviderModel, kind: kindClient, trace: q.s.trace, id: t.newSpanID(), parent: q.s.id,
		start: ev.StartedAt,
		end:   ev.StartedAt.Add(time.Duration(ev.DurationMs * float64(time.Millisecond))),
	}
	s.attrs = append(make([]attr, 0, 16),
		str("gen_ai.operation.name", op),
		str("gen_ai.provider.name", ev.Protocol),
		str("gen_ai.system", ev.Protocol),
		str("gen_ai.request.model", ev.ProviderModel),
		str("scootgate.public_model", ev.PublicModel),
		str("scootgate.backend", ev.Backend),
		num("scootgate.attempt", int64(ev.Attempt)),
		str("scootgate.send_state", ev.SendState),
	)
	if ev.ModelPattern != "" {
		s.attrs = append(s.attrs, str("scootgate.model_pattern", ev.ModelPattern))
	}
	if ev.FailureStage != "" {
		s.attrs = append(s.attrs, str("scootgate.failure_stage", ev.FailureStage))
		s.status, s.statusMessage = statusError, ev.FailureStage
	}
	if ev.HTTPStatus > 0 {
		s.attrs = append(s.attrs, num("http.response.status_code", int64(ev.HTTPStatus)))
	}
	if ev.TTFBMs > 0 {
		s.attrs = append(s.attrs, num("scootgate.ttfb_ms", int64(ev.TTFBMs)))
	}
	if out.Model != "" {
		s.attrs = append(s.attrs, str("gen_ai.response.model", out.Model))
	}
	if len(out.FinishReasons) > 0 {
		s.attrs = append(s.attrs, strs("gen_ai.response.finish_reasons", out.FinishReasons))
	}
	if u := ev.Usage; u != nil {
		s.attrs = append(s.attrs,
			num("gen_ai.usage.input_tokens", u.InputTokens),
			num("gen_ai.usage.output_tokens", u.OutputTokens))
		if u.CacheReadTokens > 0 {
			s.attrs = append(s.attrs, num("gen_ai.usage.cache_read.input_tokens", u.CacheReadTokens))
		}
		if u.CacheWriteTokens > 0 {
			s.attrs = append(s.attrs, num("gen_ai.usage.cache_creation.input_tokens", u.CacheWriteTokens))
		}
		if u.ReasoningTokens > 0 {
			s.attrs = append(s.attrs, num("gen_ai.usage.reasoning.output_tokens", u.ReasoningTokens))
		}
	}
	t.enqueue(s)

	// The request span names the public model and the GenAI operation of
	// its last attempt.
	q.mu.Lock()
	defer q.mu.Unlock()
	q.s.attrs = setAttr(q.s.attrs, str("gen_ai.operation.name", op))
	q.s.attrs = setAttr(q.s.attrs, str("gen_ai.request.model", ev.PublicModel))
	q.s.attrs = setAttr(q.s.attrs, str("gen_ai.provider.name", ev.Protocol))
	q.s.attrs = setAttr(q.s.attrs, num("scootgate.attempts", int64(ev.Attempt)))
	if out.Model != "" {
		q.s.attrs = setAttr(q.s.attrs, str("gen_ai.response.model", out.Model))
	}
}

func setAttr(as []attr, a attr) []attr {
	for i := range as {
		if as[i].key == a.key {
			as[i] = a
			return as
		}
	}
	return append(as, a)
}
