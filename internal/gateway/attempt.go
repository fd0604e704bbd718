package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
	"github.com/scootgate/scootgate/pkg/usd"
)

// Timeout causes, told apart with context.Cause.
var (
	errFirstByteTimeout = errors.New("no first byte from the provider within the limit")
	errIdleTimeout      = errors.New("provider stream idle beyond the limit")
	errTotalTimeout     = errors.New("provider answer not complete within the limit")
	errStreamTotal      = errors.New("provider stream not complete within the total limit")
	errNoProgress       = errors.New("provider stream sent only keepalives beyond the limit")
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
	byPrefix  bool        // session is the prompt prefix's digest (prefix affinity)
	pattern   string      // the pattern entry that matched req.Model; "" for an exact name
	star      string      // the part of req.Model the pattern's star matched
	// served is the fallback model whose targets the attempts go to, nil
	// while the model the request named serves (docs/routing.md
	// "Fallbacks"), and fallback why that model could not.
	served    *routes.Model
	fallback  fallbackReason
	start     time.Time
	sendState provider.SendState // the last attempt's, for the request metric (endpointResult)
	// tokens is what the request is expected to cost against a
	// credential's token budget: its declared output cap plus a quarter of
	// its body's bytes; 0 when it declares no cap (the node then never
	// holds it back for tokens on a guess alone, docs/routing.md "Headroom").
	tokens int64

	// A limited key's admission (docs/limits.md): the ticket each attempt
	// debits and the request releases, and the state its answers show.
	limited  bool
	ticket   limits.Ticket
	rl       provider.RateLimits
	budget   limits.BudgetWindow // the binding budget as admission saw it (docs/limits.md "Budgets")
	admitted time.Time

	sw statusWriter // w, allocated with the call

	door       *provider.Door // the cloud client path the request came in by, nil for the endpoint's own
	doorStream bool           // the door's path asks for a stream

	abort bool       // the answer went out in part and cannot be completed: abort the client's connection (endpointResult)
	guard writeGuard // the deadline of writes to the client
}

// attempt is the record of one provider attempt: logged, turned into a
// usage event (docs/usage-events.md), and fed back into the backend's hot
// state.
type attempt struct {
	n         int
	target    *routes.Target
	model     string        // the provider model sent (the target's, or made from a pattern's star)
	lease     balance.Lease // the target's in-flight slot, given back by finish
	placement balance.Placement
	started   time.Time
	state     provider.SendState
	status    int   // HTTP status sent to the client, 0 if none
	stage     stage // stageNone on success
	err       error
	ttfb      time.Duration
	committed bool
	vacated   bool // the slot went back when the provider's side ended (readAhead); set on its goroutine, read after close

	egressFault    bool              // the proxy itself failed (not the backend's fault, docs/egress.md "Failures")
	nodeFault      bool              // the node had no file descriptor for the dial: its own overload
	providerStatus int               // the provider's HTTP status, 0 if none
	retryAfter     time.Duration     // the provider's retry advice on a 429
	quota          bool              // an answer that says the quota or balance is gone
	authRefused    bool              // an answer that says the backend's credential was refused
	noToken        bool              // the backend's minted-token credential had no token: not sent
	headroom       upstream.Headroom // what the answer's rate-limit headers said (docs/routing.md "Headroom")
	aboutRequest   bool              // an error answer about this request alone (provider.API.AboutRequest)

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

// endpointResult is what ServeHTTP needs to know of a request once
// serveEndpoint has answered it: for the request metric, the refusal
// note, and the client's connection.
type endpointResult struct {
	model     string             // the model the request named; "" before its body was read
	sendState provider.SendState // the last attempt's; NoAttempt when none ran
	stream    bool               // the request asked for a stream
	abort     bool               // the answer went out in part: abort the client's connection
}

// serveEndpoint serves the request for spec with c, whose writer c.sw is
// set up, and says how it went.
func (h *Handler) serveEndpoint(ctx context.Context, c *call, r *http.Request, spec *provider.Spec, pathModel string, api *provider.API, rid string) endpointResult {
	h.serve(ctx, c, r, spec, pathModel, api, rid)
	return endpointResult{model: c.req.Model, sendState: c.sendState, stream: c.req.Stream, abort: c.abort}
}

// serve is serveEndpoint's work: authentication, the body, and the route.
func (h *Handler) serve(ctx context.Context, c *call, r *http.Request, spec *provider.Spec, pathModel string, api *provider.API, rid string) {
	w := &c.sw
	c.h, c.w, c.r, c.spec, c.api, c.rid, c.start = h, w, r, spec, api, rid, h.o.Now()
	if spec.Realtime != nil {
		h.serveRealtime(ctx, c, r, spec)
		return
	}
	if r.Method != spec.Method {
		if spec.Socket != nil && websocketUpgrade(r) {
			h.serveSocket(ctx, c, r, spec, api, rid)
			return
		}
		apierr.MethodNotAllowed("use "+spec.Method).Write(w, api, rid)
		return
	}
	var missingKey func(http.Header) string
	if c.door != nil {
		missingKey = c.door.MissingKey
	}
	var ok bool
	if c.principal, ok = h.authenticateDoor(w, r, api, rid, missingKey); !ok {
		return
	}
	var aerr *apierr.Error
	if c.body, aerr = h.readBody(w, r); aerr == nil {
		var berr *provider.BodyError
		doorModel := pathModel
		if c.door != nil {
			// docs/api.md "Cloud client paths": the door's envelope off,
			// and the request is the endpoint's own from here on.
			c.body, pathModel, berr = c.door.Request(c.body, pathModel, c.doorStream, r.Header)
		}
		switch {
		case berr != nil:
		case spec.InspectForm != nil:
			c.req, berr = spec.InspectForm(c.body, r.Header.Get("Content-Type"))
		default:
			c.req, berr = spec.Inspect(c.body, pathModel)
		}
		if berr == nil && c.door != nil && doorModel != "" && c.req.Model != doorModel {
			berr = &provider.BodyError{Code: "invalid_model", Msg: fmt.Sprintf("the path names model %q and the body %q; name one, or the same", doorModel, c.req.Model)}
		}
		if berr == nil {
			if c.req.MaxOutput > 0 {
				c.tokens = c.req.MaxOutput + int64(len(c.body))/4
			}
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

// route serves the request in three steps, each of which may answer it
// and end it there: resolve finds the model and pool that serve it,
// admit holds it against its key's limits, and attempts sends it to
// targets until one answers.
func (c *call) route(ctx context.Context) {
	if c.h.abandons.over(c.principal.KeyID, c.h.o.Now()) {
		c.refuseAbandoned()
		return
	}
	rs, ok := c.resolve()
	if !ok {
		return
	}
	if !c.admit(rs.named) {
		return
	}
	if c.limited {
		defer c.ticket.Release() // admitted: its slots are held until the request ends, whichever way
	}
	c.attempts(ctx, rs)
}

// resolved is where a request goes, as resolve found it before anything
// was sent (docs/routing.md "Fallbacks").
type resolved struct {
	named *routes.Model    // the model the request named
	cur   *routes.Model    // the model that serves: named, or one of its chain
	next  int              // the index in named.Chain of the next model to fall back to
	pool  []*routes.Target // cur's targets that can take the request
	first fallbackReason   // why named could not take it, when it could not
}

// resolve finds the model the request names and the pool that serves it,
// or refuses the request; nothing is sent.
func (c *call) resolve() (resolved, bool) {
	req := &c.req
	// docs/api.md "Endpoints" (model names that hold the key): a model name that holds the caller's own
	// key (a client that put its key in the model) is refused before
	// anything is sent, whatever the table holds. A pattern would serve
	// it, and the name reaches the provider (its star part), the request
	// log and the usage event.
	if holdsKey(req.Model, c.r) {
		c.fail(apierr.BadRequest("invalid_model", "the model name holds this request's API key; check the client's model setting"))
		return resolved{}, false
	}
	if !c.principal.Allows(req.Model) {
		c.fail(apierr.Forbidden(fmt.Sprintf("this API key may not use model %q", req.Model)))
		return resolved{}, false
	}
	table := c.h.o.Routes.Load() // pinned for the whole request (docs/snapshots.md)
	if table == nil {
		c.fail(apierr.Unavailable("routes are not loaded yet", time.Second))
		return resolved{}, false
	}
	m, ok := table.Model(req.Model)
	if !ok {
		c.fail(apierr.NotFound("model_not_found", fmt.Sprintf("model %q does not exist", req.Model)))
		return resolved{}, false
	}
	if m.Pattern { // docs/routing.md "Aliases and patterns"
		c.pattern, c.star = m.Name, m.Star(req.Model)
	}
	if len(m.Pools[c.spec.Endpoint]) == 0 && !m.Serves(c.api.Protocol) {
		c.fail(apierr.BadRequest("protocol_mismatch", fmt.Sprintf("model %q is not served on %s; no conversion between protocols", req.Model, c.spec.Route())))
		return resolved{}, false
	}
	// docs/routing.md "Fallbacks": the model serves when one of its
	// targets can take the request, else the first model of its chain
	// that can (one the key may not use is passed over). A chain is
	// walked once, and only before anything was sent.
	cur, next := m, 0
	pool, why := c.usable(m)
	first := why // why the model the request named could not take it
	for pool == nil {
		if next == len(m.Chain) {
			c.refuseStatic(why, req.Model, len(m.Chain) > 0)
			return resolved{}, false
		}
		cur, next = m.Chain[next], next+1
		if !c.principal.Allows(cur.Name) {
			continue
		}
		var w fallbackReason
		if pool, w = c.usable(cur); pool == nil {
			why = max(why, w) // the furthest a model got: endpoint < capability < context
		}
	}
	return resolved{named: m, cur: cur, next: next, pool: pool, first: first}, true
}

// admit holds the request against its key's and tenant's limits
// (docs/limits.md): a request over them is refused before anything is
// sent, and admit reports false; an admitted one holds its slots in
// c.ticket until it ends, whichever way (route releases it). Only limited
// keys pay for this.
func (c *call) admit(m *routes.Model) bool {
	sub := c.principal.Limit
	if sub == nil {
		return true
	}
	var worst usd.Amount
	if sub.Reserves() {
		var bounded bool
		if worst, bounded = c.reserveCost(m); !bounded {
			c.fail(errUnbounded())
			return false
		}
	}
	c.limited, c.admitted = true, c.h.o.Now()
	tk, st, ok := sub.AdmitReserve(c.admitted, worst)
	c.rl, c.budget = rateLimits(&st), st.Budget
	if !ok {
		c.refuseLimited(&st)
		return false
	}
	c.ticket = tk
	return true
}

// attempts runs the attempt loop over rs's pool and, when it runs dry, its
// model's fallback chain, and answers the request when no attempt did.
func (c *call) attempts(ctx context.Context, rs resolved) {
	req := c.req
	m, cur, next, pool, first := rs.named, rs.cur, rs.next, rs.pool, rs.first
	var tried []*routes.Target
	placement := balance.Balanced
	if cur.Affinity {
		c.session = c.sessionKey(cur.PrefixAffinity)
	}
	wait := time.Duration(-1) // the earliest Retry-After of the pools passed over
	var last *attempt
	for n := 1; n <= c.h.o.MaxAttempts; {
		var (
			l  balance.Lease
			ok bool
		)
		l, placement, ok = c.pick(pool, tried, cur.Affinity)
		if !ok {
			if len(m.Chain) == 0 {
				break
			}
			// No target of cur can take the request now: the next model
			// of the chain that the key may use and that holds it.
			if cur == m {
				first = c.unavailable(pool, tried)
			}
			if w := balance.RetryAfter(pool, req.Need, c.tokens, c.h.o.Now()); wait < 0 || w < wait {
				wait = w
			}
			pool = nil
			for pool == nil && next < len(m.Chain) {
				cur, next = m.Chain[next], next+1
				if c.principal.Allows(cur.Name) {
					pool, _ = c.usable(cur)
				}
			}
			if pool == nil {
				break
			}
			c.session, c.byPrefix = 0, false
			if cur.Affinity {
				c.session = c.sessionKey(cur.PrefixAffinity) // affinity within the model that serves
			}
			continue
		}
		if c.byPrefix && placement == balance.Preferred {
			placement = balance.PrefixPreferred
		}
		tried = append(tried, l.Target)
		if cur != m && c.served != cur {
			c.fallBack(m, cur, first)
		}
		a := c.attempt(ctx, n, l)
		a.placement = placement
		c.finish(ctx, a)
		if a.state != provider.NotSent || a.status != 0 || ctx.Err() != nil {
			return
		}
		last = a
		n++
		if a.nodeFault {
			break // another target, of this model or a fallback, needs a descriptor too
		}
	}
	if len(tried) == 0 {
		// docs/api.md "Status codes": 503 with Retry-After = the earliest
		// moment a target can take traffic again, and x-should-retry: true.
		if w := balance.RetryAfter(pool, req.Need, c.tokens, c.h.o.Now()); pool != nil && (wait < 0 || w < wait) {
			wait = w
		}
		a := attempt{state: provider.NotSent, stage: stageSelect, placement: placement}
		c.failAttempt(&a, apierr.Unavailable(fmt.Sprintf("no target for model %q can take traffic now", req.Model), wait))
		c.log(ctx, &a)
		return
	}
	// Every attempt failed before sending anything: safe to retry.
	if last != nil && last.nodeFault {
		// The node is out of file descriptors, or of turns to open a
		// tunnel (docs/egress.md "Connection reuse"): its own overload,
		// shed as the concurrency limit sheds (docs/operations.md
		// "Open-file limit"), not a path to blame with a 502.
		why := "no file descriptor left for the connection"
		if errors.Is(last.err, egress.ErrDialsBusy) {
			why = "no turn to open a connection within the connect timeout"
		}
		c.fail(apierr.Unavailable("this node is overloaded ("+why+"); retry shortly", time.Second))
		return
	}
	if last != nil && last.outOfTime() {
		// The node's own limit ran out while the connection was still
		// being made (a slow proxy, a node or provider under load): a
		// timeout, as the client would have met it after the connection
		// (docs/api.md "Status codes").
		c.fail(apierr.GatewayTimeout(fmt.Sprintf("could not reach a provider for model %q within the time limit", req.Model), false))
		return
	}
	if last != nil && last.noToken {
		// The last target's credential had no token (docs/egress.md
		// "Minted-token credentials"): the gateway's credential, not the
		// provider and not the client.
		c.fail(apierr.BadGateway("upstream_auth_failed", fmt.Sprintf("the gateway has no valid token for the credential of model %q's backend (its token endpoint is failing)", req.Model), false))
		return
	}
	c.fail(apierr.BadGateway("upstream_unreachable", fmt.Sprintf("could not reach a provider for model %q", req.Model), false))
}

// sessionKey returns the hash of the request's session key within its
// client key's namespace (docs/routing.md "Affinity"); for a request that
// names none, with prefix on, the hash of its prompt's beginning
// ("Prefix affinity"); else 0. The key itself is kept nowhere.
func (c *call) sessionKey(prefix bool) balance.Key {
	body, header := provider.Session(&c.req, c.r.Header, c.spec.SessionHeaders)
	switch {
	case len(body) > 0:
		return balance.SessionKey(c.principal.KeyID, body)
	case header != "":
		return balance.SessionKey(c.principal.KeyID, header)
	case prefix:
		var d [12]byte
		if provider.PrefixDigest(&c.req.Prefix, &d) {
			c.byPrefix = true
			return balance.SessionKey(c.principal.KeyID, d[:])
		}
	}
	return 0
}

// pick asks the picker for a target whose token budget has room for the
// request (docs/routing.md "Headroom"), passing over those without.
func (c *call) pick(pool, tried []*routes.Target, affinity bool) (balance.Lease, balance.Placement, bool) {
	skip := tried
	for {
		l, pl, ok := c.pick1(pool, skip, affinity)
		if !ok || l.Fit(c.tokens) {
			return l, pl, ok
		}
		if len(skip) == len(tried) {
			skip = slices.Clip(tried) // never append into the caller's array
		}
		skip = append(skip, l.Target)
	}
}

// pick1 asks the picker for a target: by the session's hash order when the
// model has affinity on and the picker does it, else by balancing.
func (c *call) pick1(pool, tried []*routes.Target, affinity bool) (balance.Lease, balance.Placement, bool) {
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
	a := &attempt{n: n, target: t, lease: l, started: c.h.o.Now(), model: t.ProviderModel}
	// The provider model, and the URL when the endpoint's path names it:
	// compiled, or for a pattern's templated target made from the star.
	res, err := t.Resolve(c.star, c.spec.Endpoint)
	if err != nil {
		a.state, a.stage, a.err = provider.NotSent, stageInternal, err
		c.failAttempt(a, apierr.BadGateway("bad_backend_url", "the provider model made from the requested name is not usable", false))
		return a
	}
	a.model = res.Model
	u := res.URL
	// A cloud platform's envelope (docs/routing.md "Platforms") makes
	// the URL and the body; nil on the protocol's own wire.
	env := c.spec.Envelopes[t.Backend.Platform]
	if env != nil {
		if u, err = env.URL(t.Backend.Base, a.model, c.req.Stream); err != nil {
			a.state, a.stage, a.err = provider.NotSent, stageInternal, err
			c.failAttempt(a, apierr.BadGateway("bad_backend_url", "the provider model does not make a usable URL on this backend's platform", false))
			return a
		}
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
	model := res.JSON
	if c.spec.Match != nil {
		model = nil // the model is in the URL
	}
	body := &piecesBody{}
	if env != nil && env.Body != nil {
		if err := env.Body(&c.req, c.body, c.r.Header, &body.p); err != nil {
			a.state, a.stage, a.err = provider.NotSent, stageInternal, err
			c.failAttempt(a, apierr.BadGateway("bad_backend_body", "the request body could not be put in this backend's platform envelope", false))
			return a
		}
	} else {
		c.req.Split(c.body, model, res.NamedJSON, a.hide, &body.p)
	}
	a.reqBytes = int64(body.p.Len())

	ctx, a.cancel = context.WithCancelCause(ctx)
	defer a.cancel(nil)
	a.trace.GotConn = a.gotConnHook
	ctx = httptrace.WithClientTrace(ctx, &a.trace)
	a.timer.start(c.h.o.FirstByte, c.h.o.NonStreamTotal, !c.req.Stream, a.cancel)
	defer a.timer.stop()

	// The credential is read once per attempt: a file credential rotated
	// meanwhile reaches the next attempt (docs/operations.md
	// "Credentials").
	cred := t.Backend.Credential.Reveal()
	if tok := t.Backend.Token; tok != nil {
		// A minted token (docs/egress.md "Minted-token credentials"):
		// none to send means nothing was sent, and the backend is not to
		// blame; another target may take the request.
		v, err := tok.Token(ctx)
		if err != nil {
			a.state, a.stage, a.err, a.noToken = provider.NotSent, stageProviderAuth, err, true
			return a
		}
		cred = v.Reveal()
	}
	header := c.spec.Header(c.r.Header, cred)
	if env != nil {
		env.Header(header, cred)
	}
	if a := t.Backend.Auth; a != credential.AuthDefault {
		// The credential's auth_header replaces the protocol's way of
		// sending it.
		for _, h := range credential.CredentialHeaders {
			header.Del(h)
		}
		header.Set(a.Header(cred))
	}
	query := ""
	if c.spec.UpstreamQuery != nil {
		query = c.spec.UpstreamQuery(c.r.URL.Query())
	}
	req := upstreamRequest(ctx, c.spec.Method, u, query, body, header)
	if sg := t.Backend.Signer; sg != nil {
		// Signed over the exact bytes the transport sends (docs/egress.md
		// "Credential kinds").
		if err := sg.Sign(req, body.p.Parts()); err != nil {
			if errors.Is(err, credential.ErrNoToken) {
				// Minted keys (aws_web_identity) with none to sign with:
				// as a minted token's absence above.
				a.state, a.stage, a.err, a.noToken = provider.NotSent, stageProviderAuth, err, true
				return a
			}
			a.state, a.stage, a.err = provider.NotSent, stageInternal, err
			c.failAttempt(a, apierr.BadGateway("upstream_auth_failed", "the gateway could not sign the request with this backend's credential", false))
			return a
		}
	}
	resp, err := c.h.o.Transport.RoundTrip(req)
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
			a.egressFault, a.nodeFault = ns.EgressFault(), ns.NodeFault()
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
	if c.api.Headroom != nil {
		// Every answer, success or not: a 200 says how much is left
		// before the 429 would (docs/routing.md "Headroom").
		a.headroom = c.api.Headroom(resp.Header, c.h.o.Now())
	}

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
	if env := c.spec.Envelopes[a.target.Backend.Platform]; env != nil {
		// The platform's framing and error documents, as the protocol's.
		a.answer = env.Answer(resp, a.answer)
	}
	if resp.StatusCode/100 == 2 && c.spec.Passthrough {
		// From the headers on, non_stream_total bounds the whole answer.
		a.timer.headersIn()
		defer c.readAhead(a).close()
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
		defer c.readAhead(a).close()
		c.relayStream(ctx, a)
		return
	}
	if resp.StatusCode == http.StatusOK && c.req.Stream && c.spec.Stream != nil {
		// A stream in one growing JSON document (Gemini's
		// streamGenerateContent without alt=sse): relayed as it arrives.
		defer c.readAhead(a).close()
		c.relayJSONStream(ctx, a)
		return
	}
	// Relayed whole (a JSON answer): from the headers on,
	// non_stream_total bounds it, never first_byte.
	a.timer.headersIn()
	c.relayWhole(ctx, a)
}

// readAhead makes a's successful answer read ahead of the client, so
// that the backend's slot goes back when the provider has sent it,
// whatever the client's pace (docs/failures.md "Slots"). The caller
// closes it when the relay is done.
func (c *call) readAhead(a *attempt) *readAhead {
	ra := newReadAhead(a.answer, func() { a.lease.Vacate(); a.vacated = true }, a.cancel)
	a.answer = ra
	return ra
}

// exchangeTimer is an attempt's one timer (docs/api.md "Timeouts"). Until
// the response headers it holds first_byte (or non_stream_total if that is
// nearer); for a non-stream answer it is then re-armed for what is left of
// non_stream_total, and the body may take that long. A stream's first
// event makes it the stream's stream_idle timer (streamIdle).
type exchangeTimer struct {
	t         *time.Timer
	sent      time.Time // real time, as the timer's
	total     time.Duration
	wholeLeft atomic.Bool // set only while the timer is stopped: it now bounds the whole answer
	idle      atomic.Bool // set only while the timer is stopped: it now bounds a stream's silence (streamIdle)
	stopped   atomic.Bool // stop ran: the timer no longer re-arms itself

	// A stream's silence (streamIdle, quiet): idleFor is written before
	// idle is set, and read only after it is.
	idleFor   time.Duration
	lastEvent atomic.Int64 // when the provider last sent, in nanoseconds after sent (monotonic)
}

func (x *exchangeTimer) start(firstByte, total time.Duration, whole bool, cancel context.CancelCauseFunc) {
	limit, cause := firstByte, errFirstByteTimeout
	if whole && total < limit {
		limit, cause = total, errTotalTimeout
	}
	x.sent, x.total = time.Now(), total
	x.t = time.AfterFunc(limit, func() { x.fire(time.Now(), cancel, cause) })
}

// fire is the timer's work when it fires at now: it ends the exchange
// with the cause of the limit it holds, unless it holds a stream's
// silence and the provider sent something meanwhile (stillActive).
func (x *exchangeTimer) fire(now time.Time, cancel context.CancelCauseFunc, cause error) {
	switch {
	case x.idle.Load():
		if x.stillActive(now) {
			return
		}
		cancel(errIdleTimeout)
	case x.wholeLeft.Load():
		cancel(errTotalTimeout)
	default:
		cancel(cause)
	}
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

func (x *exchangeTimer) stop() {
	x.stopped.Store(true)
	x.t.Stop()
}

// upstreamRequest is what http.NewRequestWithContext(ctx, method,
// u.String(), bytes.NewReader(body)) returns with header as its Header and
// query as its query, without parsing the URL again, and without GetBody:
// the transport must never replay a POST (docs/architecture.md "Go
// traps").
func upstreamRequest(ctx context.Context, method string, u *url.URL, query string, body *piecesBody, header http.Header) *http.Request {
	uc := *u // u is the backend's, shared
	if query != "" {
		uc.RawQuery = query
	}
	r := http.Request{
		Method: method, URL: &uc, Host: uc.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: body, ContentLength: int64(body.p.Len()),
	}
	return r.WithContext(ctx)
}

// piecesBody is a request body sent from its pieces (provider.Pieces):
// the client's bytes and the edits, never joined into a copy.
type piecesBody struct {
	p   provider.Pieces
	i   int // the piece being read
	off int // read so far of piece i
}

func (b *piecesBody) Read(p []byte) (int, error) {
	parts := b.p.Parts()
	n := 0
	for n < len(p) && b.i < len(parts) {
		k := copy(p[n:], parts[b.i][b.off:])
		n += k
		if b.off += k; b.off == len(parts[b.i]) {
			b.i, b.off = b.i+1, 0
		}
	}
	if b.i == len(parts) {
		return n, io.EOF
	}
	return n, nil
}

// WriteTo writes the pieces left as they are: io.Copy in the transport
// uses it, so no piece passes through an intermediate buffer here.
func (b *piecesBody) WriteTo(w io.Writer) (int64, error) {
	parts := b.p.Parts()
	var n int64
	for ; b.i < len(parts); b.i, b.off = b.i+1, 0 {
		k, err := w.Write(parts[b.i][b.off:])
		n += int64(k)
		if err != nil {
			b.off += k
			return n, err
		}
	}
	return n, nil
}

func (*piecesBody) Close() error { return nil }

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
		c.failAttempt(a, apierr.GatewayTimeout("the provider did not answer within the limit", true))
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

// rateLimits is the limiter's status as the provider API's headers show it.
func rateLimits(st *limits.Status) provider.RateLimits {
	w := func(w limits.Window) provider.RateWindow {
		return provider.RateWindow{Limit: w.Limit, Remaining: w.Remaining, Reset: w.Reset}
	}
	return provider.RateLimits{Requests: w(st.Requests), Tokens: w(st.Tokens)}
}

// limitHeaders shows a limited key its own limits on an answer, in place
// of any rate-limit headers the provider sent: those describe the
// provider account every key shares (docs/limits.md "Headers").
func (c *call) limitHeaders(h http.Header) {
	if c.limited && c.api.LimitHeaders != nil {
		c.api.LimitHeaders.Write(h, c.rl, c.admitted)
	}
	if c.limited && c.budget.Limit > 0 {
		budgetHeaders(h, c.budget)
	}
}

// Budget headers (docs/limits.md "Headers"): what is left of the key's
// binding budget when it was admitted, in US dollars, and the seconds
// until its window ends. The same in every API: providers have no
// header of their own for money.
const (
	headerBudgetRemaining = "X-Scootgate-Budget-Remaining-Usd"
	headerBudgetReset     = "X-Scootgate-Budget-Reset"
)

func budgetHeaders(h http.Header, b limits.BudgetWindow) {
	h[headerBudgetRemaining] = []string{b.Remaining.String()}
	h[headerBudgetReset] = []string{strconv.FormatInt(int64((b.Reset+time.Second-1)/time.Second), 10)}
}

// refuseLimited answers the 429 of a limit refusal (docs/limits.md
// "Refusals"): in the API's shape, with Retry-After the time until a
// request fits and the limit headers; counted per scope and kind, and
// noted for the refusal log with the key's id.
func (c *call) refuseLimited(st *limits.Status) {
	scope, kind := st.Scope.String(), st.Kind.String()
	c.h.o.Observer.ObserveLimitRefusal(scope, kind)
	c.sw.keyID, c.sw.tenantID, c.sw.limit = c.principal.KeyID, c.principal.TenantID, kind
	c.limitHeaders(c.w.Header())
	if st.Kind == limits.KindStore {
		// The store is down and the node fails closed: not the key's
		// doing, and nothing was sent; a retry (on another node, or
		// later) is safe.
		c.fail(apierr.Unavailable("the store of this API key's limits is unreachable", st.RetryAfter))
		return
	}
	whose := "this API key"
	if st.Scope == limits.ScopeTenant {
		whose = "this API key's tenant"
	}
	if st.Kind == limits.KindBudget {
		// Retrying before the window ends is pointless (x-should-retry:
		// false); Retry-After says when it ends.
		c.fail(apierr.BudgetExceeded(st.Scope == limits.ScopeTenant, whose+" has spent its budget for the current window", st.RetryAfter))
		return
	}
	what := "requests per minute"
	switch st.Kind {
	case limits.KindTokens:
		what = "tokens per minute"
	case limits.KindConcurrency:
		what = "concurrent requests"
	}
	c.fail(apierr.RateLimited(st.Scope == limits.ScopeTenant, whose+" is over its limit of "+what, st.RetryAfter))
}

// tokens is what an attempt is debited from its key's and tenant's
// tokens per minute (docs/limits.md "How a node counts"): the usage the provider
// reported (input + output); an estimate from the request's size when it
// may have reached the provider and reported none; nothing when it was
// never sent.
func (a *attempt) tokens() int64 {
	switch {
	case a.hasUsage:
		return a.usage.InputTokens + a.usage.OutputTokens
	case a.state == provider.NotSent:
		return 0
	}
	return limits.EstimateTokens(a.reqBytes)
}

// cost is what an attempt cost at its target's price (docs/usage-events.md
// "Cost"): the reported usage's; with none, for an attempt that may have
// reached the provider, the tokens estimate debits, as input (estimated);
// nothing when it was never sent. priced is false for an unpriced target.
func (a *attempt) cost() (cost usd.Amount, estimated, priced bool) {
	p := a.target.Price
	switch {
	case p == nil:
		return 0, false, false
	case a.hasUsage:
		u := &a.usage
		return p.Cost(usd.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens}), false, true
	case a.state == provider.NotSent:
		return 0, false, true
	}
	return p.Cost(usd.Tokens{Input: limits.EstimateTokens(a.reqBytes)}), true, true
}

// finish accounts for one attempt: one log line and one usage event
// (docs/usage-events.md: one event per provider route attempt), after
// reporting the outcome through the attempt's lease, which gives the
// backend's in-flight slot back.
func (c *call) finish(ctx context.Context, a *attempt) {
	res := c.result(a)
	res.Vacated = a.vacated
	a.lease.Done(res)
	if c.limited {
		now := c.h.o.Now()
		c.ticket.Debit(now, a.tokens())
		if cost, _, _ := a.cost(); cost > 0 {
			c.ticket.Charge(now, cost) // docs/limits.md "Budgets": spend is charged when the attempt ends
		}
	}
	c.sendState = a.state
	c.noteAbandoned(a)
	c.h.o.Observer.ObserveAttempt(a.target.Backend.ID, a.target.Backend.PlatformName, res.Outcome, res.TTFB)
	c.log(ctx, a)
	if c.h.recording() {
		c.h.emit(ctx, c.event(a), a.outcome)
	}
}

// recording reports whether anything takes usage events; without, no
// event is built.
func (h *Handler) recording() bool { return len(h.o.Recorders) > 0 || h.o.Tracer != nil }

// emit hands one attempt's usage event to every recorder and to the
// tracer.
func (h *Handler) emit(ctx context.Context, ev *usageevent.Event, o provider.Outcome) {
	for _, r := range h.o.Recorders {
		r.Record(ev)
	}
	if h.o.Tracer != nil {
		h.o.Tracer.Attempt(ctx, ev, o)
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
	case a.noToken:
		r.Outcome = upstream.CredentialUnavailable
	case a.state == provider.NotSent && a.nodeFault:
		// Out of descriptors (docs/egress.md "Failures"): nothing
		// learned about the backend.
		r.Outcome = upstream.NodeOverloaded
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
	r.Headroom = a.headroom
	return r
}

// result is a.result, with the failures a saturated node caused itself
// (one of its timers ran out while the node was saturated at some moment
// of the attempt) taken off the backend (docs/failures.md "When the node is the
// bottleneck"): the node's timer fired while the answer may have been
// waiting for the node to read it, so its backend's breaker must not
// count it. Nothing is asked of the node's load for any other outcome.
func (c *call) result(a *attempt) upstream.Result {
	res := a.result()
	if res.Outcome == upstream.TransportFailure && a.nodeTimer() && c.h.o.NodeLoad != nil && c.h.o.NodeLoad.SaturatedSince(a.started) {
		res.Outcome = upstream.NodeOverloaded
	}
	return res
}

// nodeTimer reports whether the attempt failed because one of the node's
// own timers ran out: first byte, stream idle, non-stream total (stage
// timeout), or, before a connection was had, the egress connect timeout
// or the first-byte limit.
func (a *attempt) nodeTimer() bool {
	switch a.stage {
	case stageTimeout:
		return true
	case stageConnect:
		return errors.Is(a.err, egress.ErrConnectTimeout) || a.outOfTime()
	}
	return false
}

// outOfTime reports whether the attempt ended because the first-byte or
// the total limit ran out.
func (a *attempt) outOfTime() bool {
	return errors.Is(a.err, errFirstByteTimeout) || errors.Is(a.err, errTotalTimeout)
}

// event is the attempt's usage event, made by the usage package from what
// the request path knows of it.
func (c *call) event(a *attempt) *usageevent.Event {
	at := usage.Attempt{
		NodeID:        c.h.o.NodeID,
		RequestID:     c.rid,
		TenantID:      c.principal.TenantID,
		KeyID:         c.principal.KeyID,
		PublicModel:   c.req.Model,
		ModelPattern:  c.pattern,
		ServedModel:   c.servedModel(),
		ProviderModel: a.model,
		Backend:       a.target.Backend.ID,
		Protocol:      c.api.Protocol.String(),
		Platform:      a.target.Backend.PlatformName,
		Region:        a.target.Backend.Region,
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
	}
	if p := a.target.Price; p != nil {
		at.Cost, at.CostEstimated, at.Priced = a.cost()
		at.PriceVersion = p.Version
	}
	return usage.NewEvent(&at)
}

// stage is where an attempt failed: the usage event's failure_stage
// (docs/usage-events.md) and the request log's stage. The request path
// decides with these values; their wire names are in one place,
// stageNames.
type stage uint8

const (
	stageNone                stage = iota // the attempt succeeded
	stageSelect                           // no target could take the request (logged; no attempt, no event)
	stageConnect                          // egress proxy or provider TLS failed; nothing sent
	stageSend                             // failed after sending may have begun, before the response status
	stageTimeout                          // a configured timeout fired
	stageProviderAuth                     // the provider refused the backend's credential
	stageProviderStatus                   // the provider answered with an error status
	stageResponseBody                     // reading a non-stream answer failed
	stageFirstEvent                       // a stream failed before its first event
	stageStream                           // a stream ended without its terminator
	stageProviderStreamError              // the provider sent an in-band error event
	stageClientCancelled                  // the client went away
	stageShutdown                         // the node cut the attempt at the end of its drain or on a second signal
	stageClientWrite                      // writing the answer to the client failed
	stageInternal                         // a gateway bug stopped the attempt
	stageStreamTotal                      // a stream ran past timeouts.stream_total
	stageNoProgress                       // a stream sent only keepalives for longer than timeouts.stream_progress
	stageClientStalled                    // the client stopped reading: a write to it did not go out within the stream idle limit
	numStages
)

var stageNames = [numStages]string{
	stageNone:                "",
	stageSelect:              "select",
	stageConnect:             usageevent.StageConnect,
	stageSend:                usageevent.StageSend,
	stageTimeout:             usageevent.StageTimeout,
	stageProviderAuth:        usageevent.StageProviderAuth,
	stageProviderStatus:      usageevent.StageProviderStatus,
	stageResponseBody:        usageevent.StageResponseBody,
	stageFirstEvent:          usageevent.StageFirstEvent,
	stageStream:              usageevent.StageStream,
	stageProviderStreamError: usageevent.StageProviderStreamError,
	stageClientCancelled:     usageevent.StageClientCancelled,
	stageShutdown:            usageevent.StageShutdown,
	stageClientWrite:         usageevent.StageClientWrite,
	stageInternal:            usageevent.StageInternal,
	stageStreamTotal:         usageevent.StageStreamTotal,
	stageNoProgress:          usageevent.StageNoProgress,
	stageClientStalled:       usageevent.StageClientStalled,
}

// String returns the stage's wire name, "" for stageNone.
func (s stage) String() string { return stageNames[s] }

// cancelled reports whether the attempt ended because the request did:
// the client went away, the node cut it, the answer could not be written,
// the client stopped reading, or a bug. None of these says anything about the backend.
func (s stage) cancelled() bool {
	return s == stageClientCancelled || s == stageShutdown || s == stageClientWrite || s == stageInternal || s == stageClientStalled
}
