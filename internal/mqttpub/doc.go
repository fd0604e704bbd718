// Package mqttpub delivers usage events from the outbox to an MQTT broker
// with QoS 1, and deletes an outbox row only after a PUBACK for it was
// observed on the connection that carried the publish (docs/usage-events.md
// "MQTT acknowledgement").
//
// # Basics
//
// A [Publisher] reads rows from a [Source] (the bbolt outbox,
// *outbox.Store), publishes each row's payload unchanged to one topic (QoS
// 1, retained false) and deletes the row once it is acknowledged. [New]
// checks the [Options]; [Publisher.Run] owns the connection and the
// reconnect loop until its context ends, then sends DISCONNECT and returns.
// [Publisher.Stats] reports counters for metrics.
//
// Delivery works per connection. Each connection:
//
//  1. reads the outbox from its first row: every row still there is
//     unacknowledged, so after a reconnect and after a restart it is
//     published again with the same payload, hence the same event_id;
//  2. keeps at most Options.Window publishes in flight, reading more as
//     PUBACKs free the window, and waits on Source.Notify when caught up;
//  3. judges every completed publish, oldest first: one that completed
//     with its PUBACK on this connection is an acknowledgement, and the
//     acknowledged rows of one wakeup are deleted in one Delete call. A
//     PUBACK the broker withholds holds back only its own row;
//  4. ends on the first publish that completed any other way, when the
//     connection is lost, when no PUBACK arrived for Options.AckTimeout
//     while publishes were in flight, or on an outbox error. Nothing in
//     flight is then trusted: the connection is closed, Run waits a backoff
//     and connects again, and step 1 replays the rows.
//
// Rows larger than Options.MaxPayload are deleted before they are ever
// published and counted in Stats.Oversize (docs/usage-events.md "MQTT acknowledgement"): a broker may
// acknowledge and then drop a message over its limit (mosquitto's
// message_size_limit does this for MQTT 3.1.1 clients), so such a PUBACK
// would prove nothing, and the row could never be delivered.
//
// # The MQTT client
//
// The publisher speaks the few MQTT 3.1.1 packets it needs itself (wire.go):
// CONNECT/CONNACK, PUBLISH with QoS 1 and its PUBACK, PINGREQ/PINGRESP and
// DISCONNECT. It used paho.mqtt.golang until the delivery benchmarks
// showed paho's per-publish machinery (a token with its channel, a timer,
// a store entry under two formatted keys, three goroutine hand-offs each
// way) as the larger part of what delivery cost (docs/performance.md,
// "Usage delivery"). The drain goroutine encodes each PUBLISH into the
// link's buffer and hands a whole window refill to the connection in one
// Write; one reader goroutine matches PUBACKs to publishes by packet
// identifier and completes the PUBACKs of one read(2) together, with one
// wakeup of the drain loop. Keepalive: a PINGREQ after KeepAlive without
// traffic either way (checked every KeepAlive/4, at most 5 s), and the
// connection ends when its PINGRESP is KeepAlive/2 late: a half-open link
// ends within about 1.5×KeepAlive. A packet a publisher never expects
// (anything but CONNACK, PUBACK, PINGRESP, or longer than 64 bytes) ends
// the connection. paho remains in the tests: as the baseline of the
// benchmarks and for the tests that pin down the behaviour below.
//
// # Connection generations
//
// A completed publish alone is not an acknowledgement. paho.mqtt.golang,
// for one, completes a publish token with a nil error although no PUBACK
// came: with AutoReconnect, on reconnect it replaces the stored publish's
// token and completes the old one (paho.mqtt.golang#563, still open, and
// reproduced by TestPahoIssue563). The publisher therefore:
//
//   - never resumes a connection: every connection is new, with a clean
//     session, and connects once;
//   - dials the broker itself and wraps the connection (genConn) so that
//     its end (first failed read or write, or Close) bumps a connection
//     generation and closes the loss signal before anyone can see the
//     failure: the link fails a publish because of a loss only after it,
//     so the bump always comes first. Opening a connection bumps it too;
//   - records the generation with each publish, and counts a completed
//     publish as an acknowledgement only if it has no error and the
//     generation is unchanged when it is judged. Then the connection that
//     carried the publish is the one that delivered the PUBACK. A publish
//     that completed across a connection change ends the connection
//     ([ErrStaleAck]).
//
// Three independent checks thus guard every delete: the publish's error,
// the generation, and the loss signal, which ends the drain before
// anything in flight is judged. TestPahoFailsPendingTokensOnLoss and
// TestWireFailsPendingOnLoss observe the first for each client;
// TestStaleAckIsNotAnAck the second; TestPartialAcksLeaveExactlyTheUnacked
// that a broker acknowledging some publishes leaves exactly the others in
// the outbox.
//
// # Session, reconnects and identity
//
// CleanSession is true. Redelivery is the outbox's job: every connection
// replays every unacknowledged row as a new PUBLISH with a fresh packet id,
// which MQTT allows at any time (the resend rule [MQTT-4.4.0-1] only
// governs packets of a resumed session). A persistent session would add
// nothing for a client that only publishes: the broker keeps no state for
// a QoS 1 PUBLISH after its PUBACK, and the outbox is the one durable copy.
// It would only leave per-node state on the broker, and its resend rule
// would tie redelivery to the client's in-memory state, which a restart
// loses.
//
// After a failed or lost connection Run waits with "full jitter": a draw
// from [0, min(BackoffMax, BackoffMin·2^(n-1))) after n consecutive
// failures, with the injected Rand, so that nodes that lost one broker
// together do not return together. BackoffMax defaults to 2 s, so delivery
// resumes within about 2 s of the broker being reachable again, however
// long it was away (TestReconnectAfterBrokerRestart measures it against
// a broker it stops and starts). A connection that acknowledged at least
// one row, or lasted at least BackoffMax, resets n; one the broker drops at
// once (another client with the same id, an overloaded broker) does not.
//
// The client id derives from the node id ([ClientID]): two nodes with one
// id would kick each other off the broker. TLS is used for ssl:// brokers
// (Options.TLS, or the system roots; TLS 1.2 or later); the password is
// sent only in CONNECT and is never logged or put into an error.
//
// # Caveats
//
// Delivery is at least once. A row is published again after every
// reconnect and restart until its PUBACK is observed, including when the
// broker did receive it and only the PUBACK was lost, and when a PUBACK
// arrived but the connection ended before it was judged. Consumers
// de-duplicate on event_id (docs/usage-events.md). Order is outbox order within one
// connection; a replay sends earlier rows again.
//
// A PUBACK means the broker accepted the message, not that a consumer got
// it: a broker restart without
// persistence, a subscriber without a persistent session, or mosquitto's
// max_queued_messages limit can still lose it downstream.
//
// Options.Window must not exceed the broker's receive limit for one client
// (mochi closes a connection that exceeds its receive maximum, 1024 by
// default), and Options.MaxPayload must stay below the broker's message size
// limit. If Delete fails after a PUBACK, the rows stay and are published
// again: a duplicate, never a loss. On shutdown, rows whose PUBACK already
// arrived are deleted; the rest are replayed at the next start.
package mqttpub
