package anthropic

import (
	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
)

// BodyOutcome reads the Outcome of a non-stream Messages answer: the
// top-level "model" and "stop_reason".
func BodyOutcome(body []byte) provider.Outcome {
	var o provider.Outcome
	o.SetModel(body, "model")
	if raw, ok, err := jsonedit.Lookup(body, "stop_reason"); err == nil && ok {
		o.AddReason(raw)
	}
	return o
}

// StreamOutcome follows a Messages stream for its Outcome: message.model
// of message_start and delta.stop_reason of message_delta. One stream, one
// tracker.
type StreamOutcome struct{ o provider.Outcome }

// Observe looks at the next event of the stream; events other than
// message_start and message_delta cost nothing.
func (t *StreamOutcome) Observe(ev *sse.Event) {
	switch ev.Type {
	case "message_start":
		if msg, ok, err := jsonedit.Lookup(ev.Data, "message"); err == nil && ok && provider.Object(msg) {
			t.o.SetModel(msg, "model")
		}
	case "message_delta":
		d, ok, err := jsonedit.Lookup(ev.Data, "delta")
		if err != nil || !ok || !provider.Object(d) {
			return
		}
		if raw, ok, err := jsonedit.Lookup(d, "stop_reason"); err == nil && ok {
			if s, ok := provider.OutcomeString(raw); ok {
				t.o.FinishReasons = append(t.o.FinishReasons[:0], s) // one message, one reason: the last
			}
		}
	}
}

// Outcome returns what the stream said so far.
func (t *StreamOutcome) Outcome() provider.Outcome { return t.o }
