// Package usage turns a finished provider attempt into its usage event
// and hands the event on (docs/usage-events.md). It is provider-neutral:
// reading token usage from an answer is the provider API's business
// (internal/provider/openai, internal/provider/anthropic), and the request
// path passes the result in.
//
// # Basics
//
// The package does no I/O. When an attempt ends, the request path
// describes it in its own terms as an [Attempt]; [NewEvent] makes the
// pkg/usageevent event from it (the event's rules — schema, units, the
// status it carries — live here, not in the request path), and
// [NewEventID] names the event once, so that replays reuse the id. A
// [Recorder] encodes each event once and appends it to the outbox behind
// a small interface; it never blocks the request path.
package usage
