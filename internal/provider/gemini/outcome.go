package gemini

import (
	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
)

// addReasons appends the finishReason of every candidate of the
// GenerateContentResponse doc, in order.
func addReasons(o *provider.Outcome, doc []byte) {
	cands, ok, err := jsonedit.Lookup(doc, candidatesName)
	if err != nil || !ok {
		return
	}
	it, err := jsonedit.Elements(cands)
	if err != nil {
		return
	}
	for {
		c, _, more, err := it.Next()
		if err != nil || !more {
			return
		}
		if !provider.Object(c) {
			continue
		}
		if raw, ok, err := jsonedit.Lookup(c, "finishReason"); err == nil && ok {
			o.AddReason(raw)
		}
	}
}

// BodyOutcome reads the Outcome of a non-stream answer: modelVersion and
// each candidates[].finishReason.
func BodyOutcome(body []byte) provider.Outcome {
	var o provider.Outcome
	o.SetModel(body, "modelVersion")
	addReasons(&o, body)
	return o
}

// StreamOutcome follows a stream for its Outcome: the modelVersion of the
// first chunk that names one, and every finishReason in the order they
// arrive. One stream, one tracker.
type StreamOutcome struct{ o provider.Outcome }

// Observe looks at the next chunk.
func (t *StreamOutcome) Observe(ev *sse.Event) {
	if len(ev.Data) == 0 || ev.Data[0] != '{' {
		return
	}
	if t.o.Model == "" {
		t.o.SetModel(ev.Data, "modelVersion")
	}
	if provider.MayHaveValue(ev.Data, finishReasonKey) {
		addReasons(&t.o, ev.Data)
	}
}

// Outcome returns what the stream said so far.
func (t *StreamOutcome) Outcome() provider.Outcome { return t.o }
