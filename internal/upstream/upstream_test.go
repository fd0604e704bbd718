package upstream

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestCapNeverExceeded(t *testing.T) {
	r := NewRegistry()
	s := r.Get(Identity{ID: "b", Cap: 5})
	var peak atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if !s.TryAcquire() {
					continue
				}
				n := s.InFlight()
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				s.Release()
			}
		}()
	}
	wg.Wait()
	if got := peak.Load(); got > 5 || got < 1 {
		t.Fatalf("peak in-flight = %d, want 1..5", got)
	}
	if got := s.InFlight(); got != 0 {
		t.Fatalf("in-flight after all released = %d, want 0", got)
	}
}

func TestRegistryKeepsStateByIdentity(t *testing.T) {
	r := NewRegistry()
	a := r.Get(Identity{ID: "a", BaseURL: "https://x", Cap: 2})
	if !a.TryAcquire() {
		t.Fatal("first acquire failed")
	}
	if b := r.Get(Identity{ID: "a", BaseURL: "https://x", Cap: 2}); b != a {
		t.Fatal("same identity returned a different state")
	}
	if c := r.Get(Identity{ID: "a", BaseURL: "https://x", Cap: 3}); c == a {
		t.Fatal("changed cap must give a fresh state")
	}
	if r.Len() != 2 {
		t.Fatalf("Len = %d, want 2", r.Len())
	}
}
