package gateway

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSocketEvents is what a socket pays per relayed event beyond the
// frame write: reading the event's type and data out of the SSE bytes the
// relay writes, and telling an in-band error apart.
func BenchmarkSocketEvents(b *testing.B) {
	var sb strings.Builder
	for i := range 20 {
		fmt.Fprintf(&sb, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"word \"}\n\n", i)
	}
	stream := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		n := 0
		for typ, data := range eventData(stream) {
			if streamError(typ, data) {
				b.Fatal("not an error")
			}
			n += len(data)
		}
		if n == 0 {
			b.Fatal("no data")
		}
	}
}

// BenchmarkResponsesTurn compares one Responses turn over the node's
// Responses WebSocket with its HTTP twin (POST /v1/responses, stream:
// true, SSE), in one run through one handler wired as the node wires it
// (log, metrics, usage events encoded and appended). Both turns get the
// same provider answer: a transport replays the fake provider's recorded
// stream (response.created, 20 deltas, response.completed with usage),
// one event per read. The clients are raw loopback connections that
// write prebuilt bytes (a request, or one masked response.create frame on
// a socket opened once) and read the answer into a fixed buffer, so that
// nearly all the process's work is the node's.
//
// Turns run in blocks of turnBlock, alternating HTTP and socket blocks,
// and each block is accounted to its kind: what a turn leaves to finish
// after its last byte reached the client (the usage event, the request
// metric) falls into the next turn of the same kind, except once per
// block. Per turn it reports for each kind the process's CPU
// (getrusage: user and system time of every thread, so the node's
// goroutines, the syscalls of its writes and the garbage collector are
// in and the time spent waiting for a CPU on a busy machine is out),
// the heap allocations and bytes (runtime.MemStats, every goroutine's),
// the writes on the client connection, and socket ÷ HTTP for CPU and
// allocations. Run it with -cpu 1, as the node runs (GOMAXPROCS 1 in the
// load harness): with more Ps, idle ones spinning for work add CPU that
// depends on the number of goroutine hand-offs, not on the work.
func BenchmarkResponsesTurn(b *testing.B) {
	h := wiredHandler(b)
	const body = `{"model":"gpt-all","stream":true,"input":"[[chunks=20]]"}`
	_, header, recorded := recordAnswer(b, h, h.o.Transport, "/v1/responses", "gpt-all",
		strings.Replace(body, `"gpt-all"`, `"provider-gpt"`, 1))
	if !bytes.Contains(recorded, []byte(`"usage":{`)) {
		b.Fatalf("the recorded answer has no usage:\n%s", recorded)
	}
	h.o.Transport = &cannedStream{header: header, events: bytes.SplitAfter(recorded, []byte("\n\n"))}
	var writes atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = countingListener{Listener: srv.Listener, writes: &writes}
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	turns := [2]turnClient{
		newHTTPTurn(b, addr, body),
		newSocketTurn(b, addr, `{"type":"response.create","model":"gpt-all","input":"[[chunks=20]]"}`),
	}
	var (
		cpu, allocs, bytes, writesN, n [2]int64
		ms                             runtime.MemStats
	)
	mark := func() (time.Duration, uint64, uint64, int64) {
		runtime.ReadMemStats(&ms)
		return cpuTime(b), ms.Mallocs, ms.TotalAlloc, writes.Load()
	}
	const turnBlock = 32
	kind, inBlock := 0, 0
	c0, m0, t0, w0 := mark()
	for b.Loop() {
		turns[kind].turn(b)
		n[kind]++
		if inBlock++; inBlock == turnBlock {
			c1, m1, t1, w1 := mark()
			cpu[kind] += int64(c1 - c0)
			allocs[kind] += int64(m1 - m0)
			bytes[kind] += int64(t1 - t0)
			writesN[kind] += w1 - w0
			kind, inBlock = 1-kind, 0
			c0, m0, t0, w0 = mark()
		}
	}
	c1, m1, t1, w1 := mark()
	cpu[kind] += int64(c1 - c0)
	allocs[kind] += int64(m1 - m0)
	bytes[kind] += int64(t1 - t0)
	writesN[kind] += w1 - w0
	if n[0] == 0 || n[1] == 0 {
		return // the run that sizes b.N
	}
	per := func(v [2]int64, k int) float64 { return float64(v[k]) / float64(n[k]) }
	for k, name := range [2]string{"http", "socket"} {
		b.ReportMetric(per(cpu, k), name+"-cpu-ns/turn")
		b.ReportMetric(per(allocs, k), name+"-allocs/turn")
		b.ReportMetric(per(bytes, k), name+"-B/turn")
		b.ReportMetric(per(writesN, k), name+"-writes/turn")
	}
	b.ReportMetric(per(cpu, 1)/per(cpu, 0), "socket/http-cpu")
	b.ReportMetric(per(allocs, 1)/per(allocs, 0), "socket/http-allocs")
}

// rawUpgrade opens a WebSocket on path at addr with a raw connection
// (the client key in the upgrade) and returns the connection and its
// reader, positioned at the first frame.
func rawUpgrade(tb testing.TB, addr, path string) (net.Conn, *bufio.Reader) {
	tb.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	upgrade := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer client-key\r\n" +
		"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := io.WriteString(conn, upgrade); err != nil {
		tb.Fatal(err)
	}
	rd := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		tb.Fatalf("upgrade: %v %v", resp, err)
	}
	return conn, rd
}

// turnClient runs one Responses turn on its connection.
type turnClient interface{ turn(b *testing.B) }

// httpTurn posts a prebuilt stream request on one kept-alive connection
// and reads the chunked answer to its last chunk.
type httpTurn struct {
	conn net.Conn
	req  []byte
	buf  []byte
}

func newHTTPTurn(b *testing.B, addr, body string) *httpTurn {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	req := fmt.Sprintf("POST /v1/responses HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer client-key\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	return &httpTurn{conn: conn, req: []byte(req), buf: make([]byte, 64<<10)}
}

func (t *httpTurn) turn(b *testing.B) {
	if _, err := t.conn.Write(t.req); err != nil {
		b.Fatal(err)
	}
	const last = "\r\n0\r\n\r\n" // the chunked answer's end
	tail := make([]byte, 0, 2*len(last))
	first := true
	for {
		n, err := t.conn.Read(t.buf)
		if err != nil {
			b.Fatal(err)
		}
		if first && !bytes.HasPrefix(t.buf[:n], []byte("HTTP/1.1 200 ")) {
			b.Fatalf("answer: %q", t.buf[:n])
		}
		first = false
		tail = append(tail, t.buf[max(0, n-len(last)):n]...) // the answer's last bytes so far
		tail = tail[max(0, len(tail)-len(last)):]
		if string(tail) == last {
			if bytes.Contains(t.buf[:n], []byte(`"type":"error"`)) {
				b.Fatalf("an error event: %q", t.buf[:n])
			}
			return
		}
	}
}

// socketTurn sends a prebuilt masked response.create frame on a Responses
// WebSocket opened once and reads frames up to response.completed (the
// fake provider's events end with their type).
type socketTurn struct {
	conn  net.Conn
	rd    *bufio.Reader
	frame []byte
}

func newSocketTurn(b *testing.B, addr, create string) *socketTurn {
	conn, rd := rawUpgrade(b, addr, "/v1/responses")
	// One text frame, FIN, masked (RFC 6455 §5.2; a client must mask).
	frame := []byte{0x81}
	switch p := len(create); {
	case p < 126:
		frame = append(frame, 0x80|byte(p))
	default:
		frame = append(frame, 0x80|126, byte(p>>8), byte(p))
	}
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	frame = append(frame, key[:]...)
	for i := range len(create) {
		frame = append(frame, create[i]^key[i%4])
	}
	return &socketTurn{conn: conn, rd: rd, frame: frame}
}

func (t *socketTurn) turn(b *testing.B) {
	if _, err := t.conn.Write(t.frame); err != nil {
		b.Fatal(err)
	}
	for {
		var hdr [2]byte
		if _, err := io.ReadFull(t.rd, hdr[:]); err != nil {
			b.Fatal(err)
		}
		if hdr[0] != 0x81 || hdr[1]&0x80 != 0 {
			rest, _ := t.rd.Peek(t.rd.Buffered())
			b.Fatalf("frame header % x (%q): want one unmasked text frame", hdr, rest)
		}
		n := int(hdr[1] & 0x7f)
		switch n {
		case 126:
			var ext [2]byte
			if _, err := io.ReadFull(t.rd, ext[:]); err != nil {
				b.Fatal(err)
			}
			n = int(binary.BigEndian.Uint16(ext[:]))
		case 127:
			var ext [8]byte
			if _, err := io.ReadFull(t.rd, ext[:]); err != nil {
				b.Fatal(err)
			}
			n = int(binary.BigEndian.Uint64(ext[:]))
		}
		// The frame's data read in place (the reader's buffer holds any
		// frame of this answer), as little work as the HTTP client's.
		data, err := t.rd.Peek(n)
		if err != nil {
			b.Fatal(err)
		}
		if bytes.HasPrefix(data, []byte(`{"type":"error"`)) {
			b.Fatalf("an error event: %q", data)
		}
		done := bytes.HasSuffix(data, []byte(`"type":"response.completed"}`))
		if _, err := t.rd.Discard(n); err != nil {
			b.Fatal(err)
		}
		if done {
			return
		}
	}
}
