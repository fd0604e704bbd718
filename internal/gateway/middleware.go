package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/provider/catalog"
)

// The request path's middlewares, outermost first as the node wires them:
// LimitResets (conns.go), CloseAfterChunked, GuardBody, LimitConcurrency,
// then the Handler.

// CloseAfterChunked closes the connection after every HTTP/1.x request with
// a chunked body. It is the request-smuggling guard that net/http lacks
// (docs/api.md "Request framing").
//
// net/http rejects two differing Content-Length headers (400) and any
// Transfer-Encoding other than a single "chunked" (501), but it accepts
// Content-Length together with Transfer-Encoding: chunked: it frames the
// body by the chunks, deletes Content-Length from the header map (so a
// handler cannot tell the two cases apart), and keeps the connection open.
// Behind a load balancer that frames by Content-Length, the bytes after the
// last chunk would then be read as a second request that the balancer
// never saw. RFC 9112 §6.3 says the server MUST close the connection after
// answering such a message; closing after every chunked request does that
// without seeing the header. Clients of this API send Content-Length (the
// official SDKs do), so keep-alive is lost only by the rare chunked upload.
//
// It must wrap everything else: a handler that answers without reading the
// body (a 401, the concurrency refusal) would otherwise let net/http drain
// the chunked body and parse what follows as the next request.
func CloseAfterChunked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && slices.Contains(r.TransferEncoding, "chunked") {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// GuardBody bounds how long a request body may hold a connection, whatever
// its framing and whoever answers (docs/api.md "Slow bodies and early answers"):
//
//   - The whole body must arrive within limits.body_read_timeout of the
//     request's headers: a read deadline is set on entry and cleared only
//     when the body has been read to its end, so a long answer stream is
//     never cut by it. A body dripped at one byte every few seconds is cut
//     with Content-Length as with chunked framing, and also when the
//     handler never reads it.
//   - An answer sent before the body was read to its end (401, 404, 405,
//     413, the concurrency 503, a 408) goes out at once with Connection:
//     close. Without that header net/http reads up to 256 KiB of the unread
//     body before it writes the status, and for a dripped body that read
//     never ends.
//   - After such an answer the rest of the body is read and thrown away
//     for at most limits.linger_timeout (never past the body deadline),
//     then the connection closes. A client that writes its whole body
//     before reading (most HTTP client libraries) then sees the status;
//     closing at once would leave unread bytes in the node's socket, the
//     kernel would answer them with a reset, and the client would lose the
//     status with the reset (ECONNRESET instead of the 413).
//
// HTTP/2 needs only the deadline: the server resets the stream of an
// unread body itself, and the connection carries other streams.
//
// It must wrap the concurrency limit, so that its 503 closes the same way
// and the lingering read does not hold a request slot.
func GuardBody(next http.Handler, timeout, linger time.Duration) http.Handler {
	return &bodyGuard{next: next, timeout: timeout, linger: linger, now: time.Now}
}

type bodyGuard struct {
	// immutable
	next    http.Handler
	timeout time.Duration    // limits.body_read_timeout
	linger  time.Duration    // limits.linger_timeout; 0 = close at once
	now     func() time.Time // time.Now; the deadlines are the socket's, so real time
}

func (g *bodyGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		g.next.ServeHTTP(w, r)
		return
	}
	rc := http.NewResponseController(w)
	deadline := g.now().Add(g.timeout)
	if rc.SetReadDeadline(deadline) != nil {
		// Not a connection with deadlines (an in-memory test writer): no
		// socket to hold, nothing to guard.
		g.next.ServeHTTP(w, r)
		return
	}
	gd := &guarded{}
	gd.body = guardedBody{ReadCloser: r.Body, rc: rc, gd: gd}
	gd.w = guardedWriter{ResponseWriter: w, gd: gd, h1: r.ProtoMajor == 1}
	r.Body = &gd.body
	g.next.ServeHTTP(&gd.w, r)

	if gd.complete.Load() || r.ProtoMajor != 1 {
		return
	}
	// The answer went out before the body was in (or the handler wrote
	// nothing, and net/http's own discard runs under the body deadline).
	now := g.now()
	if gd.failed.Load() || !gd.w.answered.Load() || g.linger == 0 || expectsContinue(r) {
		// A read already failed (the body deadline: a 408), the client
		// waits for a 100 Continue it will not get, or lingering is off:
		// close now; net/http's discard fails at once on a past deadline.
		_ = rc.SetReadDeadline(now)
		return
	}
	// Send the status before lingering (it is buffered until the handler
	// returns otherwise), then read what the client still sends.
	_ = rc.Flush()
	until := now.Add(g.linger)
	if deadline.Before(until) {
		until = deadline
	}
	_ = rc.SetReadDeadline(until)
	_, _ = io.Copy(io.Discard, gd.body.ReadCloser)
	_ = rc.SetReadDeadline(now) // whatever remains, net/http must not wait for it
}

// expectsContinue reports whether the client sent Expect: 100-continue. An
// early answer means net/http never sent the 100, so such a client is not
// sending: there is nothing to linger for.
func expectsContinue(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Expect"), "100-continue")
}

// guarded is one request's body and writer wrappers, allocated together.
type guarded struct {
	body guardedBody
	w    guardedWriter
	// atomic: the body is read on the handler goroutine; a stream's
	// keepalive writes from a timer goroutine.
	complete atomic.Bool // the body was read to its end
	failed   atomic.Bool // a body read failed (deadline, reset, bad chunking)
}

// guardedBody clears the body deadline at the body's end.
type guardedBody struct {
	io.ReadCloser
	rc *http.ResponseController
	gd *guarded
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		if !b.gd.complete.Swap(true) {
			_ = b.rc.SetReadDeadline(time.Time{}) // the answer may stream for hours
		}
	case err != nil:
		b.gd.failed.Store(true)
	}
	return n, err
}

// guardedWriter adds Connection: close to an HTTP/1 answer that starts
// before the body was read to its end.
type guardedWriter struct {
	http.ResponseWriter
	gd       *guarded
	h1       bool
	answered atomic.Bool // WriteHeader or Write was called
}

func (w *guardedWriter) WriteHeader(code int) {
	w.begin(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *guardedWriter) Write(p []byte) (int, error) {
	w.begin(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

func (w *guardedWriter) begin(code int) {
	if code < 200 || w.answered.Load() || w.answered.Swap(true) {
		return
	}
	if w.h1 && !w.gd.complete.Load() {
		w.Header().Set("Connection", "close")
	}
}

// Unwrap lets http.ResponseController (flush, deadlines) reach the
// connection through the wrapper.
func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ConcurrencyLimit caps the requests in flight on the API listener,
// streams included (docs/api.md "Connection limit"; OWASP API4). Beyond the cap
// it answers at once, before reading the body or touching a backend, with
// a 503 that tells the client a retry is safe (docs/api.md "Tell the client
// whether a retry is safe": x-should-retry: true on local 503s). A counter and no queue: under overload a fast
// answer that a load balancer or SDK can retry elsewhere beats a wait.
//
// While the node's own load says it sheds (Adapt), it also bounds the
// requests served at once below the cap and queues the rest for a slot
// (admit.go; docs/failures.md "Shedding").
type ConcurrencyLimit struct {
	// immutable after Queue
	next      http.Handler
	max       int64
	log       *slog.Logger
	refusal   *apierr.Error    // the answer beyond the cap; Retry-After: 1
	shedding  *apierr.Error    // the answer while shedding; Retry-After: 1
	queueWait time.Duration    // the longest wait for a slot while shedding; 0: none
	now       func() time.Time // time.Now; the queue's order and the finishing rate (admit.go)

	inflight atomic.Int64
	done     atomic.Uint64 // requests ended, for the finishing rate
	refused  atomic.Uint64 // beyond the cap and shed
	gated    atomic.Bool   // shedding: new requests go through admit
	gate     gate
}

// LimitConcurrency returns next behind a cap of max requests in flight.
func LimitConcurrency(next http.Handler, max int, log *slog.Logger) *ConcurrencyLimit {
	return &ConcurrencyLimit{
		next: next, max: int64(max), log: log, now: time.Now,
		refusal:  apierr.Unavailable("this node is at its concurrent request limit; retry shortly", time.Second),
		shedding: apierr.Unavailable("this node is overloaded; retry shortly", time.Second),
	}
}

// Queue sets how long a request waits for a slot while the node sheds
// before its 503 (limits.queue_wait); without it, none waits. Call it
// before l serves.
func (l *ConcurrencyLimit) Queue(wait time.Duration) { l.queueWait = max(wait, 0) }

// shedBodyMax is the largest request body a shed request has read and
// thrown away before its 503, so that its connection stays open: a
// client that must reconnect after every refusal costs an overloaded
// node a connection (accept, buffers, a goroutine) per request on top of
// the refusal.
const shedBodyMax = 64 << 10

func (l *ConcurrencyLimit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if l.gated.Load() {
		ok, gated := l.admit(r.Context())
		switch {
		case !ok:
			l.shed(w, r)
		case gated:
			defer l.leave()
			l.next.ServeHTTP(w, r)
		default:
			defer l.end()
			l.next.ServeHTTP(w, r)
		}
		return
	}
	if l.inflight.Add(1) > l.max {
		l.inflight.Add(-1)
		l.refused.Add(1)
		rid := newRequestID()
		w.Header().Set("X-Request-Id", rid) // docs/api.md "Headers": always our own id
		l.log.Debug("request refused: concurrent request limit", "request_id", rid, "limit", l.max)
		l.refusal.Write(w, catalog.Claiming(r), rid)
		return
	}
	defer l.end()
	l.next.ServeHTTP(w, r)
}

// end gives back the slot of a request that ended.
func (l *ConcurrencyLimit) end() {
	l.inflight.Add(-1)
	l.done.Add(1)
}

// shed answers a request the node did not admit while shedding: refused
// before any work, so that the requests the node holds finish within
// their limits (docs/failures.md "Shedding").
func (l *ConcurrencyLimit) shed(w http.ResponseWriter, r *http.Request) {
	l.refused.Add(1)
	if r.ContentLength > 0 && r.ContentLength <= shedBodyMax {
		// Usually in the buffer that held the headers; a slow one is
		// bounded by the body deadline (GuardBody), and a body not read
		// to its end closes the connection as any early answer does.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, shedBodyMax))
	}
	rid := newRequestID()
	w.Header().Set("X-Request-Id", rid)
	l.shedding.Write(w, catalog.Claiming(r), rid)
}

// acquire takes a slot for an answer on a WebSocket connection, as
// ServeHTTP does for a request; false (counted as refused) at the cap.
func (l *ConcurrencyLimit) acquire() bool {
	if l.inflight.Add(1) > l.max {
		l.inflight.Add(-1)
		l.refused.Add(1)
		return false
	}
	return true
}

// release gives a slot back.
func (l *ConcurrencyLimit) release() { l.inflight.Add(-1) }

// hold takes a slot back whatever the cap, for ServeHTTP to give back
// when an upgraded request, which released its slot, returns.
func (l *ConcurrencyLimit) hold() { l.inflight.Add(1) }

// Stats reports the requests being served (a refused or queued one is
// never counted in them), the cap, and how many were refused so far.
func (l *ConcurrencyLimit) Stats() (inflight int64, limit int, refused uint64) {
	return min(max(0, l.inflight.Load()), l.max), int(l.max), l.refused.Load()
}

// InFlight reports the requests being served now.
func (l *ConcurrencyLimit) InFlight() int64 { return l.inflight.Load() }

// newRequestID returns a request id: "sg-" and 24 hex digits.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "sg-" + hex.EncodeToString(b[:])
}
