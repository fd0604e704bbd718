package app

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// guardBody bounds how long a request body may hold a connection, whatever
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
func guardBody(next http.Handler, timeout, linger time.Duration) http.Handler {
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
