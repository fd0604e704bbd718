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
//
// Every event recorded passes [usageevent.Event.Validate], and no other
// is recorded. The encoder checks an event as it writes it, in the cheap
// form the node's own events take (ids and names in printable ASCII,
// known enum values, provider usage of the plain kind, checked in the
// same pass that compacts it); Validate runs only for an event those
// checks cannot vouch for. The tests hold the checks to Validate on
// generated and fuzzed events (vouch_test.go).
package usage
