// Package logline builds the node's log handler: log/slog's JSON handler
// with durations written as Go writes them (docs/operations.md "Logs").
// cmd/scootgate, internal/app and the load harness all log through it, so
// a line looks the same whoever wrote it.
package logline

import (
	"io"
	"log/slog"
)

// NewHandler returns the node's handler writing JSON lines to w at level
// and above (nil: slog.LevelInfo). Durations are written in Go's readable
// form ("1m30s", "250ms") rather than as integer nanoseconds.
func NewHandler(w io.Writer, level slog.Leveler) *slog.JSONHandler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: replaceAttr})
}

// replaceAttr writes durations as Go writes them, and levels as strings.
func replaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
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
