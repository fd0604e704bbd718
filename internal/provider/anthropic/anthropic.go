// Package anthropic is everything the node knows about the Anthropic API
// and the providers compatible with it: the endpoints it forwards
// (Messages and Messages count_tokens), which body members decide routing,
// which headers go up (anthropic-version with a default, anthropic-beta
// unchanged, x-api-key) and come back, how a stream ends and fails, where
// usage is, the error document, what a quota answer says, and the model
// list with its paging. [API] is its catalog entry.
//
// Messages streams name every event and end with message_stop; a failure
// after the 200 is `event: error` with the error document as data. Every
// Anthropic-shape answer carries the node's request id in request-id, the
// header the Anthropic SDKs read into an error's RequestID.
package anthropic

import (
	"net/http"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
)

// LimitHeaders are Anthropic's rate-limit headers
// (docs.claude.com/en/api/rate-limits): anthropic-ratelimit-requests-limit,
// -remaining, -reset (an RFC 3339 instant) and the same for tokens. They
// replace every rate-limit header the provider sent.
var LimitHeaders = &provider.RateLimitHeaders{
	Replace:  []string{"Anthropic-Ratelimit-", "X-Ratelimit-"},
	Requests: [3]string{"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"},
	Tokens:   [3]string{"Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
	ResetAt:  true,
}

// API is the Anthropic API's catalog entry.
var API = &provider.API{
	Protocol:  provider.Anthropic,
	Endpoints: []*provider.Spec{Messages, CountTokens},
	// Anthropic clients always send anthropic-version: a request the node
	// does not route (the model list, an unknown path) that carries it is
	// answered in the Anthropic shape.
	Claims: func(r *http.Request) bool { return r.Header.Get("Anthropic-Version") != "" },
	// The Anthropic SDKs send their key as x-api-key.
	KeyHeaders:      []string{"X-Api-Key"},
	RequestIDHeader: "Request-Id",
	ErrorBody:       func(status int, _, msg, requestID string) []byte { return ErrorBody(status, msg, requestID) },
	NotRouted:       func(string) (string, string, bool) { return "", "", false },
	// Anthropic's own headers, and what compatible providers that also
	// speak the OpenAI API send (x-ratelimit-*, x-request-id, which wins
	// when both ids come, as it always has).
	ResponseHeaders:   []string{"Anthropic-Ratelimit-", "X-Ratelimit-", "Retry-After-Ms"},
	LimitHeaders:      LimitHeaders,
	ProviderRequestID: []string{"X-Request-Id", "Request-Id"},
	RetryAfter:        provider.RetryAfter,
	Headroom:          headroom,
	QuotaExhausted:    quota.Exhausted,
	ModelsPaths:       []string{"/v1/models"},
	ModelsDoors:       []*provider.ModelsDoor{BedrockInferenceProfiles},
	ListModels:        listModels,
	GetModel:          getModel,
}

// Messages is POST /v1/messages (the query is ignored, so ?beta=true, which
// Claude Code sends, is the same endpoint).
var Messages = &provider.Spec{
	Endpoint:     provider.Messages,
	Method:       http.MethodPost,
	Path:         "/v1/messages",
	UpstreamPath: "/messages",
	Inspect:      inspectMessages,
	Header:       Header,
	// Claude Code names its session here (and in metadata.user_id);
	// opencode in X-Session-Affinity and X-Session-Id.
	SessionHeaders: []string{"X-Claude-Code-Session-Id", "X-Session-Affinity", "X-Session-Id"},
	BodyUsage:      BodyUsage,
	UsageMember:    "usage",
	BodyOutcome:    BodyOutcome,
	Stream: &provider.StreamSpec{
		Terminal:    terminal,
		NewTracker:  func(bool) provider.Tracker { return NewStream() },
		NewOutcome:  func() provider.OutcomeTracker { return &StreamOutcome{} },
		InBandError: inBand,
		Keepalive:   []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n"),
		Ping:        func(ev *sse.Event) bool { return ev.Type == "ping" },
		Types: []string{"content_block_delta", "content_block_start", "content_block_stop",
			"message_start", "message_delta", "message_stop", "ping", "error"},
	},
	Envelopes: [provider.NumPlatforms]*provider.Envelope{provider.Bedrock: bedrockMessages, provider.Vertex: vertexMessages},
	Doors:     []*provider.Door{BedrockInvokeDoor, VertexRawPredictDoor},
}

// CountTokens is POST /v1/messages/count_tokens: routed and rewritten like
// Messages, JSON only. Its answer ({"input_tokens":N}) is a count, not
// token usage, so its usage events carry none. Bedrock and Vertex AI
// count with operations of their own (countenv.go).
var CountTokens = &provider.Spec{
	Endpoint:     provider.CountTokens,
	Method:       http.MethodPost,
	Path:         "/v1/messages/count_tokens",
	UpstreamPath: "/messages/count_tokens",
	Inspect:      inspectCountTokens,
	Header:       Header,
	BodyUsage:    provider.NoUsage,
	Doors:        []*provider.Door{BedrockCountTokensDoor, VertexCountTokensDoor},
	Envelopes:    [provider.NumPlatforms]*provider.Envelope{provider.Bedrock: bedrockCountTokens, provider.Vertex: vertexCountTokens},
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

func terminal(ev *sse.Event) (done, failed bool) {
	switch ev.Type {
	case "message_stop":
		return true, false
	case "error":
		return false, true
	}
	return false, false
}

func inBand(status int, _, msg, requestID string, _ int) []byte {
	body := ErrorBody(status, msg, requestID)
	out := make([]byte, 0, len(body)+24)
	out = append(out, "event: error\ndata: "...)
	out = append(out, body...)
	return append(out, "\n\n"...)
}
