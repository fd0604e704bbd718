// Package provider is what every provider API the node forwards shares:
// the protocol pools, the client endpoints of each, the capabilities a
// request can need, how far an attempt got ([SendState]), what inspection
// reads from a request body ([Request]), and the description types through
// which a provider API tells the request path everything it needs to know
// ([API], [Spec]).
//
// # Basics
//
// A [Protocol] is a provider wire API and a pool of backends: OpenAI
// (OpenAI-compatible), Anthropic, Gemini or Bedrock Converse. The pools are never mixed and a body is
// never converted from one to the other. An [Endpoint] is one client entry
// point of a protocol (chat completions, responses, embeddings, messages,
// count_tokens, Gemini's generate_content and the others); backends declare the set of endpoints they serve
// ([EndpointSet]). The names of protocols and endpoints are the ones used in
// the node's TOML, in routing snapshots, in usage events and in metrics.
//
// Each provider API is one package below this one (provider/openai,
// provider/anthropic, provider/gemini) that owns everything its wire format implies: the
// endpoints' [Spec] values, inspection, header allowlists, how a stream
// ends and fails, error documents, model listing, quota markers, retry
// advice and usage parsing. Its [API] value is one line of
// provider/catalog. The request path (internal/gateway) runs one attempt
// loop for every endpoint, driven by the Spec, and never switches on the
// protocol itself. docs/architecture.md "Adding a provider API" lists the
// steps.
//
// # Request bodies
//
// A Spec's Inspect reads only the members that decide where a request may go
// (model, stream, capability members) or that name a session (the session
// key). Every such member must appear once and in its exact spelling:
// encoding/json and other parsers match member names case-insensitively or
// let the last duplicate win, so a body with "stream":true and
// "Stream":false could be read one way by the node and the other way by the
// provider. [Scan] refuses those bodies.
//
// Inspect walks the body once and notes where the members it will edit are
// ([Request.ModelAt], [Request.AskUsage]), so that an attempt rewrites the
// body in one copy without walking it again ([Request.Rewrite]).
package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Protocol is a provider wire API and the pool of backends that speak it.
type Protocol uint8

const (
	OpenAI Protocol = iota
	Anthropic
	Gemini
	// BedrockConverse is Amazon Bedrock's own Converse API, which only
	// Bedrock serves: its backends are always on platform Bedrock.
	BedrockConverse
	// NumProtocols is the number of protocols, for arrays indexed by one.
	NumProtocols
)

// Protocol names, as written in the node's TOML, routing snapshots
// (pkg/routesnap) and usage events (pkg/usageevent).
const (
	NameOpenAI    = usageevent.ProtocolOpenAI
	NameAnthropic = usageevent.ProtocolAnthropic
	NameGemini    = usageevent.ProtocolGemini

	NameBedrockConverse = usageevent.ProtocolBedrockConverse
)

func (p Protocol) String() string {
	switch p {
	case Anthropic:
		return NameAnthropic
	case Gemini:
		return NameGemini
	case BedrockConverse:
		return NameBedrockConverse
	}
	return NameOpenAI
}

// ParseProtocol maps a protocol name to its Protocol.
func ParseProtocol(s string) (Protocol, bool) {
	switch s {
	case NameOpenAI:
		return OpenAI, true
	case NameAnthropic:
		return Anthropic, true
	case NameGemini:
		return Gemini, true
	case NameBedrockConverse:
		return BedrockConverse, true
	}
	return 0, false
}

// Endpoint is one client endpoint of a protocol.
type Endpoint uint8

const (
	Chat                  Endpoint = iota // OpenAI POST /v1/chat/completions
	Messages                              // Anthropic POST /v1/messages
	Responses                             // OpenAI POST /v1/responses
	Embeddings                            // OpenAI POST /v1/embeddings
	CountTokens                           // Anthropic POST /v1/messages/count_tokens
	GenerateContent                       // Gemini POST /v1beta/models/{model}:generateContent
	StreamGenerateContent                 // Gemini POST /v1beta/models/{model}:streamGenerateContent
	GeminiCountTokens                     // Gemini POST /v1beta/models/{model}:countTokens
	EmbedContent                          // Gemini POST /v1beta/models/{model}:embedContent
	BatchEmbedContents                    // Gemini POST /v1beta/models/{model}:batchEmbedContents
	ResponsesCompact                      // OpenAI POST /v1/responses/compact
	ResponsesInputTokens                  // OpenAI POST /v1/responses/input_tokens
	Completions                           // OpenAI POST /v1/completions (legacy, fill-in-the-middle)
	Rerank                                // OpenAI-compatible POST /v1/rerank and /v2/rerank (Cohere, Jina, vLLM shape)
	AudioSpeech                           // OpenAI POST /v1/audio/speech
	AudioTranscriptions                   // OpenAI POST /v1/audio/transcriptions (multipart)
	AudioTranslations                     // OpenAI POST /v1/audio/translations (multipart)
	ImageGenerations                      // OpenAI POST /v1/images/generations
	ImageEdits                            // OpenAI POST /v1/images/edits (multipart)
	Realtime                              // OpenAI GET /v1/realtime (a WebSocket session)
	BidiGenerateContent                   // Gemini Live: GET /ws/…GenerativeService.BidiGenerateContent (a WebSocket session)
	Converse                              // Bedrock Converse POST /model/{modelId}/converse
	ConverseStream                        // Bedrock Converse POST /model/{modelId}/converse-stream
	// NumEndpoints is the number of endpoints, for arrays indexed by one.
	NumEndpoints
)

// endpointInfo is what every layer must agree on about an endpoint: its
// name and its protocol. Paths and behaviour are in the provider packages.
var endpointInfo = [NumEndpoints]struct {
	name  string
	proto Protocol
}{
	Chat:        {usageevent.EndpointChatCompletions, OpenAI},
	Messages:    {usageevent.EndpointMessages, Anthropic},
	Responses:   {usageevent.EndpointResponses, OpenAI},
	Embeddings:  {usageevent.EndpointEmbeddings, OpenAI},
	CountTokens: {usageevent.EndpointCountTokens, Anthropic},

	GenerateContent:       {usageevent.EndpointGenerateContent, Gemini},
	StreamGenerateContent: {usageevent.EndpointStreamGenerateContent, Gemini},
	GeminiCountTokens:     {usageevent.EndpointGeminiCountTokens, Gemini},
	EmbedContent:          {usageevent.EndpointEmbedContent, Gemini},
	BatchEmbedContents:    {usageevent.EndpointBatchEmbedContents, Gemini},

	ResponsesCompact:     {usageevent.EndpointResponsesCompact, OpenAI},
	ResponsesInputTokens: {usageevent.EndpointResponsesInputTokens, OpenAI},
	Completions:          {usageevent.EndpointCompletions, OpenAI},
	Rerank:               {usageevent.EndpointRerank, OpenAI},
	AudioSpeech:          {usageevent.EndpointAudioSpeech, OpenAI},
	AudioTranscriptions:  {usageevent.EndpointAudioTranscriptions, OpenAI},
	AudioTranslations:    {usageevent.EndpointAudioTranslations, OpenAI},
	ImageGenerations:     {usageevent.EndpointImageGenerations, OpenAI},
	ImageEdits:           {usageevent.EndpointImageEdits, OpenAI},
	Realtime:             {usageevent.EndpointRealtime, OpenAI},
	BidiGenerateContent:  {usageevent.EndpointBidiGenerateContent, Gemini},

	Converse:       {usageevent.EndpointConverse, BedrockConverse},
	ConverseStream: {usageevent.EndpointConverseStream, BedrockConverse},
}

// String returns the endpoint's name: "chat_completions", "messages",
// "responses", "embeddings", "count_tokens", "generate_content",
// "stream_generate_content", "gemini_count_tokens", "embed_content",
// "batch_embed_contents", "responses_compact", "responses_input_tokens",
// "completions", "rerank", "audio_speech", "audio_transcriptions",
// "audio_translations", "image_generations", "image_edits", "realtime",
// "bidi_generate_content", "converse" or "converse_stream".
func (e Endpoint) String() string { return endpointInfo[e].name }

// Protocol returns the protocol the endpoint belongs to.
func (e Endpoint) Protocol() Protocol { return endpointInfo[e].proto }

// ParseEndpoint maps an endpoint name to its Endpoint.
func ParseEndpoint(s string) (Endpoint, bool) {
	for e := range NumEndpoints {
		if endpointInfo[e].name == s {
			return e, true
		}
	}
	return 0, false
}

// EndpointNames lists the endpoint names of protocol p, defaults first.
func EndpointNames(p Protocol) []string {
	var out []string
	for e := range NumEndpoints {
		if endpointInfo[e].proto == p {
			out = append(out, endpointInfo[e].name)
		}
	}
	return out
}

// EndpointSet is a set of endpoints.
type EndpointSet uint32

// Set returns the set holding only e.
func (e Endpoint) Set() EndpointSet { return 1 << e }

// Has reports whether s holds e.
func (s EndpointSet) Has(e Endpoint) bool { return s&e.Set() != 0 }

// DefaultEndpoints is what a backend of protocol p serves when it does not
// say: chat completions for OpenAI, messages for Anthropic,
// generate_content and stream_generate_content for Gemini (one model
// generating, answered whole or streamed: Google's SDKs and agents use
// both), converse and converse_stream for Bedrock Converse (the same). Responses (and its compaction), embeddings, legacy completions, rerank, audio, images, realtime and Live sessions and the token counts
// are opt-in: not every compatible provider serves them.
func DefaultEndpoints(p Protocol) EndpointSet {
	switch p {
	case Anthropic:
		return Messages.Set()
	case Gemini:
		return GenerateContent.Set() | StreamGenerateContent.Set()
	case BedrockConverse:
		return Converse.Set() | ConverseStream.Set()
	}
	return Chat.Set()
}

func (s EndpointSet) String() string {
	var parts []string
	for e := range NumEndpoints {
		if s.Has(e) {
			parts = append(parts, e.String())
		}
	}
	return strings.Join(parts, ",")
}

// Caps is a set of capabilities a request can need and a target can offer.
type Caps uint8

const (
	CapStream Caps = 1 << iota
	CapTools
	CapJSONSchema
)

// Has reports whether c offers every capability in need.
func (c Caps) Has(need Caps) bool { return c&need == need }

func (c Caps) String() string {
	var parts []string
	if c&CapStream != 0 {
		parts = append(parts, "stream")
	}
	if c&CapTools != 0 {
		parts = append(parts, "tools")
	}
	if c&CapJSONSchema != 0 {
		parts = append(parts, "json_schema")
	}
	return strings.Join(parts, ",")
}

// Request is what the node knows about a client body after Inspect.
type Request struct {
	Model  string
	Stream bool
	Need   Caps
	// SessionKey is the raw JSON value of the member that names the
	// client's conversation (OpenAI prompt_cache_key, Anthropic
	// metadata.user_id), nil when absent. It aliases the body. It must
	// never be logged or published; see [Session].
	SessionKey []byte
	// Prefix is the beginning of the prompt, for prefix affinity when
	// the request names no session.
	Prefix Prefix
	// MaxOutput is the output cap the body declares (OpenAI max_tokens,
	// max_completion_tokens or max_output_tokens, Anthropic max_tokens);
	// 0 when it declares none or not as a whole number. With the body's
	// size it estimates the tokens a provider counts against the
	// credential's budget (docs/routing.md "Headroom").
	MaxOutput int64

	// ModelAt is where the model's JSON value is in the body, [start, end):
	// the one member every attempt rewrites, for an endpoint whose path
	// does not name the model.
	ModelAt [2]int
	// ModelRaw says that ModelAt spans a form field's text, not a JSON
	// string (a multipart body): the model is written there unquoted.
	ModelRaw bool
	// Named lists further places in the body, in order, where a string
	// names the model as "models/{model}" (Gemini's nested and batch
	// requests): each JSON string, quotes included, is rewritten to name
	// the target's provider model the same way.
	Named [][2]int
	// AskUsage, when its Value is set, is the edit that asks the provider
	// for the stream usage the client did not ask for (OpenAI
	// stream_options.include_usage; docs/usage-events.md). The request
	// path applies it only where the node and the backend allow it, and
	// then hides the usage-only chunk the client did not expect.
	AskUsage Edit
}

// Edit replaces the bytes [At, End) of a body with Value (an insertion when
// At == End).
type Edit struct {
	At, End int
	Value   []byte
}

// Pieces is the body of one attempt as the pieces it is sent as: the
// client's bytes between the edits and the edits' values, none of them
// copied, so that a large body (an audio upload) is held once, not twice.
type Pieces struct {
	buf   [9][]byte // room for four edits without allocating
	parts [][]byte
	size  int
}

// Parts returns the pieces in order; they alias the body and the values.
func (p *Pieces) Parts() [][]byte { return p.parts }

// Len is the body's length.
func (p *Pieces) Len() int { return p.size }

// Set makes b the whole body, in place of what p held: the body of an
// envelope that wraps the client's bytes rather than editing them in
// place (Bedrock's count-tokens carries the invoke body base64-encoded).
// b must stay unchanged while p is in use.
func (p *Pieces) Set(b []byte) {
	p.parts, p.size = p.buf[:0], 0
	p.add(b)
}

func (p *Pieces) add(b []byte) {
	if len(b) > 0 {
		p.parts = append(p.parts, b)
		p.size += len(b)
	}
}

// Split makes the body of one attempt into dst: body with the model value
// at ModelAt replaced by model (a JSON string; nil for an endpoint whose
// path names the model), every Named string replaced by named (the JSON
// string "models/{provider model}"), and, when askUsage is set, the
// AskUsage edit applied. Every other byte is body's, and nothing is
// copied: body and the values must stay unchanged while dst is in use.
func (r *Request) Split(body, model, named []byte, askUsage bool, dst *Pieces) {
	var buf [4]Edit
	dst.parts, dst.size = dst.buf[:0], 0
	prev := 0
	for _, e := range r.edits(model, named, askUsage, buf[:0]) {
		dst.add(body[prev:e.At])
		dst.add(e.Value)
		prev = e.End
	}
	dst.add(body[prev:])
}

// Rewrite returns the body Split describes as one slice: body itself when
// there is nothing to edit, else its one copy.
func (r *Request) Rewrite(body, model, named []byte, askUsage bool) []byte {
	var buf [4]Edit
	edits := r.edits(model, named, askUsage, buf[:0])
	if len(edits) == 0 {
		return body
	}
	size := len(body)
	for _, e := range edits {
		size += len(e.Value) - (e.End - e.At)
	}
	out := make([]byte, 0, size)
	prev := 0
	for _, e := range edits {
		out = append(out, body[prev:e.At]...)
		out = append(out, e.Value...)
		prev = e.End
	}
	return append(out, body[prev:]...)
}

// edits appends the edits of one attempt's body to edits, in offset order.
func (r *Request) edits(model, named []byte, askUsage bool, edits []Edit) []Edit {
	if model != nil {
		if r.ModelRaw {
			model = unquote(model)
		}
		edits = append(edits, Edit{At: r.ModelAt[0], End: r.ModelAt[1], Value: model})
	}
	for _, at := range r.Named {
		edits = append(edits, Edit{At: at[0], End: at[1], Value: named})
	}
	if askUsage && r.AskUsage.Value != nil {
		edits = append(edits, r.AskUsage)
	}
	// Few edits, nearly in order: an insertion sort by offset.
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && edits[j].At < edits[j-1].At; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	return edits
}

// unquote returns the text of the JSON string s: its bytes between the
// quotes when it has no escape, else its decoded value.
func unquote(s []byte) []byte {
	if len(s) >= 2 && bytes.IndexByte(s, '\\') < 0 {
		return s[1 : len(s)-1]
	}
	var v string
	if json.Unmarshal(s, &v) != nil {
		return s // not a JSON string: never the case for a compiled target
	}
	return []byte(v)
}

// Session returns what names r's session for prompt-cache affinity
// (docs/routing.md "Affinity"): the body's session member when it is a
// non-empty JSON string (its contents, when unescaped) or any other
// non-null value (its bytes), otherwise the first non-empty one of the
// endpoint's session headers (Spec.SessionHeaders, canonical names). Both
// are empty when the request names no session. It does not allocate.
func Session(r *Request, h http.Header, headers []string) (body []byte, header string) {
	if k := r.SessionKey; len(k) > 0 && string(k) != "null" && string(k) != `""` {
		if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' && bytes.IndexByte(k, '\\') < 0 {
			k = k[1 : len(k)-1]
		}
		return k, ""
	}
	for _, name := range headers {
		if v := h[name]; len(v) > 0 && v[0] != "" {
			return nil, v[0]
		}
	}
	return nil, ""
}

// BodyError is a request the node refuses: always a 400 in the
// endpoint's error shape. Code is the OpenAI error code.
type BodyError struct {
	Code string
	Msg  string
}

func (e *BodyError) Error() string { return e.Msg }

// Problemf returns a BodyError.
func Problemf(code, format string, args ...any) *BodyError {
	return &BodyError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// SendState is how far an attempt got (docs/failures.md "Send state"); a
// request's is the one of its last attempt. The request path sets it and
// metrics labels requests with it.
type SendState uint8

const (
	// NoAttempt is the state of a request that never reached an attempt:
	// refused by the node itself before any pick. It is the zero value.
	NoAttempt SendState = iota
	// NotSent: no request byte was handed to the provider's connection.
	NotSent
	// PossiblySent: request bytes may have reached the provider, but no
	// response status came back.
	PossiblySent
	// ResponseReceived: the provider's response status and headers arrived.
	ResponseReceived
	// NumSendStates is the number of send states, for arrays indexed by one.
	NumSendStates
)

// sendStateNames are the usage event's names (usageevent.Send*) and
// "none" for NoAttempt, which no event carries.
var sendStateNames = [NumSendStates]string{
	NoAttempt:        "none",
	NotSent:          usageevent.SendDefinitelyNotSent,
	PossiblySent:     usageevent.SendPossiblySent,
	ResponseReceived: usageevent.SendResponseReceived,
}

// String returns the state's name as usage events and logs write it
// ("definitely_not_sent", "possibly_sent", "response_received"), "none"
// for NoAttempt, and "send_state(N)" for a value outside the set.
func (s SendState) String() string {
	if s < NumSendStates {
		return sendStateNames[s]
	}
	return "send_state(" + strconv.Itoa(int(s)) + ")"
}

// SplitMember makes the body of one attempt into dst: body with its whole
// top-level model member (name, colon and value, as Inspect found it at
// ModelAt) replaced by member, one or more JSON members ("name":value,…)
// or nothing. Every other byte is body's, and nothing is copied. It is
// the envelope edit of a platform that names the model in the path
// (docs/routing.md "Platforms"). ok is false when the bytes before
// ModelAt are not a member name and a colon, which Inspect never leaves.
func (r *Request) SplitMember(body, member []byte, dst *Pieces) (ok bool) {
	dst.parts, dst.size = dst.buf[:0], 0
	start, ok := memberStart(body, r.ModelAt[0])
	if !ok {
		return false
	}
	dst.add(body[:start])
	dst.add(member)
	dst.add(body[r.ModelAt[1]:])
	return true
}

// memberStart returns the offset of the opening quote of the member name
// whose value starts at at. The name is "model" (Inspect matched it), so
// no quote is escaped inside it: the previous quote is the opening one.
func memberStart(body []byte, at int) (int, bool) {
	i := skipSpaceBack(body, at)
	if i == 0 || body[i-1] != ':' {
		return 0, false
	}
	i = skipSpaceBack(body, i-1)
	if i == 0 || body[i-1] != '"' {
		return 0, false
	}
	q := bytes.LastIndexByte(body[:i-1], '"')
	return q, q >= 0
}

// skipSpaceBack returns the offset after the last non-space byte of
// body[:i] (JSON whitespace).
func skipSpaceBack(body []byte, i int) int {
	for i > 0 {
		switch body[i-1] {
		case ' ', '\t', '\n', '\r':
			i--
		default:
			return i
		}
	}
	return i
}
