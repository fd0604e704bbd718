// Package usage works out what a usage event says about token usage: it
// asks OpenAI providers for stream usage, reads usage from every response
// and stream as it passes, and normalizes it (docs/usage-events.md "Token usage").
//
// # Basics
//
// The package does no I/O. The request path calls it at four points:
//
//   - Before an OpenAI streaming request is sent, [InjectIncludeUsage] sets
//     stream_options.include_usage (docs/usage-events.md: the node asks for usage when
//     the client did not), editing only that member's bytes (docs/api.md).
//   - For every event of a stream, in order, the relay calls Observe on an
//     [OpenAIStream] or [AnthropicStream] and skips writing the event when
//     Observe returns true. Only the OpenAI usage-only chunk that the node
//     itself asked for is ever hidden (docs/api.md "Streams").
//   - A non-stream answer goes through [FromOpenAIBody] or
//     [FromAnthropicBody].
//   - When an attempt ends, [NewEvent] makes its usage event from an
//     [Attempt], the request path's plain account of it; [NewEventID]
//     names the event once, and replays reuse the id. The event's rules
//     (schema, units, the status it carries) live here, not in the
//     request path.
//
// Whatever ends the stream (its terminator, a cut, a provider error event,
// a client disconnect), Usage returns what was seen until then, so cut and
// cancelled streams still yield the usage they carried (docs/api.md "Streams").
//
// Every Usage result pairs the normalized counts with the provider's usage
// object, byte for byte as received; for Anthropic streams, the
// message_start object with the message_delta members overlaid (see
// [AnthropicStream.Usage]).
//
// # Normalization
//
// One convention for every provider (pkg/usageevent.Usage): InputTokens is
// the total input, cache reads and writes included; cache reads and writes
// are parts of it and ReasoningTokens is part of OutputTokens. Nothing is
// counted twice:
//
//	          OpenAI                                      Anthropic
//	input     prompt_tokens (already includes cached)     input_tokens + cache_creation_input_tokens + cache_read_input_tokens
//	output    completion_tokens                           output_tokens (the latest message_delta value)
//	cache rd  prompt_tokens_details.cached_tokens          cache_read_input_tokens
//	cache wr  0 (not reported)                            cache_creation_input_tokens
//	reasoning completion_tokens_details.reasoning_tokens   0 (not reported separately)
//
// A count that is absent, null, negative or not an integer reads as 0
// (integral floats such as 12.0 are accepted). A part larger than its whole
// (cached_tokens above prompt_tokens) is clamped to the whole, so every
// event validates; the provider's own numbers stay in the raw object.
//
// # Performance
//
// Observe runs on every stream event. Anthropic events are told apart by
// their type, so content events cost a string comparison. OpenAI chunks
// pass a byte search for `"usage"` first; a chunk whose only usage member
// is `"usage":null` (every chunk but the last when usage was asked for) is
// settled without parsing. Only a chunk with a usage object is scanned,
// with jsonedit.Lookup, which does not allocate. Neither tracker allocates
// for a chunk without usage.
//
// # Caveats
//
// A provider that spells the usage key with JSON escapes ("us\u0061ge") is
// not recognised in OpenAI streams. A usage object larger than
// [MaxRawUsageBytes] is ignored. An OpenAI-compatible server that puts usage
// on chunks that also carry choices gets its usage recorded, but those
// chunks are never hidden.
package usage
