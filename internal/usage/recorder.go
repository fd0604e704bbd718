package usage

import (
	"sync"
	"sync/atomic"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Appender is where encoded events go: the outbox (*outbox.Store). Append
// must never block; false means the event was dropped (docs/usage-events.md
// drop_newest).
//
// Append must copy payload if it keeps it (outbox.Store.Append does): the
// Recorder encodes into a pooled buffer and reuses it as soon as Append
// returns.
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
	invalid  atomic.Uint64 // failed Validate: a gateway bug, counted and dropped

	// bufs holds *[]byte encode buffers (pointers, so that Put does not
	// allocate). A buffer goes back once Append has returned: Appender
	// implementations copy what they keep.
	bufs sync.Pool
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
	bp := r.getBuf()
	defer r.putBuf(bp)
	// appendJSON writes the bytes json.Marshal would (the encoding stored
	// events always had), without reflection and, into a pooled buffer,
	// without allocating; it relies on the Validate above.
	data, err := appendJSON((*bp)[:0], ev)
	*bp = data
	if err != nil {
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

// maxPooledBuf is the largest buffer put back in the pool. Events are
// usually under 1 KiB; one with a huge provider_usage should not pin its
// buffer there.
const maxPooledBuf = 64 << 10

func (r *Recorder) getBuf() *[]byte {
	if bp, ok := r.bufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, 1024)
	return &b
}

func (r *Recorder) putBuf(bp *[]byte) {
	if cap(*bp) > maxPooledBuf {
		return
	}
	*bp = (*bp)[:0]
	r.bufs.Put(bp)
}

// Stats returns the counters.
func (r *Recorder) Stats() RecorderStats {
	return RecorderStats{
		Recorded: r.recorded.Load(), Dropped: r.dropped.Load(),
		Oversize: r.oversize.Load(), Invalid: r.invalid.Load(),
	}
}
