// Package fakeprovider is a scriptable stand-in for an LLM provider: the one
// part of the request path that tests and the dev stack cannot have for real.
// It is a dev/test tool only and is never imported by cmd/scootgate or
// internal/app.
//
// # Basics
//
// A [Provider] is an [http.Handler] that speaks the three wire formats the
// gateway forwards (docs/api.md), faithfully enough that the official Go SDKs
// (openai-go/v3, anthropic-sdk-go/v2) parse its answers:
//
//   - POST /v1/chat/completions: OpenAI Chat Completions, JSON or SSE
//     (`data: {chunk}` events, a usage chunk with `choices: []` when
//     `stream_options.include_usage` is true, then `data: [DONE]`).
//   - POST /v1/messages: Anthropic Messages, JSON or SSE (message_start,
//     content_block_start, ping, content_block_delta…, content_block_stop,
//     message_delta with cumulative usage, message_stop).
//   - POST /v1/responses: OpenAI Responses, JSON or SSE (named events
//     response.created, response.in_progress, output_item.added,
//     content_part.added, output_text.delta…, output_text.done,
//     content_part.done, output_item.done, response.completed with usage; no
//     [DONE]); its in-band error is the Responses `error` event.
//   - POST /v1/embeddings: an embeddings list, one 8-dimension vector per
//     input, usage.prompt_tokens = words.
//   - POST /v1/messages/count_tokens: {"input_tokens": words}.
//   - POST /v1/responses/compact: a response.compaction object (the prompt
//     as the user message kept, one compaction item) with a Responses usage.
//   - POST /v1/responses/input_tokens: {"object":"response.input_tokens",
//     "input_tokens": words}.
//   - POST /v1/completions: legacy text completions, JSON or SSE, as Chat
//     Completions (a usage chunk when asked, then `data: [DONE]`); the
//     prompt is the "prompt" string (or list of strings).
//   - POST /v1/rerank and /v2/rerank: every document scored (1/2, 1/3, …
//     in order), top_n of them when set; usage as Jina and vLLM report it
//     (usage.total_tokens = words of query and documents) on /v1, as
//     Cohere does (meta.billed_units: search_units 1, input_tokens) on /v2.
//     The prompt is the query.
//   - POST /v1/audio/speech: audio/mpeg, chunked (no Content-Length): an
//     ID3 tag header, then "fake-audio:" and the reply text, written
//     in two flushed halves (a cut drops the connection after the first).
//   - POST /v1/audio/transcriptions and /v1/audio/translations
//     (multipart/form-data): {"text":"transcribed N bytes"} (or
//     "translated"), N the size of the uploaded file part; transcriptions
//     carry usage {"type":"tokens","input_tokens":N,"output_tokens":3};
//     response_format=text answers text/plain, and a transcription with
//     stream=true answers SSE transcript.text.delta events and a
//     transcript.text.done with the usage. The prompt field carries the
//     directives.
//   - POST /v1/images/generations (JSON) and /v1/images/edits (multipart):
//     one image, b64_json of "fake-image:" and the reply text (an edit
//     adds the uploaded images' size), usage input_tokens = words,
//     output_tokens = 4; with stream, SSE {image_generation|image_edit}.
//     partial_image events and a .completed event with the usage.
//   - GET /v1/models: the OpenAI list shape, or the Anthropic one when the
//     request carries anthropic-version (docs/api.md "Client surface details").
//   - POST /v1beta/models/{model}:{method} (and /v1/…): the Gemini API's
//     generateContent, streamGenerateContent (SSE with ?alt=sse, one chunk
//     per piece, the last with finishReason STOP and the whole
//     usageMetadata; without alt=sse one JSON array of the chunks; its
//     in-band error is a chunk with a top-level "error"), countTokens
//     ({"totalTokens": words}), embedContent and batchEmbedContents (8-dimension
//     vectors); GET /v1beta/models lists the models in Google's shape. The
//     model is the path's; the prompt is the last user content's text.
//
// The reply is "echo: " followed by the text of the last user message (the
// directives below removed, runs of white space collapsed), split into pieces
// for streaming. Ids are
// derived from the request's sequence number and timestamps from
// [Options.Clock], so a transcript is byte-for-byte reproducible.
//
// Usage is deterministic so tests can assert it:
//
//	words  = whitespace-separated words in every message's text (and Anthropic's
//	         system), as received, directives included
//	pieces = number of content pieces the reply is split into
//	OpenAI:    prompt_tokens = words + cache_read, cached_tokens = cache_read,
//	           completion_tokens = pieces + reasoning, reasoning_tokens = reasoning
//	Anthropic: input_tokens = words, cache_read_input_tokens = cache_read,
//	           cache_creation_input_tokens = cache_write,
//	           output_tokens = pieces + reasoning (message_start says 1)
//	Gemini:    promptTokenCount = words + cache_read, cachedContentTokenCount = cache_read,
//	           candidatesTokenCount = pieces, thoughtsTokenCount = reasoning
//	           (on the last chunk; earlier chunks carry the prompt counts)
//
// Credentials: when [Options.OpenAIKey] is set, /v1/chat/completions needs
// `Authorization: Bearer <key>`; when [Options.AnthropicKey] is set,
// /v1/messages needs `x-api-key: <key>` or `Authorization: Bearer <key>` (the
// current Anthropic SDK sends the latter, docs/api.md "Client surface details"); when
// [Options.GeminiKey] is set, the Gemini paths need `x-goog-api-key: <key>` or
// `?key=<key>`. A wrong key is a 401 in the protocol's error shape (Google itself
// answers 400 API_KEY_INVALID); /v1/messages without anthropic-version is a 400.
//
// # Scripting
//
// Behaviour comes from [Options.Script] when it returns non-nil, otherwise
// from directives embedded in the last user message, which is what makes the
// dev demo scriptable from curl:
//
//	[[status=429]] [[retry_after=7]]  error in the protocol's shape (+ Retry-After)
//	[[quota]]                         429, OpenAI code insufficient_quota (Gemini: a daily
//	                                  quota's RESOURCE_EXHAUSTED with its QuotaFailure)
//	[[delay_ms=N]]                    wait before the status line
//	[[hang]]                          never answer; return when the request context ends
//	[[reset=after_body]]              read the body, then close the TCP connection with RST
//	[[chunks=N]]                      split the reply into N pieces (default 3)
//	[[event_delay_ms=N]]              wait between stream events
//	[[first_event_delay_ms=N]]        after a stream's status and headers, wait before its first event
//	[[cut=after_events:K]]            send K events, then drop the connection
//	[[error_event=after:K]]           send K events, then an in-band error
//	[[cache_read=N]] [[cache_write=N]] [[reasoning=N]]  extra usage numbers
//	[[ratelimit_remaining_requests=N]] [[ratelimit_remaining_tokens=N]] [[ratelimit_reset=DURATION]]
//	                                  what the rate-limit headers say (any answer): OpenAI's
//	                                  x-ratelimit-* ("30s"), Anthropic's anthropic-ratelimit-*
//	                                  (RFC 3339); Gemini sends none
//
// An unknown or malformed directive is a 400, so a typo fails loudly. See
// [Behaviour] for how the knobs combine. Every endpoint obeys them (the
// stream directives where the endpoint streams). The prompt of a Responses
// or Embeddings request is its input string, or the text of its last user
// input item.
//
// # Observability
//
// [Provider.Requests] returns what arrived (headers, body, parsed model and
// stream flags), [Provider.RequestCount] and [Provider.ConnCount] count
// requests and accepted connections, and [Provider.Reset] clears all three.
// [Provider.Start] and [Provider.StartTLS] serve on a loopback listener (TLS
// with a self-signed certificate generated at start); [Provider.Close] stops
// the server and waits for every handler to return.
//
// # Caveats
//
// The server speaks HTTP/1.1 only, also over TLS: connection-level faults
// (reset, cut) need [http.Hijacker] or a per-connection abort, which HTTP/2
// does not offer, and the gateway's egress transport is HTTP/1.1 anyway.
// Request bodies are decoded with encoding/json; only the fields the fake
// needs are read.
package fakeprovider
