package egress

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
)

// raceProbeEnv selects the tunnel TestRaceProbeChild probes.
const raceProbeEnv = "SCOOTGATE_EGRESS_RACE_PROBE"

// TestRaceDetectorSeesTunnelReads keeps the tunnels to providers on
// package net's reads, which tell the race detector (and msan and asan)
// what they write. A socket read made any other way, a raw system call
// above all, writes the caller's buffer unseen: the tools go blind on the
// node's busiest sockets and nothing else fails. In a child process, one
// goroutine reads a buffer while the tunnel's Read fills it; the race
// detector must report that race.
func TestRaceDetectorSeesTunnelReads(t *testing.T) {
	if !raceEnabled {
		t.Skip("needs a test binary built with -race (make test builds one): the probe is a data race only the race detector reports")
	}
	for _, kind := range []string{"socks5", "connect"} {
		t.Run(kind, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRaceProbeChild$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), raceProbeEnv+"="+kind)
			out, err := cmd.CombinedOutput()
			if err == nil || !seenRace(string(out)) {
				t.Fatalf("the race detector did not see the %s tunnel's Read fill the buffer another goroutine reads (child: %v):\n%s", kind, err, out)
			}
		})
	}
}

// TestRaceProbeChild is the child of TestRaceDetectorSeesTunnelReads: it
// fails under -race, by design.
func TestRaceProbeChild(t *testing.T) {
	kind := os.Getenv(raceProbeEnv)
	if kind == "" {
		t.Skip("helper process for TestRaceDetectorSeesTunnelReads")
	}
	target := echoTarget(t)
	var u string
	switch kind {
	case "socks5":
		_, addr := startSOCKS(t, socks5proxy.Options{})
		u = "socks5://" + addr
	case "connect":
		_, addr := startConnect(t, connectproxy.Options{})
		u = "http://" + addr
	default:
		t.Fatalf("%s=%q: want socks5 or connect", raceProbeEnv, kind)
	}
	d := newDialer(t, Options{Proxies: []Proxy{{Name: kind, URL: mustURL(t, u)}}})
	conn, err := d.DialContext(t.Context(), "tcp", target)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	readWhilePeeked(t, conn)
}

// readWhilePeeked writes to c, which echoes, and reads the echo into a
// buffer that another goroutine reads at the same time, with nothing
// ordering the two accesses. The bytes come from the socket, not from a
// buffer in front of it: nothing was sent before the write.
func readWhilePeeked(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
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

// echoTarget serves one echoing TCP connection on loopback and returns
// its address.
func echoTarget(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}
