package gateway

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
)

// Bounds of what the node holds of a provider's answer.
const (
	// maxProviderBody bounds a non-stream provider answer relayed.
	maxProviderBody = 64 << 20
	// wholeAnswer is the largest non-stream answer read whole before it
	// is sent (with its Content-Length; a failure while reading it is
	// still a clean error answer). A larger one is relayed as it arrives
	// through a buffer of this size.
	wholeAnswer = 64 << 10
	// usageTail is what the node keeps of the end of an answer relayed as
	// it arrives: the usage comes last, and a usage object larger than
	// provider.MaxRawUsageBytes is ignored anyway.
	usageTail = 2 * provider.MaxRawUsageBytes
	// maxEventBytes bounds one SSE event read from a provider.
	maxEventBytes = 16 << 20
)

// errAnswerTooLarge is a non-stream answer past maxProviderBody.
var errAnswerTooLarge = errors.New("provider answer exceeds the size limit")

// readAll is io.ReadAll starting from a buffer of capacity size, reading at
// most limit bytes (io.LimitReader without its allocation).
func readAll(r io.Reader, size, limit int) ([]byte, error) {
	buf := make([]byte, 0, min(size, limit))
	for {
		if len(buf) == limit {
			return buf, nil
		}
		if len(buf) == cap(buf) {
			// Grow only when full, doubling up to limit: append's growth
			// of large slices (a quarter at a time) would copy and drop
			// several times the final size.
			buf = append(make([]byte, 0, min(2*cap(buf)+512, limit)), buf...)
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

// relayWhole relays a non-stream answer. One of at most wholeAnswer
// bytes is read completely, then sent: the client never sees half of it.
// A larger one is sent as it arrives, through a buffer of that size, and
// its usage read from its last bytes; a failure after its first bytes
// went out (the provider's connection, non_stream_total, the size limit)
// aborts the client's connection, so that the client cannot take what it
// got for the whole answer.
func (c *call) relayWhole(ctx context.Context, a *attempt) {
	resp := a.resp
	if resp.ContentLength > maxProviderBody {
		a.timer.stop()
		a.err, a.stage = errAnswerTooLarge, stageResponseBody
		c.failAttempt(a, apierr.BadGateway("upstream_answer_too_large", "the provider's answer exceeds the node's size limit", true))
		return
	}
	size := 4096 // grown as needed up to wholeAnswer+1
	switch cl := resp.ContentLength; {
	case cl > wholeAnswer:
		size = wholeAnswer + 1 // it will be relayed through the full buffer
	case cl >= 0:
		size = int(cl) + 1 // +1: EOF is seen without growing
	}
	data, err := readAll(a.answer, size, wholeAnswer+1)
	whole := len(data) <= wholeAnswer
	if whole || err != nil {
		a.timer.stop()
	}
	if resp.StatusCode/100 == 2 && err == nil {
		if whole {
			// docs/failures.md "Slots": the provider has sent all of it.
			a.lease.Vacate()
			a.vacated = true
		} else {
			defer c.readAhead(a).close()
		}
	}
	if err != nil {
		a.err, a.stage = err, stageResponseBody
		c.failBeforeCommit(ctx, a)
		return
	}
	// An error answer is decided on by its first wholeAnswer bytes: error
	// documents are small, and one that is not is relayed as it is.
	failed := resp.StatusCode/100 != 2
	a.aboutRequest = failed && c.api.AboutRequest != nil && c.api.AboutRequest(resp.StatusCode, data)
	switch {
	case resp.StatusCode == http.StatusForbidden && a.aboutRequest:
		// The backend's credential may not use this model: the
		// operator's routing, not the client's key and not the backend,
		// which serves its other models.
		a.timer.stop()
		a.stage = stageProviderStatus
		c.failAttempt(a, apierr.BadGateway("upstream_model_refused", "the provider refused this backend access to the model; its other models are unaffected", true))
		return
	case resp.StatusCode == http.StatusForbidden || failed && c.api.CredentialRefused != nil && c.api.CredentialRefused(resp.StatusCode, data):
		// The backend's credential was refused (a 403, or Gemini's 400
		// API_KEY_INVALID): as a 401 in answered, never the client's
		// problem.
		a.timer.stop()
		a.stage, a.authRefused = stageProviderAuth, true
		c.failAttempt(a, apierr.BadGateway("upstream_auth_failed", "the provider rejected the gateway's credential for this backend", false))
		return
	}
	if resp.StatusCode/100 != 2 {
		a.quota = c.api.QuotaExhausted(resp.StatusCode, data)
		if a.quota || resp.StatusCode == http.StatusTooManyRequests {
			a.retryAfter = c.api.RetryAfter(resp.Header, c.h.o.Now())
			if a.retryAfter == 0 && c.api.BodyRetryAfter != nil {
				a.retryAfter = c.api.BodyRetryAfter(data)
			}
		}
		a.stage = stageProviderStatus
	} else if whole {
		a.usage, a.rawUsage, a.hasUsage = c.spec.BodyUsage(data)
		if c.spec.BodyOutcome != nil && c.traced(ctx) {
			a.outcome = c.spec.BodyOutcome(data)
		}
	}
	w := c.w
	copyResponseHeaders(w.Header(), resp.Header, c.api)
	c.limitHeaders(w.Header())
	if a.aboutRequest {
		// A request refused for its size fails the same way every time:
		// the SDKs that would re-send a 429 read this and do not.
		w.Header().Set("X-Should-Retry", "false")
	}
	switch {
	case whole:
		w.Header()["Content-Length"] = contentLength(resp.Header, len(data))
	case resp.ContentLength >= 0: // not decoded from gzip
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	a.status, a.committed = resp.StatusCode, true
	g := &c.guard
	if len(data) > smallAnswer {
		// More than the server's write buffer: the write waits for the
		// client to read.
		g.start(http.NewResponseController(w), c.h.o.StreamIdle)
		defer g.release()
	}
	g.hold()
	if _, err := w.Write(data); err != nil {
		a.timer.stop()
		a.stage, a.err = c.writeFailed(g, stageClientWrite), err
		return
	}
	if !whole {
		g.lift() // the provider may pause before the next write
		c.relayRest(ctx, a, data)
	}
}

// relayJSONStream relays a stream that the provider sends as one JSON
// document growing as it generates (Gemini's streamGenerateContent
// without alt=sse: an array whose elements arrive one by one) as each
// read arrives, flushed, so that the client sees every element when the
// provider sends it. It is bounded as a stream is: stream_idle between
// reads, stream_total in all, and the answer size limit; its usage comes
// from its last bytes. JSON has no in-band error: a failure after the
// status went out aborts the client's connection, so that a cut array
// never reads as complete.
func (c *call) relayJSONStream(ctx context.Context, a *attempt) {
	h, resp, w := c.h, a.resp, c.w
	a.timer.streamIdle(h.o.StreamIdle, time.Now()) // the headers are in: stream_idle from here
	copyResponseHeaders(w.Header(), resp.Header, c.api)
	c.limitHeaders(w.Header())
	w.WriteHeader(resp.StatusCode)
	a.status, a.committed = resp.StatusCode, true
	rc := http.NewResponseController(w)
	g := &c.guard
	g.start(rc, h.o.StreamIdle)
	defer g.release()
	var end time.Time
	if h.o.StreamTotal > 0 {
		end = a.started.Add(h.o.StreamTotal)
	}
	var tail tailBuffer
	if c.spec.UsageMember != "" {
		tail.b = make([]byte, 0, 2*usageTail)
	}
	buf := make([]byte, 16<<10)
	var n int64
	var err error
	for err == nil {
		var k int
		k, err = a.answer.Read(buf)
		if k == 0 {
			continue
		}
		a.timer.quiet(time.Now())
		if n += int64(k); n > maxProviderBody {
			err = errAnswerTooLarge
			break
		}
		tail.add(buf[:k])
		g.hold()
		_, werr := w.Write(buf[:k])
		if werr == nil {
			if werr = rc.Flush(); errors.Is(werr, http.ErrNotSupported) {
				werr = nil // an in-memory writer
			}
		}
		if werr != nil {
			a.stage, a.err = c.writeFailed(g, stageClientWrite), werr
			return
		}
		g.lift()
		if !end.IsZero() && err == nil && h.o.Now().After(end) {
			a.cancel(errStreamTotal)
			err = errStreamTotal
		}
	}
	if err == io.EOF {
		a.usage, a.rawUsage, a.hasUsage = provider.TailUsage(tail.bytes(), c.spec.UsageMember, c.spec.BodyUsage)
		return
	}
	c.abort = true
	switch cause := context.Cause(ctx); {
	case c.cutByNode():
		a.stage, a.err = stageShutdown, ErrShutdown
	case c.r.Context().Err() != nil:
		a.stage, a.err = stageClientCancelled, c.r.Context().Err()
	case errors.Is(cause, errIdleTimeout):
		a.stage, a.err = stageTimeout, cause
	case errors.Is(cause, errStreamTotal):
		a.stage, a.err = stageStreamTotal, cause
	default:
		a.stage, a.err = stageStream, err
	}
}

// contentLength is the Content-Length value of an answer of n bytes: the
// provider's own value when it says exactly that (the usual case, and no
// allocation), else a new one.
func contentLength(provider http.Header, n int) []string {
	var b [20]byte
	want := strconv.AppendInt(b[:0], int64(n), 10)
	if v := provider["Content-Length"]; len(v) == 1 && v[0] == string(want) {
		return v
	}
	return []string{string(want)}
}

// smallAnswer is what the server's write buffer takes without waiting
// for the client (net/http's bufio.Writer on the connection).
const smallAnswer = 4 << 10

// writeFailed is the stage of an attempt whose answer could not be written
// to the client: client_stalled when g's deadline passed (the client
// stopped reading), shutdown when the node cut the request (a write
// racing the cut), else otherwise.
func (c *call) writeFailed(g *writeGuard, otherwise stage) stage {
	switch {
	case g.stalled():
		return stageClientStalled
	case c.cutByNode():
		return stageShutdown
	}
	return otherwise
}

// relayRest sends the rest of a non-stream answer whose first bytes, head,
// went to the client already, as it arrives, through head's buffer.
func (c *call) relayRest(ctx context.Context, a *attempt, head []byte) {
	defer a.timer.stop()
	ok := a.resp.StatusCode/100 == 2
	var tail tailBuffer
	if ok && c.spec.UsageMember != "" {
		tail.b = make([]byte, 0, 2*usageTail)
		tail.add(head)
	}
	buf := head[:cap(head)]
	n := int64(len(head))
	var err error
	for err == nil {
		var k int
		k, err = a.answer.Read(buf)
		if n += int64(k); n > maxProviderBody {
			err = errAnswerTooLarge
			break
		}
		if k == 0 {
			continue
		}
		tail.add(buf[:k])
		c.guard.hold()
		if _, werr := c.w.Write(buf[:k]); werr != nil {
			a.stage, a.err = c.writeFailed(&c.guard, stageClientWrite), werr
			return
		}
		c.guard.lift()
	}
	if err == io.EOF {
		if ok {
			a.usage, a.rawUsage, a.hasUsage = provider.TailUsage(tail.bytes(), c.spec.UsageMember, c.spec.BodyUsage)
		}
		return
	}
	// The status and part of the answer went out: only an abort tells the
	// client that the rest will not come.
	c.abort = true
	switch {
	case c.cutByNode():
		a.stage, a.err = stageShutdown, ErrShutdown
	case c.r.Context().Err() != nil:
		a.stage, a.err = stageClientCancelled, c.r.Context().Err()
	case errors.Is(context.Cause(ctx), errTotalTimeout):
		a.stage, a.err = stageTimeout, errTotalTimeout
	default:
		a.stage, a.err = stageResponseBody, err
	}
}

// tailBuffer keeps the last usageTail bytes added to it, in a buffer of
// twice that, so that each byte is copied once more at most. A nil
// buffer keeps nothing.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) add(p []byte) {
	switch {
	case t.b == nil:
	case len(p) >= usageTail:
		t.b = append(t.b[:0], p[len(p)-usageTail:]...)
	case len(t.b)+len(p) > cap(t.b):
		keep := usageTail - len(p)
		t.b = t.b[:copy(t.b, t.b[len(t.b)-keep:])]
		t.b = append(t.b, p...)
	default:
		t.b = append(t.b, p...)
	}
}

// bytes returns the last usageTail bytes added, or all if fewer.
func (t *tailBuffer) bytes() []byte { return t.b[max(0, len(t.b)-usageTail):] }

// relayStream holds the status until the first event is in, then passes
// every event through with its exact bytes, flushing whenever the next
// event has not arrived complete yet: events that came in one read leave
// in one write, and none waits for more input. With a keepalive
// configured, a provider that sent its 200 and then stays silent (a
// reasoning model thinking before its first event) gets the client's 200
// committed by the first keepalive, so that idle limits of load balancers
// do not cut the connection; from then on a failure ends the stream in
// band, as any failure after the first event does.
//
// ctx is the attempt's: its cause names a timeout.
func (c *call) relayStream(ctx context.Context, a *attempt) {
	h, ss, resp := c.h, c.spec.Stream, a.resp
	tracker := ss.NewTracker(a.hide)
	var outcome provider.OutcomeTracker // nil unless traced
	if ss.NewOutcome != nil && c.traced(ctx) {
		outcome = ss.NewOutcome()
	}
	defer func() {
		a.usage, a.rawUsage, a.hasUsage = tracker.Usage()
		if outcome != nil {
			a.outcome = outcome.Outcome()
		}
	}()

	out := &streamWriter{w: c.w, body: bodyWriter(c.w), rc: *http.NewResponseController(c.w), fl: flusherOf(c.w), guard: &c.guard, c: c, resp: resp}
	c.guard.start(&out.rc, h.o.StreamIdle)
	defer c.guard.release() // after out.close: nothing writes then
	defer out.close()
	if h.o.StreamKeepalive > 0 {
		// Before the first event an SSE comment, which every SSE parser
		// skips: a protocol ping (Anthropic's event: ping) before
		// message_start is not something clients expect.
		out.startKeepalive(h.o.StreamKeepalive, preFirstKeepalive)
	}

	rd := sse.NewReader(a.answer, maxEventBytes)
	defer rd.Release() // its read buffer goes to the next stream
	rd.KnownTypes(ss.Types)
	ev, err := rd.Next()
	if err != nil {
		a.timer.stop()
		a.err, a.stage = err, stageFirstEvent
		if !out.settle() {
			c.failBeforeCommit(ctx, a) // nothing went to the client yet
			return
		}
		a.status, a.committed = http.StatusOK, true
		c.endStream(ctx, a, out, err, 0, stageFirstEvent)
		return
	}
	// One real-time reading per event, as it arrives, serves the event's
	// stream_idle, its write deadline, the keepalive's silence and the
	// stream's bounds.
	now := time.Now()
	a.timer.streamIdle(h.o.StreamIdle, now) // the first event is in: stream_idle from here
	out.commit(ss.Keepalive)
	a.status, a.committed = http.StatusOK, true
	bounds := c.newStreamBounds(a)

	relayed := 0
	for {
		done, failed := ss.Terminal(&ev)
		if outcome != nil {
			outcome.Observe(&ev)
		}
		// Events that arrived together leave in one flush: flush unless
		// the next event is already complete in the reader's buffer, so
		// that no event waits for bytes that have not arrived. (Buffered
		// only looks: ev stays valid.)
		more := !done && rd.Buffered()
		var werr error
		switch hide := tracker.Observe(&ev); {
		case !hide:
			werr = out.send(ev.Raw, !more, now)
			relayed++
		case !more:
			werr = out.flush(now)
		}
		if werr != nil {
			a.stage, a.err = out.writeFailed(c), werr
			return
		}
		if failed {
			a.stage = stageProviderStreamError // the provider's own in-band error, passed through
		}
		if done && !ss.EndsAtEOF {
			_, _ = io.CopyN(io.Discard, a.answer, 4<<10) // let the connection be reused
			return
		}
		ev, err = rd.Next()
		if err != nil {
			if done && err == io.EOF {
				return // the stream ended after an event that may end it
			}
			break
		}
		now = time.Now()
		if err = bounds.check(&ev, now); err != nil {
			a.cancel(err) // the provider side ends now; endStream reads the cause
			break
		}
		if !more {
			a.timer.quiet(now) // a buffered event took no wait
		}
	}
	c.endStream(ctx, a, out, err, relayed, stageStream)
}

// streamIdle makes the attempt's timer the stream's stream_idle timer:
// the provider must send something within d of now, its first event's
// arrival, and then within d of each quiet. One timer per attempt, never a
// second one per stream. A Stop that lost the race leaves the first-byte
// cancel to fire. The attempt stops it when it ends.
func (x *exchangeTimer) streamIdle(d time.Duration, now time.Time) {
	if x.t.Stop() {
		x.idleFor = d
		x.lastEvent.Store(int64(now.Sub(x.sent)))
		x.idle.Store(true)
		x.t.Reset(d)
	}
}

// quiet notes that the provider sent something at now (real time): the
// stream_idle limit counts from there. The timer is not touched: a Reset
// per event costs the runtime's timer heap more than the rest of the
// relay's timing; the timer fires at the deadline it was armed for, and
// stillActive re-arms it for what is left when something came meanwhile.
func (x *exchangeTimer) quiet(now time.Time) { x.lastEvent.Store(int64(now.Sub(x.sent))) }

// stillActive, as the stream_idle timer fires at now, reports whether the
// provider sent something within stream_idle before now, and if so
// re-arms the timer for the rest of the limit from that moment: the
// timer then fires when the limit from the provider's last event has
// passed, as one re-armed at each event would.
func (x *exchangeTimer) stillActive(now time.Time) bool {
	rest := x.idleLeft(now)
	if rest <= 0 {
		return false
	}
	x.t.Reset(rest)
	if x.stopped.Load() {
		x.t.Stop() // the attempt ended meanwhile: its stop may have come before this Reset
	}
	return true
}

// idleLeft is what is left at now of the stream_idle limit since the
// provider last sent; 0 or less when it has passed.
func (x *exchangeTimer) idleLeft(now time.Time) time.Duration {
	return x.idleFor - (now.Sub(x.sent) - time.Duration(x.lastEvent.Load()))
}

// streamBounds holds a committed stream to timeouts.stream_total and
// timeouts.stream_progress (docs/api.md "Timeouts"). Both are checked
// against the handler's clock as each event arrives: a stream that sends
// nothing at all is stream_idle's, so neither needs a timer of its own,
// and each fires at most one stream_idle late.
type streamBounds struct {
	now      func() time.Time         // the handler's clock when one was given (Options.Now); nil: the relay's reading
	ping     func(ev *sse.Event) bool // the protocol's own keepalive event, if any
	end      time.Time                // the stream must be complete by then; zero = no bound
	progress time.Duration            // 0 = no bound
	lastData time.Time                // the last event that carried data came then; the next must come within progress
}

// newStreamBounds starts the bounds of a's stream at its first event.
func (c *call) newStreamBounds(a *attempt) streamBounds {
	o := &c.h.o
	b := streamBounds{ping: c.spec.Stream.Ping, progress: o.StreamProgress}
	if !c.h.realNow {
		b.now = o.Now
	}
	if o.StreamTotal <= 0 && o.StreamProgress <= 0 {
		return b
	}
	now := o.Now()
	if o.StreamTotal > 0 {
		b.end = a.started.Add(o.StreamTotal)
	}
	b.lastData = now
	return b
}

// check reports errStreamTotal or errNoProgress when ev, just read at now
// (real time), came past a bound. A block of only comments, an event
// without data and the protocol's ping are keepalives: they keep the
// connection alive, but they are no progress.
func (b *streamBounds) check(ev *sse.Event, now time.Time) error {
	if b.end.IsZero() && b.progress <= 0 {
		return nil
	}
	if b.now != nil {
		now = b.now()
	}
	if !b.end.IsZero() && now.After(b.end) {
		return errStreamTotal
	}
	if b.progress <= 0 {
		return nil
	}
	if ev.Data != nil && (b.ping == nil || !b.ping(ev)) {
		b.lastData = now // a copy per event, not a time.Add
		return nil
	}
	if now.Sub(b.lastData) > b.progress {
		return errNoProgress
	}
	return nil
}

// errStreamCut is the in-band error of a stream the node cuts when it
// shuts down (docs/operations.md "Drain" lists its shape per protocol).
var errStreamCut = &apierr.Error{Status: 503, Code: "node_shutting_down", Msg: "the node is shutting down; the answer is incomplete"}

// endStream ends a committed stream whose provider side failed with err
// after relayed events: with the in-band error, unless the client is gone.
// stage is the failure stage when no more specific one applies.
func (c *call) endStream(ctx context.Context, a *attempt, out *streamWriter, err error, relayed int, failed stage) {
	if c.cutByNode() {
		// Cut at the end of the drain or by a second signal: the client is
		// still there and must learn that the answer is incomplete.
		a.stage, a.err = stageShutdown, ErrShutdown
		_ = out.event(errStreamCut.InBand(c.spec, c.rid, relayed))
		return
	}
	if c.r.Context().Err() != nil {
		a.stage, a.err = stageClientCancelled, c.r.Context().Err()
		return
	}
	// docs/api.md "Streams": a stream without its terminator is a failure; say so in
	// band and never fake [DONE] / message_stop / response.completed.
	a.stage = failed
	msg := "the provider stream ended without its terminator"
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errIdleTimeout):
		msg = "the provider stream was idle beyond the limit"
		a.stage, a.err = stageTimeout, cause
	case errors.Is(cause, errFirstByteTimeout):
		msg = "the provider sent no event within the first-byte limit"
		a.stage, a.err = stageTimeout, cause
	case errors.Is(cause, errStreamTotal):
		msg = "the provider stream ran beyond the total limit"
		a.stage, a.err = stageStreamTotal, cause
	case errors.Is(cause, errNoProgress):
		msg = "the provider stream sent only keepalives beyond the limit"
		a.stage, a.err = stageNoProgress, cause
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
	w     http.ResponseWriter
	body  io.Writer               // where events go once header has run: w without the node's header-only wrappers (bodyWriter)
	rc    http.ResponseController // of w; a value, so that it is no allocation of its own
	fl    flushError              // what rc.Flush calls, found once (flusherOf)
	guard *writeGuard             // used under mu
	c     *call                   // the call whose stream this is, for header
	resp  *http.Response          // the provider's answer, for header

	mu        sync.Mutex
	committed bool        // guarded by mu: header has run
	closed    bool        // guarded by mu: the handler has returned or is returning
	ka        *time.Timer // nil when keepalive is off
	every     time.Duration
	ping      []byte    // guarded by mu: what a keepalive writes
	dirty     bool      // guarded by mu: written since the last flush
	flushed   time.Time // guarded by mu: the last flush (real time); a keepalive is due every after it
}

// noCache is every stream's Cache-Control value; header maps share it
// (nothing changes a value in place).
var noCache = []string{"no-cache"}

// preFirstKeepalive is the keepalive before a stream's first event.
var preFirstKeepalive = []byte(": keepalive\n\n")

// commitLocked writes the status and headers once. s.mu must be held.
func (s *streamWriter) commitLocked() {
	if !s.committed {
		s.committed = true
		s.header()
	}
}

// header sets the stream's headers from the provider's and writes the 200.
func (s *streamWriter) header() {
	h := s.w.Header()
	copyResponseHeaders(h, s.resp.Header, s.c.api)
	s.c.limitHeaders(h)
	h.Del("Content-Length")
	h["Cache-Control"] = noCache
	s.w.WriteHeader(http.StatusOK)
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
func (s *streamWriter) event(b []byte) error { return s.send(b, true, time.Now()) }

// send writes b and, if flush, flushes it with whatever was written
// before: the relay's one step per event, under one lock. Unflushed, b
// waits for the caller's next flush, when no further event is at hand
// (the ResponseWriter's buffer may still send part of it when it fills).
// now is a real-time reading taken just before (the event's arrival).
func (s *streamWriter) send(b []byte, flush bool, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.guard.arm(now)
	s.commitLocked()
	if _, err := s.body.Write(b); err != nil {
		return err
	}
	s.dirty = true
	if flush {
		return s.flushLocked(now)
	}
	return nil
}

// writeFailed is the stage of a write to the client that failed.
func (s *streamWriter) writeFailed(c *call) stage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.writeFailed(s.guard, stageClientCancelled)
}

// flush sends what write left in the ResponseWriter's buffer, if
// anything; now as for send.
func (s *streamWriter) flush(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dirty {
		return nil
	}
	s.guard.arm(now)
	return s.flushLocked(now)
}

// flushLocked flushes what was written, the write deadline armed, at now
// (real time). s.mu must be held. The keepalive's silence counts from
// now: its timer is not touched (a Reset per event costs the runtime's
// timer heap more than the write); keepalive re-arms it for the rest of
// the silence when it fires early.
func (s *streamWriter) flushLocked(now time.Time) error {
	s.dirty = false
	s.flushed = now
	return s.fl.FlushError()
}

// bodyWriter is where a stream's bytes go once its header is written: w
// less the node's own wrappers that act only up to the header
// (statusWriter records the status, guardedWriter may add Connection:
// close), each an indirect call and a check per event otherwise. A door's
// writer, which frames the bytes, and any other writer stay.
func bodyWriter(w http.ResponseWriter) io.Writer {
	for {
		switch t := w.(type) {
		case *statusWriter:
			w = t.ResponseWriter
		case *guardedWriter:
			w = t.ResponseWriter
		default:
			return w
		}
	}
}

// flushError is what http.ResponseController.Flush calls.
type flushError interface{ FlushError() error }

// flusherOf finds once what http.ResponseController.Flush on w would
// call: Flush looks it up through w's Unwrap chain on every call, an
// interface switch per writer in the chain and flush, and a stream
// flushes once or more per event.
func flusherOf(w http.ResponseWriter) flushError {
	for {
		switch t := w.(type) {
		case flushError:
			return t
		case http.Flusher:
			return plainFlusher{t}
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return noFlusher{}
		}
	}
}

// plainFlusher is an http.Flusher, whose Flush cannot fail.
type plainFlusher struct{ http.Flusher }

func (f plainFlusher) FlushError() error {
	f.Flush()
	return nil
}

// noFlusher is a writer that cannot flush, as http.ResponseController
// reports it.
type noFlusher struct{}

func (noFlusher) FlushError() error { return http.ErrNotSupported }

// startKeepalive writes ping after every of silence (nothing flushed),
// from now on, until close or settle.
func (s *streamWriter) startKeepalive(every time.Duration, ping []byte) {
	s.every = every
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ping = ping
	s.flushed = time.Now()
	s.ka = time.AfterFunc(every, func() { s.keepalive(time.Now) })
}

// keepalive is the keepalive timer's work: the ping when the client has
// heard nothing for every (as of now(), read under the lock), else the
// timer re-armed for the rest of the silence, which flushes since it was
// armed shortened.
func (s *streamWriter) keepalive(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	t := now()
	if rest := s.every - t.Sub(s.flushed); rest > 0 {
		s.ka.Reset(rest)
		return
	}
	s.guard.arm(t)
	s.commitLocked()
	if _, err := s.body.Write(s.ping); err == nil && s.fl.FlushError() == nil {
		s.dirty = false
		s.flushed = t
		s.ka.Reset(s.every)
	}
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

// writeGuard holds writes to the client to a deadline (docs/api.md
// "Clients that stop reading"): a client that stops reading (an HTTP/1.1
// client that reads nothing more, an HTTP/2 stream whose window never
// opens) would otherwise hold its request and the provider's slot until
// it disconnects. A write that cannot go out within the limit fails.
//
// A deadline must never pass between writes: HTTP/2 resets a stream whose
// write deadline passes even when nothing is being written. A stream
// (arm) keeps it at least limit away, moving it to twice the limit when
// it comes nearer: its provider is silent for at most stream_idle between
// writes, and the deadline moves at most once per limit; a stalled write
// fails after one to two limits. A non-stream answer relayed as it
// arrives may pause for longer, so each of its writes has its own
// deadline (hold), lifted after it (lift).
type writeGuard struct {
	rc       *http.ResponseController
	limit    time.Duration
	deadline time.Time // the one set; zero when none is
	used     bool      // a deadline was set at some point
	off      bool      // the writer has no deadlines (an in-memory writer)
}

// start prepares g for writes through rc.
func (g *writeGuard) start(rc *http.ResponseController, limit time.Duration) {
	g.rc, g.limit = rc, limit
	g.off = limit <= 0
}

// set sets the deadline d, unless the writer has none.
func (g *writeGuard) set(d time.Time) {
	if g.rc == nil || g.off {
		return
	}
	if g.rc.SetWriteDeadline(d) != nil {
		g.off = true
		return
	}
	g.deadline, g.used = d, true
}

// arm, before a stream's write at now, keeps the deadline at least limit
// away. now is real time, as the socket's deadline.
func (g *writeGuard) arm(now time.Time) {
	if g.rc == nil || g.off {
		return
	}
	if g.deadline.Sub(now) < g.limit {
		g.set(now.Add(2 * g.limit))
	}
}

// hold gives the next write of a non-stream answer the limit.
func (g *writeGuard) hold() {
	if g.rc != nil && !g.off {
		g.set(time.Now().Add(g.limit))
	}
}

// lift removes the deadline after a non-stream write.
func (g *writeGuard) lift() {
	if !g.deadline.IsZero() {
		_ = g.rc.SetWriteDeadline(time.Time{})
		g.deadline = time.Time{}
	}
}

// stalled reports whether the deadline set has passed: a write that
// failed then failed because the client did not read.
func (g *writeGuard) stalled() bool {
	return !g.deadline.IsZero() && !time.Now().Before(g.deadline)
}

// release sends what is buffered under a deadline, then lifts it: a
// connection kept alive must not carry it into its next request.
func (g *writeGuard) release() {
	if !g.used || g.off {
		return
	}
	if g.deadline.IsZero() {
		g.hold()
	}
	if !g.stalled() {
		_ = g.rc.Flush()
	}
	g.lift()
}

// copyResponseHeaders copies the provider headers a client may see
// (docs/api.md "Headers"): content type, Retry-After, the headers the
// provider API lists (its retry advice and rate-limit state), and the
// provider's request id renamed so that X-Request-Id stays ours. Never
// Set-Cookie, never Content-Encoding (decodedBody removed any encoding).
func copyResponseHeaders(dst, src http.Header, api *provider.API) {
	for k, v := range src {
		if k == "Content-Type" || k == "Retry-After" || listed(k, api.ResponseHeaders) {
			dst[k] = v
		}
	}
	// The first of the API's request id headers the provider sent,
	// whatever the map order.
	for _, k := range api.ProviderRequestID {
		if v := src[k]; len(v) > 0 {
			dst["X-Provider-Request-Id"] = v
			return
		}
	}
}

// listed reports whether the canonical header name k is one of names or
// starts with one of them that ends in "-".
func listed(k string, names []string) bool {
	for _, n := range names {
		if k == n || (strings.HasSuffix(n, "-") && strings.HasPrefix(k, n)) {
			return true
		}
	}
	return false
}

// errUnknownEncoding is a provider answer in a content encoding other than
// gzip.
var errUnknownEncoding = errors.New("provider answer has a content encoding the node cannot decode")

// decodedBody returns the provider's answer without its content encoding.
// The node never sends Accept-Encoding, yet some providers (or the CDN in
// front of them) gzip anyway: gzip is decoded, so the client gets readable
// JSON and the node reads its usage; any other encoding is
// errUnknownEncoding (docs/api.md "Status codes": 502
// upstream_bad_encoding). The decoded size stays bounded by the readers
// downstream (maxProviderBody, maxEventBytes).
func decodedBody(resp *http.Response, body io.Reader) (io.Reader, error) {
	ce := strings.TrimSpace(resp.Header.Get("Content-Encoding"))
	switch {
	case ce == "" || strings.EqualFold(ce, "identity"):
		return body, nil
	case strings.EqualFold(ce, "gzip") || strings.EqualFold(ce, "x-gzip"):
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, fmt.Errorf("gzip answer: %w", err)
		}
		resp.Header.Del("Content-Encoding")
		resp.ContentLength = -1 // the header counted the compressed bytes
		return zr, nil
	}
	return nil, fmt.Errorf("%w: %q", errUnknownEncoding, ce)
}
