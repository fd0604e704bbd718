package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/sse"
)

// SendState is how far an attempt got (SPEC §6).
type SendState string

const (
	NotSent          SendState = "definitely_not_sent"
	PossiblySent     SendState = "possibly_sent"
	ResponseReceived SendState = "response_received"
)

// Timeout causes, told apart with context.Cause.
var (
	errFirstByteTimeout = errors.New("no first byte from the provider within the limit")
	errIdleTimeout      = errors.New("provider stream idle beyond the limit")
	errTotalTimeout     = errors.New("provider answer not complete within the limit")
)

// maxEventBytes bounds one SSE event read from a provider.
const maxEventBytes = 16 << 20

// attempt is the record of one provider attempt, logged per request.
type attempt struct {
	target    *routes.Target
	state     SendState
	status    int // HTTP status sent to the client, 0 if none
	stage     string
	err       error
	ttfb      time.Duration
	committed bool
}

func (h *Handler) serveCompletion(w http.ResponseWriter, r *http.Request, p routes.Protocol, rid string) {
	start := h.o.Now()
	shape := shapeOf(p)
	if r.Method != http.MethodPost {
		apierr.MethodNotAllowed("use POST").Write(w, shape, rid)
		return
	}
	principal, ok := h.authenticate(w, r, shape, rid)
	if !ok {
		return
	}
	body, aerr := h.readBody(w, r)
	if aerr == nil {
		var req request
		req, aerr = inspect(p, body)
		if aerr == nil {
			h.route(w, r, p, rid, principal.Allows, body, req, start)
			return
		}
	}
	aerr.Write(w, shape, rid)
}

// route resolves the model to a pool and runs the attempt loop.
func (h *Handler) route(w http.ResponseWriter, r *http.Request, p routes.Protocol, rid string, allows func(string) bool, body []byte, req request, start time.Time) {
	shape := shapeOf(p)
	if !allows(req.model) {
		apierr.Forbidden(fmt.Sprintf("this API key may not use model %q", req.model)).Write(w, shape, rid)
		return
	}
	table := h.o.Routes.Load() // pinned for the whole request (SPEC §7)
	if table == nil {
		apierr.Unavailable("routes are not loaded yet", time.Second).Write(w, shape, rid)
		return
	}
	m, ok := table.Model(req.model)
	if !ok {
		apierr.NotFound("model_not_found", fmt.Sprintf("model %q does not exist", req.model)).Write(w, shape, rid)
		return
	}
	pool := m.Pools[p]
	if len(pool) == 0 {
		apierr.BadRequest("protocol_mismatch", fmt.Sprintf("model %q is not served on %s; no conversion between protocols", req.model, r.URL.Path)).Write(w, shape, rid)
		return
	}
	if !offers(pool, req.need) {
		apierr.BadRequest("capability_not_offered", fmt.Sprintf("model %q offers no target with %s", req.model, req.need)).Write(w, shape, rid)
		return
	}

	var (
		tried []*routes.Target
		last  attempt
	)
	for n := 1; n <= h.o.MaxAttempts; n++ {
		t, ok := h.o.Picker.Pick(pool, req.need, tried)
		if !ok {
			break
		}
		tried = append(tried, t)
		last = h.attempt(w, r, shape, rid, t, body, req)
		h.log(r, rid, req, last, n, start)
		if last.state != NotSent || last.status != 0 || r.Context().Err() != nil {
			return
		}
	}
	if len(tried) == 0 {
		// SPEC §11: 503 with Retry-After and x-should-retry: true.
		apierr.Unavailable(fmt.Sprintf("no target for model %q can take traffic now", req.model), time.Second).Write(w, shape, rid)
		h.log(r, rid, req, attempt{state: NotSent, status: 503, stage: "select"}, 0, start)
		return
	}
	// Every attempt failed before sending anything: safe to retry.
	apierr.BadGateway("upstream_unreachable", fmt.Sprintf("could not reach a provider for model %q", req.model), false).Write(w, shape, rid)
}

func offers(pool []*routes.Target, need routes.Caps) bool {
	for _, t := range pool {
		if t.Caps.Has(need) {
			return true
		}
	}
	return false
}

// attempt sends body to t and relays the answer. A returned attempt with
// state NotSent and status 0 has written nothing to w and may be re-picked.
func (h *Handler) attempt(w http.ResponseWriter, r *http.Request, shape apierr.Protocol, rid string, t *routes.Target, body []byte, req request) (a attempt) {
	a.target = t
	defer t.Backend.State.Release()

	out, _, err := jsonedit.Replace(body, "model", t.ProviderModelJSON)
	if err != nil { // inspect accepted the body, so this is a bug
		a.state, a.stage, a.err = NotSent, "rewrite", err
		a.status = 500
		(&apierr.Error{Status: 500, Code: "internal_error", Msg: "could not rewrite the request"}).Write(w, shape, rid)
		return a
	}

	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	var gotConn atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	})
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Backend.Endpoint, bytes.NewReader(out))
	if err != nil {
		a.state, a.stage, a.err, a.status = NotSent, "request", err, 502
		apierr.BadGateway("bad_backend_url", "backend URL is not usable", false).Write(w, shape, rid)
		return a
	}
	up.GetBody = nil // the transport must never replay a POST (SPEC §11)
	up.Header = upstreamHeader(r.Header, t.Backend)

	sent := h.o.Now()
	firstByte := time.AfterFunc(h.o.FirstByte, func() { cancel(errFirstByteTimeout) })
	defer firstByte.Stop()
	if !req.stream {
		total := time.AfterFunc(h.o.NonStreamTotal, func() { cancel(errTotalTimeout) })
		defer total.Stop()
	}

	resp, err := h.o.Transport.RoundTrip(up)
	if err != nil {
		a.err = err
		var ns *egress.NotSentError
		if errors.As(err, &ns) || !gotConn.Load() {
			// Nothing left the node: the caller may re-pick (SPEC §6).
			a.state, a.stage = NotSent, "connect"
			return a
		}
		a.state, a.stage = PossiblySent, "send"
		h.failBeforeCommit(w, shape, rid, &a, ctx, r)
		return a
	}
	defer resp.Body.Close()
	a.state = ResponseReceived
	a.ttfb = h.o.Now().Sub(sent)

	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		// The gateway's credential was refused; the client's key is fine
		// (SPEC §11 "Errors"): never show the client a 401/403 for this.
		a.stage, a.status = "provider_auth", 502
		apierr.BadGateway("upstream_auth_failed", "the provider rejected the gateway's credential for this backend", false).Write(w, shape, rid)
		return a
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode == http.StatusOK && mt == "text/event-stream" {
		h.relayStream(w, r, shape, rid, resp, firstByte, cancel, ctx, &a)
		return a
	}
	h.relayWhole(w, r, shape, rid, resp, firstByte, ctx, &a)
	return a
}

// failBeforeCommit answers a possibly-sent failure before any byte went to
// the client: 504 for timeouts, 502 otherwise, never retryable.
func (h *Handler) failBeforeCommit(w http.ResponseWriter, shape apierr.Protocol, rid string, a *attempt, ctx context.Context, r *http.Request) {
	if r.Context().Err() != nil {
		a.stage, a.status = "client_cancelled", 499
		return
	}
	switch context.Cause(ctx) {
	case errFirstByteTimeout, errTotalTimeout, errIdleTimeout:
		a.status = 504
		a.err = context.Cause(ctx)
		apierr.GatewayTimeout("the provider did not answer within the limit").Write(w, shape, rid)
	default:
		a.status = 502
		apierr.BadGateway("upstream_failed", "the provider connection failed after the request may have been sent", true).Write(w, shape, rid)
	}
}

// relayWhole reads a non-stream answer completely, then sends it: the
// client never sees half a JSON document.
func (h *Handler) relayWhole(w http.ResponseWriter, r *http.Request, shape apierr.Protocol, rid string, resp *http.Response, firstByte *time.Timer, ctx context.Context, a *attempt) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderBody+1))
	firstByte.Stop()
	if err == nil && len(data) > maxProviderBody {
		err = errors.New("provider answer exceeds the size limit")
	}
	if err != nil {
		a.err, a.stage = err, "response_body"
		h.failBeforeCommit(w, shape, rid, a, ctx, r)
		return
	}
	copyResponseHeaders(w.Header(), resp.Header)
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	w.WriteHeader(resp.StatusCode)
	a.status, a.committed = resp.StatusCode, true
	if resp.StatusCode >= 400 {
		a.stage = "provider_status"
	}
	if _, err := w.Write(data); err != nil {
		a.stage, a.err = "client_write", err
	}
}

// relayStream holds the status until the first event is in, then passes
// every event through with its exact bytes and a flush.
func (h *Handler) relayStream(w http.ResponseWriter, r *http.Request, shape apierr.Protocol, rid string, resp *http.Response, firstByte *time.Timer, cancel context.CancelCauseFunc, ctx context.Context, a *attempt) {
	rd := sse.NewReader(resp.Body, maxEventBytes)
	ev, err := rd.Next()
	firstByte.Stop()
	if err != nil {
		a.err, a.stage = err, "first_event"
		h.failBeforeCommit(w, shape, rid, a, ctx, r)
		return
	}
	idle := time.AfterFunc(h.o.StreamIdle, func() { cancel(errIdleTimeout) })
	defer idle.Stop()

	copyResponseHeaders(w.Header(), resp.Header)
	w.Header().Del("Content-Length")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	a.status, a.committed = http.StatusOK, true
	out := &streamWriter{w: w, rc: http.NewResponseController(w)}
	defer out.close()
	if h.o.StreamKeepalive > 0 {
		out.startKeepalive(h.o.StreamKeepalive, keepaliveEvent[shape])
	}

	for {
		done, failed := terminal(shape, &ev)
		if werr := out.event(ev.Raw); werr != nil {
			a.stage, a.err = "client_cancelled", werr
			return
		}
		if failed {
			a.stage = "provider_stream_error" // the provider's own in-band error, passed through
		}
		if done {
			_, _ = io.CopyN(io.Discard, resp.Body, 4<<10) // let the connection be reused
			return
		}
		ev, err = rd.Next()
		if err != nil {
			break
		}
		idle.Reset(h.o.StreamIdle)
	}
	if r.Context().Err() != nil {
		a.stage, a.err = "client_cancelled", r.Context().Err()
		return
	}
	// SPEC §11: a stream without its terminator is a failure; say so in
	// band and never fake [DONE] / message_stop.
	a.stage = "stream"
	msg := "the provider stream ended without its terminator"
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errIdleTimeout):
		msg = "the provider stream was idle beyond the limit"
		a.err = cause
	case err == io.EOF:
		a.err = errors.New("missing terminator")
	default:
		a.err = err
	}
	_ = out.event((&apierr.Error{Status: 502, Msg: msg}).InBand(shape, rid))
}

// keepaliveEvent is written after StreamKeepalive of provider silence so
// that load balancers with idle limits keep long reasoning streams open
// (SPEC §11 "Timeouts"). Both are ignored by the official SDKs.
var keepaliveEvent = [2][]byte{
	apierr.OpenAI:    []byte(": keepalive\n\n"),
	apierr.Anthropic: []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n"),
}

// streamWriter serialises the relay loop's events and the keepalive
// timer's pings onto one ResponseWriter, flushing after each.
type streamWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu     sync.Mutex
	closed bool        // guarded by mu: the handler has returned or is returning
	ka     *time.Timer // nil when keepalive is off
	every  time.Duration
}

func (s *streamWriter) event(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	if s.ka != nil {
		s.ka.Reset(s.every)
	}
	return s.rc.Flush()
}

func (s *streamWriter) startKeepalive(every time.Duration, ping []byte) {
	s.every = every
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ka = time.AfterFunc(every, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		if _, err := s.w.Write(ping); err == nil && s.rc.Flush() == nil {
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

var doneData = []byte("[DONE]")

// terminal reports whether ev ends the stream cleanly, and whether it is
// the provider's own in-band error.
func terminal(shape apierr.Protocol, ev *sse.Event) (done, failed bool) {
	if shape == apierr.Anthropic {
		switch ev.Type {
		case "message_stop":
			return true, false
		case "error":
			return false, true
		}
		return false, false
	}
	if bytes.Equal(ev.Data, doneData) {
		return true, false
	}
	return false, bytes.HasPrefix(ev.Data, []byte(`{"error"`))
}

func (h *Handler) log(r *http.Request, rid string, req request, a attempt, n int, start time.Time) {
	backend := ""
	if a.target != nil {
		backend = a.target.Backend.ID
	}
	attrs := []slog.Attr{
		slog.String("request_id", rid),
		slog.String("path", r.URL.Path),
		slog.String("model", req.model),
		slog.Bool("stream", req.stream),
		slog.String("backend", backend),
		slog.Int("attempt", n),
		slog.String("send_state", string(a.state)),
		slog.Int("status", a.status),
		slog.Float64("ttfb_ms", ms(a.ttfb)),
		slog.Float64("duration_ms", ms(h.o.Now().Sub(start))),
	}
	level := slog.LevelInfo
	if a.stage != "" {
		attrs = append(attrs, slog.String("stage", a.stage))
	}
	if a.err != nil {
		// Errors from the transport may embed the provider URL (url.Error);
		// config forbids userinfo and queries in base URLs, and the client
		// body and keys never reach an error.
		attrs = append(attrs, slog.String("error", a.err.Error()))
		level = slog.LevelWarn
	}
	h.o.Logger.LogAttrs(r.Context(), level, "request", attrs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
