package anthropic

import (
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
)

// TestInspect: count_tokens reads what messages reads except stream and
// the session key; both refuse an ambiguous member.
func TestInspect(t *testing.T) {
	r, berr := Messages.Inspect([]byte(`{"model":"m","stream":true,"tools":[{}],"output_config":{"format":{"type":"json_schema"}},"metadata":{"user_id":"u-1"}}`), "")
	if berr != nil || r.Need.String() != "stream,tools,json_schema" || string(r.SessionKey) != `"u-1"` {
		t.Errorf("messages: %+v, %v", r, berr)
	}
	r, berr = CountTokens.Inspect([]byte(`{"model":"m","stream":true,"tools":[{}],"output_format":{"type":"json_schema"},"metadata":{"user_id":"u-1"}}`), "")
	if berr != nil || r.Need.String() != "tools,json_schema" || r.Stream || r.SessionKey != nil {
		t.Errorf("count_tokens: %+v, %v", r, berr)
	}
	for _, body := range []string{
		`{"model":"m","tools":[{}],"Tools":[]}`,
		`{"model":"m","output_config":{"format":{"type":"json_schema","Type":"text"}}}`,
		`{"model":"m","output_format":{"type":"json_schema"},"output_format":null}`,
	} {
		if _, berr := CountTokens.Inspect([]byte(body), ""); berr == nil || berr.Code != "ambiguous_member" {
			t.Errorf("count_tokens accepted %s: %v", body, berr)
		}
	}
	if _, berr := Messages.Inspect([]byte(`{"model":"m","metadata":{"user_id":"a","USER_ID":"b"}}`), ""); berr == nil || !strings.Contains(berr.Msg, `"metadata.user_id"`) {
		t.Errorf("messages accepted a differently cased metadata.user_id: %v", berr)
	}
}

// TestInspectMaxTokens: max_tokens, the declared output cap, read once.
func TestInspectMaxTokens(t *testing.T) {
	r, berr := Messages.Inspect([]byte(`{"model":"m","max_tokens":1024,"messages":[]}`), "")
	if berr != nil || r.MaxOutput != 1024 {
		t.Errorf("MaxOutput = %d, %v; want 1024", r.MaxOutput, berr)
	}
	if _, berr := Messages.Inspect([]byte(`{"model":"m","max_tokens":1,"MAX_TOKENS":2}`), ""); berr == nil {
		t.Error("a differently cased max_tokens was accepted")
	}
}

// TestInspectOutputCap: max_tokens is read exactly (docs/routing.md
// "Context windows"): a whole number, null or absent; anything else and a
// twin are refused. count_tokens asks for no output.
func TestInspectOutputCap(t *testing.T) {
	for _, tt := range []struct {
		spec   *provider.Spec
		body   string
		want   int64
		refuse bool
	}{
		{spec: Messages, body: `{"model":"m","max_tokens":64000}`, want: 64000},
		{spec: Messages, body: `{"model":"m"}`},
		{spec: Messages, body: `{"model":"m","max_tokens":null}`},
		{spec: Messages, body: `{"model":"m","max_tokens":"64000"}`, refuse: true},
		{spec: Messages, body: `{"model":"m","max_tokens":-1}`, refuse: true},
		{spec: Messages, body: `{"model":"m","max_tokens":1.5}`, refuse: true},
		{spec: Messages, body: `{"model":"m","max_tokens":1,"max_Tokens":2}`, refuse: true},
		{spec: Messages, body: `{"model":"m","max_tokens":1,"max_tokens":2}`, refuse: true},
		{spec: CountTokens, body: `{"model":"m","max_tokens":"x"}`},
	} {
		r, berr := tt.spec.Inspect([]byte(tt.body), "")
		if got := berr != nil; got != tt.refuse {
			t.Errorf("%v %s: refused %v, want %v", tt.spec.Endpoint, tt.body, got, tt.refuse)
			continue
		}
		if r.MaxOutput != tt.want {
			t.Errorf("%v %s: MaxOutput = %d, want %d", tt.spec.Endpoint, tt.body, r.MaxOutput, tt.want)
		}
	}
}
