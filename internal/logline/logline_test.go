package logline

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
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
