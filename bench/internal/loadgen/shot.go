package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/scootgate/scootgate/internal/sse"
)

// maxEventBytes bounds one SSE event the generator reads.
const maxEventBytes = 1 << 20

// StatusError is a shot's error for an answer that is not 200.
type StatusError struct {
	Code int
	Body string // the answer's first bytes, for diagnostics
}

func (e *StatusError) Error() string { return fmt.Sprintf("loadgen: status %d: %q", e.Code, e.Body) }

// statusBodyBytes is how much of a non-200 answer a StatusError keeps.
const statusBodyBytes = 256

// ErrNoEvent is a stream's error when the answer ended before its first event.
var ErrNoEvent = errors.New("loadgen: stream ended before its first event")

// Request is what every shot of an attack sends: a POST of Body to URL.
type Request struct {
	URL    string
	Header http.Header // sent as is; not modified
	Body   []byte
}

func (r Request) send(ctx context.Context, c *http.Client) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	req.Header = r.Header
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, statusBodyBytes))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, &StatusError{Code: resp.StatusCode, Body: string(head)}
	}
	return resp, nil
}

// NonStream returns a Fire that posts r and reads the whole answer.
func NonStream(c *http.Client, r Request) Fire {
	return func(ctx context.Context, s *Shot) {
		s.Late = time.Since(s.Intended)
		resp, err := r.send(ctx, c)
		if err != nil {
			s.Err = err
			return
		}
		defer resp.Body.Close()
		s.Bytes, s.Err = io.Copy(io.Discard, resp.Body)
		s.Latency = time.Since(s.Intended)
	}
}

// Stream returns a Fire that posts r and reads the answer as an SSE stream
// of format f, recording the time to its first event and the gap before
// each later one. Comment-only blocks (keepalives) count as events. A
// stream that ends cleanly but not as f says a complete one does fails
// with ErrNoTerminator or ErrNoUsage.
func Stream(c *http.Client, r Request, f Format) Fire {
	return func(ctx context.Context, s *Shot) {
		s.Late = time.Since(s.Intended)
		resp, err := r.send(ctx, c)
		if err != nil {
			s.Err = err
			return
		}
		defer resp.Body.Close()
		rd := sse.NewReader(resp.Body, maxEventBytes)
		check := streamCheck{f: f}
		var last time.Time
		for {
			ev, err := rd.Next()
			if err != nil {
				switch {
				case err != io.EOF:
					s.Err = err
				case s.Events == 0:
					s.Err = ErrNoEvent
				default:
					s.Err = check.err()
				}
				break
			}
			check.see(ev)
			now := time.Now()
			if s.Events == 0 {
				s.TTFB = now.Sub(s.Intended)
			} else {
				s.Gaps = append(s.Gaps, now.Sub(last))
			}
			last = now
			s.Events++
			s.Bytes += int64(len(ev.Raw))
		}
		s.Latency = time.Since(s.Intended)
	}
}

// HoldStream posts r, waits for the first SSE event and calls opened with
// nil (or with the error if the stream failed before it), then holds the
// connection open, reading and discarding, until ctx ends or the server
// closes the stream. opened is called exactly once.
func HoldStream(ctx context.Context, c *http.Client, r Request, opened func(error)) {
	resp, err := r.send(ctx, c)
	if err != nil {
		opened(err)
		return
	}
	defer resp.Body.Close()
	rd := sse.NewReader(resp.Body, maxEventBytes)
	if _, err := rd.Next(); err != nil {
		if err == io.EOF {
			err = ErrNoEvent
		}
		opened(err)
		return
	}
	opened(nil)
	for {
		if _, err := rd.Next(); err != nil {
			return // ctx ended (the transport closes the body) or the server ended the stream
		}
	}
}
