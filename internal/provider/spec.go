package provider

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// API describes one provider wire API to the request path: its protocol,
// its endpoints, and everything about its answers that is not per
// endpoint. A provider package exports one; provider/catalog lists them.
// Every function field is safe for concurrent use and keeps none of its
// arguments.
type API struct {
	Protocol  Protocol
	Endpoints []*Spec

	// Claims reports whether a request that no endpoint of any API serves
	// (the model list, an unknown path) comes from a client of this API,
	// by its headers, path or query, so that the answer takes its shape
	// and model list. The catalog asks the APIs in its order; its default
	// answers the requests no API claims.
	Claims func(r *http.Request) bool
	// KeyHeaders are the headers, besides Authorization: Bearer, in which
	// the API's clients present their key (Anthropic's x-api-key,
	// Gemini's x-goog-api-key), canonical names, the preferred first.
	// The node reads every API's on every request, in the catalog's
	// order (catalog.KeyHeaders, authz.Store.KeyHeaders), and never
	// forwards them.
	KeyHeaders []string
	// QueryKey, when set, is the query parameter in which the API's clients
	// may present their key (Gemini's "key"), after the headers
	// (authz.ExtractKey). The node never forwards a client's query.
	QueryKey string
	// RequestIDHeader, when set, is the header in which the API's SDKs look
	// for a request id: every answer of the API carries the node's request
	// id there as well as in X-Request-Id.
	RequestIDHeader string
	// ErrorBody renders a gateway error as the API's error document. code
	// is the OpenAI-style error code; an API whose shape has none ignores
	// it.
	ErrorBody func(status int, code, msg, requestID string) []byte
	// RetryErrorBody, when set, renders a gateway error that carries
	// retry advice (a limit refusal, a local 503) with the advice in the
	// document too, where the API's SDKs read it (Gemini's
	// google.rpc.RetryInfo); nil: ErrorBody, the advice in headers only.
	RetryErrorBody func(status int, code, msg, requestID string, retryAfter time.Duration) []byte
	// LimitHeaders names the headers in which the node shows a limited
	// key its own rate-limit state (docs/limits.md "Headers").
	LimitHeaders *RateLimitHeaders
	// NotRouted reports whether path is an endpoint of the API that the
	// node knows and does not route, with the message for the 404 and its
	// code (OpenAI's stored responses: docs/api.md "Endpoints").
	NotRouted func(path string) (code, msg string, ok bool)

	// ResponseHeaders lists the provider headers a client of the API may
	// see, besides Content-Type and Retry-After: exact canonical names
	// (retry advice) and canonical prefixes ending in "-" (rate-limit
	// state). Never Set-Cookie.
	ResponseHeaders []string
	// ProviderRequestID lists the headers in which the API's providers name
	// their request id, the preferred first; the first present is relayed
	// as X-Provider-Request-Id, so that X-Request-Id stays the node's.
	ProviderRequestID []string
	// RetryAfter reads the provider's retry advice from an answer's
	// headers; zero when there is none.
	RetryAfter func(h http.Header, now time.Time) time.Duration
	// BodyRetryAfter, when set, reads retry advice that the API states in
	// an error answer's body (Google's google.rpc.RetryInfo); the request
	// path asks it when the headers carry none. Zero when there is none.
	BodyRetryAfter func(body []byte) time.Duration
	// CredentialRefused, when set, reports whether an error answer other
	// than a 401 or 403 says that the backend's own credential was refused
	// (Gemini answers a bad key with a 400 API_KEY_INVALID). Such an answer
	// is the gateway's problem, not the client's: the client gets a 502
	// and the backend is disabled, as for a 401 (docs/failures.md).
	CredentialRefused func(status int, body []byte) bool
	// QuotaExhausted reports whether an error answer says that the
	// account's quota or balance is used up, as opposed to a rate limit or
	// a problem with the request (docs/failures.md "Quota exhaustion").
	QuotaExhausted func(status int, body []byte) bool
	// AboutRequest, when set, reports whether an error answer is about
	// the one request (its size, the model it names) and not about the
	// backend: the backend is neither cooled nor disabled for it
	// (docs/failures.md "Refusals about one request"). Nil: no answer is.
	AboutRequest func(status int, body []byte) bool
	// Headroom, when set, reads the rate-limit headers of any answer,
	// success or not (docs/routing.md "Headroom"). Nil for an API whose
	// providers document none (Gemini).
	Headroom func(h http.Header, now time.Time) upstream.Headroom

	// ModelsPaths are the paths of the API's model list; "PATH/{name}"
	// gets one model (OpenAI and Anthropic: /v1/models; Gemini:
	// /v1beta/models and /v1/models). The request's API answers.
	ModelsPaths []string
	// ListModels renders the answer of GET /v1/models: names are the
	// public models of the protocol the key may use, sorted; query holds
	// the API's paging parameters; created is when the node started. A
	// paging parameter out of range is a BodyError.
	ListModels func(names []string, query url.Values, created time.Time) ([]byte, *BodyError)
	// GetModel renders the answer of GET /v1/models/{name}.
	GetModel func(name string, created time.Time) []byte
	// ModelsDoors are cloud platforms' own model listings of the API's
	// public models (Bedrock's ListInferenceProfiles).
	ModelsDoors []*ModelsDoor
}

// Spec describes one endpoint to the request path. Every function field is
// safe for concurrent use and does not keep its arguments.
type Spec struct {
	Endpoint Endpoint
	Method   string
	// Path is the client path, matched exactly (the query is ignored, so
	// /v1/messages?beta=true is /v1/messages). It is empty for an
	// endpoint whose path names the model: Match serves it instead.
	Path string
	// AlsoPaths are further client paths served exactly as Path (the same
	// body, the same UpstreamPath): one wire shape that clients reach under
	// more than one version prefix.
	AlsoPaths []string
	// Match, when set, reports whether a client path is this endpoint's
	// and reads the public model it names (Gemini's
	// /v1beta/models/{model}:generateContent). Only paths in canonical
	// form match.
	Match func(path string) (model string, ok bool)
	// UpstreamPath is appended to a backend's base URL. In an endpoint
	// with Match, "{model}" in it stands for the target's provider model,
	// path-escaped.
	UpstreamPath string
	// UpstreamQuery, when set, gives the query of the provider request
	// from the client's. Without it no query is sent: a client's query
	// can carry its key.
	UpstreamQuery func(client url.Values) string

	// Inspect validates a body and reads what routing and the attempt's
	// rewrite need from it. pathModel is the model Match read from the
	// path ("" for an endpoint without Match); a body that names another
	// model is refused.
	Inspect func(body []byte, pathModel string) (Request, *BodyError)
	// InspectForm, set instead of Inspect for an endpoint whose body is
	// multipart/form-data, does the same with the request's Content-Type,
	// whose boundary delimits the parts.
	InspectForm func(body []byte, contentType string) (Request, *BodyError)
	// Header builds the provider request's headers from the client's: only
	// the allowlisted ones, plus the backend's credential.
	Header func(client http.Header, credential string) http.Header
	// SessionHeaders are the client headers in which the agent clients of
	// this endpoint name their session (as observed from Codex CLI and
	// Claude Code). Like Request.SessionKey they name the session for
	// prompt-cache affinity ([Session]); they are never forwarded and never
	// logged.
	SessionHeaders []string

	// BodyUsage reads the usage of a successful non-stream answer.
	BodyUsage func(body []byte) (usageevent.Usage, json.RawMessage, bool)
	// UsageMember names the member that holds the usage in the
	// endpoint's answers ("usage", "usageMetadata"), for an answer too
	// large to be held whole, whose usage is read from its last bytes
	// ([TailUsage]); "" when the answers carry none.
	UsageMember string
	// BodyOutcome, when non-nil, reads the response model and finish
	// reasons of a successful non-stream answer; called only for a traced
	// attempt.
	BodyOutcome func(body []byte) Outcome
	// Stream is nil for an endpoint that never streams; a provider answer
	// in SSE there is relayed as a whole body.
	Stream *StreamSpec
	// Passthrough says that a successful answer is relayed as it arrives,
	// byte for byte and with its Content-Type, never held whole and never
	// read (generated audio: the client plays it while it comes). Its
	// usage is unknown; BodyUsage is not asked. Error answers are read
	// whole, as for every endpoint.
	Passthrough bool
	// Realtime, when set, says that the endpoint is a realtime session: a
	// WebSocket at Path (a GET with Upgrade: websocket), relayed frame by
	// frame to one opened to the target; Inspect and the other body
	// functions are not used.
	Realtime *RealtimeSpec
	// Socket, when set, says that the endpoint is also served over
	// WebSocket at its path (a GET with Upgrade: websocket): every client
	// frame that asks for an answer is one request sent over HTTP as a
	// stream, and the stream's events go back as frames.
	Socket *SocketSpec
	// Envelopes are how the endpoint travels on each cloud platform
	// (docs/routing.md "Platforms"), nil where it is not served there;
	// the FirstParty entry is always nil: the Spec itself is the
	// protocol's own wire.
	Envelopes [NumPlatforms]*Envelope
	// Doors are the endpoint's further client paths: the shapes in which
	// cloud platforms' own clients send it (docs/api.md "Cloud client
	// paths"). Any target of the endpoint serves a request from any door.
	Doors []*Door
}

// SocketSpec is how an endpoint is served over WebSocket.
type SocketSpec struct {
	// Header is what the client's upgrade request headers stand for in
	// the HTTP request of each frame, before Spec.Header filters them:
	// the WebSocket-only values gone, a JSON body that streams.
	Header func(upgrade http.Header) http.Header
	// Frame reads a client text frame. It returns the body of the HTTP
	// request the frame stands for (a stream request), or skip for a frame
	// that asks for nothing and gets no answer, or the reason the frame is
	// refused.
	Frame func(frame []byte) (body []byte, skip bool, err *BodyError)
	// ErrorEvent is the frame that carries an error answer: status, the
	// error document the endpoint answers with over HTTP, and the headers
	// the client would have seen.
	ErrorEvent func(status int, body []byte, header http.Header) []byte
	// StreamError is the frame that carries a stream's in-band error
	// event (data is the event's data: the node's own when it cut the
	// answer, or the provider's), in the same shape as ErrorEvent: a
	// client of the socket learns of every failure the same way.
	StreamError func(data []byte, header http.Header) []byte
	// LimitReached is the frame that ends a socket that has reached its
	// lifetime (the node's socket_lifetime).
	LimitReached func(header http.Header) []byte
	// Whole is the frame that carries a successful answer the provider
	// sent whole instead of as a stream.
	Whole func(body []byte) []byte
	// Continue lets a frame build on the answer before it on the same
	// socket, where the provider's own WebSocket mode keeps that answer in
	// memory and HTTP does not (nil: frames go as they are). last is what
	// Remember kept; body is the frame's request body, returned expanded
	// to stand on its own when it builds on last.
	Continue func(body, last []byte) []byte
	// Remember is what a completed answer leaves for the next frame's
	// Continue: body is the request sent, done the data of the stream's
	// terminal event (valid only during the call). nil keeps nothing.
	Remember func(body, done []byte) []byte
	// Prepare, when set, answers a frame that only prepares the context
	// of the answers to come (the Responses WebSocket mode's "generate":
	// false) on the node: events are the frames of its answer, whose
	// response id is made of the node's requestID, and last what it
	// leaves for the next frame's Continue. ok is false for a frame that wants an answer generated.
	// Nothing of such a frame reaches a provider: over HTTP there is no
	// context to prepare, and a provider would refuse the member or
	// generate an answer nobody reads.
	Prepare func(body []byte, requestID string) (events [][]byte, last []byte, ok bool)
}

// Route names the endpoint where a client path is not a name (messages,
// traces, logs): its Path, or, when its path names the model, its
// endpoint's name.
func (s *Spec) Route() string {
	if s.Path != "" {
		return s.Path
	}
	return s.Endpoint.String()
}

// StreamSpec is how an endpoint's SSE stream is followed and ended.
type StreamSpec struct {
	// Terminal reports whether ev completes the stream (nothing after it
	// matters), and whether it is the provider's own failure report.
	Terminal func(ev *sse.Event) (done, failed bool)
	// EndsAtEOF says that the stream has no terminator of its own: it
	// ends when the provider closes it, and Terminal judges each event
	// only for whether the stream may end after it. Events after one that
	// is done are still relayed (Gemini: with several candidates, one can
	// finish before the others); the stream is complete when the last
	// event before the end is.
	EndsAtEOF bool
	// NewTracker returns the usage tracker of one stream; hide says that
	// the request's AskUsage edit was applied, so the usage-only chunk the
	// client did not ask for must not reach it.
	NewTracker func(hide bool) Tracker
	// NewOutcome, when non-nil, returns the outcome tracker of one traced
	// stream.
	NewOutcome func() OutcomeTracker
	// InBandError is the event that ends a stream the node must cut after
	// the 200 was sent (status is the one a non-stream answer would have
	// had); n is the number of events already relayed. Never a terminator.
	InBandError func(status int, code, msg, requestID string, n int) []byte
	// Keepalive is written after a long provider silence; clients ignore it.
	Keepalive []byte
	// Ping, when set, reports an event of the protocol that only keeps
	// the connection alive (Anthropic's event: ping). Like a block of only
	// comments, it is no progress: it does not hold off
	// timeouts.stream_progress. Nil when comments are the only keepalives.
	Ping func(ev *sse.Event) bool
	// Types lists the "event:" types the endpoint's streams carry, the
	// commonest first, so that reading them allocates nothing
	// (sse.Reader.KnownTypes). Other types still pass.
	Types []string
}

// Tracker follows a stream as it passes and keeps its usage.
type Tracker interface {
	// Observe looks at the next event and reports whether the relay must
	// not pass it to the client.
	Observe(ev *sse.Event) (hide bool)
	Usage() (usageevent.Usage, json.RawMessage, bool)
}

// OutcomeTracker follows a stream for the provider's response model and
// finish reasons ([Outcome]), for trace spans. The request path makes one
// only for a traced attempt.
type OutcomeTracker interface {
	Observe(ev *sse.Event)
	Outcome() Outcome
}
