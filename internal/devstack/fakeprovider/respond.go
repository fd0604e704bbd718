package fakeprovider

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Low-level writers shared by both protocols: bodies, event streams and the
// connection-level faults.

// writeBody writes a complete JSON body, or with cut only its first half
// before dropping the connection.
func writeBody(w http.ResponseWriter, status int, body []byte, cut bool) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if !cut {
		_, _ = w.Write(body)
		return
	}
	_, _ = w.Write(body[:len(body)/2])
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler)
}

// event is one server-sent event; name is "" for OpenAI's data-only events.
type event struct {
	name string
	data []byte
}

func (e event) bytes() []byte {
	var b []byte
	if e.name != "" {
		b = append(b, "event: "+e.name+"\n"...)
	}
	b = append(b, "data: "...)
	b = append(b, e.data...)
	return append(b, "\n\n"...)
}

// writeStream sends events with a flush after each one, applying b's
// EventDelay, Cut and ErrorEvent. A fault position is clamped to the last
// event, so a faulted stream never carries its terminator.
func writeStream(ctx context.Context, w http.ResponseWriter, b Behaviour, events []event, errEvent event) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	out := io.Writer(w)
	flush := rc.Flush
	if b.Gzip {
		// Each event is flushed through the compressor, so the stream
		// stays a stream.
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		defer zw.Close() // the gzip trailer after the last event
		out = zw
		flush = func() error {
			if err := zw.Flush(); err != nil {
				return err
			}
			return rc.Flush()
		}
	}
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	last := len(events) - 1
	for i, ev := range events {
		if i == 0 && b.FirstEventDelay > 0 && !wait(ctx, b.FirstEventDelay) {
			return
		}
		if i > 0 && !wait(ctx, b.EventDelay) {
			return
		}
		if b.Cut && i == min(b.CutAfter, last) {
			panic(http.ErrAbortHandler) // net/http closes the connection: no terminator, no final chunk
		}
		inBandError := b.ErrorEvent && i == min(b.ErrorAfter, last)
		if inBandError {
			ev = errEvent
		}
		if _, err := out.Write(ev.bytes()); err != nil || flush() != nil || inBandError {
			return
		}
	}
}

// resetConn drops the connection with an RST and no response: the request
// was fully received, so for the gateway it is possibly_sent.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // not hijackable: the closest thing is an abort
	}
	raw := conn
	if u, ok := conn.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		raw = u.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST instead of FIN
	}
	_ = raw.Close()
}

// wait sleeps for d unless ctx ends first; false when ctx ended.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// split cuts text into n pieces of nearly equal rune counts (n = 0 means
// DefaultChunks; never more pieces than runes, never fewer than one).
func split(text string, n int) []string {
	if n <= 0 {
		n = DefaultChunks
	}
	runes := []rune(text)
	n = max(min(n, len(runes)), 1)
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(runes[i*len(runes)/n:(i+1)*len(runes)/n]))
	}
	return out
}

// mustJSON marshals the fake's own response types, which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakeprovider: marshal %T: %v", v, err))
	}
	return b
}

// gzipped returns body gzip-compressed.
func gzipped(body []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(body) // a bytes.Buffer does not fail
	_ = zw.Close()
	return buf.Bytes()
}

// speechHeader starts every fake speech answer: an ID3v2 tag header, as
// an MP3 file starts.
var speechHeader = []byte("ID3\x04\x00\x00\x00\x00\x00\x00")

// writeSpeech answers a speech request as OpenAI does: audio/mpeg in
// chunked transfer (no Content-Length), here the tag header and then
// "fake-audio:" and the input text, in two flushed halves. With
// [[cut=after_events:K]] the connection drops after the first half.
func writeSpeech(w http.ResponseWriter, r reply) {
	body := append(append([]byte{}, speechHeader...), "fake-audio:"+r.text()...)
	w.Header().Set("Content-Type", "audio/mpeg")
	w.Header().Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	half := len(body) / 2
	_, _ = w.Write(body[:half])
	_ = rc.Flush()
	if r.b.Cut {
		panic(http.ErrAbortHandler)
	}
	_, _ = w.Write(body[half:])
}
