package app

import (
	"testing"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/rawconn"
)

// TestAPIListenerMakesRawCalls: the API listener is a rawconn.Listener,
// so client connections make raw reads and writes (the stream relay's
// writes to clients, see rawconn).
func TestAPIListenerMakesRawCalls(t *testing.T) {
	n := &node{cfg: &config.Config{Listen: config.Listen{API: "127.0.0.1:0"}}}
	ln, err := n.listenAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, ok := ln.(rawconn.Listener); !ok {
		t.Fatalf("the API listener is a %T; want rawconn.Listener", ln)
	}
}
