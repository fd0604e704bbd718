package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseGoroutines(t *testing.T) {
	dump := `goroutine 1 [running]:
main.main()
	/x/main.go:10 +0x1

goroutine 39 [IO wait]:
internal/poll.runtime_pollWait(0x7f4cb8a79a00, 0x72)
	/usr/local/go/src/runtime/netpoll.go:351 +0x85
internal/poll.(*FD).Read(0x2a29cf1c4180, {0x2a29cf22a000, 0x1000, 0x1000})
	/usr/local/go/src/internal/poll/fd_unix.go:165 +0x2ae
net.(*netFD).Read(0x2a29cf1c4180, {0x2a29cf22a000?, 0x0?, 0x0?})
	/usr/local/go/src/net/fd_posix.go:68 +0x25
github.com/scootgate/scootgate/internal/gateway.(*call).relayStream(0x1, 0x2)
	/w/internal/gateway/relay.go:520 +0x97e
net/http.(*conn).serve(0x2a29cee41320, {0xba2e78, 0x2a29ceef3080})
	/usr/local/go/src/net/http/server.go:2067 +0x690
created by net/http.(*Server).Serve in goroutine 34
	/usr/local/go/src/net/http/server.go:3464 +0x485

goroutine 40 [select]:
net/http.(*persistConn).writeLoop(0x1)
	/usr/local/go/src/net/http/transport.go:2600 +0x1
created by net/http.(*Transport).dialConn in goroutine 39
	/usr/local/go/src/net/http/transport.go:2000 +0x1
`
	var got []goroutine
	got = append(got, parseGoroutines(dump)...)
	want := []goroutine{
		{key: "main · waits in main.main", frames: 1},
		{key: "net/http.(*Server).Serve · waits in net.(*netFD).Read", frames: 5},
		{key: "net/http.(*Transport).dialConn · waits in net/http.(*persistConn).writeLoop", frames: 1},
	}
	if diff := cmp.Diff(got, want, cmp.AllowUnexported(goroutine{})); diff != "" {
		t.Errorf("goroutines (-got +want):\n%s", diff)
	}
}

func TestBreakdown(t *testing.T) {
	before := memSnapshot{
		Classes:    map[string]uint64{"heap/objects": 1 << 20, "heap/stacks": 1 << 20, "total": 4 << 20},
		Goroutines: map[string]int{"a": 10},
		Sites:      map[string]siteBytes{"bufio.NewReaderSize": {Bytes: 4096, Objects: 1}, "gone": {Bytes: 1024, Objects: 1}},
		RSSAnon:    10 << 20, RSSFile: 5 << 20,
	}
	after := memSnapshot{
		Classes:    map[string]uint64{"heap/objects": 1<<20 + 10*8192, "heap/stacks": 1<<20 + 10*16384, "total": 4<<20 + 10*24576},
		Goroutines: map[string]int{"a": 10, "b": 20, "c": 10},
		Sites:      map[string]siteBytes{"bufio.NewReaderSize": {Bytes: 4096 + 10*8192, Objects: 21}, "tiny": {Bytes: 10 * 64, Objects: 10}},
		RSSAnon:    10<<20 + 10*30<<10, RSSFile: 5 << 20,
		Depth: map[string]float64{"b": 20},
	}
	b := breakdown(before, after, releaseResult{AnonBefore: 20 << 20, AnonAfter: 20<<20 - 10*5<<10}, 31, 10)
	want := memBreakdown{
		RSSKiB: 31, AnonKiB: 30, ReleasedKiB: 5,
		ClassKiB:   map[string]float64{"heap/objects": 8, "heap/stacks": 16, "total": 24},
		Goroutines: map[string]float64{"b": 2, "c": 1},
		Depth:      map[string]float64{"b": 20},
		Sites:      []siteShare{{Site: "bufio.NewReaderSize", KiB: 8, Objects: 2}},
		RestKiB:    (640.0 - 1024) / 10 / 1024, // "tiny" is below 1/8 KiB; "gone" went away
	}
	approx := cmp.Comparer(func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 })
	if diff := cmp.Diff(b, want, approx); diff != "" {
		t.Errorf("breakdown (-got +want):\n%s", diff)
	}
	if got := b.stackPerGoroutineKiB(); got < 5.33 || got > 5.34 {
		t.Errorf("stack per goroutine = %v KiB, want 16/3", got)
	}

	r := newReport(options{}, pinning{}, sutRuntime{})
	r.Idle = []idleResult{
		{Target: keyBaseline, Requested: 10, Streams: 10, Opened: 10, Breakdown: memBreakdown{RSSKiB: 30, ClassKiB: map[string]float64{"heap/stacks": 12}}},
		{Target: keyNode, Requested: 10, Streams: 10, Opened: 10, Breakdown: b},
	}
	md := r.markdown()
	for _, line := range []string{
		"### Per idle stream, 10 streams: where it goes",
		"| runtime: heap/stacks | 12.00 | 16.00 | 4.00 |",
		"| `bufio.NewReaderSize` | 0.00 | 8.00 | 0.00 | 2.00 |",
	} {
		if !strings.Contains(md, line+"\n") {
			t.Errorf("markdown lacks %q:\n%s", line, md)
		}
	}
}

// TestMemoryEndpoints reads GET /memory and POST /release of a control
// server in this process: the breakdown's inputs are there and the
// goroutine this test parks on a connection is counted by its creator.
func TestMemoryEndpoints(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := controlServer(ctx, func() any { return readSUTStats() })
	if err != nil {
		t.Fatal(err)
	}
	c := &child{name: "self", ready: readyLine{Control: addr}}
	// One keep-alive connection held open to the control server: its
	// goroutine was created by (*Server).Serve.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	s, err := c.memory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Classes["heap/objects"] == 0 || s.Classes["heap/stacks"] == 0 || s.Classes["total"] == 0 {
		t.Errorf("classes lack heap/objects, heap/stacks or total: %v", s.Classes)
	}
	if s.RSSAnon == 0 {
		t.Error("RssAnon not read")
	}
	served := 0
	for k, n := range s.Goroutines {
		if strings.HasPrefix(k, "net/http.(*Server).Serve · ") {
			served += n
		}
	}
	if served == 0 {
		t.Errorf("no goroutine created by net/http.(*Server).Serve among %v", s.Goroutines)
	}
	if len(s.Sites) == 0 && s.ProfileRate > 0 {
		t.Error("no allocation sites")
	}
	if _, err := c.release(ctx); err != nil {
		t.Fatal(err)
	}
}
