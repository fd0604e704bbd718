package gateway

import (
	"encoding/json"
	"testing"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
)

// FuzzInspect: any body either yields a clear 400 or a request whose model
// the rewrite can replace, leaving a valid JSON document.
func FuzzInspect(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[]}`, `{"model":"m","stream":true,"tools":[{}]}`,
		`{"mod\u0065l":"m","model":"n"}`, `[1]`, ``, `{"model":1}`, `{"model":"m"} x`,
		`{"model":"m","output_config":{"format":{"type":"json_schema"}}}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, anthropic bool) {
		p := provider.OpenAI
		if anthropic {
			p = provider.Anthropic
		}
		req, aerr := inspect(p, body)
		if aerr != nil {
			if aerr.Status != 400 || aerr.Msg == "" {
				t.Fatalf("rejection %d %q, want 400 with a message", aerr.Status, aerr.Msg)
			}
			return
		}
		if req.model == "" {
			t.Fatal("accepted a body without a model")
		}
		out, n, err := jsonedit.Replace(body, "model", []byte(`"provider"`))
		if err != nil || n == 0 || !json.Valid(out) {
			t.Fatalf("rewrite of an accepted body: n=%d err=%v valid=%v", n, err, json.Valid(out))
		}
	})
}
