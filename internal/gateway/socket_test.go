package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// wsEvent is what the socket tests read of a frame.
type wsEvent struct {
	Type    string            `json:"type"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Error   struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// holdingProvider is an OpenAI provider whose Responses streams send
// response.created and then nothing until the node cancels the request.
// started receives one value per stream that sent its first event.
func holdingProvider(t *testing.T, started chan<- struct{}) string {
	t.Helper()
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n")
		_ = http.NewResponseController(w).Flush()
		started <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(prov.Close)
	return prov.URL + "/v1"
}

// socketServer serves h with base as every request's base context.
func socketServer(t *testing.T, h *Handler, base context.Context) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/responses"
}

// dialWS opens a Responses WebSocket with key.
func dialWS(t *testing.T, url, key string) *websocket.Conn {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+key)
	c, _, err := websocket.Dial(t.Context(), url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// readWS reads one frame as an event. It gives up after 20 s, only when
// a test fails: a socket that should have closed then still waits.
func readWS(t *testing.T, c *websocket.Conn) (wsEvent, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, data, err := c.Read(ctx)
	if err != nil {
		return wsEvent{}, err
	}
	var ev wsEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("frame is not one JSON event (%v): %q", err, data)
	}
	ev.raw = string(data)
	return ev, nil
}

const wsCreate = `{"type":"response.create","model":"gpt-all","input":"hi"}`

// TestSocketDrainCut: at the end of the drain grace, every socket whose
// answer still runs gets the node_shutting_down error event (status 503,
// the socket's error shape) and then a
// close frame with 1001, and every cut attempt is recorded with failure
// stage shutdown. A write bound to the cut context used to close the
// connection before the event went out on most of the sockets, and a
// write that failed that way was recorded as client_cancelled.
func TestSocketDrainCut(t *testing.T) {
	const n = 50
	started := make(chan struct{}, n)
	rec := make(chanRecorder, n)
	h := newHandlerAt(t, Options{Recorders: []Recorder{rec}}, holdingProvider(t, started))
	base, cut := context.WithCancelCause(context.Background())
	defer cut(nil)
	url := socketServer(t, h, base)

	conns := make([]*websocket.Conn, n)
	for i := range conns {
		conns[i] = dialWS(t, url, "k")
		if err := conns[i].Write(t.Context(), websocket.MessageText, []byte(wsCreate)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range conns {
		<-started
		if ev, err := readWS(t, conns[i]); err != nil || ev.Type != "response.created" {
			t.Fatalf("socket %d: first frame %q, %v", i, ev.raw, err)
		}
	}
	// The drain as the node runs it: go away (busy sockets stay until
	// their answers end), then, at the end of the grace, the cut.
	h.GoingAway()
	cut(ErrShutdown)

	var wg sync.WaitGroup
	errs := make(chan string, 2*n)
	for i, c := range conns {
		wg.Go(func() {
			ev, err := readWS(t, c)
			if err != nil || ev.Type != "error" || ev.Status != http.StatusServiceUnavailable || ev.Error.Code != "node_shutting_down" {
				errs <- fmt.Sprintf("socket %d: frame after the cut %q, %v; want the node_shutting_down error event", i, ev.raw, err)
				return
			}
			if _, err := readWS(t, c); websocket.CloseStatus(err) != websocket.StatusGoingAway {
				errs <- fmt.Sprintf("socket %d: after the event: %v, want a close frame with 1001", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for e := range errs {
		if failed++; failed <= 5 {
			t.Error(e)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d sockets did not end as documented", failed, n)
	}
	for range n {
		if ev := <-rec; ev.FailureStage != usageevent.StageShutdown {
			t.Errorf("usage event stage %q, want %q", ev.FailureStage, usageevent.StageShutdown)
		}
	}
}

// TestSocketStalledClient: a socket whose client stops reading while the
// provider keeps streaming has its answer cut once a frame cannot go out
// within stream_idle, and the attempt is recorded client_stalled, as over
// HTTP, not client_cancelled. The stall takes real time (the socket's
// buffers fill); the test waits for the event, not for a duration.
func TestSocketStalledClient(t *testing.T) {
	event := strings.Repeat("x", 16<<10)
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for r.Context().Err() == nil {
			if _, err := fmt.Fprintf(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":%q}\n\n", event); err != nil || rc.Flush() != nil {
				return
			}
		}
	}))
	defer prov.Close()
	rec := make(chanRecorder, 4)
	h := newHandlerAt(t, Options{StreamIdle: 300 * time.Millisecond, Recorders: []Recorder{rec}}, prov.URL+"/v1")
	c := dialWS(t, socketServer(t, h, context.Background()), "k")
	if err := c.Write(t.Context(), websocket.MessageText, []byte(wsCreate)); err != nil {
		t.Fatal(err)
	}
	// Never read.
	select {
	case ev := <-rec:
		if ev.FailureStage != usageevent.StageClientStalled {
			t.Fatalf("usage event stage %q, want %q", ev.FailureStage, usageevent.StageClientStalled)
		}
	case <-time.After(20 * time.Second): // only when it fails
		t.Fatal("the answer still runs 20 s after its client stopped reading")
	}
}

// TestSocketClientLeaves: a client that closes its socket while an answer
// runs ends that answer and its provider request at once, recorded
// client_cancelled, not when the provider next sends or stream_idle
// passes.
func TestSocketClientLeaves(t *testing.T) {
	started := make(chan struct{}, 1)
	rec := make(chanRecorder, 1)
	h := newHandlerAt(t, Options{StreamIdle: time.Minute, Recorders: []Recorder{rec}}, holdingProvider(t, started))
	c := dialWS(t, socketServer(t, h, context.Background()), "k")
	if err := c.Write(t.Context(), websocket.MessageText, []byte(wsCreate)); err != nil {
		t.Fatal(err)
	}
	<-started
	if ev, err := readWS(t, c); err != nil || ev.Type != "response.created" {
		t.Fatalf("first frame %q, %v", ev.raw, err)
	}
	_ = c.CloseNow()
	select {
	case ev := <-rec:
		if ev.FailureStage != usageevent.StageClientCancelled {
			t.Fatalf("usage event stage %q, want %q", ev.FailureStage, usageevent.StageClientCancelled)
		}
	case <-time.After(20 * time.Second): // only when it fails
		t.Fatal("the answer still runs 20 s after its client left")
	}
}

// TestSocketDrainBusy: a socket whose answer runs when the node starts
// its drain gets that answer whole, then a close frame with 1001, and no
// answer to a frame sent after it; an idle socket is closed at once
// (TestSocketDrain in internal/app).
func TestSocketDrainBusy(t *testing.T) {
	gate := make(chan struct{})
	h := newHandlerAt(t, Options{}, gatedProvider(t, gate))
	c := dialWS(t, socketServer(t, h, context.Background()), "k")
	if err := c.Write(t.Context(), websocket.MessageText, []byte(wsCreate)); err != nil {
		t.Fatal(err)
	}
	if ev, err := readWS(t, c); err != nil || ev.Type != "response.created" {
		t.Fatalf("first frame %q, %v", ev.raw, err)
	}
	if err := c.Write(t.Context(), websocket.MessageText, []byte(wsCreate)); err != nil { // waits for the first answer
		t.Fatal(err)
	}
	h.GoingAway()
	close(gate)
	if ev, err := readWS(t, c); err != nil || ev.Type != "response.completed" {
		t.Fatalf("frame after the drain began %q, %v; want response.completed", ev.raw, err)
	}
	if _, err := readWS(t, c); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("after the answer: %v, want a close frame with 1001", err)
	}
}

// TestSocketAnswersApart: each answer on a socket is told only its own
// headers: an error event after an answer from the provider carries no
// header of that answer (the provider's request id, its rate-limit
// state), though the socket's writer is reused from one answer to the next.
func TestSocketAnswersApart(t *testing.T) {
	h, _ := newHandler(t, Options{})
	c := dialWS(t, socketServer(t, h, context.Background()), "k")
	first := wsAnswer(t, c, wsCreate)
	if got := lastOf(first); got != "response.completed 0 " {
		t.Fatalf("first answer: %q", got)
	}
	last := wsAnswer(t, c, `{"type":"response.create","model":"no-such-model","input":"hi"}`)
	ev := last[len(last)-1]
	if ev.Type != "error" || ev.Status != http.StatusNotFound {
		t.Fatalf("second answer: %s", ev.raw)
	}
	if _, ok := ev.Headers["x-request-id"]; !ok || len(ev.Headers) != 1 {
		t.Errorf("error event headers %v, want the request id alone", ev.Headers)
	}
}

// gatedProvider is an OpenAI provider whose Responses streams send
// response.created, wait for a value on gate (or the request's end), then
// complete.
func gatedProvider(t *testing.T, gate <-chan struct{}) string {
	t.Helper()
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n")
		_ = rc.Flush()
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1,\"total_tokens\":2}}}\n\n")
		_ = rc.Flush()
	}))
	t.Cleanup(prov.Close)
	return prov.URL + "/v1"
}

// openGate is a gate that every stream passes at once.
func openGate() chan struct{} {
	g := make(chan struct{})
	close(g)
	return g
}

// wsAnswer sends a frame and reads its events up to a terminal or error
// event.
func wsAnswer(t *testing.T, c *websocket.Conn, frame string) []wsEvent {
	t.Helper()
	if err := c.Write(t.Context(), websocket.MessageText, []byte(frame)); err != nil {
		t.Fatalf("write frame: %v", err)
	}
	var evs []wsEvent
	for {
		ev, err := readWS(t, c)
		if err != nil {
			t.Fatalf("read after %d events: %v", len(evs), err)
		}
		evs = append(evs, ev)
		switch ev.Type {
		case "response.completed", "response.failed", "response.incomplete", "error":
			return evs
		}
	}
}

// lastOf is what a test compares of an answer: its last event's type,
// status and error code.
func lastOf(evs []wsEvent) string {
	ev := evs[len(evs)-1]
	return fmt.Sprintf("%s %d %s", ev.Type, ev.Status, ev.Error.Code)
}

const socketKey = "sk-socket-test-key"

// authDoc is an authorization snapshot with the one key socketKey, edited
// by edit.
func authDoc(version uint64, edit func(k *authsnap.Key)) *authsnap.Snapshot {
	k := authsnap.Key{KeyID: "k_1", TenantID: "t_1", Digest: authsnap.Digest(socketKey)}
	if edit != nil {
		edit(&k)
	}
	doc := &authsnap.Snapshot{Schema: authsnap.Schema, Version: version, Keys: []authsnap.Key{k}}
	if k.KeyID == "" { // removed
		doc.Keys = []authsnap.Key{}
	}
	return doc
}

// swapAuth compiles doc, bound to l, into store.
func swapAuth(t *testing.T, store *authz.Store, l *limits.Limiter, doc *authsnap.Snapshot) {
	t.Helper()
	b := l.Bind()
	ix, err := authz.CompileLimited(doc, b)
	if err != nil {
		b.Abort()
		t.Fatal(err)
	}
	b.Done()
	store.Swap(ix)
}

// TestSocketFrameAuthorization: every response.create frame on an open
// socket is judged against the authorization snapshot in force when it
// arrives, as an HTTP request with the upgrade's key would be. A key
// removed, disabled or expired since the upgrade gets the 401 as an
// error event and the socket is closed with 1008; a key whose allowlist
// no longer holds the model gets the 403 and the socket stays open; a
// key whose limits changed is held to the new ones. The socket used to
// keep the principal of its upgrade and serve them all.
func TestSocketFrameAuthorization(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	expires := now.Add(time.Minute)
	tests := []struct {
		name   string
		after  func(k *authsnap.Key) // the key in the snapshot published between the frames
		expire bool                  // the clock passes the key's expires_at between the frames
		want   []string              // the second and third frames' last events
		close  websocket.StatusCode  // how the socket ends after them; -1: still open
	}{
		{name: "removed", after: func(k *authsnap.Key) { k.KeyID = "" }, want: []string{"error 401 invalid_api_key"}, close: websocket.StatusPolicyViolation},
		{name: "disabled", after: func(k *authsnap.Key) { k.Disabled = true }, want: []string{"error 401 invalid_api_key"}, close: websocket.StatusPolicyViolation},
		{name: "expired", after: func(k *authsnap.Key) { k.ExpiresAt = &expires }, expire: true, want: []string{"error 401 invalid_api_key"}, close: websocket.StatusPolicyViolation},
		{
			name: "narrowed", after: func(k *authsnap.Key) { k.Models = []string{"gpt"} },
			want: []string{"error 403 model_not_allowed", "error 403 model_not_allowed"}, close: -1,
		},
		{
			name: "limited", after: func(k *authsnap.Key) { k.Limits = authsnap.Limits{RequestsPerMinute: 1} },
			want: []string{"response.completed 0 ", "error 429 key_rate_limited"}, close: -1,
		},
		{name: "unchanged", want: []string{"response.completed 0 ", "response.completed 0 "}, close: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(now)
			l := limits.New(limits.Options{Clock: fc.Now})
			store := &authz.Store{}
			swapAuth(t, store, l, authDoc(1, nil))
			h := newHandlerAt(t, Options{Auth: store, Now: fc.Now}, gatedProvider(t, openGate()))
			c := dialWS(t, socketServer(t, h, context.Background()), socketKey)
			if got := lastOf(wsAnswer(t, c, wsCreate)); got != "response.completed 0 " {
				t.Fatalf("first frame: %q", got)
			}
			if tt.after != nil {
				swapAuth(t, store, l, authDoc(2, tt.after))
			}
			if tt.expire {
				fc.Advance(2 * time.Minute)
			}
			var got []string
			for range tt.want {
				got = append(got, lastOf(wsAnswer(t, c, wsCreate)))
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
			if tt.close == -1 {
				return
			}
			if _, err := readWS(t, c); websocket.CloseStatus(err) != tt.close {
				t.Errorf("after the refusal: %v, want a close frame with %d", err, tt.close)
			}
		})
	}
}

// TestSocketLifetime: a socket's life is bounded. An answer that runs
// when the lifetime passes is not cut; the next frame gets OpenAI's
// connection-limit error event (which Codex answers with a new socket)
// and the socket is closed with 1000. The clock is the handler's.
func TestSocketLifetime(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	gate := make(chan struct{}, 1)
	h := newHandlerAt(t, Options{Now: fc.Now, SocketLifetime: 10 * time.Minute}, gatedProvider(t, gate))
	c := dialWS(t, socketServer(t, h, context.Background()), "k")
	gate <- struct{}{} // the first answer completes at once (buffered)
	if got := lastOf(wsAnswer(t, c, wsCreate)); got != "response.completed 0 " {
		t.Fatalf("first frame: %q", got)
	}
	// The second answer is still running when the lifetime passes.
	if err := c.Write(t.Context(), websocket.MessageText, []byte(wsCreate)); err != nil {
		t.Fatal(err)
	}
	if ev, err := readWS(t, c); err != nil || ev.Type != "response.created" {
		t.Fatalf("second frame's first event %q, %v", ev.raw, err)
	}
	fc.Advance(10 * time.Minute)
	gate <- struct{}{}
	if ev, err := readWS(t, c); err != nil || ev.Type != "response.completed" {
		t.Fatalf("the answer that ran at the lifetime: %q, %v; want it completed", ev.raw, err)
	}
	if got := lastOf(wsAnswer(t, c, wsCreate)); got != "error 400 websocket_connection_limit_reached" {
		t.Errorf("frame after the lifetime: %q", got)
	}
	if _, err := readWS(t, c); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("after the lifetime: %v, want a close frame with 1000", err)
	}
}

// TestEventData: the events the relay writes, as the socket reads them
// into frames: one data line is the frame as it is, several are joined
// with LF; comments, other fields and events without data give no
// frame; the bytes read are left as they were.
func TestEventData(t *testing.T) {
	type ev struct{ Typ, Data string }
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"one line", "event: a\ndata: {\"x\":1}\n\n", []ev{{"a", `{"x":1}`}}},
		{"lines joined", "data: one\ndata:two\ndata:  three\n\ndata: next\n\n", []ev{{"", "one\ntwo\n three"}, {"", "next"}}},
		{"CRLF and CR", "event: a\r\ndata: x\r\ndata: y\r\n\r\nevent: b\rdata: z\r\r", []ev{{"a", "x\ny"}, {"b", "z"}}},
		{"comments and other fields", ": keepalive\n\nid: 7\nretry: 1\n\nevent: e\n\ndata: d\nid: 8\n\n", []ev{{"", "d"}}},
		{"no final blank line", "data: a\ndata: b", []ev{{"", "a\nb"}}},
		{"empty data line", "data\n\n", []ev{{"", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			var got []ev
			for typ, data := range eventData(in) {
				got = append(got, ev{string(typ), string(data)})
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("events (-got +want):\n%s", diff)
			}
			if string(in) != tt.in {
				t.Errorf("the input changed: %q", in)
			}
		})
	}
}

// TestSocketSinkAllocs: relaying a stream's events as frames allocates
// nothing per event, as an HTTP stream's writes do not: a frame is
// written under the connection's write deadline, not under a context
// with a deadline of its own (docs/performance.md "Hot-path benchmarks").
func TestSocketSinkAllocs(t *testing.T) {
	accepted := make(chan *socket, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hw := &hijackWriter{ResponseWriter: w}
		conn, err := websocket.Accept(hw, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		accepted <- &socket{conn: conn, nc: hw.conn, wctx: context.WithoutCancel(r.Context())}
	}))
	defer srv.Close()
	client, rd := rawUpgrade(t, srv.Listener.Addr().String(), "/")
	s := <-accepted
	defer s.conn.CloseNow()
	go func() { _, _ = io.Copy(io.Discard, rd) }() // owned: ends when the connection closes
	defer client.Close()

	h, _ := newHandler(t, Options{})
	spec, _ := catalog.ByPath("/v1/responses")
	s.h, s.spec = h, spec
	var sb strings.Builder
	for i := range 20 {
		fmt.Fprintf(&sb, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"delta\":\"word \"}\n\n", i)
	}
	stream := []byte(sb.String())
	sk := &socketSink{s: s, header: http.Header{"Content-Type": {"text/event-stream"}}}
	for _, deadline := range []time.Time{{}, time.Now().Add(time.Minute)} {
		if err := sk.SetWriteDeadline(deadline); err != nil {
			t.Fatal(err)
		}
		// AllocsPerRun counts every goroutine's allocations, the test
		// server's and the reader's among them; on a loaded machine they
		// can fall into one measurement. Theirs only add: the least of
		// three still counts one per Write if Write allocates.
		allocs := math.Inf(1)
		for range 3 {
			allocs = min(allocs, testing.AllocsPerRun(20, func() {
				if _, err := sk.Write(stream); err != nil {
					t.Fatal(err)
				}
			}))
		}
		if allocs != 0 {
			t.Errorf("deadline %v: %v allocations per 20 events, want 0", deadline, allocs)
		}
	}
}

// TestSocketSinkReuse: the socket's writer, reused from one answer to the
// next, starts each answer with an empty header map (the same map) and
// holds no bytes of an answer once it is done: an idle socket keeps
// neither a whole answer nor its last event's copy.
func TestSocketSinkReuse(t *testing.T) {
	s := &socket{}
	sk := &s.sink
	sk.reset(s)
	header := sk.header
	header.Set("X-Ratelimit-Remaining-Requests", "9")
	sk.status, sk.held, sk.lastData, sk.streamed = http.StatusOK, []byte(`{"whole":true}`), []byte(`{"type":"response.completed"}`), true
	sk.idle()
	if sk.held != nil || sk.lastData != nil {
		t.Errorf("an idle socket holds %q and %q", sk.held, sk.lastData)
	}
	sk.reset(s)
	if len(sk.header) != 0 || sk.status != 0 || sk.streamed {
		t.Errorf("the next answer starts with header %v, status %d, streamed %v", sk.header, sk.status, sk.streamed)
	}
	sk.header.Set("X-Request-Id", "b")
	if header.Get("X-Request-Id") != "b" {
		t.Error("the header map was not reused")
	}
}
