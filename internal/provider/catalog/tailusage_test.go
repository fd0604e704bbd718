package catalog_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
)

// TestTailUsage: for every endpoint whose answers carry usage, the usage
// read from an answer's last bytes (an answer too large to be held whole)
// is the usage read from the whole answer, as long as those bytes hold
// the usage member; an endpoint without usage names no member.
func TestTailUsage(t *testing.T) {
	const counts = `{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"input_tokens":3,"output_tokens":4,` +
		`"promptTokenCount":3,"candidatesTokenCount":4,"totalTokenCount":7}`
	for _, a := range catalog.APIs() {
		for _, s := range a.Endpoints {
			if s.UsageMember == "" {
				if _, _, ok := s.BodyUsage([]byte(`{"usage":` + counts + `,"usageMetadata":` + counts + `}`)); ok {
					t.Errorf("%v reads usage but names no usage member", s.Endpoint)
				}
				continue
			}
			m := `"` + s.UsageMember + `"`
			bodies := []string{
				`{"id":"x","content":"a \"usage\": {} \"usageMetadata\":{}","nested":{"usage":1},` + m + ` : ` + counts + `,"model":"m"}`,
				`[{"id":"x",` + m + `:{"promptTokenCount":1}},{"id":"y",` + m + `:` + counts + `}]`,
			}
			checked := 0
			for _, body := range bodies {
				wantU, wantRaw, wantOK := s.BodyUsage([]byte(body))
				if !wantOK {
					continue // not this endpoint's answer shape
				}
				checked++
				for cut := 0; cut < len(body); cut++ {
					u, raw, ok := provider.TailUsage([]byte(body[cut:]), s.UsageMember, s.BodyUsage)
					if !ok {
						if cut <= strings.LastIndex(body, m) {
							t.Errorf("%v: no usage in %q", s.Endpoint, body[cut:])
						}
						continue
					}
					if diff := cmp.Diff(u, wantU); diff != "" || string(raw) != string(wantRaw) {
						t.Errorf("%v: tail %q: usage (-got +want):\n%s raw %s, want %s", s.Endpoint, body[cut:], diff, raw, wantRaw)
					}
				}
			}
			if checked == 0 {
				t.Errorf("%v: no answer to read usage from", s.Endpoint)
			}
		}
	}
}
