package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/protocol"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Timeout causes, told apart with context.Cause.
var (
	errFirstByteTimeout = errors.New("no first byte from the provider within the limit")
	errIdleTimeout      = errors.New("provider stream idle beyond the limit")
	errTotalTimeout     = errors.New("provider answer not complete within the limit")
)

// maxEventBytes bounds one SSE event read from a provider.
const maxEventBytes = 16 << 20

// attempt is the record of one provider attempt: logged, turned into a
// usage event (docs/usage-events.md), and fed back into the backend's hot state.
type attempt struct {
	n         int
	target    *routes.Target
	lease     balance.Lease // the target's in-flight slot, given back by finish
	started   time.Time
	state     protocol.SendState
	status    int    // HTTP status sent to the client, 0 if none
	stage     string // usageevent.Stage*; "" on success
	err       error
	ttfb      time.Duration
	committed bool

	// Hooks into the provider exchange, kept here so that they cost no
	// allocations of their own.
	counter countingReader        // counts respBytes
	gotConn atomic.Bool           // the transport had a connection for the request
	trace   httptrace.ClientTrace // sets gotConn

	placement balance.Placement // how the target was chosen (docs/routing.md "Affinity")

	egressFault    bool          // the proxy itself failed (not the backend's fault, docs/egress.md "Failures")
	providerStatus int           // the provider's HTTP status, 0 if none
	retryAfter     time.Duration // the provider's retry advice on a 429
	quota          bool          // an answer (429, 402, 400) that says the quota or balance is gone

	reqBytes  int64
	respBytes int64
	usage     usageevent.Usage
	rawUsage  json.RawMessage
	hasUsage  bool
	outcome   usage.Outcome // read only when traced
}

// call is one client request on its way through the attempt loop. Every
// endpoint runs the same loop; spec says what differs.
type call struct {
	h         *Handler
	w         http.ResponseWriter
	r         *http.Request
	spec      *protocol.Spec
	shape     protocol.Protocol // the endpoint's protocol: its error shape
	rid       string
	principal *authz.Principal
	body      []byte
	req       protocol.Request
	session   balance.Key // 0 = none, or affinity off for the model
	start     time.Time
	sendState protocol.SendState // the last attempt's, for the request metric

	sw statusWriter // w, allocated with the call
}

// serveEndpoint serves the request for spec with c, whose writer c.sw
// is set up.
func (h *Handler) serveEndpoint(c *call, r *http.Request, spec *protocol.Spec, rid string) {
	w := &c.sw
	c.h, c.w, c.r, c.spec, c.shape, c.rid, c.start = h, w, r, spec, spec.Endpoint.Protocol(), rid, h.o.Now()
	if r.Method != spec.Method {
		apierr.MethodNotAllowed("use "+spec.Method).Write(w, c.shape, rid)
		return
	}
	var ok bool
	if c.principal, ok = h.authenticate(w, r, c.shape, rid); !ok {
		return
	}
	var aerr *apierr.Error
	if c.body, aerr = h.readBody(w, r); aerr == nil {
		var berr *protocol.BodyError
		if c.req, berr = spec.Inspect(c.body); berr == nil {
			c.route()
			return
		}
		aerr = apierr.BadRequest(berr.Code, berr.Msg)
	}
	aerr.Write(w, c.shape, rid)
}

func (c *call) fail(e *apierr.Error) { e.Write(c.w, c.shape, c.rid) }

// failAttempt writes e as the answer to a and records the status written
// there, the one place an error answer sets it: the log line and the
// usage event then say what the client got.
func (c *call) failAttempt(a *attempt, e *apierr.Error) {
	a.status = e.Status
	c.fail(e)
}

// route resolves the model to a pool and runs the attempt loop.
func (c *call) route() {
	req := c.req
	if !c.principal.Allows(req.Model) {
		c.fail(apierr.Forbidden(fmt.Sprintf("this API key may not use model %q", req.Model)))
		return
	}
	table := c.h.o.Routes.Load() // pinned for the whole request (docs/snapshots.md)
	if table == nil {
		c.fail(apierr.Unavailable("routes are not loaded yet", time.Second))
		return
	}
	m, ok := table.Model(req.Model)
	if !ok {
		c.fail(apierr.NotFound("model_not_found", fmt.Sprintf("model %q does not exist", req.Model)))
		return
	}
	pool := m.Pools[c.spec.Endpoint]
	switch {
	case len(pool) > 0:
	case !m.Serves(c.shape):
		c.fail(apierr.BadRequest("protocol_mismatch", fmt.Sprintf("model %q is not served on %s; no conversion between protocols", req.Model, c.spec.Path)))
		return
	default:
		// Not every provider of a protocol serves every endpoint: backends
		// declare theirs, and nothing is sent to one that does not.
		c.fail(apierr.BadRequest("endpoint_not_served", fmt.Sprintf("model %q has no backend that serves %s", req.Model, c.spec.Path)))
		return
	}
	if !offers(pool, req.Need) {
		c.fail(apierr.BadRequest("capability_not_offered", fmt.Sprintf("model %q offers no target with %s", req.Model, req.Need)))
		return
	}

	var tried []*routes.Target
	placement := balance.Balanced
	if m.Affinity {
		c.session = c.sessionKey()
	}
	for n := 1; n <= c.h.o.MaxAttempts; n++ {
		var (
			l  balance.Lease
			ok bool
		)
		l, placement, ok = c.pick(pool, tried, m.Affinity)
		if !ok {
			break
		}
		tried = append(tried, l.Target)
		a := c.attempt(n, l)
		a.placement = placement
		c.finish(a)
		if a.state != protocol.NotSent || a.status != 0 || c.r.Context().Err() != nil {
			return
		}
	}
	if len(tried) == 0 {
		// docs/api.md "Status codes": 503 with Retry-After = the earliest moment a target can
		// take traffic again, and x-should-retry: true.
		wait := balance.RetryAfter(pool, req.Need, c.h.o.Now())
		a := attempt{state: protocol.NotSent, stage: "select", placement: placement}
		c.failAttempt(&a, apierr.Unavailable(fmt.Sprintf("no target for model %q can take traffic now", req.Model), wait))
		c.log(&a)
		return
	}
	// Every attempt failed before sending anything: safe to retry.
	c.fail(apierr.BadGateway("upstream_unreachable", fmt.Sprintf("could not reach a provider for model %q", req.Model), false))
}

// sessionKey returns the hash of the request's session key within its
// client key's namespace, 0 when it names no session (docs/routing.md
// "Affinity"). The key itself is kept nowhere.
func (c *call) sessionKey() balance.Key {
	body, header := protocol.Session(&c.req, c.r.Header, c.spec.SessionHeaders)
	if len(body) > 0 {
		return balance.SessionKey(c.principal.KeyID, body)
	}
	return balance.SessionKey(c.principal.KeyID, header)
}

// pick asks the picker for a target: by the session's hash order when the
// model has affinity on and the picker does it, else by balancing.
func (c *call) pick(pool, tried []*routes.Target, affinity bool) (balance.Lease, balance.Placement, bool) {
	if sp, ok := c.h.o.Picker.(SessionPicker); ok && affinity {
		return sp.PickKey(pool, c.req.Need, tried, c.session)
	}
	l, ok := c.h.o.Picker.Pick(pool, c.req.Need, tried)
	return l, balance.Balanced, ok
}

func offers(pool []*routes.Target, need routes.Caps) bool {
	for _, t := range pool {
		if t.Caps.Has(need) {
			return true
		}
	}
	return false
}

// attempt sends the body to l's target and relays the answer; the
// returned attempt holds l until finish. One with state NotSent and
// status 0 has written nothing and may be re-picked.
func (c *call) attempt(n int, l balance.Lease) *attempt {
	h := c.h
	t := l.Target
	a := &attempt{n: n, target: t, lease: l, started: h.o.Now()}

	out, _, err := jsonedit.Replace(c.body, "model", t.ProviderModelJSON)
	injected := false
	if err == nil && c.req.Stream && c.spec.InjectUsage != nil && h.o.InjectStreamUsage && t.Backend.InjectUsage {
		// docs/usage-events.md: ask for stream usage the client did not ask for, and
		// hide the usage-only chunk it then did not expect.
		out, injected, err = c.spec.InjectUsage(out)
	}
	if err != nil { // inspect accepted the body, so this is a bug
		a.state, a.stage, a.err = protocol.NotSent, usageevent.StageInternal, err
		c.failAttempt(a, &apierr.Error{Status: 500, Code: "internal_error", Msg: "could not rewrite the request"})
		return a
	}
	a.reqBytes = int64(len(out))

	ctx, cancel := context.WithCancelCause(c.r.Context())
	defer cancel(nil)
	a.trace.GotConn = a.gotConnHook
	ctx = httptrace.WithClientTrace(ctx, &a.trace)
	u := t.Backend.Upstream[c.spec.Endpoint]
	if u == nil { // the pool holds only targets that serve the endpoint: a bug
		a.state, a.stage, a.err = protocol.NotSent, usageevent.StageInternal, errors.New("backend has no URL for the endpoint")
		c.failAttempt(a, apierr.BadGateway("bad_backend_url", "backend URL is not usable", false))
		return a
	}
	up := upstreamRequest(ctx, c.spec.Method, u, out, c.spec.Header(c.r.Header, t.Backend.Credential.Reveal()))

	// One timer per attempt (docs/api.md "Timeouts"). Until the response
	// headers it holds first_byte (or non_stream_total if that is nearer);
	// for a non-stream answer it is then re-armed for what is left of
	// non_stream_total, and the body may take that long. A stream's first
	// event stops it (relayStream).
	limit, cause := h.o.FirstByte, errFirstByteTimeout
	if !c.req.Stream && h.o.NonStreamTotal < limit {
		limit, cause = h.o.NonStreamTotal, errTotalTimeout
	}
	sent := time.Now()        // real time, as the timers'
	var wholeLeft atomic.Bool // set only while the timer is stopped
	firstByte := time.AfterFunc(limit, func() {
		if wholeLeft.Load() {
			cancel(errTotalTimeout)
			return
		}
		cancel(cause)
	})
	defer firstByte.Stop()

	resp, err := h.o.Transport.RoundTrip(up)
	if err != nil {
		a.err = err
		var ns *egress.NotSentError
		if errors.As(err, &ns) || !a.gotConn.Load() {
			// Nothing left the node: the caller may re-pick (docs/failures.md).
			a.state, a.stage = protocol.NotSent, usageevent.StageConnect
			if ns != nil {
				// Counted and logged by the dialer's OnFailure, every
				// proxy tried (internal/app egresslog.go), not here.
				a.egressFault = ns.EgressFault()
			}
			if c.r.Context().Err() != nil {
				a.stage = c.cancelledStage()
			}
			return a
		}
		a.state, a.stage = protocol.PossiblySent, usageevent.StageSend
		c.failBeforeCommit(a, ctx)
		return a
	}
	defer resp.Body.Close()
	a.state, a.providerStatus = protocol.ResponseReceived, resp.StatusCode
	a.ttfb = h.o.Now().Sub(a.started)
	a.counter = countingReader{r: resp.Body, n: &a.respBytes}
	var body io.Reader = &a.counter

	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		// The gateway's credential was refused; the client's key is fine
		// (docs/api.md "Status codes"): never show the client a 401/403 for this.
		a.stage = usageevent.StageProviderAuth
		c.failAttempt(a, apierr.BadGateway("upstream_auth_failed", "the provider rejected the gateway's credential for this backend", false))
		return a
	}
	if body, err = decodedBody(resp, body); err != nil {
		// An encoding the node cannot read: relaying it would hand the
		// client bytes labelled JSON that it cannot parse.
		a.err, a.stage = err, usageevent.StageResponseBody
		// The provider ran the request: a retry would run it again.
		c.failAttempt(a, apierr.BadGateway("upstream_bad_encoding", "the provider answered with a content encoding the node did not ask for and cannot decode", true))
		return a
	}
	if resp.StatusCode == http.StatusOK && c.spec.Stream != nil && isEventStream(resp.Header.Get("Content-Type")) {
		if !c.req.Stream {
			// A stream answer to a non-stream request: relayStream stops
			// the first-byte timer at the first event, and the whole
			// exchange stays bounded by non_stream_total.
			total := time.AfterFunc(h.o.NonStreamTotal-time.Since(sent), func() { cancel(errTotalTimeout) })
			defer total.Stop()
		}
		c.relayStream(a, resp, body, firstByte, cancel, ctx, injected)
		return a
	}
	if !c.req.Stream && firstByte.Stop() {
		// The headers are in: from here only non_stream_total bounds the
		// answer. A Stop that lost the race leaves the cancel to fire.
		wholeLeft.Store(true)
		firstByte.Reset(h.o.NonStreamTotal - time.Since(sent))
	}
	c.relayWhole(a, resp, body, firstByte, ctx)
	return a
}

// upstreamRequest is what http.NewRequestWithContext(ctx, method,
// u.String(), bytes.NewReader(body)) returns with header as its Header,
// without parsing the URL again, and without GetBody: the transport must
// never replay a POST (docs/architecture.md "Go traps").
func upstreamRequest(ctx context.Context, method string, u *url.URL, body []byte, header http.Header) *http.Request {
	uc := *u // u is the backend's, shared
	rb := &bytesBody{}
	rb.Reset(body)
	r := http.Request{
		Method: method, URL: &uc, Host: uc.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: rb, ContentLength: int64(len(body)),
	}
	return r.WithContext(ctx)
}

// bytesBody is a request body in memory.
type bytesBody struct{ bytes.Reader }

func (*bytesBody) Close() error { return nil }

func (a *attempt) gotConnHook(httptrace.GotConnInfo) { a.gotConn.Store(true) }

// readProviderBody reads a non-stream answer up to maxProviderBody+1 bytes,
// sizing the buffer from Content-Length when the provider sent one (not
// io.ReadAll's doubling from 512 bytes).
func readProviderBody(body io.Reader, contentLength int64) ([]byte, error) {
	size := int64(4096)
	if contentLength >= 0 && contentLength <= maxProviderBody {
		size = contentLength + 1 // +1: EOF is seen without growing
	}
	return readAll(body, int(size), maxProviderBody+1)
}

// readAll is io.ReadAll starting from a buffer of capacity size, reading at
// most limit bytes (io.LimitReader without its allocation).
func readAll(r io.Reader, size, limit int) ([]byte, error) {
	buf := make([]byte, 0, min(size, limit))
	for {
		if len(buf) == limit {
			return buf, nil
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow only when full
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// isEventStream reports whether a Content-Type value names
// text/event-stream, parameters ignored. It is mime.ParseMediaType's answer
// for every well-formed value without its map allocation; a value with
// malformed parameters, which ParseMediaType rejects, still counts as a
// stream here when its media type is text/event-stream.
func isEventStream(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// countingReader counts the provider bytes read (ResponseBytes).
type countingReader struct {
	r io.Reader
	n *int64
}

func (cr *countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	*cr.n += int64(n)
	return n, err
}

// failBeforeCommit answers a possibly-sent failure before any byte went to
// the client: 504 for timeouts, 502 otherwise, never retryable.
func (c *call) failBeforeCommit(a *attempt, ctx context.Context) {
	if c.cutByNode() {
		// The connection stays open a moment after the cut: say why.
		a.stage, a.err = usageevent.StageShutdown, ErrShutdown
		c.failAttempt(a, apierr.BadGateway("node_shutting_down", "the node is shutting down; the request may have reached the provider", true))
		return
	}
	if c.r.Context().Err() != nil {
		// Nothing is written: 499 is the log's word for it (the usage
		// event carries no status).
		a.stage, a.status = usageevent.StageClientCancelled, 499
		return
	}
	switch cause := context.Cause(ctx); cause {
	case errFirstByteTimeout, errTotalTimeout, errIdleTimeout:
		a.stage, a.err = usageevent.StageTimeout, cause
		c.failAttempt(a, apierr.GatewayTimeout("the provider did not answer within the limit"))
	default:
		c.failAttempt(a, apierr.BadGateway("upstream_failed", "the provider connection failed after the request may have been sent", true))
	}
}

// cutByNode reports whether the request's context was cancelled by the
// node itself (ErrShutdown: end of the drain grace, second signal) rather
// than by the client going away.
func (c *call) cutByNode() bool {
	return c.r.Context().Err() != nil && errors.Is(context.Cause(c.r.Context()), ErrShutdown)
}

// cancelledStage is the failure stage of an attempt ended by its request
// context.
func (c *call) cancelledStage() string {
	if c.cutByNode() {
		return usageevent.StageShutdown
	}
	return usageevent.StageClientCancelled
}

// relayWhole reads a non-stream answer completely, then sends it: the
// client never sees half a JSON document.
func (c *call) relayWhole(a *attempt, resp *http.Response, body io.Reader, firstByte *time.Timer, ctx context.Context) {
	data, err := readProviderBody(body, resp.ContentLength)
	firstByte.Stop()
	if err == nil && len(data) > maxProviderBody {
		err = errors.New("provider answer exceeds the size limit")
	}
	if err != nil {
		a.err, a.stage = err, usageevent.StageResponseBody
		c.failBeforeCommit(a, ctx)
		return
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusPaymentRequired || resp.StatusCode == http.StatusBadRequest {
		a.quota = quotaExhausted(resp.StatusCode, data)
		if a.quota || resp.StatusCode == http.StatusTooManyRequests {
			a.retryAfter = retryAfter(resp.Header, c.h.o.Now())
		}
	}
	if resp.StatusCode/100 == 2 {
		a.usage, a.rawUsage, a.hasUsage = c.spec.BodyUsage(data)
		if c.spec.BodyOutcome != nil && c.traced() {
			a.outcome = c.spec.BodyOutcome(data)
		}
	} else {
		a.stage = usageevent.StageProviderStatus
	}
	w := c.w
	copyResponseHeaders(w.Header(), resp.Header)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(resp.StatusCode)
	a.status, a.committed = resp.StatusCode, true
	if _, err := w.Write(data); err != nil {
		a.stage, a.err = usageevent.StageClientWrite, err
	}
}

// relayStream holds the status until the first event is in, then passes
// every event through with its exact bytes, flushing whenever the next
// event has not arrived complete yet: events that came in one read leave
// in one write, and none waits for more input. With a keepalive
// configured, a provider that sent its 200 and then stays silent (a
// reasoning model thinking before its first event) gets the client's 200
// committed by the first keepalive, so that idle limits of load balancers
// do not cut the connection; from then on a failure ends the stream in
// band, as any failure after the first event does.
func (c *call) relayStream(a *attempt, resp *http.Response, body io.Reader, firstByte *time.Timer, cancel context.CancelCauseFunc, ctx context.Context, injected bool) {
	h, ss := c.h, c.spec.Stream
	tracker := ss.NewTracker(injected)
	var outcome protocol.OutcomeTracker // nil unless traced
	if ss.NewOutcome != nil && c.traced() {
		outcome = ss.NewOutcome()
	}
	defer func() {
		a.usage, a.rawUsage, a.hasUsage = tracker.Usage()
		if outcome != nil {
			a.outcome = outcome.Outcome()
		}
	}()

	w := c.w
	out := &streamWriter{w: w, rc: http.NewResponseController(w), header: func() {
		copyResponseHeaders(w.Header(), resp.Header)
		w.Header().Del("Content-Length")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
	}}
	defer out.close()
	if h.o.StreamKeepalive > 0 {
		// Before the first event an SSE comment, which every SSE parser
		// skips: a protocol ping (Anthropic's event: ping) before
		// message_start is not something clients expect.
		out.startKeepalive(h.o.StreamKeepalive, preFirstKeepalive)
	}

	rd := sse.NewReader(body, maxEventBytes)
	rd.KnownTypes(ss.Types)
	ev, err := rd.Next()
	firstByte.Stop()
	if err != nil {
		a.err, a.stage = err, usageevent.StageFirstEvent
		if !out.settle() {
			c.failBeforeCommit(a, ctx) // nothing went to the client yet
			return
		}
		a.status, a.committed = http.StatusOK, true
		c.endStream(a, out, ctx, err, 0, usageevent.StageFirstEvent)
		return
	}
	idle := time.AfterFunc(h.o.StreamIdle, func() { cancel(errIdleTimeout) })
	defer idle.Stop()
	out.commit(ss.Keepalive)
	a.status, a.committed = http.StatusOK, true

	relayed := 0
	for {
		done, failed := ss.Terminal(&ev)
		if outcome != nil {
			outcome.Observe(&ev)
		}
		if !tracker.Observe(&ev) {
			if werr := out.write(ev.Raw); werr != nil {
				a.stage, a.err = usageevent.StageClientCancelled, werr
				return
			}
			relayed++
		}
		if failed {
			a.stage = usageevent.StageProviderStreamError // the provider's own in-band error, passed through
		}
		// Events that arrived together leave in one write: flush unless
		// the next event is already complete in the reader's buffer, so
		// that no event waits for bytes that have not arrived.
		more := !done && rd.Buffered()
		if !more {
			if werr := out.flush(); werr != nil {
				a.stage, a.err = usageevent.StageClientCancelled, werr
				return
			}
		}
		if done {
			_, _ = io.CopyN(io.Discard, body, 4<<10) // let the connection be reused
			return
		}
		ev, err = rd.Next()
		if err != nil {
			break
		}
		if !more {
			idle.Reset(h.o.StreamIdle) // a buffered event took no wait
		}
	}
	c.endStream(a, out, ctx, err, relayed, usageevent.StageStream)
}

// endStream ends a committed stream whose provider side failed with err
// after relayed events: with the in-band error, unless the client is gone.
// stage is the failure stage when no more specific one applies.
func (c *call) endStream(a *attempt, out *streamWriter, ctx context.Context, err error, relayed int, stage string) {
	if c.cutByNode() {
		// Cut at the end of the drain or by a second signal: the client is
		// still there and must learn that the answer is incomplete.
		a.stage, a.err = usageevent.StageShutdown, ErrShutdown
		_ = out.event((&apierr.Error{Status: 503, Code: "node_shutting_down", Msg: "the node is shutting down; the answer is incomplete"}).InBand(c.spec, c.rid, relayed))
		return
	}
	if c.r.Context().Err() != nil {
		a.stage, a.err = usageevent.StageClientCancelled, c.r.Context().Err()
		return
	}
	// docs/api.md "Streams": a stream without its terminator is a failure; say so in
	// band and never fake [DONE] / message_stop / response.completed.
	a.stage = stage
	msg := "the provider stream ended without its terminator"
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errIdleTimeout):
		msg = "the provider stream was idle beyond the limit"
		a.stage, a.err = usageevent.StageTimeout, cause
	case errors.Is(cause, errFirstByteTimeout):
		msg = "the provider sent no event within the first-byte limit"
		a.stage, a.err = usageevent.StageTimeout, cause
	case err == io.EOF:
		a.err = errors.New("missing terminator")
	default:
		a.err = err
	}
	_ = out.event((&apierr.Error{Status: 502, Msg: msg}).InBand(c.spec, c.rid, relayed))
}

// streamWriter serialises the relay loop's events and the keepalive
// timer's pings onto one ResponseWriter. Pings are flushed at once; the
// relay flushes events when it has no further one at hand. The first
// write of either commits the response (header).
type streamWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	header func() // sets the headers and writes the 200; called once, under mu

	mu        sync.Mutex
	committed bool        // guarded by mu: header has run
	closed    bool        // guarded by mu: the handler has returned or is returning
	ka        *time.Timer // nil when keepalive is off
	every     time.Duration
	ping      []byte // guarded by mu: what a keepalive writes
	dirty     bool   // guarded by mu: written since the last flush
}

// preFirstKeepalive is the keepalive before a stream's first event.
var preFirstKeepalive = []byte(": keepalive\n\n")

// commitLocked writes the status and headers once. s.mu must be held.
func (s *streamWriter) commitLocked() {
	if !s.committed {
		s.committed = true
		s.header()
	}
}

// commit writes the status and headers now unless a keepalive did, and
// makes ping the keepalive from now on.
func (s *streamWriter) commit(ping []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commitLocked()
	s.ping = ping
}

// settle is for a stream that failed before its first event: if nothing
// was written yet it stops the keepalive for good and reports false (the
// caller answers with a plain error); if a keepalive already committed
// the 200 it reports true (the caller must end the stream in band).
func (s *streamWriter) settle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed {
		return true
	}
	s.closed = true
	if s.ka != nil {
		s.ka.Stop()
	}
	return false
}

// event writes b and flushes, with whatever write left unflushed.
func (s *streamWriter) event(b []byte) error {
	if err := s.write(b); err != nil {
		return err
	}
	return s.flush()
}

// write writes b without flushing it: the caller flushes when no further
// event is at hand (the ResponseWriter's buffer may still send part of it
// when it fills).
func (s *streamWriter) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commitLocked()
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	s.dirty = true
	return nil
}

// flush sends what write left in the ResponseWriter's buffer, if anything.
func (s *streamWriter) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dirty {
		return nil
	}
	s.dirty = false
	if s.ka != nil {
		s.ka.Reset(s.every)
	}
	return s.rc.Flush()
}

func (s *streamWriter) startKeepalive(every time.Duration, ping []byte) {
	s.every = every
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ping = ping
	s.ka = time.AfterFunc(every, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		s.commitLocked()
		if _, err := s.w.Write(s.ping); err == nil && s.rc.Flush() == nil {
			s.dirty = false
			s.ka.Reset(every)
		}
	})
}

// close stops the keepalive; after it returns nothing writes to w.
func (s *streamWriter) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.ka != nil {
		s.ka.Stop()
	}
}

// finish accounts for one attempt: one log line and one usage event
// (docs/usage-events.md: one event per provider route attempt), after
// reporting the outcome through the attempt's lease, which gives the
// backend's in-flight slot back.
func (c *call) finish(a *attempt) {
	res := a.result()
	a.lease.Done(res)
	c.sendState = a.state
	c.h.o.Observer.ObserveAttempt(a.target.Backend.ID, res.Outcome, res.TTFB)
	c.log(a)
	if c.h.o.Recorder == nil && c.h.o.Tracer == nil {
		return
	}
	ev := c.event(a)
	if c.h.o.Recorder != nil {
		c.h.o.Recorder.Record(ev)
	}
	if c.h.o.Tracer != nil {
		c.h.o.Tracer.Attempt(c.r.Context(), ev, a.outcome)
	}
}

// traced reports whether the request's attempts become trace spans.
func (c *call) traced() bool {
	return c.h.o.Tracer != nil && c.h.o.Tracer.Recording(c.r.Context())
}

// result tells the backend's hot state how the attempt went (docs/failures.md),
// from send state and provider status only.
func (a *attempt) result() upstream.Result {
	r := upstream.Result{Outcome: upstream.TransportFailure}
	switch {
	case a.stage == usageevent.StageClientCancelled || a.stage == usageevent.StageShutdown ||
		a.stage == usageevent.StageClientWrite || a.stage == usageevent.StageInternal:
		r.Outcome = upstream.Cancelled
	case a.state == protocol.NotSent && a.egressFault:
		r.Outcome = upstream.EgressFault
	case a.state != protocol.ResponseReceived:
		// Unreachable through the proxy, provider TLS, reset, timeout.
	case a.providerStatus == http.StatusUnauthorized || a.providerStatus == http.StatusForbidden:
		r.Outcome = upstream.AuthRejected
	case a.quota: // a 429, 402 or 400 that says so (quotaExhausted)
		r.Outcome, r.RetryAfter = upstream.QuotaExhausted, a.retryAfter
	case a.providerStatus == http.StatusTooManyRequests:
		r.Outcome, r.RetryAfter = upstream.RateLimited, a.retryAfter
	case a.providerStatus >= 500:
		// A provider answering 5xx is unhealthy however fast it answers:
		// it counts toward the breaker like a transport failure (Envoy's
		// consecutive_5xx), so P2C cannot favour a backend failing fast.
	case a.providerStatus/100 != 2:
		r.Outcome = upstream.ProviderError
	case a.stage == "":
		r.Outcome, r.TTFB = upstream.Success, a.ttfb
	case a.stage == usageevent.StageProviderStreamError:
		r.Outcome = upstream.ProviderError
	}
	// Any other stage after a 2xx (cut stream, idle or read timeout) is
	// the backend failing mid-answer: a transport failure.
	return r
}

// event is the attempt's usage event, made by the usage package from what
// the request path knows of it.
func (c *call) event(a *attempt) *usageevent.Event {
	return usage.NewEvent(&usage.Attempt{
		NodeID:        c.h.o.NodeID,
		RequestID:     c.rid,
		TenantID:      c.principal.TenantID,
		KeyID:         c.principal.KeyID,
		PublicModel:   c.req.Model,
		ProviderModel: a.target.ProviderModel,
		Backend:       a.target.Backend.ID,
		Protocol:      c.shape.String(),
		Endpoint:      c.spec.Endpoint.String(),
		Placement:     a.placement.String(),
		Stream:        c.req.Stream,
		N:             a.n,
		SendState:     a.state.String(),
		FailureStage:  a.stage,
		ClientStatus:  a.status,
		RequestBytes:  a.reqBytes,
		ResponseBytes: a.respBytes,
		TTFB:          a.ttfb,
		Started:       a.started,
		Ended:         c.h.o.Now(),
		Usage:         a.usage,
		RawUsage:      a.rawUsage,
		HasUsage:      a.hasUsage,
	})
}

// log writes the attempt's request line (docs/operations.md "Logs").
// The attributes go in one array on the stack: LogAttrs copies what does
// not fit in the record into a slice of its own.
func (c *call) log(a *attempt) {
	level := slog.LevelInfo
	if a.err != nil {
		level = slog.LevelWarn
	}
	ctx := c.r.Context()
	if !c.h.o.Logger.Enabled(ctx, level) {
		return
	}
	var buf [14]slog.Attr
	attrs := c.logFields(buf[:0], a)
	c.h.o.Logger.LogAttrs(ctx, level, "request", attrs...)
}

// logFields appends the request line's fields to attrs.
func (c *call) logFields(attrs []slog.Attr, a *attempt) []slog.Attr {
	backend := ""
	if a.target != nil {
		backend = a.target.Backend.ID
	}
	attrs = append(attrs,
		slog.String("request_id", c.rid),
		slog.String("path", c.r.URL.Path),
		slog.String("model", c.req.Model),
		slog.Bool("stream", c.req.Stream),
		slog.String("backend", backend),
		slog.Int("attempt", a.n),
		slog.String("send_state", a.state.String()),
		slog.Int("status", a.status),
		slog.Float64("ttfb_ms", ms(a.ttfb)),
		slog.Float64("duration_ms", ms(c.h.o.Now().Sub(c.start))),
		slog.String("placement", a.placement.String()),
	)
	if c.session != 0 {
		// A short hash, so that turns of one session can be followed in
		// the log; never the key (it may carry a user id).
		attrs = append(attrs, slog.String("session", strconv.FormatUint(uint64(c.session)>>40, 16)))
	}
	if a.stage != "" {
		attrs = append(attrs, slog.String("stage", a.stage))
	}
	if a.err != nil {
		attrs = append(attrs, slog.String("error", errorText(a.err)))
	}
	return attrs
}

// errorText is an error for the log without the request URL that Go's
// *url.Error embeds (never a URL query in logs, docs/operations.md "Logs"; the backend id is
// logged beside it). Client bodies and keys never reach an error.
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
