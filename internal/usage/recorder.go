package usage

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Appender is where encoded events go: the outbox (*outbox.Store). Append
// takes the events of attempts that may have reached a provider,
// AppendNotSent those of attempts that definitely did not; the outbox
// never drops the former to make room for the latter. Neither may block;
// false means the event was dropped (docs/usage-events.md drop_newest).
//
// Both must copy payload if they keep it (outbox.Store does).
type Appender interface {
	Append(payload []byte) bool
	AppendNotSent(payload []byte) bool
}

// Recorder encodes an attempt's event once (so replays are byte-identical)
// and hands it to the outbox. It never blocks the request path.
type Recorder struct {
	out        Appender
	maxPayload int

	// cancels is each key's budget for the events of attempts its client
	// cancelled before anything was sent.
	cancels *KeyBudget

	// bufs holds *[]byte encoding buffers: the Appender copies what it
	// keeps, so a buffer is free again once Append returns.
	bufs sync.Pool

	recorded atomic.Uint64 // accepted by the outbox
	overKey  atomic.Uint64 // cancelled before sending, beyond the key's budget: counted, not recorded
	dropped  atomic.Uint64 // refused by the outbox (full, failing)
	oversize atomic.Uint64 // larger than the broker limit: refused before the outbox
	invalid  atomic.Uint64 // failed Validate or encoding: a gateway bug, counted and dropped
}

// RecorderStats are the recorder's counters.
type RecorderStats struct {
	Recorded, Dropped, Oversize, Invalid uint64
	// OverKeyBudget counts the events of attempts cancelled by their
	// client before anything was sent that were beyond their key's budget
	// (CancelRate, CancelBurst) and so were counted here instead of
	// recorded.
	OverKeyBudget uint64
}

// NewRecorder returns a Recorder. maxPayload is the largest encoded event
// the broker will take (docs/usage-events.md "MQTT acknowledgement": brokers may ack and drop larger ones, so
// such an event is refused here and counted).
func NewRecorder(out Appender, maxPayload int) *Recorder {
	return &Recorder{out: out, maxPayload: maxPayload, cancels: NewKeyBudget(CancelRate, CancelBurst)}
}

// Record validates, encodes and appends ev.
//
// The encoder checks the event as it writes it (appendJSON): an event
// the node built passes those checks, and Validate runs only for one that
// does not, to decide. Either way exactly the events Validate accepts are
// recorded (docs/usage-events.md: every event a node writes is valid).
func (r *Recorder) Record(ev *usageevent.Event) {
	bp := r.getBuf()
	defer r.putBuf(bp)
	// appendJSON writes json.Marshal's bytes without reflection and, into
	// a pooled buffer, without allocating.
	data, valid, err := appendJSON((*bp)[:0], ev)
	*bp = data
	if err != nil || !valid && ev.Validate() != nil {
		// Encoding fails for what Validate lets through and JSON cannot
		// hold: a started_at outside RFC 3339's years, an empty (not
		// nil) provider_usage. Either is a gateway bug.
		r.invalid.Add(1)
		return
	}
	notSent := ev.SendState == usageevent.SendDefinitelyNotSent
	if notSent && ev.FailureStage == usageevent.StageClientCancelled {
		// A client that opens and resets requests by the thousand must
		// not fill the outbox with their events: past its key's budget
		// they are only counted. The event's own end time keeps the
		// budget on the request path's clock.
		end := ev.StartedAt.Add(time.Duration(ev.DurationMs * float64(time.Millisecond)))
		if ok, _ := r.cancels.Take(ev.KeyID, end); !ok {
			r.overKey.Add(1)
			return
		}
	}
	if r.maxPayload > 0 && len(data) > r.maxPayload {
		r.oversize.Add(1)
		return
	}
	appended := false
	if notSent {
		appended = r.out.AppendNotSent(data)
	} else {
		appended = r.out.Append(data)
	}
	if appended {
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
		OverKeyBudget: r.overKey.Load(),
	}
}
