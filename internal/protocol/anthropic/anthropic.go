// Package anthropic describes the Anthropic API endpoints the node
// forwards: Messages and Messages count_tokens. Everything the node knows
// about that API is here or referenced from here: paths, which body members
// decide routing, which headers go up (anthropic-version with a default,
// anthropic-beta unchanged, x-api-key), how a stream ends and fails, where
// usage is, and the error document.
//
// Messages streams name every event and end with message_stop; a failure
// after the 200 is `event: error` with the error document as data. Every
// Anthropic-shape answer carries the node's request id in request-id, the
// header the Anthropic SDKs read into an error's RequestID.
package anthropic

import (
	"encoding/json"
	"net/http"

	"github.com/scootgate/scootgate/internal/protocol"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Messages is POST /v1/messages (the query is ignored, so ?beta=true, which
// Claude Code sends, is the same endpoint).
var Messages = &protocol.Spec{
	Endpoint:     protocol.Messages,
	Method:       http.MethodPost,
	Path:         "/v1/messages",
	UpstreamPath: "/messages",
	Inspect:      inspectMessages,
	Header:       Header,
	// Claude Code names its session here (and in metadata.user_id).
	SessionHeaders: []string{"X-Claude-Code-Session-Id"},
	BodyUsage:      usage.FromAnthropicBody,
	BodyOutcome:    usage.AnthropicBodyOutcome,
	Stream: &protocol.StreamSpec{
		Terminal:    terminal,
		NewTracker:  func(bool) protocol.Tracker { return usage.NewAnthropicStream() },
		NewOutcome:  func() protocol.OutcomeTracker { return &usage.AnthropicOutcome{} },
		InBandError: inBand,
		Keepalive:   []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n"),
		Types: []string{"content_block_delta", "content_block_start", "content_block_stop",
			"message_start", "message_delta", "message_stop", "ping", "error"},
	},
}

// CountTokens is POST /v1/messages/count_tokens: routed and rewritten like
// Messages, JSON only. Its answer ({"input_tokens":N}) is a count, not
// token usage, so its usage events carry none.
var CountTokens = &protocol.Spec{
	Endpoint:     protocol.CountTokens,
	Method:       http.MethodPost,
	Path:         "/v1/messages/count_tokens",
	UpstreamPath: "/messages/count_tokens",
	Inspect:      inspectCountTokens,
	Header:       Header,
	BodyUsage:    noUsage,
}

// DefaultVersion is sent when the client names none (a sane default);
// unfamiliar client versions pass through unchanged.
const DefaultVersion = "2023-06-01"

var requestHeaders = [...]string{"Content-Type", "Accept", "User-Agent", "Anthropic-Version", "Anthropic-Beta"}

// Header builds an Anthropic provider request's headers from scratch: the
// allowlisted client headers (anthropic-version and anthropic-beta
// unchanged), a default anthropic-version, and `x-api-key: <credential>`.
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
	if h.Get("Anthropic-Version") == "" {
		h.Set("Anthropic-Version", DefaultVersion)
	}
	h.Set("X-Api-Key", credential)
	return h
}

var (
	msgNames    = protocol.NewNames("model", "stream", "tools", "output_config", "output_format", "metadata")
	countNames  = protocol.NewNames("model", "tools", "output_config", "output_format")
	formatNames = protocol.NewNames("format")
	userIDNames = protocol.NewNames("user_id")
)

const (
	mModel = iota
	mStream
	mTools
	mOutputConfig
	mOutputFormat
	mMetadata
	mNum
)

// inspectMessages reads model, stream, tools (tools capability),
// output_config.format.type or the older beta top-level output_format.type
// == "json_schema" (json_schema capability) and the session key
// metadata.user_id.
func inspectMessages(body []byte) (protocol.Request, *protocol.BodyError) {
	var v [mNum][]byte
	r, berr := scan(body, msgNames, v[:])
	if berr != nil {
		return r, berr
	}
	if r.Stream, berr = protocol.ReadStream(v[mStream]); berr != nil {
		return protocol.Request{}, berr
	}
	if r.Stream {
		r.Need |= protocol.CapStream
	}
	if r.Need, berr = caps(r.Need, v[mTools], v[mOutputConfig], v[mOutputFormat]); berr != nil {
		return protocol.Request{}, berr
	}
	if r.SessionKey, berr = protocol.Nested(v[mMetadata], "metadata", userIDNames); berr != nil {
		return protocol.Request{}, berr
	}
	return r, nil
}

// inspectCountTokens is inspectMessages without stream and session key:
// the same model, tools and output format decide the targets.
func inspectCountTokens(body []byte) (protocol.Request, *protocol.BodyError) {
	var v [4][]byte
	r, berr := scan(body, countNames, v[:])
	if berr != nil {
		return r, berr
	}
	if r.Need, berr = caps(0, v[1], v[2], v[3]); berr != nil {
		return protocol.Request{}, berr
	}
	return r, nil
}

func scan(body []byte, names *protocol.Names, v [][]byte) (protocol.Request, *protocol.BodyError) {
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

func caps(need protocol.Caps, tools, outputConfig, outputFormat []byte) (protocol.Caps, *protocol.BodyError) {
	if protocol.NonEmptyArray(tools) {
		need |= protocol.CapTools
	}
	format, berr := protocol.Nested(outputConfig, "output_config", formatNames)
	if berr != nil {
		return 0, berr
	}
	a, berr := protocol.TypeIs(format, "output_config.format", "json_schema")
	if berr != nil {
		return 0, berr
	}
	b, berr := protocol.TypeIs(outputFormat, "output_format", "json_schema")
	if berr != nil {
		return 0, berr
	}
	if a || b {
		need |= protocol.CapJSONSchema
	}
	return need, nil
}

func terminal(ev *sse.Event) (done, failed bool) {
	switch ev.Type {
	case "message_stop":
		return true, false
	case "error":
		return false, true
	}
	return false, false
}

func noUsage([]byte) (usageevent.Usage, json.RawMessage, bool) { return usageevent.Usage{}, nil, false }

// ErrorType returns the Anthropic error "type" for a status
// (docs.claude.com/en/api/errors).
func ErrorType(status int) string {
	switch status {
	case 400, 405:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, 529:
		return "overloaded_error"
	default:
		if status >= 500 {
			return "api_error"
		}
		return "invalid_request_error"
	}
}

type errorBody struct {
	Type      string      `json:"type"`
	Error     errorObject `json:"error"`
	RequestID string      `json:"request_id,omitempty"`
}

type errorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ErrorBody renders a gateway error in the Anthropic shape:
// {"type":"error","error":{"type":…,"message":…},"request_id":…}.
func ErrorBody(status int, msg, requestID string) []byte {
	b, err := json.Marshal(errorBody{
		Type:      "error",
		Error:     errorObject{Type: ErrorType(status), Message: msg},
		RequestID: requestID,
	})
	if err != nil { // unreachable: only strings are marshalled
		return []byte(`{"type":"error","error":{"type":"api_error","message":"internal error"}}`)
	}
	return b
}

func inBand(status int, _, msg, requestID string, _ int) []byte {
	body := ErrorBody(status, msg, requestID)
	out := make([]byte, 0, len(body)+24)
	out = append(out, "event: error\ndata: "...)
	out = append(out, body...)
	return append(out, "\n\n"...)
}

// Model is one entry of the Anthropic model list, and the answer of
// GET /v1/models/{id}.
type Model struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// ModelList is the answer of GET /v1/models in the Anthropic shape.
type ModelList struct {
	Data    []Model `json:"data"`
	HasMore bool    `json:"has_more"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
}

// NewModel returns the model entry the node shows for a public model.
func NewModel(name, createdAt string) Model {
	return Model{Type: "model", ID: name, DisplayName: name, CreatedAt: createdAt}
}
