package config

import "time"

// Realtime bounds realtime sessions ([realtime]; docs/api.md "Realtime
// sessions").
type Realtime struct {
	// FrameBytes bounds one message either way; a client's larger one
	// closes its session with 1009 (message too big).
	FrameBytes int64
	// IdleTimeout closes a session in which no frame went either way for
	// this long; MaxDuration bounds a session's whole life.
	IdleTimeout time.Duration
	MaxDuration time.Duration
}

// Ranges of the [realtime] keys (documented in the package doc).
const (
	minRealtimeFrame    = 4 << 10
	maxRealtimeFrame    = 256 << 20
	minRealtimeDuration = 100 * time.Millisecond
	maxRealtimeDuration = 24 * time.Hour
)

// realtimeSection reads [realtime]; absent, the defaults hold.
func (v *validator) realtimeSection(root *table, r *Realtime) {
	t, ok := section(root, "realtime")
	if !ok {
		return
	}
	defer t.done()
	if n, ok := t.integer("frame_bytes", "", minRealtimeFrame, maxRealtimeFrame); ok {
		r.FrameBytes = n
	}
	durationIn(t, "idle_timeout", minRealtimeDuration, maxRealtimeDuration, &r.IdleTimeout)
	durationIn(t, "max_duration", minRealtimeDuration, maxRealtimeDuration, &r.MaxDuration)
}
