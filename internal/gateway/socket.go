package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/provider"
)

// An endpoint with a provider.SocketSpec is also served over WebSocket
// (docs/api.md "Responses over WebSocket"): the upgrade is authenticated
// as any request, then every client frame that asks for an answer runs
// the request path of one HTTP stream request (route, pick, attempts,
// usage events), and the stream's events go back as frames. Only the
// writer differs: a socketSink in place of the client's ResponseWriter.

// errClientGone is the cause a frame's context ends with when its socket
// broke or the client closed it.
var errClientGone = errors.New("the client closed the socket")

// defaultSocketIdle bounds an idle socket when Options.SocketIdle is 0.
const defaultSocketIdle = 2 * time.Minute

// DefaultSocketLifetime bounds a socket's life when Options.SocketLifetime
// is 0: the limit OpenAI's own WebSocket mode sets on a connection.
const DefaultSocketLifetime = 60 * time.Minute

// sockets tracks the open sockets of a Handler, for the drain: hijacked
// connections are invisible to http.Server.Shutdown.
type sockets struct {
	mu    sync.Mutex
	open  map[*socket]struct{} // guarded by mu
	going bool                 // guarded by mu: GoingAway was called
	wg    sync.WaitGroup
}

func (ss *sockets) add(s *socket) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.going {
		return false
	}
	if ss.open == nil {
		ss.open = make(map[*socket]struct{})
	}
	ss.open[s] = struct{}{}
	ss.wg.Add(1)
	return true
}

func (ss *sockets) remove(s *socket) {
	ss.mu.Lock()
	delete(ss.open, s)
	ss.mu.Unlock()
	ss.wg.Done()
}

// GoingAway starts the drain of the WebSocket connections (the node calls
// it when it stops accepting): no new socket is accepted, an idle socket
// is closed at once with status 1001 (going away), a busy one when its
// answer is complete.
func (h *Handler) GoingAway() {
	ss := &h.sockets
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.going = true
	for s := range ss.open {
		s.awayOnce.Do(func() { close(s.away) })
	}
}

// WaitSockets waits until every socket is closed, or ctx is done (its
// error is then returned). Sockets still open then end with their
// request context: cancelling the base context with ErrShutdown ends
// their answers with the in-band error and closes them.
func (h *Handler) WaitSockets(ctx context.Context) error {
	done := make(chan struct{})
	go func() { // owned: ends when the last socket ends, which ctx's cut forces
		h.sockets.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// UseLimit makes the WebSocket connections count against l only while an
// answer runs: the upgrade request holds l's slot until the upgrade, an
// idle socket none (docs/api.md "Connection limit").
func (h *Handler) UseLimit(l *ConcurrencyLimit) { h.limit = l }

// socket is one accepted WebSocket connection.
type socket struct {
	// immutable
	h       *Handler
	conn    *websocket.Conn
	nc      net.Conn        // the connection conn runs on: frame writes' deadlines are set here (socketSink.frame)
	wctx    context.Context // what frame writes run under: never done (socketSink.frame)
	upgrade *http.Request
	header  http.Header // what each frame's request carries (SocketSpec.Header)
	spec    *provider.Spec
	api     *provider.API
	query   []string  // the upgrade's key query values (provider.API.QueryKey), judged again with every frame
	opened  time.Time // Options.Now at the upgrade, for the socket's lifetime

	away     chan struct{} // closed by GoingAway
	awayOnce sync.Once

	// Used by the answers, one at a time, on run's goroutine.
	req  *http.Request // every frame's request: POST with the frame's headers, under the answers' context (run)
	sink socketSink    // the running answer's writer, reused by the next
	last []byte        // what the last completed answer left (SocketSpec.Remember)
}

// clientFrame is one frame read from the client, or the read's error.
type clientFrame struct {
	typ  websocket.MessageType
	data []byte
	err  error
}

// serveSocket authenticates a WebSocket upgrade like any request (401
// before the upgrade), accepts it and serves its frames.
func (h *Handler) serveSocket(ctx context.Context, c *call, r *http.Request, spec *provider.Spec, api *provider.API, rid string) {
	w := &c.sw
	if _, ok := h.authenticate(w, r, api, rid); !ok {
		return
	}
	s := &socket{
		h: h, upgrade: r, header: spec.Socket.Header(r.Header), spec: spec, api: api,
		query: keyQuery(r, api), opened: h.o.Now(), away: make(chan struct{}),
	}
	if !h.sockets.add(s) {
		apierr.Unavailable("the node is shutting down", time.Second).Write(w, api, rid)
		return
	}
	defer h.sockets.remove(s)
	// No browser origin check: a browser cannot put the API key in an
	// upgrade request's headers, and the node has no cookie or other
	// ambient credential a cross-site page could ride on (docs/api.md
	// "Responses over WebSocket"). Compression is not offered: it costs
	// the node CPU on every frame and the client's deflate state memory.
	hw := &hijackWriter{ResponseWriter: w}
	conn, err := websocket.Accept(hw, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept answered the client (400, 426)
	}
	s.conn, s.nc, s.wctx = conn, hw.conn, context.WithoutCancel(ctx)
	// A frame is a request body: the same limit. A larger frame closes
	// the socket with 1009 (message too big).
	conn.SetReadLimit(h.o.BodyLimit)
	if h.limit != nil {
		h.limit.release() // an idle socket holds no request slot
		defer h.limit.hold()
	}
	s.run(ctx)
}

// run reads frames and serves them one at a time until the client
// closes, the socket idles beyond the limit, or the node drains.
//
// An answer runs on run's own goroutine, the connection's, as an HTTP
// request's does: a goroutine of its own per answer would start on a
// small stack and grow it every time. While it runs, run reads no frame:
// the reader ends the answer itself when the client leaves, by ending
// the answers' context, which every answer runs under.
func (s *socket) run(ctx context.Context) {
	actx, leave := context.WithCancelCause(ctx)
	defer leave(nil)
	s.req = s.upgrade.WithContext(actx)
	s.req.Method, s.req.Header, s.req.Body = s.spec.Method, s.header, http.NoBody
	frames := make(chan clientFrame)
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() { // owned: ends when the connection is closed, below
		defer rwg.Done()
		// Reading is not bound to ctx: a cancelled read context closes the
		// connection without a close frame; run closes it itself.
		rctx := context.WithoutCancel(ctx)
		for {
			typ, data, err := s.conn.Read(rctx)
			if err != nil {
				leave(errClientGone) // the running answer ends now, and any after it at once
			}
			select {
			case frames <- clientFrame{typ, data, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	code, reason := websocket.StatusNormalClosure, ""
	defer func() {
		close(stop)
		_ = s.conn.Close(code, reason)
		rwg.Wait()
	}()

	idleFor := s.h.o.SocketIdle
	if idleFor <= 0 {
		idleFor = defaultSocketIdle
	}
	idle := time.NewTimer(idleFor)
	defer idle.Stop()
	// serve answers a text frame, or a frame that asks for no answer. It
	// reports false when the socket must close (code and reason set)
	// instead, also once the answer is done when the node drains.
	serve := func(f clientFrame) bool {
		if f.typ != websocket.MessageText {
			s.refuse(apierr.BadRequest("invalid_frame", "frames must be text (JSON)"))
			return true
		}
		body, skip, berr := s.spec.Socket.Frame(f.data)
		switch {
		case skip:
			return true
		case berr != nil:
			s.refuse(apierr.BadRequest(berr.Code, berr.Msg))
			return true
		}
		p, ok := s.admit(&code, &reason)
		if !ok {
			return false
		}
		idle.Stop()
		// One answer at a time, in order, as the provider's WebSocket
		// mode runs them: a frame sent before the last answer was
		// accounted for (its terminal event can reach the client first)
		// waits in the reader, and reading waits with it.
		s.serveFrame(body, p)
		select {
		case <-ctx.Done():
			// Cut at the end of the drain: the answer ended with the
			// in-band error (its context is a child of ctx).
		case <-s.away:
			// The drain began while the answer ran: closed now that it is
			// complete.
		default:
			idle.Reset(idleFor)
			return true
		}
		code, reason = websocket.StatusGoingAway, "the node is shutting down"
		return false
	}
	for {
		select {
		case f := <-frames:
			if f.err != nil {
				code = websocket.CloseStatus(f.err)
				if code == -1 {
					code = websocket.StatusAbnormalClosure
				}
				return
			}
			if !serve(f) {
				return
			}
		case <-idle.C:
			code, reason = websocket.StatusNormalClosure, "idle timeout"
			return
		case <-s.away:
			code, reason = websocket.StatusGoingAway, "the node is shutting down"
			return
		case <-ctx.Done():
			code, reason = websocket.StatusGoingAway, "the node is shutting down"
			return
		}
	}
}

// admit judges a frame that asks for an answer against the socket's
// lifetime and against the authorization snapshot in force now, as an HTTP
// request with the upgrade's key would be (docs/api.md "Responses over
// WebSocket"): the key present, enabled and not expired, and, through the
// principal returned, the model allowlist and the limits of that
// snapshot. A socket past its lifetime gets the lifetime's error event and
// is closed with 1000; a key that no longer authenticates gets the 401 as
// an error event and the socket is closed with 1008 (policy violation).
// Either way admit sets the close code and reason and reports false.
func (s *socket) admit(code *websocket.StatusCode, reason *string) (*authz.Principal, bool) {
	h := s.h
	now := h.o.Now()
	life := h.o.SocketLifetime
	if life <= 0 {
		life = DefaultSocketLifetime
	}
	if now.Sub(s.opened) >= life {
		sk := &socketSink{s: s, header: http.Header{}}
		sk.header.Set("X-Request-Id", newRequestID())
		_ = sk.frame(s.spec.Socket.LimitReached(sk.header))
		*code, *reason = websocket.StatusNormalClosure, "socket lifetime reached"
		return nil, false
	}
	p, err := h.o.Auth.Authenticate(s.upgrade.Header, s.query, now)
	if err != nil {
		s.refuse(unauthorized(err))
		*code, *reason = websocket.StatusPolicyViolation, "API key no longer valid"
		return nil, false
	}
	return p, true
}

// refuse sends the error event of a frame the node refuses by itself.
func (s *socket) refuse(e *apierr.Error) {
	sk := &socketSink{s: s, header: http.Header{}}
	sk.header.Set("X-Request-Id", newRequestID())
	e.Write(sk, s.api, sk.header.Get("X-Request-Id"))
	sk.end()
}

// serveFrame runs the request path for one frame's body for principal,
// with the socket's sink as the client's writer.
func (s *socket) serveFrame(body []byte, principal *authz.Principal) {
	h, spec := s.h, s.spec
	start := h.o.Now()
	c := &call{}
	sk := &s.sink
	sk.reset(s)
	defer sk.idle() // after end
	defer sk.end()
	c.sw.ResponseWriter = sk
	w := &c.sw
	rid := newRequestID()
	sk.header.Set("X-Request-Id", rid)
	if h.limit != nil {
		if !h.limit.acquire() {
			h.limit.refusal.Write(w, s.api, rid)
			return
		}
		defer h.limit.release()
	}
	if spec.Socket.Continue != nil {
		body = spec.Socket.Continue(body, s.last)
	}
	s.last = nil
	if spec.Socket.Prepare != nil {
		if events, last, ok := spec.Socket.Prepare(body, rid); ok {
			// A warm-up: answered here, nothing sent to a provider, so
			// no attempt and no usage event (docs/api.md "Responses over
			// WebSocket").
			for _, ev := range events {
				if sk.frame(ev) != nil {
					return
				}
			}
			s.last = last
			h.o.Observer.ObserveRequest(spec.Endpoint, http.StatusOK, provider.NoAttempt, h.o.Now().Sub(start), true)
			return
		}
	}
	r := s.req
	r.ContentLength = int64(len(body))
	ctx := r.Context()
	c.h, c.w, c.r, c.spec, c.api, c.rid, c.start = h, w, r, spec, s.api, rid, start
	c.principal, c.body = principal, body
	if int64(len(body)) > h.o.BodyLimit {
		apierr.TooLarge("the request exceeds the body limit").Write(w, s.api, rid)
	} else {
		var berr *provider.BodyError
		if c.req, berr = spec.Inspect(body, ""); berr == nil {
			c.route(ctx)
		} else {
			apierr.BadRequest(berr.Code, berr.Msg).Write(w, s.api, rid)
		}
	}
	h.o.Observer.ObserveRequest(spec.Endpoint, w.status, c.sendState, h.o.Now().Sub(start), true)
	h.noteRefusal(w, r, rid, c.req.Model)
	if spec.Socket.Remember != nil && sk.status == http.StatusOK && sk.streamed {
		s.last = spec.Socket.Remember(body, sk.lastData)
	}
}

// socketSink is the client's writer for one frame: what the request path
// writes as an HTTP answer goes out as frames. A stream's events each
// become one text frame, their data exactly; an error answer, written
// whole, becomes the endpoint's error event when the frame's request
// ends (end); so does a whole successful answer, as SocketSpec.Whole.
type socketSink struct {
	s      *socket
	header http.Header
	status int
	held   []byte // an answer written whole, sent by end
	err    error  // the first failed frame write

	written  bool   // Write was called: status and headers are final
	events   bool   // the answer is a 200 event stream, sent as frames (set by the first Write)
	streamed bool   // an event went out
	lastData []byte // a copy of the data of the last event sent (the event's bytes are the relay's read buffer)

	// deadline bounds the frame writes while the relay's write guard
	// holds one (SetWriteDeadline, set on the connection); zero: each
	// write gets stream_idle.
	deadline time.Time
}

// reset readies the socket's sink for the next answer on s, with the
// header map of the answer before it.
func (sk *socketSink) reset(s *socket) {
	header := sk.header
	if header == nil {
		header = make(http.Header, 8)
	}
	clear(header)
	*sk = socketSink{s: s, header: header}
}

// idle, when the answer is done, lets go of what an idle socket should
// not hold: the answer's bytes (a whole answer, the last event's copy).
func (sk *socketSink) idle() {
	sk.held, sk.lastData = nil, nil
}

func (sk *socketSink) Header() http.Header { return sk.header }

func (sk *socketSink) WriteHeader(code int) {
	if sk.status == 0 {
		sk.status = code
	}
}

// Write takes an answer's bytes: whole events of a 200 stream (the relay
// writes one event, keepalive or in-band error per call), or part of a
// whole answer.
func (sk *socketSink) Write(b []byte) (int, error) {
	if sk.status == 0 {
		sk.status = http.StatusOK
	}
	if sk.err != nil {
		return 0, sk.err
	}
	if !sk.written {
		// The status and headers are the answer's from its first write
		// on, as over HTTP: judged once, not per event.
		sk.written = true
		sk.events = sk.status == http.StatusOK && isEventStream(sk.header.Get("Content-Type"))
	}
	if !sk.events {
		sk.held = append(sk.held, b...)
		return len(b), nil
	}
	ss := sk.s.spec.Socket
	for typ, data := range eventData(b) {
		out := data
		if ss.StreamError != nil && streamError(typ, data) {
			// The stream's in-band error, the node's or the provider's, as
			// the socket's error event (docs/api.md "Responses over
			// WebSocket"): with the status a client acts on.
			out = ss.StreamError(data, sk.header)
		}
		if err := sk.frame(out); err != nil {
			return 0, err
		}
		sk.streamed, sk.lastData = true, append(sk.lastData[:0], data...)
	}
	return len(b), nil
}

// streamError reports whether an event is a stream's in-band error: its
// SSE event type, or, from a server that leaves that out, a data object
// whose first member says so. It looks at no more than a prefix: every
// event of a stream passes here.
func streamError(typ, data []byte) bool {
	if len(typ) > 0 {
		return string(typ) == "error"
	}
	return bytes.HasPrefix(data, []byte(`{"type":"error"`))
}

// FlushError is what http.ResponseController.Flush calls: every frame is
// already sent when Write returns.
func (sk *socketSink) FlushError() error { return sk.err }

// SetWriteDeadline is what http.ResponseController.SetWriteDeadline
// calls: the relay's write guard bounds each frame write as it bounds an
// HTTP stream's writes, so that a client that stops reading is told
// apart from one that left (client_stalled, docs/usage-events.md).
func (sk *socketSink) SetWriteDeadline(t time.Time) error {
	sk.deadline = t
	return sk.s.nc.SetWriteDeadline(t)
}

// frame sends one text frame. A client that reads nothing until the
// deadline (stream_idle) fails it, which ends the answer as a stalled
// client, and closes the connection: a frame cut short leaves nothing
// that could follow it.
//
// The deadline is the connection's, not a context's: coder/websocket
// bounds a write by its context with a timer and a context callback of
// its own per write, a dozen allocations per frame, where the
// connection's deadline moves at most once per stream_idle while the
// relay's write guard holds it. And the write is not bound to the
// frame's context: with coder/websocket a write whose context is done
// closes the connection at once, and the node must still send the error
// event of an answer it cuts at the end of a drain, then close with 1001
// (docs/operations.md "Drain"). A client that is gone fails the write by
// itself.
func (sk *socketSink) frame(data []byte) error {
	s := sk.s
	if sk.deadline.IsZero() && s.h.o.StreamIdle > 0 {
		// Outside the guard (an error event, a warm-up's answer): this
		// write alone gets stream_idle, in real time as a socket's
		// deadline is.
		_ = s.nc.SetWriteDeadline(time.Now().Add(s.h.o.StreamIdle))
		defer func() { _ = s.nc.SetWriteDeadline(time.Time{}) }()
	}
	if err := s.conn.Write(s.wctx, websocket.MessageText, data); err != nil {
		sk.err = err
		_ = s.conn.CloseNow()
		return err
	}
	return nil
}

// end sends what the answer left for the end: the error event of an
// error answer, or a whole answer as its terminal event.
func (sk *socketSink) end() {
	ss := sk.s.spec.Socket
	switch {
	case sk.err != nil || sk.streamed || sk.status == 0:
	case sk.status == http.StatusOK:
		_ = sk.frame(ss.Whole(sk.held))
	default:
		_ = sk.frame(ss.ErrorEvent(sk.status, sk.held, sk.header))
	}
}

// eventData yields the type and data of each event in b, a run of whole
// SSE events as the relay writes them (WHATWG: "data" lines joined with
// LF, one space after the colon dropped; comments and events without
// data yield nothing; the type is the last "event" line's, "" without
// one). Type and data point into b (data is a copy when it joins several
// lines): they are valid until b changes.
func eventData(b []byte) func(yield func(typ, data []byte) bool) {
	return func(yield func(typ, data []byte) bool) {
		var data, typ []byte
		has, joined := false, false // joined: data is a copy that joins lines
		for len(b) > 0 {
			line := b
			next := len(b)
			if i := bytes.IndexAny(b, "\r\n"); i >= 0 {
				line, next = b[:i], i+1
				if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
					next++
				}
			}
			b = b[next:]
			if len(line) == 0 {
				if has && !yield(typ, data) {
					return
				}
				data, typ, has, joined = nil, nil, false, false
				continue
			}
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				typ = value
				continue
			case "data":
			default:
				continue
			}
			switch {
			case !has: // one line: its bytes in b, not copied
				data, has = value, true
			case !joined:
				data = append(append(append(make([]byte, 0, len(data)+1+len(value)), data...), '\n'), value...)
				joined = true
			default:
				data = append(append(data, '\n'), value...)
			}
		}
		if has {
			yield(typ, data)
		}
	}
}

// hijackWriter is the writer websocket.Accept takes the connection from:
// it keeps the connection, whose write deadline bounds the frame writes.
type hijackWriter struct {
	http.ResponseWriter
	conn net.Conn
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	w.conn = c
	return c, rw, err
}

// websocketUpgrade reports whether r asks for a WebSocket (RFC 6455 §4.2.1).
func websocketUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && headerHasToken(r.Header, "Connection", "upgrade") &&
		headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
