package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
)

// passthroughChunk is the most a Passthrough answer's relay reads at once.
const passthroughChunk = 32 << 10

// relayBytes relays a successful answer of a Passthrough endpoint as it
// arrives: the status and headers at once (Content-Type and the listed
// provider headers, Content-Length when the provider gave one), then
// every read written and flushed, so that a client plays generated audio
// while it comes. The node reads nothing in it. A provider side that
// fails after the status went out cannot be reported in band: the
// connection is aborted (call.abort), so the client sees a truncated
// answer and not a complete one.
func (c *call) relayBytes(ctx context.Context, a *attempt) {
	resp, w := a.resp, c.w
	copyResponseHeaders(w.Header(), resp.Header, c.api)
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	a.status, a.committed = resp.StatusCode, true
	rc := http.NewResponseController(w)
	buf := make([]byte, passthroughChunk)
	for {
		n, err := a.answer.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				a.stage, a.err = stageClientWrite, werr
				return
			}
			if ferr := rc.Flush(); ferr != nil {
				a.stage, a.err = stageClientWrite, ferr
				return
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			a.err, a.stage = err, stageStream
			switch cause := context.Cause(ctx); {
			case c.r.Context().Err() != nil:
				a.stage = c.cancelledStage()
			case errors.Is(cause, errTotalTimeout):
				a.stage, a.err = stageTimeout, cause
			}
			if a.stage != stageClientCancelled {
				c.abort = true
			}
			return
		}
	}
}
