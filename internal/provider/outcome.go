package provider

import (
	"github.com/scootgate/scootgate/internal/jsonedit"
)

// Outcome is what a provider's answer says about how it ended: the model
// that answered and the reason each generation stopped. It is for trace
// spans only (gen_ai.response.model, gen_ai.response.finish_reasons),
// never for usage events, and it is read only when the attempt is traced:
// an untraced attempt pays nothing for it.
//
// Both are the provider's own short strings. A value is kept only when it
// is a non-empty JSON string of at most MaxOutcomeString bytes (decoded),
// and at most MaxFinishReasons reasons are kept, so that a provider cannot
// push body content into a span.
type Outcome struct {
	Model         string
	FinishReasons []string
}

// Bounds of an Outcome.
const (
	MaxOutcomeString = 128
	MaxFinishReasons = 8
)

// OutcomeString decodes raw when it is a short, non-empty JSON string.
func OutcomeString(raw []byte) (string, bool) {
	if len(raw) > 6*MaxOutcomeString+2 { // the longest escaped form of a short string
		return "", false
	}
	s, ok := jsonedit.Unquote(raw)
	if !ok || s == "" || len(s) > MaxOutcomeString {
		return "", false
	}
	return s, true
}

// SetModel takes the model named by the top-level member key of the object
// obj, when it is a short string.
func (o *Outcome) SetModel(obj []byte, key string) {
	if raw, ok, err := jsonedit.Lookup(obj, key); err == nil && ok {
		if s, ok := OutcomeString(raw); ok {
			o.Model = s
		}
	}
}

// AddReason appends the reason raw, a JSON value, when it is a short string
// and there is room.
func (o *Outcome) AddReason(raw []byte) {
	if len(o.FinishReasons) >= MaxFinishReasons {
		return
	}
	if s, ok := OutcomeString(raw); ok {
		o.FinishReasons = append(o.FinishReasons, s)
	}
}
