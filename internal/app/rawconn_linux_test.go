package app

import (
	"net"
	"testing"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/rawconn"
)

// TestAPIListenerMakesRawCalls: client connections on the API listener
// are rawconn.Conns (the stream relay's writes to clients, see rawconn).
func TestAPIListenerMakesRawCalls(t *testing.T) {
	n := &node{cfg: &config.Config{Listen: config.Listen{API: "127.0.0.1:0"}}}
	ln, err := n.listenAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*rawconn.Conn); !ok {
		t.Fatalf("the API listener accepted a %T; want *rawconn.Conn", s)
	}
}
