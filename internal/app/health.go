// The node's health listener: /healthz (the process
// is alive), /metrics (Prometheus), and /readyz (docs/operations.md: authorization snapshot loaded, routes
// ready, not draining; each failing check says why). It never shares a
// listener with the public API, and needs no API key.

package app

import (
	"encoding/json"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
)

// readyCheck reports nil when its condition for readiness holds, or an error
// whose text is the reason shown on /readyz. Checks must be cheap and
// must not reveal secrets.
type readyCheck func() error

type namedCheck struct {
	name string
	fn   readyCheck
}

// Health holds readiness checks and the drain flag.
type Health struct {
	draining atomic.Bool

	mu      sync.Mutex
	checks  []namedCheck      // guarded by mu
	details map[string]string // guarded by mu: facts an operator must see, not failures
	// detailFns are details read at each /readyz (a credential's token
	// state); guarded by mu.
	detailFns map[string]func() string
}

// AddDetail registers a detail read at every /readyz, shown whether or
// not the node is ready; fn must be cheap and reveal no secret.
func (h *Health) AddDetail(name string, fn func() string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.detailFns == nil {
		h.detailFns = map[string]func() string{}
	}
	h.detailFns[name] = fn
}

// SetDetail records a fact shown on /readyz whether or not the node is
// ready, such as an explicit insecure opt-in (docs/operations.md "TLS").
func (h *Health) SetDetail(name, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.details == nil {
		h.details = map[string]string{}
	}
	h.details[name] = text
}

// New returns a Health with no checks.
func newHealth() *Health { return &Health{} }

// Add registers a readiness check.
func (h *Health) Add(name string, fn readyCheck) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks = append(h.checks, namedCheck{name, fn})
}

// StartDraining makes /readyz fail from now on (docs/operations.md "Drain": fail
// readiness first).
func (h *Health) StartDraining() { h.draining.Store(true) }

// Draining reports whether the node is draining.
func (h *Health) Draining() bool { return h.draining.Load() }

// ReadyReport is the /readyz document.
type ReadyReport struct {
	Ready   bool              `json:"ready"`
	Reasons map[string]string `json:"reasons,omitempty"` // check name → why it fails
	Details map[string]string `json:"details,omitempty"` // facts shown even when ready
}

// Ready runs every check.
func (h *Health) Ready() ReadyReport {
	h.mu.Lock()
	checks := h.checks
	rep := ReadyReport{Ready: true}
	if len(h.details)+len(h.detailFns) > 0 {
		rep.Details = make(map[string]string, len(h.details)+len(h.detailFns))
		for k, v := range h.details {
			rep.Details[k] = v
		}
	}
	fns := maps.Clone(h.detailFns)
	h.mu.Unlock()
	for k, fn := range fns {
		rep.Details[k] = fn()
	}
	fail := func(name, why string) {
		if rep.Reasons == nil {
			rep.Reasons = map[string]string{}
		}
		rep.Ready = false
		rep.Reasons[name] = why
	}
	if h.Draining() {
		fail("drain", "node is draining")
	}
	for _, c := range checks {
		if err := c.fn(); err != nil {
			fail(c.name, err.Error())
		}
	}
	return rep
}

// Handler serves /healthz, /readyz and, when metrics is not nil,
// /metrics: metrics belong on this listener, never the public one (docs/operations.md).
func (h *Health) Handler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeHealthJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		rep := h.Ready()
		status := http.StatusOK
		if !rep.Ready {
			status = http.StatusServiceUnavailable
		}
		writeHealthJSON(w, status, rep)
	})
	return mux
}

func writeHealthJSON(w http.ResponseWriter, status int, v any) {
	data, _ := json.Marshal(v) // maps of strings and bools cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
