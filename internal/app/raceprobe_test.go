package app

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/config"
)

// raceProbeEnv makes TestRaceProbeChild run.
const raceProbeEnv = "SCOOTGATE_APP_RACE_PROBE"

// TestRaceDetectorSeesClientReads keeps the connections the API listener
// accepts on package net's reads, which tell the race detector (and msan
// and asan) what they write. A socket read made any other way, a raw
// system call above all, writes the caller's buffer unseen: the tools go
// blind on the node's busiest sockets and nothing else fails. In a child
// process, one goroutine reads a buffer while a client connection's Read
// fills it; the race detector must report that race.
func TestRaceDetectorSeesClientReads(t *testing.T) {
	if !raceEnabled {
		t.Skip("needs a test binary built with -race (make test builds one): the probe is a data race only the race detector reports")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRaceProbeChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), raceProbeEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !seenRace(string(out)) {
		t.Fatalf("the race detector did not see a client connection's Read fill the buffer another goroutine reads (child: %v):\n%s", err, out)
	}
}

// TestRaceProbeChild is the child of TestRaceDetectorSeesClientReads: it
// fails under -race, by design.
func TestRaceProbeChild(t *testing.T) {
	if os.Getenv(raceProbeEnv) == "" {
		t.Skip("helper process for TestRaceDetectorSeesClientReads")
	}
	n := &node{cfg: &config.Config{Listen: config.Listen{API: "127.0.0.1:0"}}}
	ln, err := n.listenAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	readWhilePeeked(t, c)
}

// readWhilePeeked reads from c into a buffer that another goroutine reads
// at the same time, with nothing ordering the two accesses.
func readWhilePeeked(t *testing.T, c net.Conn) {
	t.Helper()
	buf := make([]byte, 4)
	done := make(chan byte)
	go func() { done <- peekBuffer(buf) }()
	n, err := c.Read(buf)
	<-done
	if err != nil || n == 0 {
		t.Fatalf("Read = %d, %v", n, err)
	}
}

// seenRace says a race report in out is the probe's: package net's Read
// writing the buffer peekBuffer reads.
func seenRace(out string) bool {
	return strings.Contains(out, "WARNING: DATA RACE") &&
		strings.Contains(out, "net.(*conn).Read") &&
		strings.Contains(out, "peekBuffer")
}

// peekBuffer reads b; the race detector names it in its report.
//
//go:noinline
func peekBuffer(b []byte) byte { return b[0] }
