package app

import (
	"log/slog"
	"sync"
	"time"

	"github.com/scootgate/scootgate/internal/egress"
)

// egressLogEvery is the shortest gap between two log lines about the same
// proxy failing at the same stage.
const egressLogEvery = 10 * time.Second

// egressFailures reports every failed proxy attempt (egress.Options
// OnFailure), the ones a later proxy made up for included, so that a dead
// primary behind a working fallback shows on scootgate_egress_errors_total
// and in the log (docs/egress.md "Failures"). Every failure is counted;
// the log is rate-limited per proxy and stage, each line carrying the
// number of failures since the last one, so a dead proxy under load does
// not flood it.
type egressFailures struct {
	// immutable
	count func(proxy string, stage egress.Stage) // the metric
	log   *slog.Logger
	now   func() time.Time
	every time.Duration

	mu   sync.Mutex
	seen map[egressKey]*egressSeen // guarded by mu
}

type egressKey struct {
	proxy string
	stage egress.Stage
}

type egressSeen struct {
	next       time.Time // no line before this
	suppressed int       // failures not logged since the last line
}

func newEgressFailures(count func(proxy string, stage egress.Stage), log *slog.Logger, now func() time.Time) *egressFailures {
	return &egressFailures{count: count, log: log, now: now, every: egressLogEvery, seen: make(map[egressKey]*egressSeen)}
}

// report is the dialer's OnFailure. The error text names the proxy by its
// configured name and never carries a credential (egress.NotSentError).
func (f *egressFailures) report(e *egress.NotSentError) {
	f.count(e.Proxy, e.Stage)
	k := egressKey{e.Proxy, e.Stage}
	f.mu.Lock()
	now := f.now()
	s := f.seen[k]
	if s == nil {
		s = &egressSeen{}
		f.seen[k] = s // bounded: configured proxies × stages
	}
	if now.Before(s.next) {
		s.suppressed++
		f.mu.Unlock()
		return
	}
	n := s.suppressed
	s.suppressed, s.next = 0, now.Add(f.every)
	f.mu.Unlock()
	f.log.Warn("egress proxy attempt failed", "proxy", e.Proxy, "stage", e.Stage.String(),
		"egress_fault", e.EgressFault(), "error", e.Err.Error(), "suppressed", n)
}
