// Package proxy is the request path of the node:
// authenticate → read and inspect the body → select a target → forward
// through the egress transport → stream the answer back.
//
// # Basics
//
// ServeHTTP serves POST /v1/chat/completions (OpenAI pool), POST
// /v1/messages (Anthropic pool, query ignored so ?beta=true works), GET
// /v1/models and HEAD /. Every response carries our own X-Request-Id.
// A request loads the routing table once and uses only that table (docs/snapshots.md).
//
// Everything that can be rejected is rejected before a byte leaves the
// node: key (401), body size (413), JSON shape and model (400), allowlist
// (403), unknown model (404), protocol pool and capabilities (400).
//
// # Send state
//
// Each attempt is classified by send state (docs/failures.md "Send state"), never by error
// text: a failure that is an *egress.NotSentError, or that happened before
// the transport obtained a connection (httptrace GotConn), is
// definitely_not_sent and may be re-picked on another target within the
// attempt limit. Anything later is possibly_sent: never retried, answered
// with 502 (or 504 on a timeout) and x-should-retry: false.
//
// # Streams
//
// The status line is held until the provider's status and first event are
// known, so a first-byte failure is still a clean 5xx. After the commit,
// each SSE event is written with its exact bytes and flushed as soon as
// the next one is not already complete in the reader's buffer (events that
// arrived together leave in one write; none waits for more input). A provider
// stream that ends without its terminator ([DONE] / message_stop), goes idle
// beyond the limit or breaks ends with an in-band error event, never with a
// fake terminator. A client disconnect cancels the upstream request at once
// (the upstream request's context derives from the client's).
package proxy
