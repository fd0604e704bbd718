package mqttpub

import (
	"errors"
	"fmt"
)

// Errors that end a connection. Run handles all of them the same way (drop
// the connection, back off, reconnect, replay every row still in the
// outbox); they surface in logs and in Stats.LastError, and tests tell them
// apart with errors.Is.
var (
	// ErrConnectionLost: the network connection ended (read or write
	// failure, no answer to a keepalive PINGREQ, the broker closed it).
	ErrConnectionLost = errors.New("mqttpub: connection lost")
	// ErrAckTimeout: publishes were in flight and no PUBACK arrived for
	// Options.AckTimeout. The broker is withholding acknowledgements or the
	// link is half-open; a fresh connection replays the rows.
	ErrAckTimeout = errors.New("mqttpub: no PUBACK within the ack timeout")
	// ErrProtocol: the broker sent a packet this client never asks for (a
	// publisher with a clean session and no subscriptions receives only
	// CONNACK, PUBACK and PINGRESP), or something other than CONNACK first.
	ErrProtocol = errors.New("mqttpub: protocol violation by the broker")
)

// ErrRunning is returned by Run when the Publisher is already running: one
// Publisher owns one connection and one replay cursor.
var ErrRunning = errors.New("mqttpub: already running")

// RefusedError is a CONNACK with a non-zero return code: the broker
// refused the connection (MQTT 3.1.1 §3.2.2.3). Run reports it in logs and
// Stats.LastError and retries after the backoff, as for any failed
// connect: a refusal for bad credentials or an unknown client id persists
// until the broker or the node's configuration changes.
type RefusedError struct {
	Code byte // the CONNACK return code, 1-255
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("broker refused the connection: %s (CONNACK return code %d)", refusal(e.Code), e.Code)
}

// refusal says what a CONNACK return code means (MQTT 3.1.1 table 3.1).
func refusal(code byte) string {
	switch code {
	case 1:
		return "unacceptable protocol version (the broker does not speak MQTT 3.1.1)"
	case 2:
		return "client identifier rejected"
	case 3:
		return "server unavailable"
	case 4:
		return "bad user name or password"
	case 5:
		return "not authorized"
	}
	return "reserved return code"
}
