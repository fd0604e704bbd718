// Package openai is everything the node knows about the OpenAI API and
// the providers compatible with it: the endpoints it forwards (Chat
// Completions, Responses with its compaction and input token count,
// Embeddings, legacy Completions, Rerank, audio speech, transcriptions and
// translations, image generations and edits), which body members decide routing,
// which headers go up and come back, how a stream ends and fails, where
// usage is and how the node asks for it, the error document, what a quota
// answer says, retry advice, and the model list. [API] is its catalog
// entry.
//
// # Streams
//
// Chat Completions streams are `data: {chunk}` events ended by
// `data: [DONE]`; an in-band failure is `data: {"error":{…}}`. Responses
// streams name every event (`event: response.output_text.delta` with the
// same "type" in the data) and end with one of response.completed,
// response.incomplete or response.failed; there is no [DONE]. The
// Responses API reports a failure mid-stream with an `error` event,
// {"type":"error","code":…,"message":…,"param":…,"sequence_number":…};
// the official SDKs parse it as the stream's error event (openai-go:
// ResponseErrorEvent), and it is what the node sends when it must cut a
// Responses stream. It never sends a response.completed it did not receive.
package openai

import (
	"net/http"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/upstream"
)

// API is the OpenAI API's catalog entry.
var API = &provider.API{
	Protocol: provider.OpenAI,
	Endpoints: []*provider.Spec{Chat, Responses, Embeddings, Compact, InputTokens, Completions, Rerank, AudioSpeech,
		AudioTranscriptions, AudioTranslations, ImageGenerations, ImageEdits, Realtime},
	// The OpenAI shape is the catalog's default: it answers every request
	// no other API claims.
	Claims: func(*http.Request) bool { return false },
	// The Azure OpenAI clients send their key as api-key.
	KeyHeaders: []string{"Api-Key"},
	ErrorBody:  func(status int, code, msg, _ string) []byte { return ErrorBody(status, code, msg) },
	NotRouted:  notRouted,
	// OpenAI's own headers first; compatible providers send others' too
	// (Anthropic's OpenAI-compatible endpoint its anthropic-ratelimit-*
	// and request-id).
	ResponseHeaders:   []string{"Retry-After-Ms", "X-Ratelimit-", "Anthropic-Ratelimit-"},
	ProviderRequestID: []string{"X-Request-Id", "Request-Id"},
	LimitHeaders:      LimitHeaders,
	RetryAfter:        retryAfter,
	Headroom:          headroom,
	QuotaExhausted:    quota.Exhausted,
	AboutRequest:      aboutRequest.AboutRequest,
	ModelsPaths:       []string{"/v1/models"},
	ListModels:        listModels,
	GetModel:          getModel,
}

// LimitHeaders are OpenAI's rate-limit headers
// (platform.openai.com/docs/guides/rate-limits): x-ratelimit-limit-requests,
// x-ratelimit-remaining-requests, x-ratelimit-reset-requests ("1s",
// "6m0s") and the same for tokens. They replace every rate-limit header
// the provider sent, its own and Anthropic's.
var LimitHeaders = &provider.RateLimitHeaders{
	Replace:  []string{"X-Ratelimit-", "Anthropic-Ratelimit-"},
	Requests: [3]string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	Tokens:   [3]string{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}

// Chat is POST /v1/chat/completions.
var Chat = &provider.Spec{
	Endpoint:     provider.Chat,
	Method:       http.MethodPost,
	Path:         "/v1/chat/completions",
	UpstreamPath: "/chat/completions",
	Inspect:      inspectChat,
	Header:       Header,
	// opencode names its session in X-Session-Affinity and X-Session-Id
	// (after prompt_cache_key in the body).
	SessionHeaders: []string{"X-Session-Affinity", "X-Session-Id"},
	BodyUsage:      ChatBodyUsage,
	UsageMember:    "usage",
	BodyOutcome:    ChatBodyOutcome,
	Stream:         chatStream,
	Envelopes:      [provider.NumPlatforms]*provider.Envelope{provider.Azure: azureChat},
	Doors:          []*provider.Door{azureChatDoor},
}

// chatStream is how chat completions and legacy completions stream:
// chunks until "data: [DONE]", usage in the last chunk when asked for.
var chatStream = &provider.StreamSpec{
	Terminal:    chatTerminal,
	NewTracker:  func(hide bool) provider.Tracker { return NewChatStream(hide) },
	NewOutcome:  func() provider.OutcomeTracker { return &ChatOutcome{} },
	InBandError: chatInBand,
	Keepalive:   keepalive,
}

// Responses is POST /v1/responses. The stateful Responses endpoints
// (/v1/responses/{id} and below) are not routed: see [StatefulPath];
// compaction and the input token count are stateless ([Compact],
// [InputTokens]).
var Responses = &provider.Spec{
	Endpoint:     provider.Responses,
	Method:       http.MethodPost,
	Path:         "/v1/responses",
	UpstreamPath: "/responses",
	Inspect:      inspectResponses,
	Header:       Header,
	// Codex CLI sends its session id in Session-Id (and the same value in
	// Thread-Id, X-Client-Request-Id and X-Codex-Turn-Metadata); opencode
	// in X-Session-Affinity and X-Session-Id.
	SessionHeaders: []string{"Session-Id", "Thread-Id", "X-Session-Affinity", "X-Session-Id"},
	BodyUsage:      ResponsesBodyUsage,
	UsageMember:    "usage",
	BodyOutcome:    ResponsesBodyOutcome,
	Stream: &provider.StreamSpec{
		Terminal:    ResponsesTerminal,
		NewTracker:  func(bool) provider.Tracker { return NewResponsesStream() },
		NewOutcome:  func() provider.OutcomeTracker { return &ResponsesOutcome{} },
		InBandError: responsesInBand,
		Keepalive:   keepalive,
		Types:       responsesTypes,
	},
	Socket:    responsesSocket,
	Envelopes: [provider.NumPlatforms]*provider.Envelope{provider.Azure: azureResponses},
	Doors:     []*provider.Door{azureResponsesDoor},
}

// Compact is POST /v1/responses/compact: a conversation in, its compacted
// output items out, in one JSON answer whose usage is a Responses usage
// object. It is stateless like POST /v1/responses with store false (a
// previous_response_id in it names a stored response, which only the
// provider account that stored it can find, as on /v1/responses). Codex
// CLI calls it to shrink a long conversation, with the session headers of
// its Responses calls.
var Compact = &provider.Spec{
	Endpoint:       provider.ResponsesCompact,
	Method:         http.MethodPost,
	Path:           "/v1/responses/compact",
	UpstreamPath:   "/responses/compact",
	Inspect:        inspectResponsesJSON,
	Header:         Header,
	SessionHeaders: Responses.SessionHeaders,
	BodyUsage:      ResponsesBodyUsage,
	UsageMember:    "usage",
	BodyOutcome:    ResponsesBodyOutcome, // the model, when the answer names one
}

// InputTokens is POST /v1/responses/input_tokens: a Responses request in,
// {"object":"response.input_tokens","input_tokens":N} out. The answer is a
// count, not a use of the model: it carries no usage object, and the
// event has none. OpenAI makes the model optional here; the node needs it
// to route, so a body without one is refused like any other.
var InputTokens = &provider.Spec{
	Endpoint:       provider.ResponsesInputTokens,
	Method:         http.MethodPost,
	Path:           "/v1/responses/input_tokens",
	UpstreamPath:   "/responses/input_tokens",
	Inspect:        inspectResponsesJSON,
	Header:         Header,
	SessionHeaders: Responses.SessionHeaders,
	BodyUsage:      provider.NoUsage,
}

// Embeddings is POST /v1/embeddings: JSON only, usage.prompt_tokens.
var Embeddings = &provider.Spec{
	Endpoint:     provider.Embeddings,
	Method:       http.MethodPost,
	Path:         "/v1/embeddings",
	UpstreamPath: "/embeddings",
	Inspect:      inspectEmbeddings,
	Header:       Header,
	BodyUsage:    ChatBodyUsage,
	UsageMember:  "usage",
	BodyOutcome:  ChatBodyOutcome, // the model; embeddings have no finish reason
	Envelopes:    [provider.NumPlatforms]*provider.Envelope{provider.Azure: azureEmbeddings},
	Doors:        []*provider.Door{azureEmbeddingsDoor},
}

// Completions is POST /v1/completions, the legacy text completions that
// fill-in-the-middle clients (editor autocompletion: prompt and suffix)
// still use. Its answers are shaped as Chat Completions' (choices with a
// finish_reason, the same usage object, streams of `data:` chunks ended by
// `data: [DONE]`, stream usage only when stream_options.include_usage
// asks for it), so it shares their usage, stream and outcome readers.
var Completions = &provider.Spec{
	Endpoint:     provider.Completions,
	Method:       http.MethodPost,
	Path:         "/v1/completions",
	UpstreamPath: "/completions",
	Inspect:      inspectCompletions,
	Header:       Header,
	BodyUsage:    ChatBodyUsage,
	UsageMember:  "usage",
	BodyOutcome:  ChatBodyOutcome,
	Stream:       chatStream,
	Envelopes:    [provider.NumPlatforms]*provider.Envelope{provider.Azure: azureCompletions},
	Doors:        []*provider.Door{azureCompletionsDoor},
}

// Rerank is POST /v1/rerank, the shape Cohere, Jina and vLLM share
// (model, query, documents, top_n; JSON answers), also served at
// /v2/rerank, Cohere's current path: the backend's base URL names the
// provider's version, so both go to {base_url}/rerank. Usage is the
// "usage" object (prompt_tokens, total_tokens) or Cohere's
// meta.billed_units (search_units, input_tokens): see [RerankBodyUsage].
var Rerank = &provider.Spec{
	Endpoint:     provider.Rerank,
	Method:       http.MethodPost,
	Path:         "/v1/rerank",
	AlsoPaths:    []string{"/v2/rerank"},
	UpstreamPath: "/rerank",
	Inspect:      inspectEmbeddings, // the model only
	Header:       Header,
	BodyUsage:    RerankBodyUsage,
	UsageMember:  "usage",
	BodyOutcome:  ChatBodyOutcome, // the model, when the answer names it
}

// AudioSpeech is POST /v1/audio/speech: a JSON body (model, input,
// voice), a binary answer (audio/mpeg and the other formats) relayed as
// it arrives (provider.Spec.Passthrough). The answer carries no usage.
var AudioSpeech = &provider.Spec{
	Endpoint:     provider.AudioSpeech,
	Method:       http.MethodPost,
	Path:         "/v1/audio/speech",
	UpstreamPath: "/audio/speech",
	Inspect:      inspectEmbeddings, // the model only
	Header:       Header,
	BodyUsage:    provider.NoUsage,
	Passthrough:  true,
	Doors:        []*provider.Door{azureSpeechDoor},
}

// AudioTranscriptions is POST /v1/audio/transcriptions: a
// multipart/form-data body (file, model, and more fields) in which only
// the model field's value is rewritten (inspectForm). The answer is JSON,
// text (response_format text, srt, vtt), or, with the form field
// stream=true, SSE: transcript.text.delta events and a
// transcript.text.done that carries the usage. Usage is the JSON's or the
// done event's "usage" (input_tokens, output_tokens; whisper-1 reports
// {"type":"duration","seconds":N}, kept raw with zero counts).
var AudioTranscriptions = &provider.Spec{
	Endpoint:     provider.AudioTranscriptions,
	Method:       http.MethodPost,
	Path:         "/v1/audio/transcriptions",
	UpstreamPath: "/audio/transcriptions",
	InspectForm:  inspectForm,
	Header:       Header,
	BodyUsage:    ResponsesBodyUsage, // input_tokens, output_tokens
	UsageMember:  "usage",
	Stream:       transcriptStream,
	Doors:        []*provider.Door{azureTranscriptionsDoor},
}

// AudioTranslations is POST /v1/audio/translations, the same form as
// transcriptions (translated into English); it answers JSON or text.
var AudioTranslations = &provider.Spec{
	Endpoint:     provider.AudioTranslations,
	Method:       http.MethodPost,
	Path:         "/v1/audio/translations",
	UpstreamPath: "/audio/translations",
	InspectForm:  inspectForm,
	Header:       Header,
	BodyUsage:    ResponsesBodyUsage,
	UsageMember:  "usage",
	Stream:       transcriptStream,
	Doors:        []*provider.Door{azureTranslationsDoor},
}

// ImageGenerations is POST /v1/images/generations: a JSON body (model,
// prompt, n, size, stream), a JSON answer (data[] with b64_json or url),
// or, with "stream": true, SSE: image_generation.partial_image events
// ending with image_generation.completed. Usage is the answer's or the
// completed event's "usage" (input_tokens, output_tokens; dall-e models
// report none).
var ImageGenerations = &provider.Spec{
	Endpoint:     provider.ImageGenerations,
	Method:       http.MethodPost,
	Path:         "/v1/images/generations",
	UpstreamPath: "/images/generations",
	Inspect:      inspectImages,
	Header:       Header,
	BodyUsage:    ResponsesBodyUsage,
	UsageMember:  "usage",
	Stream:       imageStream,
	Doors:        []*provider.Door{azureImagesDoor},
}

// ImageEdits is POST /v1/images/edits: a multipart/form-data body (image
// files, prompt, model, stream) read and rewritten as a transcription's
// (inspectForm); answers as ImageGenerations', the stream's events named
// image_edit.*.
var ImageEdits = &provider.Spec{
	Endpoint:     provider.ImageEdits,
	Method:       http.MethodPost,
	Path:         "/v1/images/edits",
	UpstreamPath: "/images/edits",
	InspectForm:  inspectForm,
	Header:       Header,
	BodyUsage:    ResponsesBodyUsage,
	UsageMember:  "usage",
	Stream:       imageStream,
	Doors:        []*provider.Door{azureImageEditsDoor},
}

// imageStream: image_generation.completed or image_edit.completed ends an
// image stream; an "error" member or type is the in-band failure.
var imageStream = &provider.StreamSpec{
	Terminal:    typedTerminal("image_generation.completed", "image_edit.completed"),
	NewTracker:  func(bool) provider.Tracker { return &TranscriptStream{} },
	InBandError: chatInBand,
	Keepalive:   keepalive,
}

// transcriptStream is how a transcription stream ends: data-only events
// whose "type" names them, the last transcript.text.done (some servers
// add data: [DONE]); an in-band failure is an "error" member or type.
var transcriptStream = &provider.StreamSpec{
	Terminal:    transcriptTerminal,
	NewTracker:  func(bool) provider.Tracker { return &TranscriptStream{} },
	InBandError: chatInBand,
	Keepalive:   keepalive,
}

// requestHeaders lists the client headers that may reach the provider.
// Everything else is dropped: client auth, cookies, hop-by-hop,
// x-forwarded-*, Idempotency-Key (it would let Go's transport re-send a
// POST on a reused connection), Accept-Encoding (the transport owns
// compression), OpenAI-Organization/-Project (they name the client's
// account, not ours).
var requestHeaders = [...]string{"Content-Type", "Accept", "User-Agent", "Openai-Beta"}

// Header builds an OpenAI provider request's headers from scratch: the
// allowlisted client headers and `Authorization: Bearer <credential>`.
func Header(client http.Header, credential string) http.Header {
	h := make(http.Header, 6)
	for _, k := range requestHeaders {
		if v := client[k]; len(v) > 0 {
			h[k] = v
		}
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Authorization", "Bearer "+credential)
	return h
}

// headroom reads OpenAI's rate-limit headers, which Azure OpenAI and most
// compatible providers send too: x-ratelimit-{limit,remaining}-{requests,
// tokens} as whole numbers and x-ratelimit-reset-{requests,tokens} as Go-
// style durations ("6m0s", "1s", "20ms"). Azure often leaves the resets
// out; the budget then has none.
func headroom(h http.Header, _ time.Time) upstream.Headroom {
	var hr upstream.Headroom
	hr.Requests = provider.ReadBudget(h, "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", parseReset, &hr.Malformed)
	hr.Tokens = provider.ReadBudget(h, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", parseReset, &hr.Malformed)
	return hr
}

// parseReset reads a reset duration: "6m0s", "1s", "20ms", "1h2m3.5s".
// A negative one is malformed; "0s" means the budget is whole again.
func parseReset(v string) (time.Duration, bool) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}
