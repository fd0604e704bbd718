package usage

import (
	"encoding/json"
	"sync/atomic"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Appender is where encoded events go: the outbox (*outbox.Store). Append
// must never block; false means the event was dropped (docs/usage-events.md
// drop_newest).
//
// Append must copy payload if it keeps it (outbox.Store.Append does).
type Appender interface {
	Append(payload []byte) bool
}

// Recorder encodes an attempt's event once (so replays are byte-identical)
// and hands it to the outbox. It never blocks the request path.
type Recorder struct {
	out        Appender
	maxPayload int

	recorded atomic.Uint64 // accepted by the outbox
	dropped  atomic.Uint64 // refused by the outbox (full, failing)
	oversize atomic.Uint64 // larger than the broker limit: refused before the outbox
	invalid  atomic.Uint64 // failed Validate or json.Marshal: a gateway bug, counted and dropped
}

// RecorderStats are the recorder's counters.
type RecorderStats struct {
	Recorded, Dropped, Oversize, Invalid uint64
}

// NewRecorder returns a Recorder. maxPayload is the largest encoded event
// the broker will take (docs/usage-events.md "MQTT acknowledgement": brokers may ack and drop larger ones, so
// such an event is refused here and counted).
func NewRecorder(out Appender, maxPayload int) *Recorder {
	return &Recorder{out: out, maxPayload: maxPayload}
}

// Record validates, encodes and appends ev.
func (r *Recorder) Record(ev *usageevent.Event) {
	if ev.Validate() != nil {
		r.invalid.Add(1)
		return
	}
	data, err := json.Marshal(ev)
	if err != nil {
		// What Validate lets through and JSON cannot hold: a started_at
		// outside RFC 3339's years, an empty (not nil) provider_usage.
		r.invalid.Add(1)
		return
	}
	if r.maxPayload > 0 && len(data) > r.maxPayload {
		r.oversize.Add(1)
		return
	}
	if r.out.Append(data) {
		r.recorded.Add(1)
	} else {
		r.dropped.Add(1)
	}
}

// Stats returns the counters.
func (r *Recorder) Stats() RecorderStats {
	return RecorderStats{
		Recorded: r.recorded.Load(), Dropped: r.dropped.Load(),
		Oversize: r.oversize.Load(), Invalid: r.invalid.Load(),
	}
}
