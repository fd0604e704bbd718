package app

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/protocol"
)

// concurrencyLimit caps the requests in flight on the API listener,
// streams included (docs/api.md "Connection limit"; OWASP API4). Beyond the cap
// it answers at once, before reading the body or touching a backend, with
// a 503 that tells the client a retry is safe (docs/api.md "Tell the client
// whether a retry is safe": x-should-retry: true on local 503s). A counter and no queue: under overload a fast
// answer that a load balancer or SDK can retry elsewhere beats a wait.
type concurrencyLimit struct {
	// immutable
	next    http.Handler
	max     int64
	log     *slog.Logger
	refusal *apierr.Error // the answer beyond the cap; Retry-After: 1

	inflight atomic.Int64
	refused  atomic.Uint64
}

func limitConcurrency(next http.Handler, max int, log *slog.Logger) *concurrencyLimit {
	return &concurrencyLimit{
		next: next, max: int64(max), log: log,
		refusal: apierr.Unavailable("this node is at its concurrent request limit; retry shortly", time.Second),
	}
}

func (l *concurrencyLimit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if l.inflight.Add(1) > l.max {
		l.inflight.Add(-1)
		l.refused.Add(1)
		rid := newRequestID()
		w.Header().Set("X-Request-Id", rid) // docs/api.md "Headers": always our own id
		l.log.Debug("request refused: concurrent request limit", "request_id", rid, "limit", l.max)
		l.refusal.Write(w, shapeFor(r), rid)
		return
	}
	defer l.inflight.Add(-1)
	l.next.ServeHTTP(w, r)
}

// stats reports the limit for scootgate_client_*. In-flight counts the
// requests being served; a refused one is never counted in it.
func (l *concurrencyLimit) stats() metrics.ClientStats {
	return metrics.ClientStats{InFlight: min(max(0, l.inflight.Load()), l.max), Limit: int(l.max), Refused: l.refused.Load()}
}

// shapeFor picks the error shape as the proxy does for requests it has not
// routed yet: Anthropic clients always send anthropic-version.
func shapeFor(r *http.Request) protocol.Protocol {
	if r.Header.Get("Anthropic-Version") != "" {
		return protocol.Anthropic
	}
	return protocol.OpenAI
}

// newRequestID has the proxy's format (sg- + 24 hex digits).
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "sg-" + hex.EncodeToString(b[:])
}
