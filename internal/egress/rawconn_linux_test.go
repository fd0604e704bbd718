package egress

import (
	"context"
	"net"
	"testing"

	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
	"github.com/scootgate/scootgate/internal/rawconn"
)

// TestTunnelsMakeRawCalls: the TCP connection to the egress proxy, SOCKS5
// or CONNECT, is a rawconn.Conn, so that relaying a stream through it
// does not wake the runtime's monitor at every event (rawconn).
func TestTunnelsMakeRawCalls(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	f := &socksForward{}
	c, err := f.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := f.tap.Conn.(*rawconn.Conn); !ok {
		t.Errorf("the SOCKS5 forward dial made a %T; want *rawconn.Conn", f.tap.Conn)
	}

	_, addr := startConnect(t, connectproxy.Options{})
	tg := newTarget(t, false)
	d := newDialer(t, Options{Proxies: []Proxy{{Name: "connect", URL: mustURL(t, "http://"+addr)}}})
	conn, _, err := d.connect(context.Background(), &d.proxies[0], tg.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p, ok := conn.(*prefixConn); ok {
		conn = p.Conn
	}
	if _, ok := conn.(*rawconn.Conn); !ok {
		t.Errorf("the CONNECT tunnel is a %T; want *rawconn.Conn", conn)
	}
}
