package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
)

// idleMarker in the prompt asks the fake provider for an idle stream: one
// event, then silence for idleSilence (the harness closes it long before).
const (
	idleMarker  = "scootgate-load-idle"
	idleSilence = 10 * time.Minute
)

// providerKeyEnv carries the fake provider's key to the upstream, the node
// (as a credential reference) and the baseline.
const providerKeyEnv = "SCOOTGATE_LOAD_PROVIDER_KEY"

// upstreamStats is the /stats of the provider and proxy roles (each fills
// its own fields; the harness adds them up).
type upstreamStats struct {
	Requests       int64 `json:"requests"`        // answered by the fake provider's script
	SOCKSTunnels   int64 `json:"socks_tunnels"`   // successful SOCKS5 CONNECTs
	ConnectTunnels int64 `json:"connect_tunnels"` // successful HTTP CONNECTs
	MQTTReceived   int64 `json:"mqtt_received"`   // PUBLISH messages the broker received
	MQTTClients    int64 `json:"mqtt_clients"`    // clients connected now
}

func (a upstreamStats) plus(b upstreamStats) upstreamStats {
	return upstreamStats{
		Requests:       a.Requests + b.Requests,
		SOCKSTunnels:   a.SOCKSTunnels + b.SOCKSTunnels,
		ConnectTunnels: a.ConnectTunnels + b.ConnectTunnels,
		MQTTReceived:   a.MQTTReceived + b.MQTTReceived,
		MQTTClients:    a.MQTTClients + b.MQTTClients,
	}
}

// The provider and the proxies run in separate processes: an idle stream
// holds one socket in the provider and two in the proxy, and each process
// has its own descriptor limit.

// providerScript is the fake provider's answer to every path alike:
// non-stream after delay; streams of events content events gap apart
// (each API's own events around them); one event, then silence, for the
// idle marker. It counts the requests in n.
func providerScript(delay time.Duration, events int, gap time.Duration, n *atomic.Int64) func(fakeprovider.Request) *fakeprovider.Behaviour {
	// The provider copies the Behaviour it is given, so these are shared.
	stream := &fakeprovider.Behaviour{Delay: delay, Chunks: events, EventDelay: gap}
	whole := &fakeprovider.Behaviour{Delay: delay}
	idle := &fakeprovider.Behaviour{Chunks: 2, EventDelay: idleSilence}
	return func(r fakeprovider.Request) *fakeprovider.Behaviour {
		n.Add(1)
		switch {
		case strings.Contains(r.Prompt, idleMarker):
			return idle
		case r.Stream:
			return stream
		default:
			return whole
		}
	}
}

// runProvider is -role=provider: the fake provider and an embedded MQTT
// broker, pinned beside the generator.
func runProvider(args []string) error {
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	delay := fs.Duration("delay", 0, "provider latency before the status line")
	events := fs.Int("events", 20, "content events per stream")
	gap := fs.Duration("event-gap", 5*time.Millisecond, "provider gap between stream events")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := childContext()
	defer stop()
	if _, err := raiseFDLimit(1 << 18); err != nil {
		fmt.Fprintln(os.Stderr, "provider: fd limit:", err)
	}

	var requests atomic.Int64
	prov := fakeprovider.New(fakeprovider.Options{
		OpenAIKey:    os.Getenv(providerKeyEnv),
		AnthropicKey: os.Getenv(providerKeyEnv),
		Script:       providerScript(*delay, *events, *gap, &requests),
	})
	base, err := prov.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer prov.Close()

	broker := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := broker.AddHook(new(allowAll), nil); err != nil {
		return fmt.Errorf("mqtt broker: %w", err)
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "load", Address: "127.0.0.1:0"})
	if err := broker.AddListener(tcp); err != nil {
		return fmt.Errorf("mqtt broker: %w", err)
	}
	if err := broker.Serve(); err != nil {
		return fmt.Errorf("mqtt broker: %w", err)
	}
	defer broker.Close()

	// The fake provider keeps a copy of every request for tests; forget
	// them every second so a long run does not grow without bound.
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				prov.Reset()
			}
		}
	}()

	control, err := controlServer(ctx, func() any {
		return upstreamStats{
			Requests:     requests.Load(),
			MQTTReceived: atomic.LoadInt64(&broker.Info.MessagesReceived),
			MQTTClients:  atomic.LoadInt64(&broker.Info.ClientsConnected),
		}
	})
	if err != nil {
		return err
	}
	if err := printReady(readyLine{Control: control, Provider: strings.TrimSuffix(base, "/v1"), Broker: tcp.Address()}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// runProxy is -role=proxy: the loopback SOCKS5 and CONNECT egress proxies,
// both limited to 127.0.0.1 targets.
func runProxy(args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := childContext()
	defer stop()
	if _, err := raiseFDLimit(1 << 18); err != nil {
		fmt.Fprintln(os.Stderr, "proxy: fd limit:", err)
	}
	loopback := func(host string, _ int) bool { return host == "127.0.0.1" }
	d := &net.Dialer{Timeout: 10 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return plainConn{c}, nil
	}
	socksLn, err := listenRetrying("socks5")
	if err != nil {
		return err
	}
	socks := socks5proxy.New(socks5proxy.Options{Allow: loopback, Dial: dial})
	defer socks.Close()
	go func() { _ = socks.Serve(socksLn) }() // ends at socks.Close
	connectLn, err := listenRetrying("connect")
	if err != nil {
		return err
	}
	conn := connectproxy.New(connectproxy.Options{Allow: loopback, Dial: dial})
	defer conn.Close()
	go func() { _ = conn.Serve(connectLn) }() // ends at conn.Close
	socksAddr, connectAddr := socksLn.Addr().String(), connectLn.Addr().String()
	control, err := controlServer(ctx, func() any {
		return upstreamStats{SOCKSTunnels: socks.Tunnels(), ConnectTunnels: conn.Tunnels()}
	})
	if err != nil {
		return err
	}
	if err := printReady(readyLine{Control: control, SOCKS: socksAddr, Connect: connectAddr}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// plainConn hides *net.TCPConn's ReadFrom and WriteTo, so the proxies'
// io.Copy relays through a buffer instead of splice(2). A splice blocked
// on an idle tunnel holds a pipe (two descriptors) per direction: six
// descriptors per idle stream instead of two, which would cap the
// idle-stream test at a third of the descriptor limit.
type plainConn struct{ net.Conn }

// CloseWrite half-closes, as the proxies expect of TCP connections.
func (c plainConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// retryListener retries failed accepts that a busy process can recover
// from (out of descriptors, aborted handshakes) with a growing pause, as
// net/http's server does; the devstack proxies' Serve would otherwise
// stop at the first one. Each distinct error is logged once.
type retryListener struct {
	net.Listener
	name   string
	logged map[string]bool // only the Serve goroutine calls Accept
}

func listenRetrying(name string) (*retryListener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%s proxy: %w", name, err)
	}
	return &retryListener{Listener: ln, name: name, logged: map[string]bool{}}, nil
}

func (l *retryListener) Accept() (net.Conn, error) {
	pause := 5 * time.Millisecond
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return plainConn{c}, nil
		}
		if errors.Is(err, net.ErrClosed) || !retryable(err) {
			return nil, err
		}
		if msg := err.Error(); !l.logged[msg] {
			l.logged[msg] = true
			fmt.Fprintf(os.Stderr, "%s proxy: accept: %v (retrying)\n", l.name, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}

func retryable(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPROTO)
}

// allowAll lets every client connect and publish. (mochi's own
// hooks/auth package would pull gopkg.in/yaml.v3 into the module.)
type allowAll struct{ mqtt.HookBase }

func (*allowAll) ID() string { return "scootgate-load-allow-all" }

func (*allowAll) Provides(b byte) bool {
	return b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck
}

func (*allowAll) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }
func (*allowAll) OnACLCheck(*mqtt.Client, string, bool) bool              { return true }

// deadPort returns a loopback address nothing listens on (a port the
// kernel just handed out and that was closed again): the "broker down"
// node's broker.
func deadPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
