package app

import (
	"context"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/scootgate/scootgate/internal/gateway"
)

// Refusal log limits: a burst of refusalBurst lines, then refusalRate a
// second. A flood of bad requests (a client with a revoked key in a retry
// loop, a scanner) costs a few lines a second, each saying how many were
// left out since the previous one.
const (
	refusalBurst = 20
	refusalRate  = 5.0 // lines per second once the burst is spent
	maxLogField  = 256 // bytes of a client-chosen path or model name logged

	// A key over its limits is refused on every request of a retry
	// loop: one line per key every limitLogEvery, at most (docs/limits.md
	// "Refusals"), within the bucket above. The set of keys remembered is
	// bounded; past limitLogKeys it starts over.
	limitLogEvery = 10 * time.Second
	limitLogKeys  = 10000
)

// refusalLog writes one line per request the node refused before routing
// (401, 403, 404, 400, 413, ...), rate-limited by a token bucket, so an
// operator sees which model names and endpoints clients ask for that the
// fleet does not serve. Safe for concurrent use.
type refusalLog struct {
	// immutable
	log *slog.Logger
	now func() time.Time

	mu         sync.Mutex
	tokens     float64   // guarded by mu
	last       time.Time // guarded by mu: when tokens was last refilled
	suppressed uint64    // guarded by mu: refusals not logged since the last line

	// guarded by mu: when each key's last limit refusal was logged, and
	// how many of its limit refusals were left out since
	limitLogged map[string]time.Time
	limitLeft   map[string]uint64
}

func newRefusalLog(log *slog.Logger, now func() time.Time) *refusalLog {
	return &refusalLog{log: log, now: now, tokens: refusalBurst, last: now(),
		limitLogged: map[string]time.Time{}, limitLeft: map[string]uint64{}}
}

// allow takes a token; it returns false and counts the refusal when there
// is none, else true and the number left out since the previous line.
func (l *refusalLog) allow() (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if el := now.Sub(l.last); el > 0 {
		l.tokens = min(refusalBurst, l.tokens+el.Seconds()*refusalRate)
		l.last = now
	}
	if l.tokens < 1 {
		l.suppressed++
		return false, 0
	}
	l.tokens--
	n := l.suppressed
	l.suppressed = 0
	return true, n
}

// allowKey reports whether a limit refusal of key may be logged now, and
// how many of the key's were left out since its previous line.
func (l *refusalLog) allowKey(key string) (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if last, ok := l.limitLogged[key]; ok && now.Sub(last) < limitLogEvery {
		l.limitLeft[key]++
		return false, 0
	}
	if len(l.limitLogged) >= limitLogKeys {
		clear(l.limitLogged)
		clear(l.limitLeft)
	}
	l.limitLogged[key] = now
	n := l.limitLeft[key]
	delete(l.limitLeft, key)
	return true, n
}

// Refused is the gateway's Options.Refused.
func (l *refusalLog) Refused(r gateway.Refusal) {
	var keyLeft uint64
	if r.Limit != "" {
		var ok bool
		if ok, keyLeft = l.allowKey(r.KeyID); !ok {
			return
		}
	}
	ok, left := l.allow()
	if !ok {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", r.RequestID),
		slog.String("path", clip(r.Path)),
		slog.String("model", clip(r.Model)),
		slog.Int("status", r.Status),
		slog.String("reason", r.Reason),
	}
	if r.Limit != "" {
		attrs = append(attrs, slog.String("key_id", r.KeyID), slog.String("tenant_id", r.TenantID), slog.String("limit", r.Limit))
		if keyLeft > 0 {
			attrs = append(attrs, slog.Uint64("key_suppressed", keyLeft))
		}
	}
	if left > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", left))
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "request refused", attrs...)
}

// clip bounds a client-chosen string for the log, at a rune boundary.
func clip(s string) string {
	if len(s) <= maxLogField {
		return s
	}
	i := maxLogField
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
