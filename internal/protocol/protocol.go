// Package protocol is the node's one vocabulary for the provider APIs it
// forwards: the two protocol pools, the client endpoints of each, the
// capabilities a request can need, how far an attempt got ([SendState]),
// and the description type through which an endpoint tells the request path
// everything it needs to know.
//
// # Basics
//
// A [Protocol] is a provider wire API and a pool of backends: OpenAI
// (OpenAI-compatible) or Anthropic. The pools are never mixed and a body is
// never converted from one to the other. An [Endpoint] is one client entry
// point of a protocol (chat completions, responses, embeddings, messages,
// count_tokens); backends declare the set of endpoints they serve
// ([EndpointSet]). The names of protocols and endpoints are the ones used in
// the node's TOML, in routing snapshots, in usage events and in metrics.
//
// Each provider API has one package that describes its endpoints with a
// [Spec] (internal/protocol/openai, internal/protocol/anthropic), and
// internal/protocol/catalog lists them all. The request path
// (internal/proxy) runs one attempt loop for every endpoint, driven by the
// Spec: adding an endpoint is one Spec and one catalog line.
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
package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Protocol is a provider wire API and the pool of backends that speak it.
type Protocol uint8

const (
	OpenAI Protocol = iota
	Anthropic
	// NumProtocols is the number of protocols, for arrays indexed by one.
	NumProtocols
)

// Protocol names, as written in the node's TOML, routing snapshots
// (pkg/routesnap) and usage events (pkg/usageevent).
const (
	NameOpenAI    = usageevent.ProtocolOpenAI
	NameAnthropic = usageevent.ProtocolAnthropic
)

func (p Protocol) String() string {
	if p == Anthropic {
		return NameAnthropic
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
	}
	return 0, false
}

// Endpoint is one client endpoint of a protocol.
type Endpoint uint8

const (
	Chat        Endpoint = iota // OpenAI POST /v1/chat/completions
	Messages                    // Anthropic POST /v1/messages
	Responses                   // OpenAI POST /v1/responses
	Embeddings                  // OpenAI POST /v1/embeddings
	CountTokens                 // Anthropic POST /v1/messages/count_tokens
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
}

// String returns the endpoint's name: "chat_completions", "messages",
// "responses", "embeddings" or "count_tokens".
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
type EndpointSet uint8

// Set returns the set holding only e.
func (e Endpoint) Set() EndpointSet { return 1 << e }

// Has reports whether s holds e.
func (s EndpointSet) Has(e Endpoint) bool { return s&e.Set() != 0 }

// DefaultEndpoints is what a backend of protocol p serves when it does not
// say: chat completions for OpenAI, messages for Anthropic. Responses,
// embeddings and count_tokens are opt-in: not every compatible provider
// serves them.
func DefaultEndpoints(p Protocol) EndpointSet {
	if p == Anthropic {
		return Messages.Set()
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

// BodyError is a request body the node refuses: always a 400 in the
// endpoint's error shape. Code is the OpenAI error code.
type BodyError struct {
	Code string
	Msg  string
}

func (e *BodyError) Error() string { return e.Msg }

// Tracker follows a stream as it passes and keeps its usage
// (internal/usage implements one per stream format).
type Tracker interface {
	// Observe looks at the next event and reports whether the relay must
	// not pass it to the client.
	Observe(ev *sse.Event) (hide bool)
	Usage() (usageevent.Usage, json.RawMessage, bool)
}

// OutcomeTracker follows a stream for the provider's response model and
// finish reasons ([usage.Outcome]), for trace spans. The request path
// makes one only for a traced attempt.
type OutcomeTracker interface {
	Observe(ev *sse.Event)
	Outcome() usage.Outcome
}

// Spec describes one endpoint to the request path. Every function field is
// safe for concurrent use and does not keep its arguments.
type Spec struct {
	Endpoint Endpoint
	Method   string
	// Path is the client path, matched exactly (the query is ignored, so
	// /v1/messages?beta=true is /v1/messages).
	Path string
	// UpstreamPath is appended to a backend's base URL.
	UpstreamPath string

	// Inspect validates a body and reads what routing needs from it.
	Inspect func(body []byte) (Request, *BodyError)
	// Header builds the provider request's headers from the client's: only
	// the allowlisted ones, plus the backend's credential.
	Header func(client http.Header, credential string) http.Header
	// SessionHeaders are the client headers in which the agent clients of
	// this endpoint name their session (as observed from Codex CLI and
	// Claude Code). Like Request.SessionKey they name the session for
	// prompt-cache affinity ([Session]); they are never forwarded and never
	// logged.
	SessionHeaders []string
	// InjectUsage, when non-nil, may edit a streaming body so that the
	// provider reports usage the client did not ask for; injected says the
	// tracker must then hide what the client did not expect.
	InjectUsage func(body []byte) (out []byte, injected bool, err error)

	// BodyUsage reads the usage of a successful non-stream answer.
	BodyUsage func(body []byte) (usageevent.Usage, json.RawMessage, bool)
	// BodyOutcome, when non-nil, reads the response model and finish
	// reasons of a successful non-stream answer; called only for a traced
	// attempt.
	BodyOutcome func(body []byte) usage.Outcome
	// Stream is nil for an endpoint that never streams; a provider answer
	// in SSE there is relayed as a whole body.
	Stream *StreamSpec
}

// StreamSpec is how an endpoint's SSE stream is followed and ended.
type StreamSpec struct {
	// Terminal reports whether ev completes the stream (nothing after it
	// matters), and whether it is the provider's own failure report.
	Terminal func(ev *sse.Event) (done, failed bool)
	// NewTracker returns the usage tracker of one stream; injected is
	// InjectUsage's result.
	NewTracker func(injected bool) Tracker
	// NewOutcome, when non-nil, returns the outcome tracker of one traced
	// stream.
	NewOutcome func() OutcomeTracker
	// InBandError is the event that ends a stream the node must cut after
	// the 200 was sent (status is the one a non-stream answer would have
	// had); n is the number of events already relayed. Never a terminator.
	InBandError func(status int, code, msg, requestID string, n int) []byte
	// Keepalive is written after a long provider silence; clients ignore it.
	Keepalive []byte
	// Types lists the "event:" types the endpoint's streams carry, the
	// commonest first, so that reading them allocates nothing
	// (sse.Reader.KnownTypes). Other types still pass.
	Types []string
}

// Problemf returns a BodyError.
func Problemf(code, format string, args ...any) *BodyError {
	return &BodyError{Code: code, Msg: fmt.Sprintf(format, args...)}
}
