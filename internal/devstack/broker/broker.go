// Package broker runs an embedded MQTT broker (mochi-mqtt) on loopback for
// the dev stack and tests: the node publishes usage events to it, and an
// optional in-process subscriber sees every message. It is a dev/test
// tool, never linked into the node binary.
//
// # Caveats
//
// mochi v2.7.9's own TCP listener makes Server.Close racy (a WaitGroup Add
// concurrent with Wait) and can deadlock it (a recursive read lock while a
// client disconnects). Listener replaces it: it waits for every
// connection handler it started and closes connections itself.
package broker

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Options configures a Broker.
type Options struct {
	Addr  string      // e.g. "127.0.0.1:0"
	TLS   *tls.Config // nil = plain TCP
	Hooks []mqtt.Hook // extra hooks (tests withhold or count acks); none = allow all
	// OnMessage, when set, is called for every message published on a
	// topic matching Filter (default "#"), from the broker's goroutine.
	OnMessage func(topic string, payload []byte)
	Filter    string
}

// Broker is a running embedded broker.
type Broker struct {
	srv *mqtt.Server
	ln  *Listener
}

// Start starts a broker and returns once it accepts connections.
func Start(o Options) (*Broker, error) {
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler), InlineClient: o.OnMessage != nil})
	if len(o.Hooks) == 0 {
		o.Hooks = []mqtt.Hook{new(auth.AllowHook)}
	}
	for _, h := range o.Hooks {
		if err := srv.AddHook(h, nil); err != nil {
			return nil, fmt.Errorf("broker: add hook: %w", err)
		}
	}
	ln := &Listener{Addr: o.Addr, TLS: o.TLS}
	if err := srv.AddListener(ln); err != nil {
		return nil, fmt.Errorf("broker: listen on %s: %w", o.Addr, err)
	}
	if err := srv.Serve(); err != nil {
		return nil, fmt.Errorf("broker: serve: %w", err)
	}
	b := &Broker{srv: srv, ln: ln}
	if o.OnMessage != nil {
		filter := o.Filter
		if filter == "" {
			filter = "#"
		}
		err := srv.Subscribe(filter, 1, func(_ *mqtt.Client, _ packets.Subscription, pk packets.Packet) {
			o.OnMessage(pk.TopicName, pk.Payload)
		})
		if err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("broker: subscribe: %w", err)
		}
	}
	return b, nil
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return b.ln.Address() }

// Server is the underlying mochi server (tests inspect clients).
func (b *Broker) Server() *mqtt.Server { return b.srv }

// Close stops the broker and waits for its connections to end.
func (b *Broker) Close() error { return b.srv.Close() }

// Listener is a mochi listener whose Close waits for every connection
// handler it started (see the package caveats).
type Listener struct {
	Addr string
	TLS  *tls.Config

	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	conns  []net.Conn // guarded by mu
	closed bool       // guarded by mu
}

var _ listeners.Listener = (*Listener)(nil)

// Init opens the socket.
func (l *Listener) Init(*slog.Logger) error {
	var err error
	if l.TLS != nil {
		l.ln, err = tls.Listen("tcp", l.Addr, l.TLS)
	} else {
		l.ln, err = net.Listen("tcp", l.Addr)
	}
	return err
}

// Serve accepts connections until Close.
func (l *Listener) Serve(establish listeners.EstablishFn) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = c.Close()
			return
		}
		l.conns = append(l.conns, c)
		l.wg.Go(func() { _ = establish("t", c) }) // under mu: Close's Wait sees every Add
		l.mu.Unlock()
	}
}

// ID, Address and Protocol describe the listener to mochi.
func (l *Listener) ID() string       { return "t" }
func (l *Listener) Address() string  { return l.ln.Addr().String() }
func (l *Listener) Protocol() string { return "tcp" }

// Close closes the socket and every connection, then waits for handlers.
func (l *Listener) Close(listeners.CloseFn) {
	_ = l.ln.Close()
	l.mu.Lock()
	l.closed = true
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}
