package usageevent

import (
	"encoding/json"
	"time"
)

// Schema is the only schema number this package reads and writes.
const Schema = 2

// Send states (docs/failures.md "Send state"). The set is closed: a new
// value would be a new schema number (proto/VERSIONING.md).
const (
	// SendDefinitelyNotSent: no request byte was handed to the provider's
	// connection (proxy dial, proxy handshake, proxy or provider TLS, local
	// capacity). The provider cannot have seen the request.
	SendDefinitelyNotSent = "definitely_not_sent"
	// SendPossiblySent: request bytes may have reached the provider, but no
	// response arrived. The provider may have run (and billed) the request.
	SendPossiblySent = "possibly_sent"
	// SendResponseReceived: the provider's response status and headers
	// arrived.
	SendResponseReceived = "response_received"
)

// Protocols: the wire protocol of the attempt (docs/api.md). The set is closed.
const (
	ProtocolOpenAI    = "openai"    // OpenAI Chat Completions
	ProtocolAnthropic = "anthropic" // Anthropic Messages
	ProtocolGemini    = "gemini"    // Gemini API (generateContent and the others)
	// ProtocolBedrockConverse is Amazon Bedrock's Converse API. It joined
	// schema 2 before the first release, as gemini did
	// (proto/VERSIONING.md).
	ProtocolBedrockConverse = "bedrock_converse"
)

// Protocols returns the protocol names, the closed set a node writes
// (proto/VERSIONING.md: a value joins it only with a new schema number,
// or before the first release). Validate refuses any other.
func Protocols() []string {
	return []string{ProtocolOpenAI, ProtocolAnthropic, ProtocolGemini, ProtocolBedrockConverse}
}

// Endpoints: the client endpoint of the attempt. Unlike protocols the set
// is open: a later node may serve an endpoint not listed here, and
// consumers must accept any value (proto/VERSIONING.md). Events written
// before nodes recorded the endpoint have no endpoint member: those are
// chat_completions (protocol openai) or messages (protocol anthropic).
const (
	EndpointChatCompletions = "chat_completions" // POST /v1/chat/completions
	EndpointResponses       = "responses"        // POST /v1/responses
	EndpointEmbeddings      = "embeddings"       // POST /v1/embeddings
	EndpointCompletions     = "completions"      // POST /v1/completions
	EndpointRerank          = "rerank"           // POST /v1/rerank, /v2/rerank
	EndpointAudioSpeech     = "audio_speech"     // POST /v1/audio/speech
	EndpointMessages        = "messages"         // POST /v1/messages
	EndpointCountTokens     = "count_tokens"     // POST /v1/messages/count_tokens

	EndpointAudioTranscriptions = "audio_transcriptions" // POST /v1/audio/transcriptions
	EndpointAudioTranslations   = "audio_translations"   // POST /v1/audio/translations
	EndpointImageGenerations    = "image_generations"    // POST /v1/images/generations
	EndpointImageEdits          = "image_edits"          // POST /v1/images/edits
	// EndpointRealtime is a realtime session (GET /v1/realtime, a
	// WebSocket): one event per response the session ran, and one for
	// what was left when it closed (docs/usage-events.md "Realtime sessions").
	EndpointRealtime = "realtime"

	EndpointGenerateContent       = "generate_content"        // POST /v1beta/models/{model}:generateContent
	EndpointStreamGenerateContent = "stream_generate_content" // POST /v1beta/models/{model}:streamGenerateContent
	EndpointGeminiCountTokens     = "gemini_count_tokens"     // POST /v1beta/models/{model}:countTokens
	EndpointEmbedContent          = "embed_content"           // POST /v1beta/models/{model}:embedContent
	EndpointBatchEmbedContents    = "batch_embed_contents"    // POST /v1beta/models/{model}:batchEmbedContents
	// EndpointBidiGenerateContent is a Gemini Live session (a WebSocket at
	// /ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent):
	// one event per turn the session ran, and one for what was left when
	// it closed (docs/usage-events.md "Realtime sessions").
	EndpointBidiGenerateContent = "bidi_generate_content"

	EndpointResponsesCompact     = "responses_compact"      // POST /v1/responses/compact
	EndpointResponsesInputTokens = "responses_input_tokens" // POST /v1/responses/input_tokens

	EndpointConverse       = "converse"        // POST /model/{modelId}/converse (bedrock_converse)
	EndpointConverseStream = "converse_stream" // POST /model/{modelId}/converse-stream (bedrock_converse)
)

// Placements: how the attempt's target was chosen (docs/routing.md
// "Affinity"). The set is open, like endpoints. Events written before
// nodes recorded it have no placement member: those were balanced.
const (
	PlacementBalanced         = "balanced"          // affinity off for the model: balancing chose
	PlacementKeyless          = "keyless"           // affinity on, but the request named no session: balancing chose
	PlacementAffinity         = "affinity"          // the session's first choice
	PlacementPrefix           = "prefix"            // no session named: the first choice for the prompt's beginning (prefix affinity)
	PlacementSpillOverloaded  = "spill_overloaded"  // the first choice was over the load bound: the next in the session's order
	PlacementSpillUnavailable = "spill_unavailable" // the first choice could not take traffic (breaker, cooldown, disabled, cap)
	PlacementSpillRetry       = "spill_retry"       // the first choice was already tried by this request
)

// Failure stages ScootGate reports today. Unlike send states the set is
// open: a later node may report a stage not listed here, and consumers must
// accept any value (proto/VERSIONING.md). "" means the attempt succeeded.
const (
	StageConnect             = "connect"               // egress proxy or provider TLS failed; nothing sent
	StageSend                = "send"                  // failed after sending may have begun, before the response status
	StageTimeout             = "timeout"               // a configured timeout fired (first byte, stream idle, non-stream total)
	StageProviderAuth        = "provider_auth"         // the provider refused the backend's credential (401/403)
	StageProviderStatus      = "provider_status"       // the provider answered with an error status, passed to the client
	StageResponseBody        = "response_body"         // reading a non-stream response body failed
	StageFirstEvent          = "first_event"           // a stream failed before its first event
	StageStream              = "stream"                // a stream ended without its terminator (cut)
	StageProviderStreamError = "provider_stream_error" // the provider sent an in-band error event
	StageClientCancelled     = "client_cancelled"      // the client went away; usage is what was seen until then
	StageShutdown            = "shutdown"              // the node cut the attempt at the end of its drain or on a second signal; usage is what was seen until then
	StageClientWrite         = "client_write"          // writing the answer to the client failed
	StageInternal            = "internal"              // a gateway bug stopped the attempt
	StageStreamTotal         = "stream_total"          // a stream ran past the node's limit for a whole stream; usage is what was seen until then
	StageNoProgress          = "no_progress"           // a stream sent only keepalives (comments, pings) for longer than the node's limit
	StageClientStalled       = "client_stalled"        // the client stopped reading: the node cut the answer it could not write within its stream idle limit
)

// Event is one usage event: the record of one provider route attempt
// (docs/usage-events.md). Every member but Endpoint is always present in JSON; Usage and
// ProviderUsage are null when the provider reported no usage.
type Event struct {
	// EventID is a UUID in canonical lowercase form (version 7 when
	// ScootGate made it). It is fixed when the attempt is recorded and
	// replayed unchanged: consumers de-duplicate on it.
	EventID string `json:"event_id"`
	// Schema is [Schema].
	Schema int `json:"schema"`
	// Authoritative is always false: usage events are not a billing ledger.
	Authoritative bool `json:"authoritative"`

	NodeID    string `json:"node_id"`    // the node that made the attempt (also its MQTT client id)
	RequestID string `json:"request_id"` // the request id the client saw; shared by every attempt of a request
	TenantID  string `json:"tenant_id"`  // owner of the client key, from the authorization snapshot
	KeyID     string `json:"key_id"`     // id of the client key; never the key itself

	PublicModel string `json:"public_model"` // the model name the client asked for
	// ModelPattern is the pattern model entry that matched PublicModel
	// ("claude-*", docs/routing.md "Aliases and patterns"); absent when
	// PublicModel is an exact name of the routes, and in events written
	// before nodes had patterns (all of them exact names). Unlike
	// PublicModel it is one of the operator's entries: group by it, not
	// by the names clients invent.
	ModelPattern string `json:"model_pattern,omitempty"`
	// ServedModel is the public model whose target served the attempt
	// (docs/routing.md "Fallbacks"): PublicModel itself, or the fallback
	// model (an exact name of the routes) that served when no target of
	// PublicModel could take the request before anything was sent; it
	// differs from PublicModel exactly then. Nodes always set it; it is
	// absent only from events written before nodes had fallbacks, all of
	// them served by PublicModel.
	ServedModel   string `json:"served_model,omitempty"`
	ProviderModel string `json:"provider_model"` // the model name sent to the provider
	Backend       string `json:"backend"`        // backend id from the node's route configuration
	Protocol      string `json:"protocol"`       // one of Protocols()
	// Endpoint is the client endpoint (one of the Endpoint* constants or a
	// newer one). Nodes always set it; it is absent only from events
	// written before it existed (see the Endpoint* constants).
	Endpoint string `json:"endpoint,omitempty"`
	// Platform names how the protocol travelled to the provider
	// (docs/routing.md "Platforms"): one of the Platform* constants or a
	// newer one. Nodes always set it; it is absent only from events
	// written before nodes had platforms, which all travelled on the
	// protocol's own wire.
	Platform string `json:"platform,omitempty"`
	// Region is the platform's region or location ("us-east-1" on
	// Bedrock); absent where the platform has none.
	Region string `json:"region,omitempty"`
	Stream bool   `json:"stream"` // the client asked for a stream
	// Placement says how the target was chosen (docs/routing.md
	// "Affinity"): one of the Placement* constants or a newer one. Absent
	// from events written before nodes recorded it; those were balanced.
	Placement string `json:"placement,omitempty"`

	// Attempt numbers the provider attempts of one request from 1. Only an
	// attempt that was definitely not sent is followed by another.
	Attempt int `json:"attempt"`
	// SendState is one of the Send* constants.
	SendState string `json:"send_state"`
	// FailureStage is "" when the attempt succeeded, otherwise where it
	// failed: one of the Stage* constants or a newer stage.
	FailureStage string `json:"failure_stage"`
	// HTTPStatus is the status ScootGate answered the client with for this
	// attempt (the provider's own status for passed-through answers), or 0
	// when this attempt wrote no answer (it was followed by another).
	HTTPStatus int `json:"http_status"`

	// RequestBytes is the size of the request body sent (or, when nothing
	// was sent, prepared) for the provider, after the model rewrite.
	RequestBytes int64 `json:"request_bytes"`
	// ResponseBytes counts the provider's response body bytes the node
	// read, including a usage chunk hidden from the client.
	ResponseBytes int64 `json:"response_bytes"`
	// TTFBMs is milliseconds from sending the request to the provider's
	// response status; 0 when no response arrived.
	TTFBMs float64 `json:"ttfb_ms"`
	// DurationMs is milliseconds from StartedAt to the end of the attempt.
	DurationMs float64 `json:"duration_ms"`
	// StartedAt is when the attempt started (RFC 3339, UTC).
	StartedAt time.Time `json:"started_at"`

	// Usage is the normalized token usage, nil when the provider reported
	// none (for example a stream cut before its usage arrived).
	Usage *Usage `json:"usage"`
	// ProviderUsage is the provider's native usage object as received, or
	// nil (JSON null) when there was none. For Anthropic streams it is the
	// message_start usage with each later message_delta usage member
	// overlaid (docs/usage-consumers.md).
	ProviderUsage json.RawMessage `json:"provider_usage"`

	// Cost is what the attempt cost at its target's price
	// (docs/usage-events.md "Cost"). Nodes set it whenever the target has
	// a price; it is nil (absent) for an unpriced target, and in events
	// written before nodes priced attempts.
	Cost *Cost `json:"cost,omitempty"`
}

// Cost is one attempt's cost (docs/usage-events.md "Cost").
type Cost struct {
	// USD is the cost in US dollars as an exact decimal string with at
	// most 12 digits after the point ("0.0105"); pkg/usd reads it.
	USD string `json:"usd"`
	// PriceVersion is the version of the routing snapshot whose price
	// applied (the table the request was routed with); 0 means the
	// node's static configuration.
	PriceVersion uint64 `json:"price_version"`
	// Estimated is true when the provider reported no usage for an
	// attempt that may have reached it: the cost is then that of the
	// request's estimated input tokens, at the input price.
	Estimated bool `json:"estimated"`
}

// Platforms (the platform member): the protocol's own wire, named by
// its first party, or a cloud platform that carries it.
const (
	PlatformOpenAI    = "openai"
	PlatformAnthropic = "anthropic"
	PlatformGoogle    = "google"
	PlatformBedrock   = "bedrock"
	PlatformVertex    = "vertex"
	PlatformAzure     = "azure"
)

// Usage is token usage normalized across providers (docs/usage-events.md "Token usage").
//
// InputTokens is the total input, cache reads and cache writes included,
// for every provider, so that events of different providers compare like
// with like. CacheReadTokens and CacheWriteTokens are parts of InputTokens;
// ReasoningTokens is part of OutputTokens. Validate enforces both.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`       // all input tokens, cached or not
	OutputTokens     int64 `json:"output_tokens"`      // all output tokens, reasoning included
	CacheReadTokens  int64 `json:"cache_read_tokens"`  // input tokens read from the provider's prompt cache
	CacheWriteTokens int64 `json:"cache_write_tokens"` // input tokens written to the prompt cache (Anthropic)
	ReasoningTokens  int64 `json:"reasoning_tokens"`   // output tokens spent on hidden reasoning (OpenAI)
}

// HasProviderUsage reports whether ProviderUsage holds a value: it is
// neither empty nor JSON null.
func (e *Event) HasProviderUsage() bool {
	v := trimJSONSpace(e.ProviderUsage)
	return len(v) > 0 && string(v) != "null"
}

// trimJSONSpace trims the four bytes JSON counts as white space from
// both ends of b (bytes.TrimSpace would trim \v, \f and Unicode spaces
// too, which JSON does not allow).
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
