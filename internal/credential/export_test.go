package credential

// WaitGrant waits for the grant in flight, if any, to be recorded.
func WaitGrant(s *TokenSource) {
	s.mu.Lock()
	f := s.flight
	s.mu.Unlock()
	if f != nil {
		<-f.done
	}
}

// Backoff exposes backoff for its test.
var Backoff = backoff
