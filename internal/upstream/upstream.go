// Package upstream keeps the node-local hot state of each provider backend:
// its in-flight count against the hard cap of SPEC §6.
//
// State lives in a Registry keyed by backend identity, outside the compiled
// routing table, so a later table swap can keep the state of a backend whose
// identity did not change (SPEC §7, STYLE habit 2, Caddy reverseproxy/hosts.go).
// The Registry is a value owned by the app; there is no package-global state.
package upstream

import (
	"sync"
	"sync/atomic"
)

// Identity names a backend for state purposes: two definitions with the
// same identity share one State.
type Identity struct {
	Protocol   string
	BaseURL    string
	Credential string
	Cap        int
	ID         string
}

// State is one backend's hot state. All fields are atomics: the request
// path never takes a lock.
type State struct {
	cap      int64 // immutable
	inflight atomic.Int64
}

// Cap returns the backend's max_inflight_per_node.
func (s *State) Cap() int64 { return s.cap }

// InFlight returns the current number of requests holding a slot.
func (s *State) InFlight() int64 { return s.inflight.Load() }

// TryAcquire takes one in-flight slot if the cap allows. It never lets
// InFlight exceed Cap, under any concurrency (SPEC §6: a hard cap).
func (s *State) TryAcquire() bool {
	for {
		n := s.inflight.Load()
		if n >= s.cap {
			return false
		}
		if s.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release returns a slot taken by TryAcquire.
func (s *State) Release() { s.inflight.Add(-1) }

// Registry maps identities to states.
type Registry struct {
	mu     sync.Mutex
	states map[Identity]*State // guarded by mu
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{states: make(map[Identity]*State)} }

// Get returns the state for id, creating it on first use.
func (r *Registry) Get(id Identity) *State {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.states[id]
	if !ok {
		s = &State{cap: int64(id.Cap)}
		r.states[id] = s
	}
	return s
}

// Len returns the number of tracked backends.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.states)
}
