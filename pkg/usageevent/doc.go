// Package usageevent defines the usage event, schema 2: the record a
// ScootGate node publishes for every provider route attempt (docs/usage-events.md), for
// the authors of programs that consume them.
//
// # Basics
//
// A node writes one [Event] per attempt to send a request to a provider,
// failed or not, to a bounded outbox on disk, then publishes it as one JSON
// document to MQTT with QoS 1 and deletes it only after the broker's
// PUBACK. Delivery is therefore at least once: after a lost PUBACK, a
// broken connection or a node restart the same event is published again,
// with the same event_id. Consumers de-duplicate on event_id.
//
//	{ "event_id": "01a226bf-497b-7f65-860e-1f8aa3e75316", "schema": 2,
//	  "authoritative": false, "node_id": "node-a", "request_id": "sg-…",
//	  "tenant_id": "t_9", "key_id": "k_123",
//	  "public_model": "demo-gpt", "provider_model": "gpt-4o-2024-08-06",
//	  "backend": "openai-1", "protocol": "openai", "stream": false,
//	  "attempt": 1, "send_state": "response_received", "failure_stage": "",
//	  "http_status": 200, "request_bytes": 312, "response_bytes": 689,
//	  "ttfb_ms": 412.5, "duration_ms": 418.1,
//	  "started_at": "2026-11-29T10:00:00.123Z",
//	  "usage": { "input_tokens": 1200, "output_tokens": 85,
//	             "cache_read_tokens": 1024, "cache_write_tokens": 0,
//	             "reasoning_tokens": 0 },
//	  "provider_usage": { "prompt_tokens": 1200, "completion_tokens": 85, … } }
//
// Every member is always present. usage and provider_usage are both null
// when the provider reported no usage (nothing was sent, the stream was cut
// before its usage arrived, an error answer without usage).
//
// provider_usage is the provider's own usage object as received: the same
// members and values (encoding/json may drop insignificant white space when
// the node encodes the event). usage derives five normalized counts from it
// (docs/usage-events.md "Token usage"): input always includes cache reads and cache writes, for every
// provider, and cache reads, cache writes and reasoning are parts of input
// and output, never additions to them. docs/usage-consumers.md gives the
// formulas per provider.
//
// Events are not authoritative (authoritative is always false): they are
// operational data, not a billing ledger. A provider may count differently,
// a node may drop events when its outbox is full, and a cut stream carries
// only the usage seen before the cut.
//
// The JSON Schema is proto/usage-event.schema.json; example events are in
// testdata/usage/.
//
// # Decoding and validation
//
// [Decode] reads one published document, ignores members it does not know
// (a later node may add some), rejects a schema other than [Schema] with
// [ErrUnsupportedSchema], and validates the result. [Event.Validate] checks
// meaning and reports every problem at once in a [*ValidationError]; nodes
// validate every event before they store it.
//
// # Encoding
//
// An event encodes as json.Marshal encodes it: members in declaration
// order, provider_usage compacted. The node encodes each event once, with
// an encoder of its own that writes the same bytes without reflection
// (internal/usage), so that every replay is byte-identical; json.Marshal
// is correct for any other producer.
//
// Failure stages form an open set: the Stage* constants are the stages
// nodes report today, and a consumer must accept others. Protocols and send
// states are closed sets; adding a value would be a new schema number.
//
// # Caveats
//
// The package imports only the standard library (and pkg/internal/contract,
// which does too) and does no I/O, so it can
// be vendored into any consumer.
//
// Delivery order is not guaranteed: a replayed event can arrive after newer
// ones. Order by started_at (or by event_id, whose UUIDv7 prefix is the
// millisecond the node recorded the attempt) when order matters.
package usageevent
