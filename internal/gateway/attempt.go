package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
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

// call is one client request on its way through the attempt loop. Every
// endpoint runs the same loop; spec says what differs.
type call struct {
	h         *Handler
	w         http.ResponseWriter
	r         *http.Request
	spec      *provider.Spec
	api       *provider.API // the endpoint's provider API: its error shape and answers
	rid       string
	principal *authz.Principal
	body      []byte
	req       provider.Request
	session   balance.Key // 0 = none, or affinity off for the model
	start     time.Time
	sendState provider.SendState // the last attempt's, for the request metric
	// abort says that an answer relayed as it came (Spec.Passthrough) was
	// cut after its status went out: the handler aborts the connection,
	// so that the client sees a truncated answer, not a complete one.
	abort bool

	sw statusWriter // w, allocated with the call
}

// attempt is the record of one provider attempt: logged, turned into a
// usage event (docs/usage-events.md), and fed back into the backend's hot
// state.
type attempt struct {
	n         int
	target    *routes.Target
	lease     balance.Lease // the target's in-flight slot, given back by finish
	placement balance.Placement
	started   time.Time
	state     provider.SendState
	status    int   // HTTP status sent to the client, 0 if none
	stage     stage // stageNone on success
	err       error
	ttfb      time.Duration
	committed bool

	egressFault    bool          // the proxy itself failed (not the backend's fault, docs/egress.md "Failures")
	providerStatus int           // the provider's HTTP status, 0 if none
	retryAfter     time.Duration // the provider's retry advice on a 429
	quota          bool          // an answer that says the quota or balance is gone
	authRefused    bool          // an answer that says the backend's credential was refused
	aboutRequest   bool          // an error answer about this request alone (provider.API.AboutRequest)

	reqBytes  int64
	respBytes int64
	usage     usageevent.Usage
	rawUsage  json.RawMessage
	hasUsage  bool
	outcome   provider.Outcome // read only when traced

	// The provider exchange, kept here so that it costs no allocations of
	// its own.
	hide    bool                    // the AskUsage edit was applied: hide the usage-only chunk
	cancel  context.CancelCauseFunc // ends the exchange, with a timeout cause
	timer   exchangeTimer           // first byte, then non_stream_total
	counter countingReader          // counts respBytes
	gotConn atomic.Bool             // the transport had a connection for the request
	trace   httptrace.ClientTrace   // sets gotConn
	resp    *http.Response          // the provider's answer, once its headers are in
	answer  io.Reader               // resp.Body, counted and decoded
	_       [0]func(*exchangeTimer) // attempts are never copied (timer holds a closure over a)
}

// serveEndpoint serves the request for spec with c, whose writer c.sw is
// set up.
func (h *Handler) serveEndpoint(ctx context.Context, c *call, r *http.Request, spec *provider.Spec, pathModel string, api *provider.API, rid string) {
	w := &c.sw
	c.h, c.w, c.r, c.spec, c.api, c.rid, c.start = h, w, r, spec, api, rid, h.o.Now()
	if r.Method != spec.Method {
		if spec.Socket != nil && websocketUpgrade(r) {
			h.serveSocket(ctx, c, r, spec, api, rid)
			return
		}
		apierr.MethodNotAllowed("use "+spec.Method).Write(w, api, rid)
		return
	}
	var ok bool
	if c.principal, ok = h.authenticate(w, r, api, rid); !ok {
		return
	}
	var aerr *apierr.Error
	if c.body, aerr = h.readBody(w, r); aerr == nil {
		var berr *provider.BodyError
		if spec.InspectForm != nil {
			c.req, berr = spec.InspectForm(c.body, r.Header.Get("Content-Type"))
		} else {
			c.req, berr = spec.Inspect(c.body, pathModel)
		}
		if berr == nil {
			c.route(ctx)
			return
		}
		aerr = apierr.BadRequest(berr.Code, berr.Msg)
	}
	aerr.Write(w, api, rid)
}

func (c *call) fail(e *apierr.Error) { e.Write(c.w, c.api, c.rid) }

// failAttempt writes e as the answer to a and records the status written
// there, the one place an error answer sets it: the log line and the
// usage event then say what the client got.
func (c *call) failAttempt(a *attempt, e *apierr.Error) {
	a.status = e.Status
	c.fail(e)
}

// route resolves the model to a pool and runs the attempt loop.
func (c *call) route(ctx context.Context) {
	req := c.req
	// The model as answers may quote it: never a value that holds the
	// caller's own key (a client that put its key in the model).
	shown := withoutKey(req.Model, c.r)
	if !c.principal.Allows(req.Model) {
		c.fail(apierr.Forbidden(fmt.Sprintf("this API key may not use model %q", shown)))
		return
	}
	table := c.h.o.Routes.Load() // pinned for the whole request (docs/snapshots.md)
	if table == nil {
		c.fail(apierr.Unavailable("routes are not loaded yet", time.Second))
		return
	}
	m, ok := table.Model(req.Model)
	if !ok {
		c.fail(apierr.NotFound("model_not_found", fmt.Sprintf("model %q does not exist", shown)))
		return
	}
	pool := m.Pools[c.spec.Endpoint]
	switch {
	case len(pool) > 0:
	case !m.Serves(c.api.Protocol):
		c.fail(apierr.BadRequest("protocol_mismatch", fmt.Sprintf("model %q is not served on %s; no conversion between protocols", shown, c.spec.Route())))
		return
	default:
		// Not every provider of a protocol serves every endpoint: backends
		// declare theirs, and nothing is sent to one that does not.
		c.fail(apierr.BadRequest("endpoint_not_served", fmt.Sprintf("model %q has no backend that serves %s", shown, c.spec.Route())))
		return
	}
	if !offers(pool, req.Need) {
		c.fail(apierr.BadRequest("capability_not_offered", fmt.Sprintf("model %q offers no target with %s", shown, req.Need)))
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
		a := c.attempt(ctx, n, l)
		a.placement = placement
		c.finish(ctx, a)
		if a.state != provider.NotSent || a.status != 0 || ctx.Err() != nil {
			return
		}
	}
	if len(tried) == 0 {
		// docs/api.md "Status codes": 503 with Retry-After = the earliest
		// moment a target can take traffic again, and x-should-retry: true.
		wait := balance.RetryAfter(pool, req.Need, c.h.o.Now())
		a := attempt{state: provider.NotSent, stage: stageSelect, placement: placement}
		c.failAttempt(&a, apierr.Unavailable(fmt.Sprintf("no target for model %q can take traffic now", shown), wait))
		c.log(ctx, &a)
		return
	}
	// Every attempt failed before sending anything: safe to retry.
	c.fail(apierr.BadGateway("upstream_unreachable", fmt.Sprintf("could not reach a provider for model %q", shown), false))
}

// sessionKey returns the hash of the request's session key within its
// client key's namespace, 0 when it names no session (docs/routing.md
// "Affinity"). The key itself is kept nowhere.
func (c *call) sessionKey() balance.Key {
	body, header := provider.Session(&c.req, c.r.Header, c.spec.SessionHeaders)
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
func (c *call) attempt(ctx context.Context, n int, l balance.Lease) *attempt {
	t := l.Target
	a := &attempt{n: n, target: t, lease: l, started: c.h.o.Now()}
	u := t.Upstream // the endpoint's path names the model
	if u == nil {
		u = t.Backend.Upstream[c.spec.Endpoint]
	}
	if u == nil { // the pool holds only targets that serve the endpoint: a bug
		a.state, a.stage, a.err = provider.NotSent, stageInternal, errors.New("backend has no URL for the endpoint")
		c.failAttempt(a, apierr.BadGateway("bad_backend_url", "backend URL is not usable", false))
		return a
	}
	// docs/usage-events.md: ask for the stream usage the client did not
	// ask for (where the node and the backend allow it), and hide the
	// usage-only chunk it then did not expect. The body is copied once,
	// with the model rewritten (docs/api.md).
	a.hide = c.req.AskUsage.Value != nil && c.h.o.InjectStreamUsage && t.Backend.InjectUsage
	model := t.ProviderModelJSON
	if c.spec.Match != nil {
		model = nil // the model is in the URL
	}
	body := c.req.Rewrite(c.body, model, t.ProviderModelNamedJSON, a.hide)
	a.reqBytes = int64(len(body))

	ctx, a.cancel = context.WithCancelCause(ctx)
	defer a.cancel(nil)
	a.trace.GotConn = a.gotConnHook
	ctx = httptrace.WithClientTrace(ctx, &a.trace)
	a.timer.start(c.h.o.FirstByte, c.h.o.NonStreamTotal, !c.req.Stream, a.cancel)
	defer a.timer.stop()

	header := c.spec.Header(c.r.Header, t.Backend.Credential.Reveal())
	query := ""
	if c.spec.UpstreamQuery != nil {
		query = c.spec.UpstreamQuery(c.r.URL.Query())
	}
	resp, err := c.h.o.Transport.RoundTrip(upstreamRequest(ctx, c.spec.Method, u, query, body, header))
	if err != nil {
		c.sendFailed(ctx, a, err)
		return a
	}
	defer resp.Body.Close()
	c.answered(ctx, a, resp)
	return a
}

// sendFailed classifies a round trip that brought no answer
// (docs/failures.md "Send state"): not sent when the failure is the
// egress dialer's or the transport never had a connection, so the caller
// may re-pick; possibly sent otherwise, answered here.
func (c *call) sendFailed(ctx context.Context, a *attempt, err error) {
	a.err = err
	var ns *egress.NotSentError
	if errors.As(err, &ns) || !a.gotConn.Load() {
		a.state, a.stage = provider.NotSent, stageConnect
		if ns != nil {
			// Counted and logged by the dialer's OnFailure, every proxy
			// tried (internal/app egresslog.go), not here.
			a.egressFault = ns.EgressFault()
		}
		if c.r.Context().Err() != nil {
			a.stage = c.cancelledStage()
		}
		return
	}
	a.state, a.stage = provider.PossiblySent, stageSend
	c.failBeforeCommit(ctx, a)
}

// answered relays the provider's answer to the client, whatever it is.
func (c *call) answered(ctx context.Context, a *attempt, resp *http.Response) {
	a.state, a.providerStatus, a.resp = provider.ResponseReceived, resp.StatusCode, resp
	a.ttfb = c.h.o.Now().Sub(a.started)
	a.counter = countingReader{r: resp.Body, n: &a.respBytes}

	if resp.StatusCode == http.StatusUnauthorized {
		// The gateway's credential was refused; the client's key is fine
		// (docs/api.md "Status codes"): never show the client a 401 for
		// this. A 403 is read first (relayWhole): it may be about the
		// model rather than the credential.
		a.stage = stageProviderAuth
		c.failAttempt(a, apierr.BadGateway("upstream_auth_failed", "the provider rejected the gateway's credential for this backend", false))
		return
	}
	var err error
	if a.answer, err = decodedBody(resp, &a.counter); err != nil {
		// An encoding the node cannot read: relaying it would hand the
		// client bytes labelled JSON that it cannot parse.
		a.err, a.stage = err, stageResponseBody
		// The provider ran the request: a retry would run it again.
		c.failAttempt(a, apierr.BadGateway("upstream_bad_encoding", "the provider answered with a content encoding the node did not ask for and cannot decode", true))
		return
	}
	if resp.StatusCode/100 == 2 && c.spec.Passthrough {
		// From the headers on, non_stream_total bounds the whole answer.
		a.timer.headersIn()
		c.relayBytes(ctx, a)
		return
	}
	if resp.StatusCode == http.StatusOK && c.spec.Stream != nil && isEventStream(resp.Header.Get("Content-Type")) {
		if !c.req.Stream {
			// A stream answer to a non-stream request: relayStream stops
			// the first-byte timer at the first event, and the whole
			// exchange stays bounded by non_stream_total.
			total := time.AfterFunc(a.timer.left(), func() { a.cancel(errTotalTimeout) })
			defer total.Stop()
		}
		c.relayStream(ctx, a)
		return
	}
	// Relayed whole (a JSON answer, also to a stream request, such as
	// Gemini's JSON-array stream): from the headers on, non_stream_total
	// bounds it, never first_byte.
	a.timer.headersIn()
	c.relayWhole(ctx, a)
}

// exchangeTimer is an attempt's one timer (docs/api.md "Timeouts"). Until
// the response headers it holds first_byte (or non_stream_total if that is
// nearer); for a non-stream answer it is then re-armed for what is left of
// non_stream_total, and the body may take that long. A stream's first
// event stops it (relayStream).
type exchangeTimer struct {
	t         *time.Timer
	sent      time.Time // real time, as the timer's
	total     time.Duration
	wholeLeft atomic.Bool // set only while the timer is stopped: it now bounds the whole answer
}

func (x *exchangeTimer) start(firstByte, total time.Duration, whole bool, cancel context.CancelCauseFunc) {
	limit, cause := firstByte, errFirstByteTimeout
	if whole && total < limit {
		limit, cause = total, errTotalTimeout
	}
	x.sent, x.total = time.Now(), total
	x.t = time.AfterFunc(limit, func() {
		if x.wholeLeft.Load() {
			cancel(errTotalTimeout)
			return
		}
		cancel(cause)
	})
}

// headersIn re-arms the timer for what is left of non_stream_total. A Stop
// that lost the race leaves the cancel to fire.
func (x *exchangeTimer) headersIn() {
	if x.t.Stop() {
		x.wholeLeft.Store(true)
		x.t.Reset(x.left())
	}
}

// left is what remains of non_stream_total.
func (x *exchangeTimer) left() time.Duration { return x.total - time.Since(x.sent) }

func (x *exchangeTimer) stop() { x.t.Stop() }

// upstreamRequest is what http.NewRequestWithContext(ctx, method,
// u.String(), bytes.NewReader(body)) returns with header as its Header and
// query as its query, without parsing the URL again, and without GetBody:
// the transport must never replay a POST (docs/architecture.md "Go
// traps").
func upstreamRequest(ctx context.Context, method string, u *url.URL, query string, body []byte, header http.Header) *http.Request {
	uc := *u // u is the backend's, shared
	if query != "" {
		uc.RawQuery = query
	}
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
// the client: 504 for timeouts, 502 otherwise, never retryable. ctx is the
// attempt's, whose cause names a timeout.
func (c *call) failBeforeCommit(ctx context.Context, a *attempt) {
	if c.cutByNode() {
		// The connection stays open a moment after the cut: say why.
		a.stage, a.err = stageShutdown, ErrShutdown
		c.failAttempt(a, apierr.BadGateway("node_shutting_down", "the node is shutting down; the request may have reached the provider", true))
		return
	}
	if c.r.Context().Err() != nil {
		// Nothing is written: 499 is the log's word for it (the usage
		// event carries no status).
		a.stage, a.status = stageClientCancelled, 499
		return
	}
	switch cause := context.Cause(ctx); cause {
	case errFirstByteTimeout, errTotalTimeout, errIdleTimeout:
		a.stage, a.err = stageTimeout, cause
		c.failAttempt(a, apierr.GatewayTimeout("the provider did not answer within the limit"))
	default:
		c.failAttempt(a, apierr.BadGateway("upstream_failed", "the provider connection failed after the request may have been sent", true))
	}
}

// cutByNode reports whether the request's context was cancelled by the
// node itself (ErrShutdown: end of the drain grace, second signal) rather
// than by the client going away.
func (c *call) cutByNode() bool {
	ctx := c.r.Context()
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShutdown)
}

// cancelledStage is the failure stage of an attempt ended by its request
// context.
func (c *call) cancelledStage() stage {
	if c.cutByNode() {
		return stageShutdown
	}
	return stageClientCancelled
}

// finish accounts for one attempt: one log line and one usage event
// (docs/usage-events.md: one event per provider route attempt), after
// reporting the outcome through the attempt's lease, which gives the
// backend's in-flight slot back.
func (c *call) finish(ctx context.Context, a *attempt) {
	res := a.result()
	a.lease.Done(res)
	c.sendState = a.state
	c.h.o.Observer.ObserveAttempt(a.target.Backend.ID, res.Outcome, res.TTFB)
	c.log(ctx, a)
	if c.h.o.Recorder == nil && c.h.o.Tracer == nil {
		return
	}
	ev := c.event(a)
	if c.h.o.Recorder != nil {
		c.h.o.Recorder.Record(ev)
	}
	if c.h.o.Tracer != nil {
		c.h.o.Tracer.Attempt(ctx, ev, a.outcome)
	}
}

// traced reports whether the request's attempts become trace spans.
func (c *call) traced(ctx context.Context) bool {
	return c.h.o.Tracer != nil && c.h.o.Tracer.Recording(ctx)
}

// result tells the backend's hot state how the attempt went
// (docs/failures.md), from send state and provider status only.
func (a *attempt) result() upstream.Result {
	r := upstream.Result{Outcome: upstream.TransportFailure}
	switch {
	case a.stage.cancelled():
		r.Outcome = upstream.Cancelled
	case a.state == provider.NotSent && a.egressFault:
		r.Outcome = upstream.EgressFault
	case a.state != provider.ResponseReceived:
		// Unreachable through the proxy, provider TLS, reset, timeout.
	case a.providerStatus == http.StatusUnauthorized || a.authRefused:
		r.Outcome = upstream.AuthRejected
	case a.aboutRequest:
		// The provider refused this request, not the backend: the
		// backend rests for no one (docs/failures.md "Refusals about one
		// request").
		r.Outcome = upstream.ProviderError
	case a.quota: // an answer that says so (provider.API.QuotaExhausted)
		r.Outcome, r.RetryAfter = upstream.QuotaExhausted, a.retryAfter
	case a.providerStatus == http.StatusTooManyRequests:
		r.Outcome, r.RetryAfter = upstream.RateLimited, a.retryAfter
	case a.providerStatus >= 500:
		// A provider answering 5xx is unhealthy however fast it answers:
		// it counts toward the breaker like a transport failure (Envoy's
		// consecutive_5xx), so P2C cannot favour a backend failing fast.
	case a.providerStatus/100 != 2:
		r.Outcome = upstream.ProviderError
	case a.stage == stageNone:
		r.Outcome, r.TTFB = upstream.Success, a.ttfb
	case a.stage == stageProviderStreamError:
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
		Protocol:      c.api.Protocol.String(),
		Endpoint:      c.spec.Endpoint.String(),
		Placement:     a.placement.String(),
		Stream:        c.req.Stream,
		N:             a.n,
		SendState:     a.state.String(),
		FailureStage:  a.stage.String(),
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
