package gemini

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
)

// FuzzInspect: whatever the body, every endpoint either refuses it or
// returns the path's model and Named spans that are JSON strings naming
// it; rewriting them leaves valid JSON; and only a valid JSON object is
// accepted.
func FuzzInspect(f *testing.F) {
	for _, s := range []string{
		`{"model":"models/pub","contents":[]}`,
		`{"generateContentRequest":{"model":"models/pub","tools":[{}]}}`,
		`{"requests":[{"model":"models/pub"},{"model":"pub"}]}`,
		`{"generationConfig":{"responseSchema":{},"response_schema":{}}}`,
		`{"mod\u0065l":"pub"}`,
		`[1]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	specs := []*provider.Spec{GenerateContent, StreamGenerateContent, CountTokens, EmbedContent, BatchEmbedContents}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, s := range specs {
			r, berr := s.Inspect(body, "pub")
			if berr != nil {
				continue
			}
			if r.Model != "pub" || !json.Valid(body) || bytes.TrimSpace(body)[0] != '{' {
				t.Fatalf("%v accepted %q as %+v", s.Endpoint, body, r)
			}
			for _, at := range r.Named {
				var name string
				if json.Unmarshal(body[at[0]:at[1]], &name) != nil || (name != "pub" && name != "models/pub") {
					t.Fatalf("%v: Named %q in %q", s.Endpoint, body[at[0]:at[1]], body)
				}
			}
			if out := r.Rewrite(body, nil, []byte(`"models/x"`), false); !json.Valid(out) {
				t.Fatalf("%v: rewrite of %q is not JSON: %q", s.Endpoint, body, out)
			}
		}
	})
}

// FuzzTerminal: a chunk is never both the end and a failure; an error
// chunk is never the end; whatever ends a stream is JSON with candidates
// or a prompt feedback, as json.Unmarshal reads it.
func FuzzTerminal(f *testing.F) {
	for _, c := range terminalCases {
		f.Add([]byte(c.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		done, failed := Terminal(&sse.Event{Data: data})
		if done && failed {
			t.Fatalf("%q: done and failed", data)
		}
		if !done {
			return
		}
		var doc struct {
			Candidates []struct {
				FinishReason json.RawMessage `json:"finishReason"`
			} `json:"candidates"`
			PromptFeedback *struct {
				BlockReason json.RawMessage `json:"blockReason"`
			} `json:"promptFeedback"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%q ends the stream but is not a chunk: %v", data, err)
		}
		if len(doc.Candidates) == 0 && (doc.PromptFeedback == nil || len(doc.PromptFeedback.BlockReason) == 0) {
			t.Fatalf("%q ends the stream without a finished candidate or a blocked prompt", data)
		}
	})
}
