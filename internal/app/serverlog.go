package app

import (
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// handshakeLogEvery is the shortest gap between two logged TLS handshake
// failures.
const handshakeLogEvery = 10 * time.Second

// handshakeErrorPrefix starts the line net/http writes to Server.ErrorLog
// for every failed TLS handshake (its text is fixed by net/http).
const handshakeErrorPrefix = "http: TLS handshake error"

// serverLog is the API server's ErrorLog. Any client that opens a TCP
// connection can fail a TLS handshake, so those lines are rate-limited: at
// most one per handshakeLogEvery, carrying the number of failures since
// the last one logged. Every other net/http line passes through as a
// warning.
type serverLog struct {
	// immutable
	log   *slog.Logger
	now   func() time.Time
	every time.Duration

	mu         sync.Mutex
	next       time.Time // guarded by mu: no handshake line before this
	suppressed int       // guarded by mu: handshake failures not logged since the last line
}

func newServerLog(l *slog.Logger, now func() time.Time) *log.Logger {
	return log.New(&serverLog{log: l, now: now, every: handshakeLogEvery}, "", 0)
}

func (s *serverLog) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	if !strings.HasPrefix(msg, handshakeErrorPrefix) {
		s.log.Warn(msg)
		return len(p), nil
	}
	s.mu.Lock()
	now := s.now()
	if now.Before(s.next) {
		s.suppressed++
		s.mu.Unlock()
		return len(p), nil
	}
	n := s.suppressed
	s.suppressed, s.next = 0, now.Add(s.every)
	s.mu.Unlock()
	s.log.Warn(msg, "suppressed", n, "rate_limit", s.every.String())
	return len(p), nil
}
