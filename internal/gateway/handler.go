package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Authenticator resolves a request's client key (implemented by *authz.Store).
type Authenticator interface {
	Authenticate(h http.Header, query []string, now time.Time) (*authz.Principal, error)
}

// Picker chooses a target and takes its in-flight slot (implemented by the
// balance package). tried lists targets this request already attempted.
type Picker interface {
	Pick(pool []*routes.Target, need routes.Caps, tried []*routes.Target) (balance.Lease, bool)
}

// SessionPicker is a Picker that also places requests that name a
// session by their key (implemented by *balance.Affinity; docs/routing.md
// "Affinity"). With key 0 it balances and says balance.Keyless.
type SessionPicker interface {
	PickKey(pool []*routes.Target, need routes.Caps, tried []*routes.Target, key balance.Key) (balance.Lease, balance.Placement, bool)
}

// Recorder takes a finished attempt's usage event (implemented by
// *usage.Recorder). Record must not block.
type Recorder interface {
	Record(ev *usageevent.Event)
}

// Tracer turns a finished attempt's usage event into a span under the
// request's span in ctx (implemented by *tracing.Tracer). It must not
// block. Recording reports whether ctx carries a span to record into:
// only then does the request path read the answer's outcome (response
// model, finish reasons) for Attempt.
type Tracer interface {
	Recording(ctx context.Context) bool
	Attempt(ctx context.Context, ev *usageevent.Event, out provider.Outcome)
}

// Observer takes the request path's measurements (implemented by
// *metrics.Metrics; label values are closed sets or config ids).
type Observer interface {
	ObserveRequest(endpoint provider.Endpoint, status int, sendState provider.SendState, d time.Duration, stream bool)
	ObserveModels(status int, d time.Duration)
	ObserveAttempt(backend, platform string, outcome upstream.Outcome, ttfb time.Duration)
	// ObserveLimitRefusal counts a 429 by a per-key or per-tenant limit:
	// scope "key" or "tenant", kind "requests", "tokens" or "concurrency".
	ObserveLimitRefusal(scope, kind string)
	// ObserveFallback counts a request served by a fallback model: from
	// and to are model entries of the routes, reason one of a closed set
	// (docs/routing.md "Fallbacks").
	ObserveFallback(from, to, reason string)
}

// Saturation says whether the node itself has been saturated since t
// (implemented by *upstream.NodeLoad). It is called only for attempts that
// failed on one of the node's own timers, and must be cheap.
type Saturation interface {
	SaturatedSince(t time.Time) bool
}

var _ Saturation = (*upstream.NodeLoad)(nil)

// Options configures a Handler. All fields are required unless noted.
type Options struct {
	Auth      Authenticator
	Routes    *routes.Holder
	Picker    Picker
	Transport http.RoundTripper // the egress transport; never a direct one

	BodyLimit int64
	// BodyReadTimeout bounds reading the whole request body (0 = none).
	BodyReadTimeout time.Duration
	// BodyDeadlineSet says that the server in front already holds every
	// request body to BodyReadTimeout (GuardBody sets the
	// connection's read deadline as the request arrives and clears it at
	// the body's end): the handler then sets no deadline of its own, a
	// pair of deadline changes per request, and BodyReadTimeout only names
	// the limit in the 408.
	BodyDeadlineSet bool
	MaxAttempts     int
	FirstByte       time.Duration
	StreamIdle      time.Duration
	// StreamProgress bounds how long a stream may send only keepalive
	// comments and pings after its first event; StreamTotal bounds a whole
	// stream from the request's sending. Both are checked against Now as
	// each event arrives (silence is StreamIdle's); 0 = none.
	StreamProgress time.Duration
	StreamTotal    time.Duration
	NonStreamTotal time.Duration
	// StreamKeepalive, when positive, sends an SSE comment (OpenAI) or a
	// ping event (Anthropic) after this much provider silence.
	StreamKeepalive time.Duration

	// InjectStreamUsage asks OpenAI providers for stream usage the client
	// did not request (stream_options.include_usage) and hides the extra
	// usage-only chunk from the client (docs/usage-events.md). It is the node-wide
	// switch: a request is only rewritten when its backend's
	// routes.Backend.InjectUsage (include_usage, OpenAI only) is on too.
	InjectStreamUsage bool
	// Recorders each receive every provider attempt's usage event, in
	// order (the node: per-model metrics, then the usage recorder); none
	// = off.
	Recorders []Recorder
	// Tracer, when set, receives the same event with the request's
	// context, for the attempt's trace span; nil = off.
	Tracer Tracer
	// NodeID is stamped on every usage event.
	NodeID string
	// Observer receives metrics; nil = off.
	Observer Observer
	// NodeLoad, when set, says whether the node itself was saturated
	// while an attempt ran: one that failed on one of the node's own
	// timers is then the node's failure, not its backend's (docs/failures.md "When the node
	// is the bottleneck"). nil = never saturated.
	NodeLoad Saturation
	// Refused, when set, is told of every request the node refused by
	// itself with a 4xx before any provider attempt (the app logs them,
	// rate-limited). It must not block.
	Refused func(Refusal)

	// SocketIdle closes a WebSocket connection on which no answer has
	// run for this long (0: two minutes).
	SocketIdle time.Duration
	// SocketLifetime bounds a WebSocket connection's life, judged by Now
	// as each frame that asks for an answer arrives: past it, the frame
	// gets the lifetime's error event and the socket is closed
	// (0: DefaultSocketLifetime).
	SocketLifetime time.Duration
	// Realtime bounds realtime sessions (docs/api.md "Realtime
	// sessions"); zero fields take their defaults.
	Realtime RealtimeOptions

	Logger   *slog.Logger
	Draining *atomic.Bool     // optional; set while draining: answers add Connection: close
	Now      func() time.Time // optional; time.Now
}

// Handler is the public API handler.
type Handler struct {
	o        Options
	realNow  bool // o.Now is time.Now: a real-time reading the relay takes anyway serves as a reading of it
	started  time.Time
	limit    *ConcurrencyLimit // set by UseLimit; nil: sockets count nowhere
	sockets  sockets
	realtime realtimeSessions // open realtime sessions, for RecheckSessions
	// cancelLogs is each key's budget of request lines for attempts its
	// client cancelled before anything was sent (call.log).
	cancelLogs *usage.KeyBudget
	abandons   *abandons // each key's budget of requests its client abandoned at once
	endpoints  endpoints
	dates      httpDates // the Date header of the current second
}

// endpoints is the catalog's endpoint table as the handler looks paths
// up in it, built once: exact client paths in a map, then the endpoints
// whose path names the model, each with its API.
type endpoints struct {
	exact map[string]endpoint
	match []endpoint
	doors []endpoint // one per door, looked up last
	// modelsDoors are the platforms' model listings, by path.
	modelsDoors map[string]modelsDoor
}

type modelsDoor struct {
	api  *provider.API
	door *provider.ModelsDoor
}

type endpoint struct {
	spec *provider.Spec
	api  *provider.API
	door *provider.Door // the cloud client path the request came in by; nil for the endpoint's own
}

func newEndpoints() endpoints {
	e := endpoints{exact: map[string]endpoint{}}
	for _, a := range catalog.APIs() {
		for _, d := range a.ModelsDoors {
			if e.modelsDoors == nil {
				e.modelsDoors = make(map[string]modelsDoor)
			}
			e.modelsDoors[d.Path] = modelsDoor{a, d}
		}
		for _, s := range a.Endpoints {
			if s.Path != "" {
				e.exact[s.Path] = endpoint{s, a, nil}
				for _, p := range s.AlsoPaths {
					e.exact[p] = endpoint{s, a, nil}
				}
			} else if s.Match != nil {
				e.match = append(e.match, endpoint{s, a, nil})
			} // else the endpoint is reached only through its doors
			for _, d := range s.Doors {
				e.doors = append(e.doors, endpoint{s, a, d})
			}
		}
	}
	return e
}

// lookup returns the endpoint whose client path is path (zero when none)
// and the model the path names, for one whose path names it.
func (e *endpoints) lookup(path string) (endpoint, string) {
	if ep, ok := e.exact[path]; ok {
		return ep, ""
	}
	for _, ep := range e.match {
		if m, ok := ep.spec.Match(path); ok {
			return ep, m
		}
	}
	return endpoint{}, ""
}

// lookupDoor returns the endpoint one of whose doors is escapedPath (zero
// when none), with what the door read from the path.
func (e *endpoints) lookupDoor(escapedPath string) (ep endpoint, model string, stream bool, err *provider.BodyError) {
	for _, ep := range e.doors {
		if m, st, ok, err := ep.door.Match(escapedPath); ok {
			return ep, m, st, err
		}
	}
	return endpoint{}, "", false, nil
}

// New returns a Handler.
func New(o Options) *Handler {
	realNow := o.Now == nil
	if realNow {
		o.Now = time.Now
	}
	if o.Draining == nil {
		o.Draining = new(atomic.Bool)
	}
	if o.MaxAttempts < 1 {
		o.MaxAttempts = 1
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{o: o, realNow: realNow, started: o.Now(), cancelLogs: usage.NewKeyBudget(usage.CancelRate, usage.CancelBurst), abandons: newAbandons(), endpoints: newEndpoints()}
}

// statusWriter remembers the status sent, for the request metric.
// Unwrap keeps http.ResponseController (flush) working through it.
type statusWriter struct {
	http.ResponseWriter
	dates  *httpDates
	status int
	code   string // the code of the error the node wrote itself (apierr), if any

	keyID, tenantID, limit string // set by a limit refusal, for the refusal log
}

// NoteError implements apierr.Noter.
func (s *statusWriter) NoteError(e *apierr.Error) {
	if s.status == 0 {
		s.code = e.Code
	}
}

// Refusal is a request the node refused by itself with a 4xx before any
// provider attempt (bad or missing key, model not allowed, unknown model
// or endpoint, bad body, body too large), for the refusal log.
type Refusal struct {
	RequestID string
	Path      string // the URL path, never the query; "[redacted]" if it holds the request's key
	Model     string // the model the request asked for; "" when not read; "[redacted]" as Path
	Status    int
	Reason    string // the error code sent: invalid_api_key, model_not_found, not_found, …
	// For a limit refusal (Reason key_rate_limited or tenant_rate_limited):
	// the key and tenant ids (never the key) and the limit's kind, so that
	// the log can bound its lines per key.
	KeyID, TenantID, Limit string
}

// noteRefusal reports the request to Options.Refused when the node
// answered it with its own 4xx error.
func (h *Handler) noteRefusal(w *statusWriter, r *http.Request, rid, model string) {
	if h.o.Refused == nil || w.code == "" || w.status < 400 || w.status > 499 {
		return
	}
	h.o.Refused(Refusal{
		RequestID: rid, Path: withoutKey(r.URL.Path, r), Model: withoutKey(model, r),
		Status: w.status, Reason: w.code,
		KeyID: w.keyID, TenantID: w.tenantID, Limit: w.limit,
	})
}

// withoutKey returns s, or "[redacted]" when s contains a credential the
// request carries ([holdsKey]).
func withoutKey(s string, r *http.Request) string {
	if holdsKey(s, r) {
		return "[redacted]"
	}
	return s
}

// holdsKey reports whether s contains a credential the request carries
// (a client that put its key in the path or the model): any place
// authz.ExtractKey reads a key from (Authorization, every API's key
// headers), and every API's key query parameter.
func holdsKey(s string, r *http.Request) bool {
	holds := func(v string) bool {
		v = strings.TrimSpace(v)
		return v != "" && strings.Contains(s, v)
	}
	for _, v := range r.Header.Values("Authorization") {
		if scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " "); ok && strings.EqualFold(scheme, "bearer") {
			v = tok
		}
		if holds(v) {
			return true
		}
	}
	for _, name := range catalog.KeyHeaders() {
		for _, v := range r.Header.Values(name) {
			if holds(v) {
				return true
			}
		}
	}
	for _, name := range catalog.KeyQueries() {
		if !strings.Contains(r.URL.RawQuery, name+"=") {
			continue
		}
		for _, v := range r.URL.Query()[name] {
			if holds(v) {
				return true
			}
		}
	}
	return false
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
		s.date()
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
		s.date()
	}
	return s.ResponseWriter.Write(b)
}

// date sets the answer's Date header, as net/http would, from the cache
// of the current second.
func (s *statusWriter) date() {
	if s.dates != nil {
		s.Header()["Date"] = s.dates.now(time.Now())
	}
}

// httpDates is the Date header of the current second, shared by the
// answers of that second: net/http formats one for every answer that has
// none (~1.9k instructions, a request's largest single cost in net/http's
// header writing); a lookup here is a clock reading and a compare.
type httpDates struct{ cur atomic.Pointer[httpDate] }

type httpDate struct {
	sec   int64
	value []string // shared by header maps: nothing changes a value in place
}

// now returns the Date header value for the real time t.
func (d *httpDates) now(t time.Time) []string {
	sec := t.Unix()
	if c := d.cur.Load(); c != nil && c.sec == sec {
		return c.value
	}
	c := &httpDate{sec: sec, value: []string{t.UTC().Format(http.TimeFormat)}}
	d.cur.Store(c)
	return c.value
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

type nopObserver struct{}

func (nopObserver) ObserveRequest(provider.Endpoint, int, provider.SendState, time.Duration, bool) {}
func (nopObserver) ObserveModels(int, time.Duration)                                               {}
func (nopObserver) ObserveAttempt(string, string, upstream.Outcome, time.Duration)                 {}
func (nopObserver) ObserveLimitRefusal(string, string)                                             {}
func (nopObserver) ObserveFallback(string, string, string)                                         {}

func (h *Handler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := h.o.Now()
	ctx := r.Context()
	ep, pathModel := h.endpoints.lookup(r.URL.Path)
	var (
		doorStream bool
		doorErr    *provider.BodyError
	)
	if ep.spec == nil {
		ep, pathModel, doorStream, doorErr = h.endpoints.lookupDoor(r.URL.EscapedPath())
		if doorErr == nil && ep.door != nil && ep.door.Query != nil {
			doorErr = ep.door.Query(r.URL.Query())
		}
	}
	spec, api := ep.spec, ep.api
	var (
		c *call
		w *statusWriter
	)
	if spec != nil {
		c = &call{} // the writer inside: one allocation for both
		w = &c.sw
	} else {
		w = &statusWriter{}
		api = catalog.Claiming(r)
	}
	w.ResponseWriter, w.dates = rw, &h.dates
	var dw provider.DoorWriter
	if ep.door != nil {
		// docs/api.md "Cloud client paths": the answer in the door's framing.
		dw = ep.door.Writer(rw)
		w.ResponseWriter = dw
		c.door, c.doorStream = ep.door, doorStream
	}
	rid := newRequestID()
	ridValue := []string{rid}
	w.Header()["X-Request-Id"] = ridValue
	if api.RequestIDHeader != "" {
		// The API's SDKs read an error's request id from here. (One
		// value for both: nothing changes a header value in place.)
		w.Header()[http.CanonicalHeaderKey(api.RequestIDHeader)] = ridValue
	}
	if h.o.Draining.Load() && r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close") // docs/operations.md "Drain"
	}
	if doorErr != nil {
		apierr.BadRequest(doorErr.Code, doorErr.Msg).Write(w, api, rid)
		h.o.Observer.ObserveRequest(spec.Endpoint, w.status, provider.NoAttempt, h.o.Now().Sub(start), false)
		h.noteRefusal(w, r, rid, "")
		finishDoor(dw)
		return
	}
	if spec != nil && ep.door == nil && r.URL.RawPath != "" {
		// docs/api.md "Endpoints": an endpoint is served at its path as
		// written, never at a percent-encoded spelling of it that a path
		// rule in front (a load balancer, a WAF) would not recognise.
		// RawPath is set only when the path as sent is not the plain
		// encoding of the decoded one.
		apierr.BadRequest("non_canonical_path", "the request path must be written without percent-encoding").Write(w, api, rid)
		h.o.Observer.ObserveRequest(spec.Endpoint, w.status, provider.NoAttempt, h.o.Now().Sub(start), false)
		h.noteRefusal(w, r, rid, "")
		return
	}
	if spec != nil {
		res := h.serveEndpoint(ctx, c, r, spec, pathModel, api, rid)
		h.o.Observer.ObserveRequest(spec.Endpoint, w.status, res.sendState, h.o.Now().Sub(start), res.stream)
		h.noteRefusal(w, r, rid, res.model)
		if !res.abort {
			finishDoor(dw)
		}
		if res.abort {
			// Accounted for above; net/http closes the connection (HTTP/1)
			// or resets the stream (HTTP/2) without a log line, and never
			// ends a chunked answer as if it were complete.
			panic(http.ErrAbortHandler)
		}
		return
	}
	model := ""
	defer func() { h.noteRefusal(w, r, rid, model) }()
	path := r.URL.Path
	if md, ok := h.endpoints.modelsDoors[path]; ok && r.URL.RawPath == "" {
		h.serveModelsDoor(w, r, md, rid)
		h.o.Observer.ObserveModels(w.status, h.o.Now().Sub(start))
		return
	}
	for _, a := range catalog.APIs() {
		if code, msg, ok := a.NotRouted(path); ok {
			apierr.NotFound(code, msg).Write(w, api, rid) // in the client's shape
			return
		}
	}
	if name, ok := catalog.ModelsPath(path); ok {
		model = name
		if name == "" {
			h.serveModels(w, r, api, rid)
		} else {
			h.serveModel(w, r, api, rid, name)
		}
		h.o.Observer.ObserveModels(w.status, h.o.Now().Sub(start))
		return
	}
	switch {
	case r.Method == http.MethodHead && (path == "/" || path == "/api/hello"):
		// Claude Code's probes of its base URL (HEAD / at start, HEAD
		// /api/hello to open a connection ahead of its first request):
		// 200 without a body, as Anthropic's API answers them, so they
		// are neither refused nor logged (README.md "Claude Code").
		w.WriteHeader(http.StatusOK)
	case path == "/":
		apierr.NotFound("not_found", "no such endpoint").Write(w, api, rid)
	default:
		apierr.NotFound("not_found", "no such endpoint: "+path).Write(w, api, rid)
	}
}

// finishDoor completes an answer written through a door's writer (nil:
// none). A failure to write it is the client's connection failing, which
// nothing after it can report.
func finishDoor(dw provider.DoorWriter) {
	if dw != nil {
		_ = dw.Finish()
	}
}

// authenticate answers 401 itself when the key is missing or not valid.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request, api *provider.API, rid string) (*authz.Principal, bool) {
	return h.authenticateDoor(w, r, api, rid, nil)
}

// authenticateDoor is authenticate for a request that came in by a door
// whose MissingKey is missingKey (nil: none, or no door): it tells a
// client without a key how the door's clients send one (docs/api.md
// "Cloud client paths").
func (h *Handler) authenticateDoor(w http.ResponseWriter, r *http.Request, api *provider.API, rid string, missingKey func(http.Header) string) (*authz.Principal, bool) {
	p, err := h.o.Auth.Authenticate(r.Header, keyQuery(r, api), h.o.Now())
	if err == nil {
		connAuthenticated(r) // docs/operations.md "Connection floods"
		return p, true
	}
	e := unauthorized(err)
	if missingKey != nil && errors.Is(err, authz.ErrMissingKey) {
		e = apierr.Unauthorized(missingKey(r.Header))
	}
	e.Write(w, api, rid)
	return nil, false
}

// keyQuery is the values of the API's key query parameter in r, nil for
// none.
func keyQuery(r *http.Request, api *provider.API) []string {
	if api.QueryKey == "" {
		return nil
	}
	return r.URL.Query()[api.QueryKey]
}

// unauthorized is the 401 for an authentication error.
func unauthorized(err error) *apierr.Error {
	msg := "invalid API key"
	switch {
	case errors.Is(err, authz.ErrMissingKey):
		msg = "missing API key: send Authorization: Bearer <key> or x-api-key"
	case errors.Is(err, authz.ErrExpired):
		msg = "API key expired"
	}
	return apierr.Unauthorized(msg)
}

// readBody enforces the body limit before anything leaves the node (docs/api.md "Body limit").
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apierr.Error) {
	tooLarge := func() *apierr.Error {
		return apierr.TooLarge("request body exceeds the limit of " + strconv.FormatInt(h.o.BodyLimit, 10) + " bytes")
	}
	if r.ContentLength > h.o.BodyLimit {
		return nil, tooLarge()
	}
	size := 4096
	if r.ContentLength > 0 {
		size = int(r.ContentLength) + 1 // +1 so ReadAll sees EOF without growing
	}
	if h.o.BodyReadTimeout > 0 && !h.o.BodyDeadlineSet {
		// A body trickled at 1 byte/s must not hold a request slot forever
		// (docs/api.md "Body limit"). The deadline is cleared once the body is in, so a
		// long stream answer is not cut by it.
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(h.o.BodyReadTimeout)) == nil {
			defer rc.SetReadDeadline(time.Time{})
		}
	}
	body := r.Body
	if r.ContentLength < 0 {
		// Without a Content-Length only the limit bounds the body: past
		// it, MaxBytesReader fails the read and has the server close the
		// connection. With one (at most the limit, checked above) the
		// server reads no more than it says.
		body = http.MaxBytesReader(w, r.Body, h.o.BodyLimit)
	}
	buf, err := readAll(body, size, int(h.o.BodyLimit)+1)
	if err == nil {
		return buf, nil
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &apierr.Error{Status: http.StatusRequestTimeout, Code: "body_timeout",
			Msg: "request body not received within " + h.o.BodyReadTimeout.String()}
	}
	return nil, apierr.BadRequest("body_read_failed", "could not read the request body")
}

// ErrShutdown is the cause the node cancels request contexts with
// (context.CancelCauseFunc) when it cuts the requests still running at
// the end of a drain or on a second signal. An attempt whose context ends
// with this cause was cut by the node, not abandoned by its client.
var ErrShutdown = errors.New("the node is shutting down")

// log writes the attempt's request line (docs/operations.md "Logs").
// Lines of attempts cancelled by their client before anything was sent
// are limited per key (usage.CancelRate, usage.CancelBurst): a client
// that opens and resets requests by the thousand gets a few lines a
// second, the next of which says how many were left out.
func (c *call) log(ctx context.Context, a *attempt) {
	level := slog.LevelInfo
	if a.err != nil {
		level = slog.LevelWarn
	}
	lg := c.h.o.Logger
	if !lg.Enabled(ctx, level) {
		return
	}
	var suppressed uint64
	if a.state == provider.NotSent && a.stage == stageClientCancelled {
		var ok bool
		if ok, suppressed = c.h.cancelLogs.Take(c.principal.KeyID, c.h.o.Now()); !ok {
			return
		}
	}
	backend := ""
	if a.target != nil {
		backend = a.target.Backend.ID
	}
	// A fixed array: at most 17 attributes, none allocated for the slice.
	var buf [17]slog.Attr
	attrs := append(buf[:0],
		slog.String("request_id", c.rid),
		slog.String("path", c.r.URL.Path),
		slog.String("model", c.req.Model),
		slog.Bool("stream", c.req.Stream),
		slog.String("backend", backend),
		slog.Int("attempt", a.n),
		slog.String("send_state", a.state.String()),
		slog.Int("status", a.status),
		slog.Float64("ttfb_ms", ms(a.ttfb.Microseconds())),
		slog.Float64("duration_ms", ms(c.h.o.Now().Sub(c.start).Microseconds())),
		slog.String("placement", a.placement.String()),
	)
	if c.served != nil {
		// docs/routing.md "Fallbacks": the model that served, and why
		// the one asked for could not.
		attrs = append(attrs, slog.String("served_model", c.served.Name), slog.String("fallback", c.fallback.String()))
	}
	if c.session != 0 {
		// A short hash, so that turns of one session can be followed in
		// the log; never the key (it may carry a user id).
		attrs = append(attrs, slog.String("session", strconv.FormatUint(uint64(c.session)>>40, 16)))
	}
	if a.stage != stageNone {
		attrs = append(attrs, slog.String("stage", a.stage.String()))
	}
	if a.err != nil {
		attrs = append(attrs, slog.String("error", errorText(a.err)))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", suppressed))
	}
	// The node's handler writes this line without slog's per-line work
	// (docs/performance.md "Counted per request (`make bench-count`)"); any other, as slog.
	logline.LogAttrs(ctx, lg, level, "request", attrs...)
}

// errorText is an error for the log without the request URL that Go's
// *url.Error embeds (never a URL query in logs, docs/operations.md
// "Logs"; the backend id is logged beside it). Client bodies and keys
// never reach an error.
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// ms is a duration in microseconds as milliseconds with three decimals.
func ms(us int64) float64 { return float64(us) / 1000 }
