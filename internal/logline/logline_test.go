package logline

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestReadableDurations: durations are written as Go writes them, in
// groups too; other values are left alone.
func TestReadableDurations(t *testing.T) {
	var buf bytes.Buffer
	slog.New(NewHandler(&buf, nil)).Info("drained", "took", 2301*time.Millisecond,
		slog.Group("g", "wait", 90*time.Second), "n", 3)
	for _, want := range []string{`"took":"2.301s"`, `"g":{"wait":"1m30s"}`, `"n":3`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("line %s lacks %s", buf.Bytes(), want)
		}
	}
}

// TestLevel: nil means Info; lines below the level are not written.
func TestLevel(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(&buf, nil))
	log.Debug("hidden")
	log.Info("shown")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, `"msg":"shown"`) {
		t.Fatalf("lines %q", got)
	}
}

// BenchmarkRequestLine is the node's request line (11 fields) written as
// the request path writes it: slog.Logger.LogAttrs from an array.
func BenchmarkRequestLine(b *testing.B) {
	log := slog.New(NewHandler(discard{}, nil))
	b.ReportAllocs()
	for b.Loop() {
		var buf [14]slog.Attr
		attrs := append(buf[:0],
			slog.String("request_id", "sg-4f2a9c0d1e3b5a7c9e1f3a5b"),
			slog.String("path", "/v1/chat/completions"),
			slog.String("model", "gpt-4o-mini"),
			slog.Bool("stream", false),
			slog.String("backend", "openai-primary"),
			slog.Int("attempt", 1),
			slog.String("send_state", "response_received"),
			slog.Int("status", 200),
			slog.Float64("ttfb_ms", 412.387),
			slog.Float64("duration_ms", 1534.021),
			slog.String("placement", "balanced"),
		)
		log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestLevelText: levels, built-in or an attribute's value, read as slog
// writes them without the node's options, custom levels included.
func TestLevelText(t *testing.T) {
	handle := func(h slog.Handler, l slog.Level) {
		r := slog.NewRecord(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), l, "m", 0)
		r.AddAttrs(slog.Any("custom", l+1))
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2, slog.LevelError + 4} {
		var got, want bytes.Buffer
		handle(NewHandler(&got, slog.LevelDebug), l)
		handle(slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug}), l)
		if got.String() != want.String() {
			t.Errorf("level %v: %s, slog %s", l, got.Bytes(), want.Bytes())
		}
	}
}

// TestReorderingControlsEscaped: a string a client chose (a path, a model)
// cannot reorder the line it is written in: the bidirectional controls are
// written as \uXXXX text, the rest of the string as it was.
func TestReorderingControlsEscaped(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(NewHandler(&buf, nil))
	lg.Info("request", "path", "/v1/models/abc\u202egpj.exe", "model", "m\u2066x\u2069\u200f\u061c", "plain", "héllo")
	line := buf.String()
	for _, r := range "\u202e\u2066\u2069\u200f\u061c" {
		if strings.ContainsRune(line, r) {
			t.Errorf("line holds U+%04X raw: %q", r, line)
		}
	}
	for _, want := range []string{`"path":"/v1/models/abc\\u202egpj.exe"`, `"model":"m\\u2066x\\u2069\\u200f\\u061c"`, `"plain":"héllo"`} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %s", line, want)
		}
	}
}

// TestMayReorderLeadBytes: every reordering control starts with a byte
// mayReorder looks for, so the byte search never hides one.
func TestMayReorderLeadBytes(t *testing.T) {
	n := 0
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !reorders(r) {
			continue
		}
		n++
		if s := "ascii " + string(r) + " ascii"; !mayReorder(s) {
			t.Errorf("U+%04X (% x): mayReorder = false", r, string(r))
		}
	}
	if n != 12 {
		t.Errorf("%d reordering controls, want 12 (U+061C, U+200E–200F, U+202A–202E, U+2066–2069)", n)
	}
	if mayReorder("/v1/chat/completions héllo") {
		t.Error(`mayReorder("/v1/chat/completions héllo") = true, want false`)
	}
}
