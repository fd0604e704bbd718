package usageevent

import (
	"encoding/json"
	"strings"
	"testing"
)

// validJSONCases are inputs on both sides of json.Valid's grammar.
var validJSONCases = []string{
	`{"prompt_tokens":1200,"completion_tokens_details":{"reasoning_tokens":0}}`,
	"{\n  \"a\" : [ 1 , -2.5e-3 ,\ttrue,null,false ] ,\r\n \"b\": { \"c d\":\"e<f>&\u2028\" }\n}\n",
	`{"a\"b":"c\\","d":"\"  \\\" ","u":"\u00e9\uD834\uDD1E"}`,
	"{\"a\":\"\xff \xe2\x80\"}", `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, `{"a":tru}`, `[1,]`, `{"a":1,}`,
	" null ", "", " ", `"s"`, "-0", "1e+9", `{} {}`, `{"a":}`, `{"a":"<`, "\"\x01\"", `{"a":1E-0}`,
	`{"a":-}`, `{"a":.5}`, `{"a":"\u12g4"}`, `{"a":"\U1234"}`, `{"a":0x1}`,
	`{"a":` + strings.Repeat("[ ", 9999) + "1" + strings.Repeat(" ]", 9999) + "}",   // depth 10000
	`{"a":` + strings.Repeat("[ ", 10000) + "1" + strings.Repeat(" ]", 10000) + "}", // depth 10001
}

// TestValidJSON: Validate's provider_usage check accepts exactly what
// json.Valid accepts (the node's encoder relies on it).
func TestValidJSON(t *testing.T) {
	for _, s := range validJSONCases {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%.60q) = %v, json.Valid = %v", s, got, want)
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range validJSONCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", b, got, want)
		}
	})
}
