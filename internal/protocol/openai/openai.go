// Package openai describes the OpenAI API endpoints the node forwards:
// Chat Completions, Responses and Embeddings. Everything the node knows
// about that API is here or referenced from here: paths, which body members
// decide routing, which headers go up, how a stream ends and fails, where
// usage is, and the error document.
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
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/protocol"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/internal/usage"
)

// Chat is POST /v1/chat/completions.
var Chat = &protocol.Spec{
	Endpoint:     protocol.Chat,
	Method:       http.MethodPost,
	Path:         "/v1/chat/completions",
	UpstreamPath: "/chat/completions",
	Inspect:      inspectChat,
	Header:       Header,
	InjectUsage:  usage.InjectIncludeUsage,
	BodyUsage:    usage.FromOpenAIBody,
	BodyOutcome:  usage.OpenAIBodyOutcome,
	Stream: &protocol.StreamSpec{
		Terminal:    chatTerminal,
		NewTracker:  func(injected bool) protocol.Tracker { return usage.NewOpenAIStream(injected) },
		NewOutcome:  func() protocol.OutcomeTracker { return &usage.OpenAIOutcome{} },
		InBandError: chatInBand,
		Keepalive:   keepalive,
	},
}

// Responses is POST /v1/responses. The stateful Responses endpoints
// (/v1/responses/{id} and below) are not routed: see [StatefulPath].
var Responses = &protocol.Spec{
	Endpoint:     protocol.Responses,
	Method:       http.MethodPost,
	Path:         "/v1/responses",
	UpstreamPath: "/responses",
	Inspect:      inspectResponses,
	Header:       Header,
	// Codex CLI sends its session id in Session-Id (and the same value in
	// Thread-Id, X-Client-Request-Id and X-Codex-Turn-Metadata).
	SessionHeaders: []string{"Session-Id", "Thread-Id"},
	BodyUsage:      usage.FromResponsesBody,
	BodyOutcome:    usage.ResponsesBodyOutcome,
	Stream: &protocol.StreamSpec{
		Terminal:    ResponsesTerminal,
		NewTracker:  func(bool) protocol.Tracker { return usage.NewResponsesStream() },
		NewOutcome:  func() protocol.OutcomeTracker { return &usage.ResponsesOutcome{} },
		InBandError: responsesInBand,
		Keepalive:   keepalive,
		Types:       responsesTypes,
	},
}

// responsesTypes are the Responses stream's event types (the API
// reference's streaming events), the commonest first.
var responsesTypes = []string{
	"response.output_text.delta", "response.function_call_arguments.delta",
	"response.reasoning_summary_text.delta", "response.reasoning_text.delta",
	"response.refusal.delta", "response.output_text.done",
	"response.output_text.annotation.added", "response.function_call_arguments.done",
	"response.reasoning_summary_text.done", "response.reasoning_text.done",
	"response.refusal.done", "response.content_part.added", "response.content_part.done",
	"response.output_item.added", "response.output_item.done",
	"response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
	"response.created", "response.in_progress", "response.queued",
	"response.completed", "response.incomplete", "response.failed", "error",
}

// Embeddings is POST /v1/embeddings: JSON only, usage.prompt_tokens.
var Embeddings = &protocol.Spec{
	Endpoint:     protocol.Embeddings,
	Method:       http.MethodPost,
	Path:         "/v1/embeddings",
	UpstreamPath: "/embeddings",
	Inspect:      inspectEmbeddings,
	Header:       Header,
	BodyUsage:    usage.FromOpenAIBody,
	BodyOutcome:  usage.OpenAIBodyOutcome, // the model; embeddings have no finish reason
}

// keepalive is an SSE comment: every SSE parser skips it.
var keepalive = []byte(": keepalive\n\n")

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

// The members Inspect reads, per endpoint. Index constants follow each.
var (
	chatNames   = protocol.NewNames("model", "stream", "tools", "functions", "response_format", "prompt_cache_key")
	respNames   = protocol.NewNames("model", "stream", "tools", "text", "prompt_cache_key")
	embNames    = protocol.NewNames("model")
	formatNames = protocol.NewNames("format")
)

const (
	cModel = iota
	cStream
	cTools
	cFunctions
	cResponseFormat
	cPromptCacheKey
	cNum
)

const (
	rModel = iota
	rStream
	rTools
	rText
	rPromptCacheKey
	rNum
)

// inspectChat reads model, stream, tools/functions (tools capability),
// response_format.type == "json_schema" (json_schema capability) and the
// session key prompt_cache_key.
func inspectChat(body []byte) (protocol.Request, *protocol.BodyError) {
	var v [cNum][]byte
	r, berr := begin(body, chatNames, v[:])
	if berr != nil {
		return r, berr
	}
	if r.Stream, berr = protocol.ReadStream(v[cStream]); berr != nil {
		return protocol.Request{}, berr
	}
	if r.Stream {
		r.Need |= protocol.CapStream
	}
	if protocol.NonEmptyArray(v[cTools]) || protocol.NonEmptyArray(v[cFunctions]) {
		r.Need |= protocol.CapTools
	}
	schema, berr := protocol.TypeIs(v[cResponseFormat], "response_format", "json_schema")
	if berr != nil {
		return protocol.Request{}, berr
	}
	if schema {
		r.Need |= protocol.CapJSONSchema
	}
	r.SessionKey = v[cPromptCacheKey]
	return r, nil
}

// inspectResponses reads model, stream, tools (tools capability),
// text.format.type == "json_schema" (json_schema capability) and the
// session key prompt_cache_key.
func inspectResponses(body []byte) (protocol.Request, *protocol.BodyError) {
	var v [rNum][]byte
	r, berr := begin(body, respNames, v[:])
	if berr != nil {
		return r, berr
	}
	if r.Stream, berr = protocol.ReadStream(v[rStream]); berr != nil {
		return protocol.Request{}, berr
	}
	if r.Stream {
		r.Need |= protocol.CapStream
	}
	if protocol.NonEmptyArray(v[rTools]) {
		r.Need |= protocol.CapTools
	}
	format, berr := protocol.Nested(v[rText], "text", formatNames)
	if berr != nil {
		return protocol.Request{}, berr
	}
	schema, berr := protocol.TypeIs(format, "text.format", "json_schema")
	if berr != nil {
		return protocol.Request{}, berr
	}
	if schema {
		r.Need |= protocol.CapJSONSchema
	}
	r.SessionKey = v[rPromptCacheKey]
	return r, nil
}

// inspectEmbeddings reads the model only: embeddings never stream and
// need no capability.
func inspectEmbeddings(body []byte) (protocol.Request, *protocol.BodyError) {
	var v [1][]byte
	return begin(body, embNames, v[:])
}

// begin scans the top level of body (names[0] must be "model") and reads
// the model.
func begin(body []byte, names *protocol.Names, v [][]byte) (protocol.Request, *protocol.BodyError) {
	berr, err := protocol.Scan(body, "", names, v)
	if err != nil {
		return protocol.Request{}, protocol.RejectBody(body)
	}
	if berr != nil {
		return protocol.Request{}, berr
	}
	m, berr := protocol.ReadModel(v[0])
	return protocol.Request{Model: m}, berr
}

var doneData = []byte("[DONE]")

// chatTerminal: [DONE] ends a Chat Completions stream; a chunk that is an
// error object is the provider's in-band failure.
func chatTerminal(ev *sse.Event) (done, failed bool) {
	if bytes.Equal(ev.Data, doneData) {
		return true, false
	}
	return false, bytes.HasPrefix(ev.Data, []byte(`{"error"`))
}

// ResponsesTerminal reports whether a Responses stream event is terminal:
// response.completed or response.incomplete (done), response.failed (done,
// failed); an `error` event is the provider's in-band failure. The type is
// the event: field, or, when a compatible server leaves that out, the
// data's top-level "type" string.
func ResponsesTerminal(ev *sse.Event) (done, failed bool) {
	if ev.Type != "" {
		return responsesKind(ev.Type)
	}
	if len(ev.Data) == 0 || ev.Data[0] != '{' {
		return false, false
	}
	raw, ok, err := jsonedit.Lookup(ev.Data, "type")
	if err != nil || !ok || len(raw) == 0 || raw[0] != '"' {
		return false, false
	}
	for _, t := range [...]string{"response.completed", "response.incomplete", "response.failed", "error"} {
		if jsonedit.EqualString(raw, t) {
			return responsesKind(t)
		}
	}
	return false, false
}

func responsesKind(t string) (done, failed bool) {
	switch t {
	case "response.completed", "response.incomplete":
		return true, false
	case "response.failed":
		return true, true
	case "error":
		return false, true
	}
	return false, false
}

// ErrorType returns the OpenAI error "type" for a status.
func ErrorType(status int) string {
	switch {
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ErrorBody renders a gateway error in the OpenAI shape:
// {"error":{"message":…,"type":…,"param":null,"code":…}} (code null when "").
func ErrorBody(status int, code, msg string) []byte {
	oe := errorObject{Message: msg, Type: ErrorType(status)}
	if code != "" {
		oe.Code = &code
	}
	b, err := json.Marshal(errorBody{Error: oe})
	if err != nil { // unreachable: only strings are marshalled
		return []byte(`{"error":{"message":"internal error","type":"server_error"}}`)
	}
	return b
}

// chatInBand is `data: {"error":…}`: the SDKs raise on a chunk with an
// "error" member.
func chatInBand(status int, code, msg, _ string, _ int) []byte {
	body := ErrorBody(status, code, msg)
	out := make([]byte, 0, len(body)+8)
	out = append(out, "data: "...)
	out = append(out, body...)
	return append(out, "\n\n"...)
}

type streamError struct {
	Type           string  `json:"type"`
	Code           string  `json:"code"`
	Message        string  `json:"message"`
	Param          *string `json:"param"`
	SequenceNumber int     `json:"sequence_number"`
}

// responsesInBand is the Responses stream's own error event, numbered
// after the n events relayed (sequence numbers start at 0).
func responsesInBand(status int, code, msg, _ string, n int) []byte {
	if code == "" {
		code = ErrorType(status)
	}
	body, err := json.Marshal(streamError{Type: "error", Code: code, Message: msg, SequenceNumber: n})
	if err != nil { // unreachable: only strings and an int
		body = []byte(`{"type":"error","code":"server_error","message":"internal error","param":null,"sequence_number":0}`)
	}
	out := make([]byte, 0, len(body)+24)
	out = append(out, "event: error\ndata: "...)
	out = append(out, body...)
	return append(out, "\n\n"...)
}

// Model is one entry of the OpenAI model list, and the answer of
// GET /v1/models/{id}.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// ModelList is the answer of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// NewModel returns the model entry the node shows for a public model.
func NewModel(name string, created int64) Model {
	return Model{ID: name, Object: "model", Created: created, OwnedBy: "scootgate"}
}

// StatefulPath reports whether path is one of the stateful Responses or
// Conversations endpoints (a stored response, its input items, its
// cancellation, a conversation). Those are bound to the provider account
// that stored the object, which a node routing each request on its own
// cannot find again. /v1/responses/compact and /v1/responses/input_tokens
// are stateless but not served: they are plain unknown paths.
func StatefulPath(path string) bool {
	switch path {
	case "/v1/responses/compact", "/v1/responses/input_tokens":
		return false
	}
	return hasPathPrefix(path, "/v1/responses/") || path == "/v1/conversations" || hasPathPrefix(path, "/v1/conversations/")
}

func hasPathPrefix(path, prefix string) bool {
	return len(path) > len(prefix) && path[:len(prefix)] == prefix
}
