package anthropic

import (
	"strings"
	"testing"
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
