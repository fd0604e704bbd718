package app

import (
	"log/slog"
)

// LogOptions are the handler options of the node's JSON log: durations
// are written in Go's readable form ("1m30s", "250ms") rather than as
// integer nanoseconds, in every line (drain, snapshot, publisher, TLS).
// Request lines keep their millisecond numbers (ttfb_ms, duration_ms),
// which are floats, not durations.
func LogOptions() *slog.HandlerOptions {
	return &slog.HandlerOptions{ReplaceAttr: readableDuration}
}

func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
