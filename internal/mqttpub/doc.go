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
// The client is paho.mqtt.golang (v1.5.1), one paho client per connection
// (link.go). paho completes tokens in the order PUBACKs arrive, so the
// drain loop does not wait on the oldest token: paho's store, wrapped,
// reports each PUBACK it has read; one goroutine per link waits for those
// tokens, a batch at a time, and signals the drain loop once per batch
// (one wakeup judges every publish completed by then). A PUBACK the
// broker withholds delays no other row.
// TestPartialAcksLeaveExactlyTheUnacked (every third PUBACK withheld)
// checks that exactly the unacknowledged rows stay in the outbox. paho
// reads and writes through genConn (genconn.go): reads go through a
// buffer, so a burst of PUBACKs costs one read, and writes are batched,
// and corked while the drain loop publishes a burst, so that the burst
// leaves in one write.
//
// # Connection generations
//
// paho.mqtt.golang can complete a publish token with a nil error although
// no PUBACK came: with AutoReconnect, on reconnect it replaces the stored
// publish's token and completes the old one (paho.mqtt.golang#563, still
// open, and reproduced by TestPahoIssue563). So a successful token alone is not an
// acknowledgement. The Publisher therefore:
//
//   - never lets paho reconnect: AutoReconnect and ConnectRetry are off,
//     and every connection is a new paho client that connects once;
//   - dials the broker itself (paho's CustomOpenConnectionFn) and wraps the
//     connection so that its end (first failed read or write, or Close)
//     bumps a connection generation and closes the loss signal. paho closes
//     the connection before it fails or completes any token because of the
//     loss, so the bump always comes first. Opening a connection bumps it
//     too;
//   - records the generation with each publish, and counts a completed
//     token as an acknowledgement only if it has no error and the
//     generation is unchanged when it is judged. Then the connection that
//     carried the publish is the one that delivered the PUBACK. A token that
//     completed across a connection change ends the connection
//     ([ErrStaleAck]).
//
// What paho v1.5.1 does, observed against the embedded broker with the
// PUBACK withheld and the link cut (TestPahoFailsPendingTokensOnLoss,
// TestPahoIssue563): with AutoReconnect off, the pending token ends with
// the error "connection lost before Publish completed", after the
// generation moved; with AutoReconnect on, it completes with a nil error
// once paho has reconnected, and no PUBACK was ever sent. The generation
// check rejects it. Three independent checks thus guard every delete: the
// token error, the generation, and the loss signal, which ends the drain
// before anything in flight is judged (TestStaleAckIsNotAnAck for the
// second).
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
// would tie redelivery to paho's in-memory store, which a restart loses.
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
