package mqttpub

import "errors"

// Errors that end a connection. Run handles all of them the same way (drop
// the connection, back off, reconnect, replay every row still in the
// outbox); they surface in logs and in Stats.LastError, and tests tell them
// apart with errors.Is.
var (
	// ErrConnectionLost: the network connection ended (read or write
	// failure, keepalive timeout, the broker closed it).
	ErrConnectionLost = errors.New("mqttpub: connection lost")
	// ErrAckTimeout: publishes were in flight and no PUBACK arrived for
	// Options.AckTimeout. The broker is withholding acknowledgements or the
	// link is half-open; a fresh connection replays the rows.
	ErrAckTimeout = errors.New("mqttpub: no PUBACK within the ack timeout")
	// ErrStaleAck: a publish token completed without error, but the
	// connection that carried the publish is no longer the current one.
	// That is the shape of paho.mqtt.golang#563 (a token completed across a reconnect
	// without its PUBACK); it is never taken as an acknowledgement (docs/usage-events.md
	// "MQTT acknowledgement").
	ErrStaleAck = errors.New("mqttpub: publish completed on a connection that is gone (not an acknowledgement)")
)

// ErrRunning is returned by Run when the Publisher is already running: one
// Publisher owns one connection and one replay cursor.
var ErrRunning = errors.New("mqttpub: already running")
