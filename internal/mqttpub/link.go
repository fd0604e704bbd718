package mqttpub

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"sync/atomic"
	"time"
)

// token is a publish in flight (a *wireToken; paho's mqtt.Token fits
// too).
type token interface {
	Done() <-chan struct{}
	Error() error
}

// finished reports whether t completed. It asks a token that can tell
// without a channel (wireToken) directly.
func finished(t token) bool {
	if c, ok := t.(interface{ completed() bool }); ok {
		return c.completed()
	}
	return done(t.Done())
}

// link is one broker connection. Publish tokens of a link are only ever
// judged while that link is the current one.
type link interface {
	// publish sends payload with QoS 1, retained false. The link may
	// hold it until flush.
	publish(payload []byte) token
	// flush sends what publish holds.
	flush()
	// acks receives after publishes completed (coalesced, capacity 1), so
	// that one wakeup judges them all; nil if the link has no such signal,
	// and the loop waits on the oldest publish instead.
	acks() <-chan struct{}
	// lost is closed once the network connection has ended.
	lost() <-chan struct{}
	// close disconnects (sending DISCONNECT when the connection is still
	// up) and releases the client. It is idempotent.
	close()
}

// connector opens a link. The link bumps gen whenever a network connection
// opens or ends, before it can complete any publish because of it (see
// genConn); a completed publish is an acknowledgement only if gen did not
// move between its publish and the moment it is judged.
type connector func(ctx context.Context, gen *atomic.Uint64) (link, error)

// quiesce bounds how long close waits for DISCONNECT to be written, and
// how long a genConn's Close waits for its pending bytes.
const quiesce = 250 * time.Millisecond

// linkConfig is what dialWire needs, resolved from Options by New.
type linkConfig struct {
	broker         *url.URL
	clientID       string
	topic          string
	username       string
	password       string
	tls            *tls.Config // nil for tcp://
	keepAlive      time.Duration
	connectTimeout time.Duration
	// autoReconnect is for the paho link of the tests (paho_test.go):
	// only the test that reproduces paho.mqtt.golang#563 turns it on.
	autoReconnect bool
	// wrap replaces newGenConn around each dialled connection; nil in
	// production. Benchmarks use it to count system calls and to run the
	// unbuffered baseline.
	wrap func(conn net.Conn, end func()) net.Conn
}
