package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// A realtime session (docs/api.md "Realtime sessions") is one attempt
// that lasts as long as the client keeps its WebSocket: the upgrade is
// authenticated, routed and admitted like a request, the node opens a
// WebSocket to the picked target through the egress proxy, and then
// relays frames both ways until either side closes, a bound is reached
// or the node drains. Each response the provider completes in it is
// recorded as one usage event (docs/usage-events.md "Realtime
// sessions").

// Defaults of RealtimeOptions.
const (
	DefaultRealtimeFrameBytes = 16 << 20
	DefaultRealtimeIdle       = 5 * time.Minute
	DefaultRealtimeTotal      = 60 * time.Minute
)

// RealtimeOptions bounds realtime sessions (docs/api.md "Realtime
// sessions"); a zero field takes its default.
type RealtimeOptions struct {
	// FrameBytes bounds one message either way (a client's larger message
	// closes the session with 1009, message too big).
	FrameBytes int64
	// Idle closes a session in which no frame went either way for this
	// long; Total bounds a session's life.
	Idle, Total time.Duration
}

func (o RealtimeOptions) withDefaults() RealtimeOptions {
	if o.FrameBytes <= 0 {
		o.FrameBytes = DefaultRealtimeFrameBytes
	}
	if o.Idle <= 0 {
		o.Idle = DefaultRealtimeIdle
	}
	if o.Total <= 0 {
		o.Total = DefaultRealtimeTotal
	}
	return o
}

// Realtime error events the node sends itself: the Realtime API's error
// types and the node's codes.
const (
	rtInvalidRequest = "invalid_request_error"
	rtServerError    = "server_error"
)

// realtimeSessions is the open sessions of a Handler, for the key
// re-check after an authorization snapshot swap (RecheckSessions).
type realtimeSessions struct {
	mu   sync.Mutex
	open map[*rtSession]struct{} // guarded by mu
}

func (rs *realtimeSessions) add(s *rtSession) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.open == nil {
		rs.open = make(map[*rtSession]struct{})
	}
	rs.open[s] = struct{}{}
}

func (rs *realtimeSessions) remove(s *rtSession) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.open, s)
}

// RecheckSessions judges the key of every open realtime session against
// the authorization snapshot in force now (the node calls it after each
// swap): a session whose key is no longer valid (revoked, disabled,
// expired) gets an error event and is closed with 1008 (docs/api.md
// "Realtime sessions": a revoked key's sessions end).
func (h *Handler) RecheckSessions() {
	h.realtime.mu.Lock()
	open := make([]*rtSession, 0, len(h.realtime.open))
	for s := range h.realtime.open {
		open = append(open, s)
	}
	h.realtime.mu.Unlock()
	for _, s := range open {
		if !s.keyValid() {
			s.revokeOnce.Do(func() { close(s.revoked) })
		}
	}
}

// rtSession is one relayed realtime session.
type rtSession struct {
	// immutable after the upgrade
	c          *call
	spec       *provider.RealtimeSpec
	o          RealtimeOptions
	a          *attempt // the session's attempt: target, lease, handshake
	auth       http.Header
	query      []string
	model      []byte // the target's provider model, a JSON string
	client     *websocket.Conn
	prov       *websocket.Conn
	revoked    chan struct{} // closed when the key no longer authenticates
	revokeOnce sync.Once
	ended      chan struct{} // a response ended (buffered, 1)
	// For an API whose first client frame names the model
	// (RealtimeSpec.SetupModel): the writer of the answers the node gives
	// once the upgrade is accepted, and that frame, relayed first. up
	// owns setup once the relay starts.
	answer    *closeAnswer
	setup     []byte
	setupType websocket.MessageType

	last atomic.Int64 // real time of the last frame either way, Unix ns

	mu  sync.Mutex
	seg segment // guarded by mu: what the next usage event covers
	n   int     // guarded by mu: usage events recorded
}

// segment is the part of a session the next usage event covers: since
// the previous event (or the upgrade), up to the end of a response or of
// the session.
type segment struct {
	start      time.Time
	reqBytes   int64
	respBytes  int64
	inResponse bool // the provider started a response it has not ended
}

// rtEnd is why a session ends.
type rtEnd struct {
	stage  stage
	code   websocket.StatusCode // to the client
	reason string
	event  []byte // the error event sent before the close, nil for none
	now    bool   // close at once (the client does not read)
}

// serveRealtime serves a realtime session's upgrade: every refusal
// before the upgrade is an HTTP answer in the API's shape; after it,
// error events and close codes.
func (h *Handler) serveRealtime(ctx context.Context, c *call, r *http.Request, spec *provider.Spec) {
	rs := spec.Realtime
	w := &c.sw
	c.req.Stream = true
	if !websocketUpgrade(r) {
		query := "?model=…"
		if rs.Model == nil {
			query = "" // the model is in the first message
		}
		c.fail(&apierr.Error{Status: http.StatusUpgradeRequired, Code: "websocket_required",
			Msg: "a realtime session is a WebSocket: send GET " + spec.Path + query + " with Upgrade: websocket"})
		return
	}
	// The key: the headers, or, for a browser that cannot set them, the
	// subprotocol OpenAI's browser SDK puts it in.
	auth := r.Header
	if k := rs.Key(r.Header); k != "" && r.Header.Get("Authorization") == "" {
		auth = r.Header.Clone()
		auth.Set("Authorization", "Bearer "+k)
	}
	ar := r.Clone(ctx)
	ar.Header = auth
	var ok bool
	if c.principal, ok = h.authenticate(w, ar, c.api, c.rid); !ok {
		return
	}
	if rs.Model != nil {
		model, berr := rs.Model(r.URL.Query())
		if berr != nil {
			c.fail(apierr.BadRequest(berr.Code, berr.Msg))
			return
		}
		c.req.Model = model
	}
	// A draining node opens no session; a session open when the drain
	// starts is told to go away like a socket (GoingAway).
	drain := &socket{h: h, away: make(chan struct{})}
	if !h.sockets.add(drain) {
		c.fail(apierr.Unavailable("the node is shutting down", time.Second))
		return
	}
	defer h.sockets.remove(drain)

	var query []string // the API's key query parameter, judged again later
	if c.api.QueryKey != "" {
		query = r.URL.Query()[c.api.QueryKey]
	}
	s := &rtSession{c: c, spec: rs, o: h.o.Realtime.withDefaults(), auth: auth, query: query,
		revoked: make(chan struct{}), ended: make(chan struct{}, 1)}
	if rs.SetupModel != nil {
		// docs/api.md "Gemini Live": the model is in the first frame, so
		// the upgrade is accepted first and what follows is refused with
		// close frames.
		if !s.accept(w, r) {
			return
		}
		if h.limit != nil {
			h.limit.release() // an open session holds no request slot (docs/api.md "Connection limit")
			defer h.limit.hold()
		}
		if !s.readSetup(ctx) {
			return
		}
	}
	pool, m, ok := c.realtimePool()
	if !ok {
		s.refused()
		return
	}
	if sub := c.principal.Limit; sub != nil {
		if sub.Reserves() {
			c.fail(errSessionUnbounded())
			return
		}
		// docs/limits.md "Realtime sessions": the session is one request
		// and holds one of the key's concurrent slots while it is open.
		c.limited, c.admitted = true, h.o.Now()
		tk, st, ok := sub.Admit(c.admitted)
		c.rl = rateLimits(&st)
		if !ok {
			c.refuseLimited(&st)
			s.refused()
			return
		}
		c.ticket = tk
		defer tk.Release()
	}
	if !s.dial(ctx, pool, m.Affinity) {
		s.refused()
		return
	}
	a := s.a
	if s.client == nil {
		if !s.accept(w, r) {
			// Accept answered the client (400, 426); nothing was relayed.
			_ = s.prov.CloseNow()
			a.stage, a.status = stageClientCancelled, w.status
			s.close(ctx, a.stage)
			return
		}
		if h.limit != nil {
			h.limit.release() // an open session holds no request slot (docs/api.md "Connection limit")
			defer h.limit.hold()
		}
	}
	a.status = http.StatusSwitchingProtocols
	s.prov.SetReadLimit(s.o.FrameBytes)
	h.realtime.add(s)
	defer h.realtime.remove(s)
	s.relay(ctx, drain.away)
}

// accept accepts the client's upgrade. A browser's WebSocket needs one of
// the subprotocols it offered back; the one carrying its key is never
// chosen (RealtimeSpec). On failure Accept has answered the client.
func (s *rtSession) accept(w http.ResponseWriter, r *http.Request) bool {
	client, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols: s.spec.Subprotocols, InsecureSkipVerify: true, CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		return false
	}
	s.client = client
	client.SetReadLimit(s.o.FrameBytes)
	return true
}

// readSetup reads the session's first client frame, which names the
// model (RealtimeSpec.SetupModel), within the idle bound. From here the
// node's refusals are close frames: the call's answers go to s.answer.
func (s *rtSession) readSetup(ctx context.Context) bool {
	c := s.c
	s.answer = &closeAnswer{sw: &c.sw}
	c.w = s.answer
	rctx, cancel := context.WithTimeout(ctx, s.o.Idle)
	defer cancel()
	typ, frame, err := s.client.Read(rctx)
	switch {
	case err == nil:
	case rctx.Err() != nil && ctx.Err() == nil:
		_ = s.client.Close(websocket.StatusCode(s.spec.Close(0, "session_idle")),
			closeReason(fmt.Sprintf("no setup message within %s", s.o.Idle)))
		return false
	default:
		_ = s.client.CloseNow() // the client left, or its frame was over the bound (closed with 1009)
		return false
	}
	s.touch()
	if typ != websocket.MessageText && !s.spec.Binary {
		c.fail(apierr.BadRequest("invalid_event", "messages must be text frames (JSON)"))
		s.refused()
		return false
	}
	model, berr := s.spec.SetupModel(frame)
	if berr != nil {
		c.fail(apierr.BadRequest(berr.Code, berr.Msg))
		s.refused()
		return false
	}
	c.req.Model = model
	s.setup, s.setupType = frame, typ
	return true
}

// refused ends a session the node accepted and then refused (its setup
// frame, routing, admission, the provider's handshake) with the close
// frame that says the error the node answered (RealtimeSpec.Close), as
// the API closes its own sessions. A session not accepted yet was
// answered over HTTP.
func (s *rtSession) refused() {
	if s.client == nil {
		return
	}
	e := s.answer.err
	if e == nil { // cancelled: nothing to say
		_ = s.client.CloseNow()
		return
	}
	_ = s.client.Close(websocket.StatusCode(s.spec.Close(e.Status, e.Code)), closeReason(e.Msg))
}

// closeAnswer is the call's writer once a session's upgrade was accepted
// before routing: it keeps the error for refused and notes the status and
// code for the request's metric and refusal log, as an HTTP answer would.
type closeAnswer struct {
	sw  *statusWriter
	h   http.Header
	err *apierr.Error
}

func (a *closeAnswer) Header() http.Header {
	if a.h == nil {
		a.h = make(http.Header)
	}
	return a.h
}

// NoteError implements apierr.Noter.
func (a *closeAnswer) NoteError(e *apierr.Error) { a.err, a.sw.code = e, e.Code }

func (a *closeAnswer) WriteHeader(status int)      { a.sw.status = status }
func (a *closeAnswer) Write(b []byte) (int, error) { return len(b), nil }

// providerClose is the close code and reason a provider ended a session
// with, for an API that says its errors with close codes
// (RealtimeSpec.Close): the client gets them as the provider sent them
// (docs/api.md "Gemini Live"). A connection that broke without a close
// frame, or a code that may not be sent, is 1011.
func providerClose(err error) (websocket.StatusCode, string) {
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		return websocket.StatusInternalError, "the provider connection failed"
	}
	switch c := ce.Code; {
	case c == 1004, c == websocket.StatusNoStatusRcvd, c == websocket.StatusAbnormalClosure, c == websocket.StatusTLSHandshake,
		c < websocket.StatusNormalClosure, c > 4999, c >= 1016 && c < 3000: // reserved, or never on the wire (RFC 6455 7.4)
		return websocket.StatusInternalError, closeReason(ce.Reason)
	}
	return ce.Code, ce.Reason
}

// closeReason fits msg in a close frame's reason (123 bytes), cut at a
// character boundary.
func closeReason(msg string) string {
	const maxReason = 123
	if len(msg) <= maxReason {
		return msg
	}
	cut := maxReason
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// realtimePool resolves the session's model to the pool of targets that
// serve realtime sessions, answering the refusal itself, as route does
// for a request.
func (c *call) realtimePool() ([]*routes.Target, *routes.Model, bool) {
	shown := withoutKey(c.req.Model, c.r)
	if !c.principal.Allows(c.req.Model) {
		c.fail(apierr.Forbidden(fmt.Sprintf("this API key may not use model %q", shown)))
		return nil, nil, false
	}
	table := c.h.o.Routes.Load() // pinned for the session's routing
	if table == nil {
		c.fail(apierr.Unavailable("routes are not loaded yet", time.Second))
		return nil, nil, false
	}
	m, ok := table.Model(c.req.Model)
	if !ok {
		c.fail(apierr.NotFound("model_not_found", fmt.Sprintf("model %q does not exist", shown)))
		return nil, nil, false
	}
	if m.Pattern {
		c.pattern, c.star = m.Name, m.Star(c.req.Model)
	}
	pool := m.Pools[c.spec.Endpoint]
	if len(pool) == 0 {
		c.fail(apierr.BadRequest("endpoint_not_served", fmt.Sprintf("model %q has no backend that serves %s", shown, c.spec.Route())))
		return nil, nil, false
	}
	return pool, m, true
}

// dial picks a target and opens the provider's WebSocket, re-picking
// after a failed handshake: nothing of the client's has been sent yet
// (docs/failures.md "Send state": a session's first client frame is the
// point of no return). Each failed handshake is an attempt with its own
// usage event. It answers the client itself when every pick failed.
func (s *rtSession) dial(ctx context.Context, pool []*routes.Target, affinity bool) bool {
	c := s.c
	var (
		tried []*routes.Target
		last  *attempt
	)
	for n := 1; n <= c.h.o.MaxAttempts; n++ {
		l, placement, ok := c.pick(pool, tried, affinity)
		if !ok {
			break
		}
		if last != nil {
			c.finish(ctx, last) // re-picked: it wrote nothing to the client
			last = nil
		}
		tried = append(tried, l.Target)
		a := &attempt{n: n, target: l.Target, lease: l, started: c.h.o.Now(), model: l.Target.ProviderModel, placement: placement}
		if s.handshake(ctx, a) {
			s.a = a
			s.seg.start = c.h.o.Now()
			return true
		}
		if ctx.Err() != nil {
			a.stage = c.cancelledStage()
			c.finish(ctx, a)
			return false
		}
		last = a
	}
	shown := withoutKey(c.req.Model, c.r)
	if last == nil {
		wait := balance.RetryAfter(pool, c.req.Need, 0, c.h.o.Now())
		a := attempt{state: provider.NotSent, stage: stageSelect}
		c.failAttempt(&a, apierr.Unavailable(fmt.Sprintf("no target for model %q can take traffic now", shown), wait))
		c.log(ctx, &a)
		return false
	}
	switch {
	case last.stage == stageTimeout:
		c.failAttempt(last, apierr.GatewayTimeout(fmt.Sprintf("the provider of model %q did not open the realtime session within the time limit", shown), false))
	case last.providerStatus != 0:
		c.failAttempt(last, apierr.BadGateway("upstream_refused", fmt.Sprintf("the provider refused the realtime session with status %d", last.providerStatus), false))
	default:
		c.failAttempt(last, apierr.BadGateway("upstream_unreachable", fmt.Sprintf("could not reach a provider for model %q", shown), false))
	}
	c.finish(ctx, last)
	return false
}

// handshake opens the provider's WebSocket for a, within the first-byte
// limit. On failure it sets a's send state and stage.
func (s *rtSession) handshake(ctx context.Context, a *attempt) bool {
	c := s.c
	t := a.target
	res, err := t.Resolve(c.star, c.spec.Endpoint)
	if err != nil || res.URL == nil {
		if err == nil {
			err = errors.New("backend has no URL for the endpoint")
		}
		a.state, a.stage, a.err = provider.NotSent, stageInternal, err
		return false
	}
	a.model, s.model = res.Model, res.JSON
	if s.spec.Named {
		s.model = res.NamedJSON
	}
	u := *res.URL // the backend's, shared
	if s.spec.Path != nil {
		u.Path, u.RawPath = s.spec.Path(u.Path), ""
	}
	u.RawQuery = s.spec.Query(res.Model)

	cred := t.Backend.Credential.Reveal()
	header := s.spec.Header(c.r.Header, cred)
	if au := t.Backend.Auth; au != credential.AuthDefault {
		for _, h := range credential.CredentialHeaders {
			header.Del(h)
		}
		header.Set(au.Header(cred))
	}
	dctx, cancel := context.WithTimeout(ctx, c.h.o.FirstByte)
	defer cancel()
	a.trace.GotConn = a.gotConnHook
	dctx = httptrace.WithClientTrace(dctx, &a.trace)
	conn, resp, err := websocket.Dial(dctx, u.String(), &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: c.h.o.Transport}, HTTPHeader: header,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err == nil || (resp != nil && resp.StatusCode != 0) {
		a.ttfb = c.h.o.Now().Sub(a.started) // a handshake answer came back
	}
	if err == nil {
		s.prov = conn
		a.state, a.providerStatus = provider.ResponseReceived, resp.StatusCode
		if c.api.Headroom != nil {
			a.headroom = c.api.Headroom(resp.Header, c.h.o.Now())
		}
		return true
	}
	a.err = err
	var ns *egress.NotSentError
	switch {
	case resp != nil && resp.StatusCode != 0:
		a.state, a.providerStatus, a.stage = provider.ResponseReceived, resp.StatusCode, stageProviderStatus
		if resp.StatusCode == http.StatusUnauthorized {
			a.stage = stageProviderAuth
		}
		a.retryAfter = c.api.RetryAfter(resp.Header, c.h.o.Now())
	case errors.As(err, &ns) || !a.gotConn.Load():
		a.state, a.stage = provider.NotSent, stageConnect
		if ns != nil {
			a.egressFault = ns.EgressFault()
		}
	default:
		a.state, a.stage = provider.PossiblySent, stageSend
	}
	if dctx.Err() != nil && ctx.Err() == nil {
		a.stage = stageTimeout
	}
	return false
}

// keyValid reports whether the session's key still authenticates.
func (s *rtSession) keyValid() bool {
	_, err := s.c.h.o.Auth.Authenticate(s.auth, s.query, s.c.h.o.Now())
	return err == nil
}

// touch notes a frame, for the idle bound.
func (s *rtSession) touch() { s.last.Store(time.Now().UnixNano()) }

// relay runs the session: a goroutine each way, and this one watching
// the bounds, the drain and the key, until one of them ends it.
func (s *rtSession) relay(ctx context.Context, away <-chan struct{}) {
	s.touch()
	ends := make(chan rtEnd, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // owned: ends when either connection is closed, below
		defer wg.Done()
		ends <- s.up(ctx)
	}()
	go func() { // owned: as up
		defer wg.Done()
		ends <- s.down(ctx)
	}()

	idle := time.NewTimer(s.o.Idle)
	defer idle.Stop()
	total := time.NewTimer(s.o.Total)
	defer total.Stop()
	var end rtEnd
	leaving := false
	goAway := func() rtEnd {
		return s.fail(stageShutdown, websocket.StatusGoingAway, "the node is shutting down",
			rtServerError, "node_shutting_down", "the node is shutting down; open a new session", nil)
	}
loop:
	for {
		select {
		case end = <-ends:
			break loop
		case <-idle.C:
			if left := s.o.Idle - time.Since(time.Unix(0, s.last.Load())); left > 0 {
				idle.Reset(left)
				continue
			}
			end = s.fail(stageTimeout, websocket.StatusNormalClosure, "idle timeout",
				rtInvalidRequest, "session_idle", fmt.Sprintf("no event either way for %s: the session is closed", s.o.Idle), nil)
			break loop
		case <-total.C:
			end = s.fail(stageStreamTotal, websocket.StatusNormalClosure, "session limit reached",
				rtInvalidRequest, "session_expired", fmt.Sprintf("the session reached its limit of %s", s.o.Total), nil)
			break loop
		case <-s.revoked:
			end = s.fail(stageClientCancelled, websocket.StatusPolicyViolation, "API key no longer valid",
				rtInvalidRequest, "invalid_api_key", "the session's API key is no longer valid", nil)
			break loop
		case <-away:
			// docs/operations.md "Drain": a session between responses
			// goes at once; one in a response when that response ends.
			away = nil
			if e, ok := s.endedBy(ends); ok {
				end = e // it ended before the drain reached it
				break loop
			}
			if !s.responding() {
				end = goAway()
				break loop
			}
			leaving = true
		case <-s.ended:
			if leaving && !s.responding() {
				end = goAway()
				break loop
			}
		case <-ctx.Done():
			end = goAway() // the end of the drain's grace: cut
			if e, ok := s.endedBy(ends); ok {
				end = e
			}
			break loop
		}
	}
	if end.event != nil && !end.now {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = s.client.Write(wctx, websocket.MessageText, end.event)
		cancel()
	}
	if end.now {
		_ = s.client.CloseNow()
	} else {
		_ = s.client.Close(end.code, end.reason)
	}
	_ = s.prov.Close(websocket.StatusNormalClosure, "")
	_ = s.client.CloseNow()
	_ = s.prov.CloseNow()
	wg.Wait()
	// A stalled client's write timeout closes its connection, which also
	// fails the read the other way: client_stalled says more than what
	// that read reports.
	for range len(ends) {
		if e := <-ends; e.stage == stageClientStalled {
			end.stage = e.stage
		}
	}
	s.close(ctx, end.stage)
}

// endedBy returns an end either side has already reported, if any.
func (s *rtSession) endedBy(ends <-chan rtEnd) (rtEnd, bool) {
	select {
	case e := <-ends:
		return e, true
	default:
		return rtEnd{}, false
	}
}

// responding reports whether a response is under way.
func (s *rtSession) responding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seg.inResponse
}

// up relays the client's frames to the provider, the setup frame read
// before routing first.
func (s *rtSession) up(ctx context.Context) rtEnd {
	rctx := context.WithoutCancel(ctx) // a cancelled read closes without a close frame; relay closes
	typ, data := s.setupType, s.setup
	s.setup = nil
	for {
		if data == nil {
			var err error
			if typ, data, err = s.client.Read(rctx); err != nil {
				return s.clientGone()
			}
			s.touch()
		}
		if end, ok := s.upFrame(ctx, rctx, typ, data); !ok {
			return end
		}
		data = nil
	}
}

// upFrame relays one client frame, or refuses it; false when that ends
// the session. rctx is ctx without its cancellation, for the write.
func (s *rtSession) upFrame(ctx, rctx context.Context, typ websocket.MessageType, data []byte) (rtEnd, bool) {
	c := s.c
	if typ != websocket.MessageText && !s.spec.Binary {
		return s.refuse(ctx, "invalid_event", "events must be text frames (JSON)", nil)
	}
	out, ev, berr := s.spec.ClientFrame(data, c.req.Model, s.model)
	if berr != nil {
		return s.refuse(ctx, berr.Code, berr.Msg, ev.ID)
	}
	if ev.Kind == provider.ClientResponseCreate && !s.keyValid() {
		// docs/api.md "Realtime sessions": the key is judged again
		// before every response it asks for.
		return s.fail(stageClientCancelled, websocket.StatusPolicyViolation, "API key no longer valid",
			rtInvalidRequest, "invalid_api_key", "the session's API key is no longer valid", ev.ID), false
	}
	s.mu.Lock()
	s.seg.reqBytes += int64(len(out))
	s.mu.Unlock()
	// The first frame relayed is the point of no return: from here
	// the session is never re-picked (it never is after the upgrade).
	wctx, cancel := context.WithTimeout(rctx, c.h.o.StreamIdle)
	err := s.prov.Write(wctx, typ, out)
	cancel()
	if err != nil {
		return s.fail(stageStream, websocket.StatusInternalError, "the provider connection failed",
			rtServerError, "upstream_failed", "the provider connection failed", nil), false
	}
	return rtEnd{}, true
}

// fail is the end of a session over an error the node found itself: the
// API's error event and the node's close code, or, for an API that says
// its errors with close codes (RealtimeSpec.Close), that code and the
// message as the reason.
func (s *rtSession) fail(st stage, code websocket.StatusCode, reason, typ, errCode, msg string, id []byte) rtEnd {
	e := rtEnd{stage: st, code: code, reason: reason, event: s.spec.ErrorEvent(typ, errCode, msg, id)}
	if s.spec.Close != nil {
		e.code, e.reason = websocket.StatusCode(s.spec.Close(0, errCode)), closeReason(msg)
	}
	return e
}

// clientGone is the end of a session whose client closed or broke it:
// client_cancelled when it cut a response short, else a session that
// ended well.
func (s *rtSession) clientGone() rtEnd {
	st := stageNone
	if s.responding() {
		st = stageClientCancelled
	}
	return rtEnd{stage: st, code: websocket.StatusNormalClosure, now: true}
}

// refuse tells the client of a frame the node does not relay: an error
// event, and the session goes on; or, for an API that says errors with
// close codes (RealtimeSpec.Close), the end of the session, as the
// provider ends one over a message it refuses.
func (s *rtSession) refuse(ctx context.Context, code, msg string, id []byte) (rtEnd, bool) {
	if s.spec.Close != nil {
		end := s.clientGone()
		end.now, end.code, end.reason = false, websocket.StatusCode(s.spec.Close(http.StatusBadRequest, code)), closeReason(msg)
		return end, false
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.c.h.o.StreamIdle)
	defer cancel()
	_ = s.client.Write(wctx, websocket.MessageText, s.spec.ErrorEvent(rtInvalidRequest, code, msg, id))
	return rtEnd{}, true
}

// down relays the provider's frames to the client, recording each
// response as it ends.
func (s *rtSession) down(ctx context.Context) rtEnd {
	c := s.c
	rctx := context.WithoutCancel(ctx)
	for {
		typ, data, err := s.prov.Read(rctx)
		if err != nil {
			st := stageStream
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure && !s.responding() {
				st = stageNone
			}
			end := rtEnd{stage: st, code: websocket.StatusNormalClosure, reason: "the provider closed the session"}
			if s.spec.Close != nil {
				end.code, end.reason = providerClose(err)
			}
			return end
		}
		s.touch()
		var pe provider.ProviderEvent
		if typ == websocket.MessageText || s.spec.Binary {
			pe = s.spec.ProviderFrame(data)
		}
		s.mu.Lock()
		s.seg.respBytes += int64(len(data))
		if pe.Kind == provider.ProviderResponseCreated {
			s.seg.inResponse = true
		}
		s.mu.Unlock()
		if pe.Kind == provider.ProviderResponseDone {
			// Recorded before the client sees it: the client's next
			// frame belongs to the next response's event.
			s.response(ctx, &pe)
		}
		// docs/api.md "Realtime sessions": a client that reads nothing
		// for stream_idle is cut, and the provider side with it.
		wctx, cancel := context.WithTimeout(rctx, c.h.o.StreamIdle)
		err = s.client.Write(wctx, typ, data)
		stalled := wctx.Err() != nil
		cancel()
		if err != nil {
			if stalled {
				return rtEnd{stage: stageClientStalled, now: true}
			}
			return rtEnd{stage: stageClientCancelled, now: true}
		}
		if pe.Kind == provider.ProviderResponseDone {
			select {
			case s.ended <- struct{}{}:
			default:
			}
		}
	}
}

// response records a response's usage event and debits its tokens from
// the key's tokens per minute (docs/limits.md).
func (s *rtSession) response(ctx context.Context, pe *provider.ProviderEvent) {
	st := stageNone
	if pe.Failed {
		st = stageProviderStreamError
	}
	s.record(ctx, st, pe)
}

// record writes the usage event of the segment that ends now and starts
// the next.
func (s *rtSession) record(ctx context.Context, st stage, pe *provider.ProviderEvent) {
	c, a := s.c, s.a
	now := c.h.o.Now()
	s.mu.Lock()
	seg := s.seg
	s.seg = segment{start: now}
	first := s.n == 0
	s.n++
	s.mu.Unlock()
	ev := &attempt{n: a.n, target: a.target, model: a.model, placement: a.placement, started: seg.start,
		state: a.state, status: a.status, stage: st, reqBytes: seg.reqBytes, respBytes: seg.respBytes}
	if first {
		ev.ttfb = a.ttfb // the handshake's, once
	}
	if pe != nil && pe.HasUsage {
		ev.usage, ev.rawUsage, ev.hasUsage = pe.Usage, pe.Raw, true
	}
	if c.limited {
		c.ticket.Debit(now, ev.usage.InputTokens+ev.usage.OutputTokens)
		if cost, _, _ := ev.cost(); cost > 0 {
			c.ticket.Charge(now, cost) // docs/limits.md "Budgets": per response, as it ends
		}
	}
	c.log(ctx, ev)
	if c.h.recording() {
		c.h.emit(ctx, c.event(ev), provider.Outcome{})
	}
}

// close accounts for the end of the session: the usage event of what
// was left since the last response (a response cut short is recorded
// with the stage that ended it), and the target's slot given back with
// the session's outcome.
func (s *rtSession) close(ctx context.Context, st stage) {
	c, a := s.c, s.a
	s.mu.Lock()
	seg := s.seg
	recorded := s.n
	s.mu.Unlock()
	// Nothing since the last response's event, and that event said it
	// all: the end cut nothing (docs/usage-events.md "Realtime sessions").
	if recorded == 0 || seg.reqBytes > 0 || seg.respBytes > 0 || seg.inResponse {
		s.record(ctx, st, nil)
	}
	res := upstream.Result{Outcome: upstream.TransportFailure, Headroom: a.headroom}
	switch {
	case st == stageNone:
		res.Outcome, res.TTFB = upstream.Success, a.ttfb
	case st.cancelled(), st == stageTimeout, st == stageStreamTotal:
		// The client's doing or the node's bounds: nothing about the
		// backend.
		res.Outcome = upstream.Cancelled
	case st == stageProviderStreamError:
		res.Outcome = upstream.ProviderError
	}
	a.lease.Done(res)
	c.sendState = a.state
	c.h.o.Observer.ObserveAttempt(a.target.Backend.ID, a.target.Backend.PlatformName, res.Outcome, res.TTFB)
}
