// Package logline is the node's JSON log handler: log/slog's JSON handler
// with the node's options, plus a way to write one line from fields
// appended straight into a buffer, for the line the node writes per
// request (docs/operations.md "Logs").
//
// slog costs that line ~2 µs and a handful of allocations: attributes
// beyond five are copied to the heap, the time goes through ReplaceAttr,
// and every float and the level are encoded with encoding/json. A Line
// writes the same bytes slog would (the package's tests compare the two
// over generated records, hostile strings included) into a pooled buffer,
// and the handler writes it under the same lock as slog's lines, so the
// two kinds never interleave.
package logline

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Handler is the node's log handler: every slog.Logger method works
// through it as through slog.NewJSONHandler, and Line writes a line
// without a slog.Record.
type Handler struct {
	json *slog.JSONHandler
	out  *lockedWriter // shared with json: one lock for both kinds of line
}

// NewHandler returns a Handler writing JSON lines to w at level and above
// (nil: slog.LevelInfo). Durations are written in Go's readable form
// ("1m30s", "250ms") rather than as integer nanoseconds.
func NewHandler(w io.Writer, level slog.Leveler) *Handler {
	out := &lockedWriter{w: w}
	return &Handler{
		json: slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level, ReplaceAttr: readableDuration}),
		out:  out,
	}
}

func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.json.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error { return h.json.Handle(ctx, r) }

// WithAttrs implements slog.Handler. The handler it returns has no Line:
// a line from it carries the attributes.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.json.WithAttrs(attrs) }

// WithGroup implements slog.Handler, as WithAttrs.
func (h *Handler) WithGroup(name string) slog.Handler { return h.json.WithGroup(name) }

// lockedWriter serialises the writes of slog's lines and of Lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lockedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}

// Fields takes a line's attributes, in order. *Line encodes them; *Attrs
// collects them for any other slog handler: a caller that writes its
// fields once through Fields logs the same line either way.
type Fields interface {
	String(key, value string)
	Int(key string, value int64)
	Bool(key string, value bool)
	Float(key string, value float64)
}

// Attrs collects fields as slog attributes (for slog.Logger.LogAttrs).
type Attrs []slog.Attr

func (a *Attrs) String(k, v string)        { *a = append(*a, slog.String(k, v)) }
func (a *Attrs) Int(k string, v int64)     { *a = append(*a, slog.Int64(k, v)) }
func (a *Attrs) Bool(k string, v bool)     { *a = append(*a, slog.Bool(k, v)) }
func (a *Attrs) Float(k string, v float64) { *a = append(*a, slog.Float64(k, v)) }

// Line is one log line being written. It is not safe for concurrent use,
// and must not be used after End.
type Line struct {
	h   *Handler
	buf []byte
}

var lines = sync.Pool{New: func() any { return &Line{buf: make([]byte, 0, 1024)} }}

// maxPooled is the largest line buffer kept for reuse: a line with a huge
// error text should not pin its buffer in the pool.
const maxPooled = 16 << 10

// Line starts a line at t with level and msg, or returns nil when the
// handler does not log level. The caller adds fields and calls End.
func (h *Handler) Line(ctx context.Context, t time.Time, level slog.Level, msg string) *Line {
	if !h.json.Enabled(ctx, level) {
		return nil
	}
	l := lines.Get().(*Line)
	l.h = h
	// RFC 3339 holds years 0 to 9999 only; slog writes an error beside
	// other years, and no clock the node reads is that far off.
	b := append(l.buf[:0], `{"time":"`...)
	b = t.Round(0).AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = append(b, `,"level":`...)
	b = appendString(b, level.String())
	b = append(b, `,"msg":`...)
	l.buf = appendString(b, msg)
	return l
}

func (l *Line) key(k string) {
	l.buf = append(l.buf, ',')
	l.buf = appendString(l.buf, k)
	l.buf = append(l.buf, ':')
}

// String adds a string field.
func (l *Line) String(k, v string) {
	l.key(k)
	l.buf = appendString(l.buf, v)
}

// Int adds an integer field.
func (l *Line) Int(k string, v int64) {
	l.key(k)
	l.buf = strconv.AppendInt(l.buf, v, 10)
}

// Bool adds a boolean field.
func (l *Line) Bool(k string, v bool) {
	l.key(k)
	l.buf = strconv.AppendBool(l.buf, v)
}

// Float adds a number field, written as encoding/json writes a float64
// (slog's choice). NaN and infinities, which JSON cannot hold, are
// written as slog writes them: a string with the encoder's error.
func (l *Line) Float(k string, v float64) {
	l.key(k)
	l.buf = appendFloat(l.buf, v)
}

// End writes the line and gives its buffer back. The write error, like
// slog's, goes nowhere: the logger has no better place to report it.
func (l *Line) End() {
	l.buf = append(l.buf, '}', '\n')
	_, _ = l.h.out.Write(l.buf)
	l.h = nil
	if cap(l.buf) <= maxPooled {
		lines.Put(l)
	}
}

// appendFloat is encoding/json's float64 encoding.
func appendFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return appendString(b, "!ERROR:json: unsupported value: "+strconv.FormatFloat(f, 'g', -1, 64))
	}
	if f >= 0.001 && f < 1e9 {
		// A count of microseconds over 1000 (the request line's
		// milliseconds) is written from its integer. f is the float64
		// nearest to the decimal k/1000, which has at most 12 significant
		// digits; a decimal of up to 15 names exactly one float64, so no
		// shorter decimal reads back as f, and k/1000 without its trailing
		// zeros is what the shortest formatting below writes.
		if k := int64(f*1000 + 0.5); float64(k)/1000 == f {
			return appendMillis(b, k)
		}
	}
	// Like ES6: exponent form only for very small and very large
	// magnitudes, and e-07 spelt e-7.
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendMillis writes k/1000 in decimal: the integer part, then up to
// three fraction digits without trailing zeros.
func appendMillis(b []byte, k int64) []byte {
	b = strconv.AppendInt(b, k/1000, 10)
	frac := k % 1000
	if frac == 0 {
		return b
	}
	d := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for d[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, d[:n]...)
}

const hex = "0123456789abcdef"

// appendString appends s quoted as slog's JSON handler quotes strings:
// `"` and `\` escaped, \n \r \t by name, other control bytes as \u00XX,
// invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped; HTML characters
// and DEL are kept.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
