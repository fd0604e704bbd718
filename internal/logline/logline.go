// Package logline builds the node's log handler: log/slog's JSON handler
// with durations written as Go writes them, and with the Unicode controls
// that reorder text shown as escapes (docs/operations.md "Logs").
// cmd/scootgate, internal/app and the load harness all log through it, so
// a line looks the same whoever wrote it.
//
// The request path writes a line per attempt through [LogAttrs], which
// writes the bytes slog would write without slog's per-line machinery
// (docs/performance.md "Counted per request (`make bench-count`)").
package logline

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Handler is the node's log handler: slog's JSON handler with the
// options below, whose lines [LogAttrs] can also write itself.
type Handler struct {
	// immutable after NewHandler
	json *slog.JSONHandler
	out  *lockedWriter    // json's writer too, so that lines never interleave
	now  func() time.Time // time.Now; fixed by tests

	bufs  sync.Pool             // *[]byte, LogAttrs's line buffers
	stamp atomic.Pointer[stamp] // the last line's second, formatted
}

// NewHandler returns the node's handler writing JSON lines to w at level
// and above (nil: slog.LevelInfo). Durations are written in Go's readable
// form ("1m30s", "250ms") rather than as integer nanoseconds.
func NewHandler(w io.Writer, level slog.Leveler) *Handler {
	out := &lockedWriter{w: w}
	return &Handler{
		json: slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level, ReplaceAttr: replaceAttr}),
		out:  out,
		now:  time.Now,
	}
}

// Enabled reports whether the handler writes lines at level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.json.Enabled(ctx, level)
}

// Handle writes r as one JSON line.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	return h.json.Handle(ctx, r)
}

// WithAttrs returns a handler whose lines also hold attrs. Its lines are
// written by slog only: LogAttrs knows no preformatted attributes.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.json.WithAttrs(attrs) }

// WithGroup returns a handler that puts the lines' attributes in the
// group name, written by slog only, as WithAttrs.
func (h *Handler) WithGroup(name string) slog.Handler { return h.json.WithGroup(name) }

// lockedWriter serializes the writes of slog's handler and of LogAttrs,
// each one whole line, to a writer that may not be safe for concurrent
// use.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer // guarded by mu
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// replaceAttr writes durations as Go writes them, levels as strings, and
// strings without bidirectional controls.
func replaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		// A path or model a client chose may hold U+202E and its kin: in
		// a terminal or a log viewer they reorder what follows, so a line
		// could read as something it is not. encoding/json escapes the
		// C0 controls and U+2028/2029 but not these.
		if s := a.Value.String(); mayReorder(s) && strings.ContainsFunc(s, reorders) {
			a.Value = slog.StringValue(escapeReordering(s))
		}
	case slog.KindDuration:
		a.Value = slog.StringValue(a.Value.Duration().String())
	case slog.KindAny:
		// With a ReplaceAttr the handler passes a line's level as a Level
		// in an Any and encodes it with encoding/json (Level.MarshalJSON);
		// the same text as a string saves every line an allocation and
		// ~0.25 µs.
		if l, ok := a.Value.Any().(slog.Level); ok {
			a.Value = slog.StringValue(l.String())
		}
	}
	return a
}

// reorders reports whether r is a Unicode control that changes the
// display order of text: the bidirectional embeddings, overrides and
// isolates, the directional marks, and the Arabic letter mark.
func reorders(r rune) bool {
	switch {
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	case r == '\u200e', r == '\u200f', r == '\u061c':
		return true
	}
	return false
}

// mayReorder reports whether s holds a byte that starts the UTF-8 of a
// reordering control (U+061C starts with 0xD8, the others with 0xE2): a
// line's strings are mostly ASCII, and two byte searches rule them out
// for a tenth of the work of decoding every rune.
func mayReorder(s string) bool {
	return strings.IndexByte(s, 0xE2) >= 0 || strings.IndexByte(s, 0xD8) >= 0
}

// escapeReordering writes each reordering control of s as the six
// characters \uXXXX, so the line shows it instead of obeying it.
func escapeReordering(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		if reorders(r) {
			b.WriteString(`\u`)
			b.WriteString(strconv.FormatInt(int64(r)+0x10000, 16)[1:])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
