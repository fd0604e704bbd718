package app

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/gateway"
	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestCancelFloodKeepsOtherKeysEvents: one key floods the node with
// requests it resets before anything reaches the provider (connections
// that send a request and RST), while another key sends ordinary
// requests. With a crash window of 256 events (room for all of the
// second key's), every answered request of the second key has its event, the flooding key's cancelled
// attempts are recorded only within its budget, and their request lines
// are bounded the same way.
func TestCancelFloodKeepsOtherKeysEvents(t *testing.T) {
	const hangModel = "flood-gpt"
	hang := deadAddr(t) // never dialled: the proxy holds every CONNECT to it
	hangHost, hangPort, _ := net.SplitHostPort(hang)
	entered := make(chan struct{}, 1<<16)
	release := make(chan struct{})
	s := startStack(t, stackOptions{
		egress: "connect",
		connectAllow: func(host string, port int) bool {
			if host == hangHost && fmt.Sprint(port) == hangPort {
				entered <- struct{}{}
				<-release // the attempt is stuck before its first byte
				return false
			}
			return true
		},
		// The first lines continue [usage].
		extraTOML: fmt.Sprintf(`crash_window_events = 256
[backends.hang]
protocol = "openai"
base_url = "http://%s/v1"
credential = "oa"
max_inflight_per_node = 1000
[models.%s]
[[models.%s.targets]]
backend = "hang"
model = "fake-gpt-1"
weight = 1
`, hang, hangModel, hangModel),
	})
	t.Cleanup(func() { close(release) }) // runs before the stack stops
	start := time.Now()

	// The other key: ordinary requests, two at a time, all through the
	// flood.
	const perWorker = 40
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answered int
	)
	for range 2 {
		wg.Go(func() {
			for range perWorker {
				r := s.do("POST", "/v1/messages", map[string]string{
					"x-api-key": limitedKey, "anthropic-version": "2023-06-01", "content-type": "application/json",
				}, fmt.Sprintf(`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, anthropicModel))
				if r.status == 200 {
					mu.Lock()
					answered++
					mu.Unlock()
				}
			}
		})
	}

	// The flood: rounds of connections that each send a request, wait
	// until the node's attempt is stuck in its CONNECT, and reset. The
	// rounds stay within the key's budget of abandoned requests
	// (docs/limits.md "Abandoned requests"), past which the node would
	// refuse the rest before routing (TestAbandonedRequestsRefused in
	// internal/gateway); the events' budget, smaller, is what is tested
	// here.
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"x"}]}`, hangModel)
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: n\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", clientKey, len(body), body)
	api := strings.TrimPrefix(s.api, "http://")
	const rounds, perRound = 2, gateway.AbandonBurst / 2
	for range rounds {
		conns := make([]*net.TCPConn, 0, perRound)
		for range perRound {
			c, err := net.Dial("tcp", api)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c.(*net.TCPConn))
		}
		guard := time.NewTimer(20 * time.Second) // against a hang, not a synchronisation
		for range perRound {
			select {
			case <-entered:
			case <-guard.C:
				t.Fatal("the node's attempts did not reach the proxy")
			}
		}
		guard.Stop()
		for _, c := range conns {
			_ = c.SetLinger(0) // close with a RST
			_ = c.Close()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	s.shutdown() // every attempt ends and the outbox is flushed

	var cancelled, other int
	forB := 0
	for _, ev := range s.outboxEvents(t) {
		switch {
		case ev.KeyID == "k-limited":
			forB++
		case ev.SendState == usageevent.SendDefinitelyNotSent && ev.FailureStage == usageevent.StageClientCancelled:
			cancelled++
		default:
			other++
		}
	}
	if answered != 2*perWorker || forB != answered {
		t.Errorf("the other key: %d of %d requests answered, %d events; want every request answered and one event each", answered, 2*perWorker, forB)
	}
	// Within the flooding key's budget: a burst, then a few a second.
	bound := usage.CancelBurst + int(elapsed.Seconds()+1)*usage.CancelRate
	if cancelled == 0 || cancelled > bound || other != 0 {
		t.Errorf("flooding key: %d cancelled-before-sending events, %d others; want 1..%d (its budget over %v), no others", cancelled, other, bound, elapsed)
	}
	lines := 0
	for l := range strings.Lines(s.logs.String()) {
		if strings.Contains(l, `"msg":"request"`) && strings.Contains(l, `"stage":"client_cancelled"`) {
			lines++
		}
	}
	if lines == 0 || lines > bound {
		t.Errorf("%d request lines of cancelled attempts for %d cancellations; want 1..%d", lines, rounds*perRound, bound)
	}
	t.Logf("%d flood attempts in %v: %d events and %d lines of them kept; the other key: %d events for %d answers", rounds*perRound, elapsed, cancelled, lines, forB, answered)
}

// TestH2RapidResetKeepsOtherKeysEvents is the HTTP/2 form of the flood
// above ("rapid reset"): one key opens stream after stream on one TLS
// connection, each a whole request (HEADERS, then DATA with END_STREAM)
// reset at once with RST_STREAM CANCEL, written with a raw framer as fast
// as the node takes them in (rapidReset.flood); another key sends
// ordinary requests on its own connection meanwhile. Every answered request of the second key has
// its event; every flood request that reached the provider has its event;
// the flood's attempts cancelled before anything was sent are recorded and
// logged only within the key's budget; the flooding connection is still
// answered (the flooding key with 429, past its budget of abandoned
// requests), and the node serves the other key afterwards.
func TestH2RapidResetKeepsOtherKeysEvents(t *testing.T) {
	cf, kf, pool := selfSigned(t)
	// The crash window of the flood above; a backend cap the flood cannot
	// reach, so that no flood request is refused for want of a target.
	s := startStack(t, stackOptions{tlsCert: cf, tlsKey: kf, cap: 1000, extraTOML: "crash_window_events = 256\n"})
	addr := strings.TrimPrefix(s.api, "https://")
	start := time.Now()

	// The other key: ordinary requests over HTTP/2, two at a time, until
	// the flood is over.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	defer client.CloseIdleConnections()
	messages := func() (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api+"/v1/messages",
			strings.NewReader(fmt.Sprintf(`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, anthropicModel)))
		if err != nil {
			return 0, err
		}
		req.Header.Set("x-api-key", limitedKey)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("content-type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, err
		}
		if resp.ProtoMajor != 2 {
			return 0, fmt.Errorf("answered over %s, want HTTP/2", resp.Proto)
		}
		return resp.StatusCode, nil
	}
	floodDone := make(chan struct{})
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		sentB, answeredB int
	)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-floodDone:
					return
				default:
				}
				status, err := messages()
				mu.Lock()
				sentB++
				if err == nil && status == 200 {
					answeredB++
				} else {
					t.Errorf("the other key's request: status %d, %v", status, err)
				}
				mu.Unlock()
			}
		})
	}

	f := dialRapidReset(t, addr, pool)
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"x"}]}`, openAIModel)
	streams := f.flood(addr, "/v1/chat/completions", clientKey, body, 2*time.Second, 100_000)
	f.mu.Lock()
	goAway := f.goAway
	f.mu.Unlock()
	if !goAway {
		// The connection that flooded is still answered: Go's HTTP/2
		// server drops the reset streams whose handler had not started
		// yet, and answers a request that is not reset; the flooding key,
		// past its budget of abandoned requests, is refused before
		// routing (docs/limits.md "Abandoned requests").
		if status, err := f.ask(addr, "/v1/chat/completions", clientKey, body); err != nil || status != "429" {
			t.Errorf("a request on the flooding connection after the flood: status %q, %v; want 429 (the key's abandoned requests)", status, err)
		}
	}
	f.close()
	close(floodDone)
	wg.Wait()

	// The node still serves, on a new connection, for both keys.
	if status, err := messages(); err != nil || status != 200 {
		t.Errorf("after the flood the other key got %d, %v", status, err)
	} else {
		mu.Lock()
		sentB++
		answeredB++
		mu.Unlock()
	}
	s.shutdown() // every attempt ends and the outbox is flushed
	elapsed := time.Since(start)

	var (
		forB                      int
		cancelled, reached, other int
	)
	for _, ev := range s.allOutboxEvents(t) {
		switch {
		case ev.KeyID == "k-limited":
			forB++
		case ev.SendState == usageevent.SendDefinitelyNotSent && ev.FailureStage == usageevent.StageClientCancelled:
			cancelled++
		case ev.SendState != usageevent.SendDefinitelyNotSent:
			reached++
		default:
			other++
		}
	}
	atProvider := 0
	for _, r := range s.prov.Requests() {
		if r.Protocol == fakeprovider.OpenAI {
			atProvider++
		}
	}
	if answeredB != sentB || forB != answeredB {
		t.Errorf("the other key: %d of %d requests answered, %d events; want every request answered and one event each", answeredB, sentB, forB)
	}
	if reached < atProvider {
		t.Errorf("flooding key: %d requests reached the provider, %d events of attempts that may have; want one each", atProvider, reached)
	}
	bound := usage.CancelBurst + int(elapsed.Seconds()+1)*usage.CancelRate
	seen := s.requestHooks("chat_completions")
	notSent := 0
	for k, n := range seen {
		if strings.HasSuffix(k, " definitely_not_sent") {
			notSent += n
		}
	}
	if notSent <= bound {
		t.Fatalf("%d flood requests reached an attempt and were cancelled before sending, want more than the budget (%d) for the test to tell", notSent, bound)
	}
	if cancelled > bound || other != 0 {
		t.Errorf("flooding key: %d cancelled-before-sending events, %d others; want at most %d (its budget over %v), no others", cancelled, other, bound, elapsed)
	}
	linesCancelled, linesOther := 0, 0
	for l := range strings.Lines(s.logs.String()) {
		if !strings.Contains(l, `"msg":"request"`) || !strings.Contains(l, fmt.Sprintf(`"model":%q`, openAIModel)) {
			continue
		}
		if strings.Contains(l, `"send_state":"definitely_not_sent"`) && strings.Contains(l, `"stage":"client_cancelled"`) {
			linesCancelled++
		} else {
			linesOther++
		}
	}
	if linesCancelled > bound || linesOther > reached {
		t.Errorf("flooding key: %d request lines of attempts cancelled before sending (want at most %d), %d others (want at most one per attempt that may have reached the provider, %d)",
			linesCancelled, bound, linesOther, reached)
	}
	t.Logf("%d streams in %v (%s); %d reached the provider; events kept: %d cancelled, %d reached; request lines: %d cancelled, %d others; the other key: %d events for %d answers",
		streams, elapsed, f.summary(), atProvider, cancelled, reached, linesCancelled, linesOther, forB, answeredB)
	t.Logf("flood requests the gateway saw, by status and send state: %v", seen)
}

// rapidReset is a raw HTTP/2 client connection: it writes frames itself,
// so it can reset each stream right after sending it, as no well-behaved
// client does.
type rapidReset struct {
	conn *tls.Conn

	wmu    sync.Mutex // guards the fields up to mu, and fr's writes
	bw     *bufio.Writer
	fr     *http2.Framer
	enc    *hpack.Encoder // one per connection: HPACK's table is the connection's
	hbuf   bytes.Buffer   // enc's output
	nextID uint32         // the next stream's id

	mu          sync.Mutex
	window      int64      // the connection's send window (flow control); guarded by mu
	changed     *sync.Cond // on mu: window or readDone changed
	readDone    bool       // the reader has stopped; guarded by mu
	goAway      bool       // the server sent GOAWAY (with the three below); guarded by mu
	goAwayCode  http2.ErrCode
	goAwayLast  uint32
	goAwayDebug string
	statuses    map[string]int        // response statuses; guarded by mu
	resets      map[http2.ErrCode]int // RST_STREAM from the server, by code; guarded by mu
	awaited     uint32                // the stream ask waits for; guarded by mu
	pongs       uint64                // the last PING the server acknowledged; guarded by mu
	answer      chan string           // its status
	stopped     chan struct{}         // closed when the reader returns
}

func dialRapidReset(t *testing.T, addr string, pool *x509.CertPool) *rapidReset {
	t.Helper()
	f, err := tryRapidReset(addr, pool)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// tryRapidReset connects, or says why it could not.
func tryRapidReset(addr string, pool *x509.CertPool) (*rapidReset, error) {
	return tryRapidResetFrom(&net.Dialer{}, addr, pool)
}

// tryRapidResetFrom connects with d, or says why it could not.
func tryRapidResetFrom(d *net.Dialer, addr string, pool *x509.CertPool) (*rapidReset, error) {
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
	if err != nil {
		return nil, err
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		conn.Close()
		return nil, fmt.Errorf("ALPN = %q, want h2", p)
	}
	f := &rapidReset{conn: conn, bw: bufio.NewWriterSize(conn, 64<<10), nextID: 1, window: 65535,
		statuses: map[string]int{}, resets: map[http2.ErrCode]int{}, answer: make(chan string, 1), stopped: make(chan struct{})}
	f.changed = sync.NewCond(&f.mu)
	f.enc = hpack.NewEncoder(&f.hbuf)
	f.fr = http2.NewFramer(f.bw, conn)
	f.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_, err = f.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = f.fr.WriteSettings()
	}
	if err == nil {
		err = f.bw.Flush()
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	go f.read()
	return f, nil
}

// write runs fn on the framer and flushes.
func (f *rapidReset) write(fn func(*http2.Framer) error) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if err := fn(f.fr); err != nil {
		return err
	}
	return f.bw.Flush()
}

// read answers the server's SETTINGS and PINGs, keeps the connection's
// send window, and notes what the server says, until the connection ends.
func (f *rapidReset) read() {
	defer close(f.stopped)
	var err error
	for {
		var fr http2.Frame
		if fr, err = f.fr.ReadFrame(); err != nil {
			break
		}
		switch fr := fr.(type) {
		case *http2.SettingsFrame:
			if !fr.IsAck() {
				err = f.write(func(w *http2.Framer) error { return w.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !fr.IsAck() {
				err = f.write(func(w *http2.Framer) error { return w.WritePing(true, fr.Data) })
				break
			}
			f.mu.Lock()
			f.pongs = max(f.pongs, binary.BigEndian.Uint64(fr.Data[:]))
			f.changed.Broadcast()
			f.mu.Unlock()
		case *http2.WindowUpdateFrame:
			if fr.StreamID == 0 {
				f.mu.Lock()
				f.window += int64(fr.Increment)
				f.changed.Broadcast()
				f.mu.Unlock()
			}
		case *http2.MetaHeadersFrame:
			f.mu.Lock()
			f.statuses[fr.PseudoValue("status")]++
			if fr.StreamID == f.awaited {
				f.answer <- fr.PseudoValue("status")
				f.awaited = 0 // one answer: trailers would find answer full
			}
			f.mu.Unlock()
		case *http2.DataFrame:
			if n := uint32(len(fr.Data())); n > 0 {
				err = f.write(func(w *http2.Framer) error { return w.WriteWindowUpdate(0, n) })
			}
		case *http2.RSTStreamFrame:
			f.mu.Lock()
			f.resets[fr.ErrCode]++
			f.mu.Unlock()
		case *http2.GoAwayFrame:
			f.mu.Lock()
			f.goAway, f.goAwayCode, f.goAwayLast, f.goAwayDebug = true, fr.ErrCode, fr.LastStreamID, string(fr.DebugData())
			f.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	f.mu.Lock()
	f.readDone = true
	f.changed.Broadcast()
	f.mu.Unlock()
}

// send writes a request on a new stream (HEADERS, DATA with END_STREAM)
// and, when reset, RST_STREAM CANCEL right behind it, without flushing.
// It returns the stream's id. f.wmu must be held.
func (f *rapidReset) sendLocked(authority, path, key, body string, reset bool) (uint32, error) {
	id := f.nextID
	f.nextID += 2
	f.hbuf.Reset()
	for _, h := range [][2]string{
		{":method", "POST"}, {":scheme", "https"}, {":authority", authority}, {":path", path},
		{"authorization", "Bearer " + key}, {"content-type", "application/json"},
		{"content-length", fmt.Sprint(len(body))},
	} {
		_ = f.enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1], Sensitive: h[0] == "authorization"})
	}
	err := f.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: f.hbuf.Bytes(), EndHeaders: true})
	if err == nil {
		err = f.fr.WriteData(id, true, []byte(body))
	}
	if err == nil && reset {
		err = f.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	return id, err
}

// spend takes n bytes of the connection's send window, waiting for the
// server's WINDOW_UPDATE if needed; false when the connection ended.
func (f *rapidReset) spend(n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.window < int64(n) && !f.readDone {
		f.changed.Wait()
	}
	f.window -= int64(n)
	return !f.readDone
}

// flood sends requests, each reset at once, for d or until limit streams
// or the connection ends, and returns how many it sent.
//
// It is paced by PINGs: the server handles a connection's frames in
// order, so the acknowledgement of a PING sent after stream n says the
// server has taken in every stream up to n. The flood runs at most two
// PINGs (2×pingEvery streams) ahead of that. Unpaced, the client writes
// streams many times faster than the node takes them in (the kernel's
// socket buffers hold them), and the node goes on working through them
// long after the flood ended; paced, the node works at its own full
// rate throughout and catches up within moments of the last stream.
func (f *rapidReset) flood(authority, path, key, body string, d time.Duration, limit int) int {
	const pingEvery = 128
	deadline := time.Now().Add(d)
	n := 0
	var pings uint64
	for n < limit && time.Now().Before(deadline) && f.spend(len(body)) {
		f.wmu.Lock()
		_, err := f.sendLocked(authority, path, key, body, true)
		if err == nil && n%pingEvery == pingEvery-1 {
			pings++
			var data [8]byte
			binary.BigEndian.PutUint64(data[:], pings)
			if err = f.fr.WritePing(false, data); err == nil {
				err = f.bw.Flush()
			}
		}
		f.wmu.Unlock()
		if err != nil {
			break // the server closed the connection
		}
		n++
		f.mu.Lock()
		for pings > f.pongs+2 && !f.readDone {
			f.changed.Wait()
		}
		f.mu.Unlock()
	}
	_ = f.write(func(*http2.Framer) error { return nil })
	return n
}

// ask sends one request on a new stream, not reset, and returns the
// status of the answer.
func (f *rapidReset) ask(authority, path, key, body string) (string, error) {
	if !f.spend(len(body)) {
		return "", errors.New("the connection ended")
	}
	f.wmu.Lock()
	f.mu.Lock() // the reader must know the id before the answer can come
	id, err := f.sendLocked(authority, path, key, body, false)
	f.awaited = id
	f.mu.Unlock()
	if err == nil {
		err = f.bw.Flush()
	}
	f.wmu.Unlock()
	if err != nil {
		return "", err
	}
	guard := time.NewTimer(20 * time.Second) // against a hang, not a synchronisation
	defer guard.Stop()
	select {
	case status := <-f.answer:
		return status, nil
	case <-f.stopped:
		return "", errors.New("the connection ended")
	case <-guard.C:
		return "", errors.New("no answer within 20s")
	}
}

// close closes the connection and waits for the reader.
func (f *rapidReset) close() {
	_ = f.conn.Close()
	<-f.stopped
}

// summary says what the server answered on the connection.
func (f *rapidReset) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := fmt.Sprintf("server statuses %v, resets %v", f.statuses, f.resets)
	if f.goAway {
		s += fmt.Sprintf(", GOAWAY %v after stream %d %q", f.goAwayCode, f.goAwayLast, f.goAwayDebug)
	} else {
		s += ", no GOAWAY"
	}
	return s
}

// allOutboxEvents is every event in the stopped node's outbox.
func (s *stack) allOutboxEvents(t *testing.T) []*usageevent.Event {
	t.Helper()
	st, err := outbox.Open(outbox.Options{Path: filepath.Join(s.dir, "outbox.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out []*usageevent.Event
	for after := uint64(0); ; {
		recs, err := st.Read(after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return out
		}
		for _, rec := range recs {
			ev, err := usageevent.Decode(rec.Payload)
			if err != nil {
				t.Fatalf("event %s: %v", rec.Payload, err)
			}
			out = append(out, ev)
			after = rec.Seq
		}
	}
}

// requestHooks counts the Request hooks of endpoint by status and send
// state.
func (s *stack) requestHooks(endpoint string) map[string]int {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	out := map[string]int{}
	for _, e := range s.events.events {
		if rest, ok := strings.CutPrefix(e, "request "+endpoint+" "); ok {
			out[rest]++
		}
	}
	return out
}
