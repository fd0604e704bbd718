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
//  3. deletes the rows of the PUBACKs read on this connection, those of
//     one burst in one Delete call, in whatever order they come: a PUBACK
//     the broker withholds holds back only its own row
//     (TestPartialAcksLeaveExactlyTheUnacked withholds every third);
//  4. ends when the connection is lost (a failed read or write, an
//     unanswered keepalive), when no PUBACK arrived for Options.AckTimeout
//     while publishes were in flight, or on an outbox error. Nothing still
//     in flight is trusted: the connection is closed, Run waits a backoff
//     and connects again, and step 1 replays the rows.
//
// Rows larger than Options.MaxPayload are deleted before they are ever
// published and counted in Stats.Oversize (docs/usage-events.md "MQTT acknowledgement"): a broker may
// acknowledge and then drop a message over its limit (mosquitto's
// message_size_limit does this for MQTT 3.1.1 clients), so such a PUBACK
// would prove nothing, and the row could never be delivered.
//
// # The connection
//
// The Publisher owns its MQTT 3.1.1 connection (conn.go) rather than
// running paho.mqtt.golang's client, for two reasons. paho's client can
// complete a publish token with a nil error although no PUBACK came: with
// its own reconnect it replaces a stored publish's token and completes the
// old one (paho.mqtt.golang#563, still open), so a successful token alone
// is not an acknowledgement, and guarding against that took a connection
// generation bumped by a wrapped net.Conn. And its goroutine hand-offs (a
// channel to its outgoing goroutine, a token and its channel, a
// message-id map and a store entry per publish, its incoming goroutine per
// PUBACK) cost about 40 allocations and 30 µs of CPU an event
// (BenchmarkEventLife, docs/performance.md "Usage delivery"). paho's
// packets package frames the connection's rare packets (CONNECT, CONNACK,
// PINGREQ, PINGRESP, DISCONNECT, and anything unexpected). The two an
// event costs are framed here, because paho's framing cost 11
// allocations and ~2 µs an event (BenchmarkFraming): writePublish writes a
// QoS 1 PUBLISH byte for byte as paho's PublishPacket.Write does
// (TestWritePublishMatchesPaho), and the reader takes a PUBACK whole in
// its buffer by its four bytes, leaving every other packet to paho's
// ReadPacket (TestReaderTakesEveryPacket).
//
// One connection per drain: dialLink dials the configured broker (no proxy
// from the environment; TLS for ssl://), sends CONNECT and reads CONNACK
// within Options.ConnectTimeout; a refusal is a [RefusedError] naming the
// return code. Then:
//
//   - the drain loop's goroutine writes every packet: a burst of PUBLISH
//     packets goes into a write buffer and leaves with one flush, one
//     write(2), under a write deadline of Options.ConnectTimeout;
//   - one reader goroutine reads every later packet through a read
//     buffer, so a burst of PUBACKs costs one read(2), and hands their
//     packet identifiers to the drain loop with one wakeup a burst;
//   - packet identifiers index the publishes in flight (a window of
//     Options.Window slots): a PUBACK frees exactly its own publish, a
//     PUBACK for an identifier not in flight is ignored, and identifiers
//     continue across connections rather than restart at 1.
//
// So a PUBACK counts only if it was read on the connection that carried
// its publish, by construction: a connection's reader reads only its own
// socket, and its window is emptied when it ends.
// TestOnlyThisConnectionsPUBACKsCount checks it against a scripted broker
// that drops a connection with publishes in flight and then sends PUBACKs
// for the old identifiers on the next one. PUBACKs read before a
// connection ended still count.
//
// Keepalive (MQTT 3.1.1 §3.1.2.10) runs on the drain loop's timer: a
// PINGREQ once nothing was sent or nothing was read for Options.KeepAlive,
// and the connection is given up when nothing is read within half the
// interval after it. A half-open link ends within about 1.5×KeepAlive of
// its last packet (TestKeepalive, TestHalfOpenLinkDetected). A packet the
// publisher never asks for (anything but PUBACK and PINGRESP after
// CONNACK) ends the connection with [ErrProtocol].
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
// would tie redelivery to a client's in-memory state, which a restart
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
