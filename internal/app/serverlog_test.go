package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
)

// TestHandshakeErrorsRateLimited: a flood of failed TLS handshakes writes
// one line per window, the next line counts the ones left out, and other
// server lines are never held back.
func TestHandshakeErrorsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	clk := clock.NewFake(time.Time{})
	l := newServerLog(slog.New(slog.NewJSONHandler(&buf, nil)), clk.Now)
	for i := range 1000 {
		l.Printf("http: TLS handshake error from 192.0.2.1:%d: tls: client offered only unsupported versions", 1000+i)
	}
	l.Printf("http: panic serving 192.0.2.1:1: boom")
	clk.Advance(handshakeLogEvery - time.Nanosecond)
	l.Printf("http: TLS handshake error from 192.0.2.1:2: EOF")
	clk.Advance(time.Nanosecond)
	l.Printf("http: TLS handshake error from 192.0.2.1:3: EOF")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (first failure, the panic, the next window's):\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`"suppressed":0`, `boom`, `"suppressed":1000`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s, want %s", i, lines[i], want)
		}
	}
}
