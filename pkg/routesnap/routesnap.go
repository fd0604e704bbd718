package routesnap

import "time"

// Schema is the newest schema number: the one this package writes, and the
// highest it reads. It reads every number from [MinSchema] to Schema; a
// member that a schema introduced is refused in a document of an earlier
// one (proto/VERSIONING.md), so a control plane cannot send a node a
// member that an older node would refuse while writing the older number.
const Schema = 2

// MinSchema is the oldest schema number this package reads.
const MinSchema = 1

// Limits enforced by [Snapshot.Validate] and [ValidateRoutes]. A node's
// static configuration decodes its routes into these types and checks them
// with ValidateRoutes, so a route is valid in a snapshot exactly when it
// would be valid in the node's TOML.
const (
	// MaxIDLength is the longest backend id or credential name, in bytes
	// (both use [A-Za-z0-9._-] only).
	MaxIDLength = 64
	// MaxModelNameLength is the longest public or provider model name, in
	// characters.
	MaxModelNameLength = 256
	// MaxInflight is the largest max_inflight_per_node.
	MaxInflight = 100000
	// MaxWeight is the largest target weight.
	MaxWeight = 1000000
	// MaxTier is the largest target tier.
	MaxTier = 1<<31 - 1
	// MaxContextTokens is the largest context_window and
	// max_output_tokens of a target.
	MaxContextTokens = 1 << 30
)

// Backend protocols (docs/routing.md "Models and targets"). They are separate pools: a request is
// only ever sent to a backend of its endpoint's protocol (docs/api.md).
const (
	ProtocolOpenAI    = "openai"    // POST {base_url}/chat/completions
	ProtocolAnthropic = "anthropic" // POST {base_url}/messages
	ProtocolGemini    = "gemini"    // POST {base_url}/models/{model}:generateContent
	// ProtocolBedrockConverse (schema 2) is Amazon Bedrock's Converse
	// API, served only on [PlatformBedrock]:
	// POST {base_url}/model/{model}/converse.
	ProtocolBedrockConverse = "bedrock_converse"
)

// Protocols returns the backend protocols, in the order messages list
// them; [Endpoints] knows the endpoints of each.
func Protocols() []string {
	return []string{ProtocolOpenAI, ProtocolAnthropic, ProtocolGemini, ProtocolBedrockConverse}
}

// Snapshot is one complete routing snapshot.
type Snapshot struct {
	Schema      int       `json:"schema"`                // [MinSchema]..[Schema]
	Version     uint64    `json:"version"`               // ≥ 1, strictly increasing per publisher
	GeneratedAt time.Time `json:"generated_at,omitzero"` // informational; zero = not given
	Backends    []Backend `json:"backends"`              // at least one
	Models      []Model   `json:"models"`                // at least one
}

// Backend is one provider endpoint (docs/routing.md "Models and targets").
type Backend struct {
	ID       string `json:"id"`       // unique; 1–64 of [A-Za-z0-9._-]
	Protocol string `json:"protocol"` // one of [Protocols]; [ProtocolBedrockConverse] needs schema 2
	// BaseURL is an absolute https:// URL (http:// only for a loopback
	// host) without user info, query or fragment; the endpoint path is
	// appended to it.
	BaseURL string `json:"base_url"`
	// Credential names a credential defined in the node's local
	// configuration. Snapshots never carry credential values (docs/snapshots.md).
	Credential string `json:"credential"`
	// MaxInflightPerNode is the hard node-local cap on concurrent requests
	// (docs/failures.md), 1..[MaxInflight].
	MaxInflightPerNode int `json:"max_inflight_per_node"`
	// IncludeUsage, for a [ProtocolOpenAI] backend only, says whether the
	// node may ask it for stream usage the client did not request
	// (stream_options.include_usage, docs/usage-events.md); the node's own usage
	// settings must allow it too. nil (absent) means true. Some
	// OpenAI-compatible providers reject stream_options; set false for
	// those.
	IncludeUsage *bool `json:"include_usage,omitempty"`
	// Endpoints lists the client endpoints this backend serves; nil
	// (absent) means the protocol's default, [EndpointChatCompletions] for
	// openai, [EndpointMessages] for anthropic, and
	// [EndpointGenerateContent] with [EndpointStreamGenerateContent] for
	// gemini. Not every compatible
	// provider serves every endpoint, so the others are opt-in: a request
	// whose model has no backend serving its endpoint is refused before
	// anything leaves the node. Present means at least one, no repeats,
	// each an endpoint of the backend's protocol.
	Endpoints []string `json:"endpoints,omitempty"`

	// Cloud platform (schema 2; docs/routing.md "Platforms"): how the
	// backend's protocol travels, and the platform's own coordinates. A
	// platform carries the protocol unchanged apart from its envelope:
	// the client speaks the protocol either way, and a model may mix
	// targets on several platforms.

	// Platform is [PlatformBedrock] or [PlatformVertex] (anthropic),
	// [PlatformVertex] (gemini), [PlatformAzure] (openai), or the
	// protocol's own wire: absent, or its first-party name
	// ([PlatformAnthropic], [PlatformGoogle], [PlatformOpenAI]), which is
	// what every backend was before platforms.
	Platform string `json:"platform,omitempty"`
	// Region is the AWS region of a [PlatformBedrock] backend
	// ("us-east-1"): its requests are signed for it. Required there and
	// only there.
	Region string `json:"region,omitempty"`
	// Project and Location are the Google Cloud project and location of a
	// [PlatformVertex] backend ("my-project", "us-east5" or "global").
	// Required there and only there.
	Project  string `json:"project,omitempty"`
	Location string `json:"location,omitempty"`
	// APIVersion is the api-version query of a [PlatformAzure] backend's
	// deployment URLs ("2024-10-21"), or "v1" for Azure's versionless v1
	// surface (/openai/v1/…). Required there and only there.
	APIVersion string `json:"api_version,omitempty"`
}

// Platforms (docs/routing.md "Platforms"): the values of
// [Backend.Platform].
const (
	PlatformOpenAI    = "openai"    // protocol openai's own wire
	PlatformAnthropic = "anthropic" // protocol anthropic's own wire
	PlatformGoogle    = "google"    // protocol gemini's own wire (the Gemini API)
	PlatformBedrock   = "bedrock"   // Amazon Bedrock Runtime: anthropic, bedrock_converse
	PlatformVertex    = "vertex"    // Google Vertex AI: anthropic, gemini
	PlatformAzure     = "azure"     // Azure OpenAI: openai
)

// PlatformServes reports whether platform (a [Backend.Platform] value,
// "" for the protocol's own wire) carries protocol.
func PlatformServes(platform, protocol string) bool {
	switch platform {
	case "":
		// Bedrock Converse has no wire but Bedrock's.
		return Endpoints(protocol) != nil && protocol != ProtocolBedrockConverse
	case PlatformOpenAI, PlatformAzure:
		return protocol == ProtocolOpenAI
	case PlatformAnthropic:
		return protocol == ProtocolAnthropic
	case PlatformBedrock:
		return protocol == ProtocolAnthropic || protocol == ProtocolBedrockConverse
	case PlatformGoogle:
		return protocol == ProtocolGemini
	case PlatformVertex:
		return protocol == ProtocolAnthropic || protocol == ProtocolGemini
	}
	return false
}

// PlatformEndpoints returns the endpoints of protocol that platform
// carries; nil when it carries them all, which every platform now does
// (Bedrock carries count_tokens as its CountTokens operation). A node
// may still carry fewer than a platform has (docs/routing.md
// "Platforms"); it refuses those backends when it compiles the routes.
func PlatformEndpoints(platform string) []string {
	return nil
}

// Endpoint names (the node's client endpoints; also the usage events'
// endpoint member). Each belongs to one protocol.
const (
	EndpointChatCompletions = "chat_completions" // openai: POST /v1/chat/completions → {base_url}/chat/completions
	EndpointResponses       = "responses"        // openai: POST /v1/responses → {base_url}/responses
	EndpointEmbeddings      = "embeddings"       // openai: POST /v1/embeddings → {base_url}/embeddings
	EndpointCompletions     = "completions"      // openai: POST /v1/completions → {base_url}/completions
	EndpointRerank          = "rerank"           // openai: POST /v1/rerank or /v2/rerank → {base_url}/rerank
	EndpointAudioSpeech     = "audio_speech"     // openai: POST /v1/audio/speech → {base_url}/audio/speech
	EndpointMessages        = "messages"         // anthropic: POST /v1/messages → {base_url}/messages
	EndpointCountTokens     = "count_tokens"     // anthropic: POST /v1/messages/count_tokens → {base_url}/messages/count_tokens

	EndpointResponsesCompact     = "responses_compact"      // openai: POST /v1/responses/compact → {base_url}/responses/compact
	EndpointResponsesInputTokens = "responses_input_tokens" // openai: POST /v1/responses/input_tokens → {base_url}/responses/input_tokens
	// openai, multipart/form-data bodies
	EndpointAudioTranscriptions = "audio_transcriptions" // POST /v1/audio/transcriptions → {base_url}/audio/transcriptions
	EndpointAudioTranslations   = "audio_translations"   // POST /v1/audio/translations → {base_url}/audio/translations
	EndpointImageEdits          = "image_edits"          // POST /v1/images/edits → {base_url}/images/edits

	EndpointImageGenerations = "image_generations" // openai: POST /v1/images/generations → {base_url}/images/generations

	// EndpointRealtime is new in schema 2: realtime sessions, a WebSocket
	// each (openai: GET /v1/realtime?model= → {base_url}/realtime?model=).
	EndpointRealtime = "realtime"

	// gemini: POST /v1beta/models/{model}:METHOD (or /v1/…) → {base_url}/models/{provider model}:METHOD
	EndpointGenerateContent       = "generate_content"        // :generateContent
	EndpointStreamGenerateContent = "stream_generate_content" // :streamGenerateContent
	EndpointGeminiCountTokens     = "gemini_count_tokens"     // :countTokens
	EndpointEmbedContent          = "embed_content"           // :embedContent
	EndpointBatchEmbedContents    = "batch_embed_contents"    // :batchEmbedContents

	// EndpointBidiGenerateContent is new in schema 2: Gemini Live
	// sessions, a WebSocket each (gemini: GET
	// /ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent
	// → the same path on base_url's host, under base_url's path without
	// its version segment).
	EndpointBidiGenerateContent = "bidi_generate_content"

	// bedrock_converse (schema 2): POST /model/{model}/converse and
	// /converse-stream → {base_url}/model/{provider model}/converse and
	// /converse-stream
	EndpointConverse       = "converse"
	EndpointConverseStream = "converse_stream"
)

// Endpoints returns the endpoint names of a protocol, its defaults first;
// nil for an unknown protocol.
func Endpoints(protocol string) []string {
	switch protocol {
	case ProtocolOpenAI:
		return []string{EndpointChatCompletions, EndpointResponses, EndpointEmbeddings,
			EndpointResponsesCompact, EndpointResponsesInputTokens, EndpointCompletions, EndpointRerank, EndpointAudioSpeech,
			EndpointAudioTranscriptions, EndpointAudioTranslations, EndpointImageGenerations, EndpointImageEdits,
			EndpointRealtime}
	case ProtocolAnthropic:
		return []string{EndpointMessages, EndpointCountTokens}
	case ProtocolGemini:
		return []string{EndpointGenerateContent, EndpointStreamGenerateContent,
			EndpointGeminiCountTokens, EndpointEmbedContent, EndpointBatchEmbedContents,
			EndpointBidiGenerateContent}
	case ProtocolBedrockConverse:
		return []string{EndpointConverse, EndpointConverseStream}
	}
	return nil
}

// Model is a public model name and its pool of targets (docs/routing.md "Models and targets").
type Model struct {
	Name    string   `json:"name"`    // what clients send; unique
	Targets []Target `json:"targets"` // at least one
	// Affinity says whether requests that name a session (prompt-cache
	// affinity, docs/routing.md "Affinity") are placed by rendezvous
	// hashing; nil (absent) means true. false balances every request.
	Affinity *bool `json:"affinity,omitempty"`
	// PrefixAffinity says whether a request that names no session is
	// placed by the hash of its prompt's beginning (docs/routing.md
	// "Prefix affinity"); nil (absent) means false. It needs affinity on.
	PrefixAffinity *bool `json:"prefix_affinity,omitempty"`

	// Fallbacks (schema 2) names, in order, the public models that serve a
	// request when none of this model's targets can take it before
	// anything is sent (docs/routing.md "Fallbacks"). nil (absent) means
	// none. Present means at least one exact model name (no pattern) of
	// the same list, not this model, none twice, whose targets speak the
	// one protocol this model's targets speak; the chains of all models
	// together have no cycle.
	Fallbacks []string `json:"fallbacks,omitempty"`
}

// AffinityOn reports whether prompt-cache affinity is on for m (absent
// means on).
func (m *Model) AffinityOn() bool { return m.Affinity == nil || *m.Affinity }

// PrefixAffinityOn reports whether prefix affinity is on for m (absent
// means off).
func (m *Model) PrefixAffinityOn() bool { return m.PrefixAffinity != nil && *m.PrefixAffinity }

// Target binds a public model to a backend's real model.
type Target struct {
	Backend    string `json:"backend"`               // a Backend.ID of the same snapshot
	Model      string `json:"model"`                 // the provider's model name, written into the forwarded body
	Weight     int    `json:"weight"`                // relative weight, 1..[MaxWeight]
	Stream     bool   `json:"stream,omitempty"`      // capabilities (docs/routing.md "Capabilities"); false when omitted
	Tools      bool   `json:"tools,omitempty"`       //
	JSONSchema bool   `json:"json_schema,omitempty"` //
	Tier       int    `json:"tier,omitempty"`        // 0..[MaxTier]; lower is preferred (docs/routing.md "Models and targets")

	// Context window (schema 2, docs/routing.md "Context windows"): a
	// request the node expects not to fit is never sent to the target.
	// nil (absent) means not declared.

	// ContextWindow is the most tokens, input and output together, the
	// provider model holds: 1..[MaxContextTokens].
	ContextWindow *int `json:"context_window,omitempty"`
	// MaxOutputTokens is the most output tokens the provider model
	// writes for one request: 1..[MaxContextTokens], and no more than
	// ContextWindow when both are set.
	MaxOutputTokens *int `json:"max_output_tokens,omitempty"`

	// Price (schema 2) is what the provider charges for this target's
	// tokens (docs/routing.md "Prices"); nil (absent) means unpriced: its usage
	// events carry no cost, and budgets charge it nothing.
	Price *Price `json:"price,omitempty"`
}
