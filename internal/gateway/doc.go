// Package gateway is the request path of the node, in one package:
// middlewares → authenticate → read and inspect the body → select a
// target → forward through the egress transport → relay the answer.
//
// # Basics
//
// The files are named for what they hold:
//
//   - middleware.go: what wraps the handler on the API listener, outermost
//     first: CloseAfterChunked (the request-smuggling guard), GuardBody
//     (the whole body within its timeout, early answers at once),
//     LimitConcurrency (a fast 503 beyond the node's cap).
//   - handler.go: the Handler, its Options and the small interfaces it
//     consumes (Authenticator, Picker, Recorder, Tracer, Observer);
//     authentication and reading the body; the request log line.
//   - models.go: GET /v1/models and /v1/models/{id}.
//   - attempt.go: routing, picking, the attempt loop, send states and how
//     an attempt's outcome feeds the backend's hot state and its usage
//     event; the failure stages, a typed enum with its wire names in one
//     place.
//   - relay.go: whole answers and streams, the headers a client sees.
//   - socket.go: an endpoint with a provider.SocketSpec over WebSocket
//     (the Responses API's WebSocket mode): each frame runs the same
//     request path with a writer that turns the answer into frames; the
//     sockets' idle bound, concurrency slot and drain.
//
// The package knows no provider API: every endpoint is a provider.Spec and
// every answer is read through its provider.API (internal/provider/...),
// so the same loop serves every endpoint. A request loads the routing
// table once and uses only that table (docs/snapshots.md).
//
// Everything that can be rejected is rejected before a byte leaves the
// node: key (401), body size (413), JSON shape and model (400), allowlist
// (403), unknown model (404), protocol pool and capabilities (400).
//
// The request body is walked twice: read, then inspected once by the
// endpoint's Inspect, which notes where the model (and, for a stream that
// must ask for usage, stream_options) is; each attempt then copies it
// once with its edits applied (provider.Request.Rewrite).
//
// # Send state
//
// Each attempt is classified by send state (docs/failures.md "Send
// state"), never by error text: a failure that is an *egress.NotSentError,
// or that happened before the transport obtained a connection (httptrace
// GotConn), is definitely_not_sent and may be re-picked on another target
// within the attempt limit. Anything later is possibly_sent: never
// retried, answered with 502 (or 504 on a timeout) and x-should-retry:
// false.
//
// # Streams
//
// The status line is held until the provider's status and first event are
// known, so a first-byte failure is still a clean 5xx. After the commit,
// each SSE event is written with its exact bytes and flushed as soon as
// the next one is not already complete in the reader's buffer (events that
// arrived together leave in one write; none waits for more input). A
// provider stream that ends without its terminator ([DONE] /
// message_stop), goes idle beyond the limit or breaks ends with an in-band
// error event, never with a fake terminator. A client disconnect cancels
// the upstream request at once (the upstream request's context derives
// from the client's).
package gateway
