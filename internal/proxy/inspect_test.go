package proxy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/routes"
)

func TestInspect(t *testing.T) {
	tests := []struct {
		name     string
		proto    routes.Protocol
		body     string
		want     request
		wantCode string // apierr code; "" = success
		wantMsg  string // fragment of the message
	}{
		{name: "plain", body: `{"model":"m","messages":[]}`, want: request{model: "m"}},
		{name: "stream", body: `{"model":"m","stream":true}`, want: request{model: "m", stream: true, need: routes.CapStream}},
		{name: "stream false", body: `{"model":"m","stream":false}`, want: request{model: "m"}},
		{name: "stream null", body: `{"model":"m","stream":null}`, want: request{model: "m"}},
		{name: "tools", body: `{"model":"m","tools":[{"type":"function"}]}`, want: request{model: "m", need: routes.CapTools}},
		{name: "empty tools", body: `{"model":"m","tools":[]}`, want: request{model: "m"}},
		{name: "legacy functions", body: `{"model":"m","functions":[{"name":"f"}]}`, want: request{model: "m", need: routes.CapTools}},
		{name: "openai json_schema", body: `{"model":"m","response_format":{"type":"json_schema","json_schema":{}}}`, want: request{model: "m", need: routes.CapJSONSchema}},
		{name: "openai json_object is not json_schema", body: `{"model":"m","response_format":{"type":"json_object"}}`, want: request{model: "m"}},
		{name: "anthropic output_config", proto: routes.Anthropic, body: `{"model":"m","output_config":{"format":{"type":"json_schema","schema":{}}}}`, want: request{model: "m", need: routes.CapJSONSchema}},
		{name: "anthropic beta output_format", proto: routes.Anthropic, body: `{"model":"m","output_format":{"type":"json_schema","schema":{}}}`, want: request{model: "m", need: routes.CapJSONSchema}},
		{name: "anthropic ignores response_format", proto: routes.Anthropic, body: `{"model":"m","response_format":{"type":"json_schema"}}`, want: request{model: "m"}},
		{name: "all caps", body: `{"model":"m","stream":true,"tools":[1],"response_format":{"type":"json_schema"}}`, want: request{model: "m", stream: true, need: routes.CapStream | routes.CapTools | routes.CapJSONSchema}},
		{name: "duplicate model: last wins", body: `{"model":"a","model":"b"}`, want: request{model: "b"}},
		{name: "escaped key", body: `{"mod\u0065l":"m"}`, want: request{model: "m"}},
		{name: "nested model ignored", body: `{"metadata":{"model":"x"}}`, wantCode: "missing_model"},
		{name: "missing model", body: `{"messages":[]}`, wantCode: "missing_model", wantMsg: `"model"`},
		{name: "model not a string", body: `{"model":42}`, wantCode: "invalid_model"},
		{name: "empty model", body: `{"model":""}`, wantCode: "invalid_model"},
		{name: "stream not bool", body: `{"model":"m","stream":"yes"}`, wantCode: "invalid_stream"},
		{name: "array body", body: `[1,2]`, wantCode: "invalid_json", wantMsg: "JSON object"},
		{name: "empty body", body: ``, wantCode: "invalid_json", wantMsg: "empty"},
		{name: "syntax error with position", body: "{\n  \"model\": \"m\",\n  oops\n}", wantCode: "invalid_json", wantMsg: "line 3, column 3"},
		{name: "truncated", body: `{"model":"m"`, wantCode: "invalid_json"},
		{name: "trailing garbage", body: `{"model":"m"} x`, wantCode: "invalid_json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := inspect(tt.proto, []byte(tt.body))
			if tt.wantCode != "" {
				if err == nil {
					t.Fatalf("inspect = %+v, want error %s", got, tt.wantCode)
				}
				if err.Status != 400 || err.Code != tt.wantCode || !strings.Contains(err.Msg, tt.wantMsg) {
					t.Fatalf("error = %d %s %q, want 400 %s containing %q", err.Status, err.Code, err.Msg, tt.wantCode, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("inspect error: %v", err.Msg)
			}
			if diff := cmp.Diff(got, tt.want, cmp.AllowUnexported(request{})); diff != "" {
				t.Fatalf("inspect (-got +want):\n%s", diff)
			}
		})
	}
}
