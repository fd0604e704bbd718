package provider

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestVertexModelPath(t *testing.T) {
	const res = "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"
	tests := []struct {
		name, path     string
		model, method  string
		ok, wantErrors bool
	}{
		{"versioned name", res + "claude-sonnet-4@20250514:streamRawPredict", "claude-sonnet-4@20250514", "streamRawPredict", true, false},
		{"v1beta1", "/v1beta1/projects/my-project/locations/global/publishers/anthropic/models/m:rawPredict", "m", "rawPredict", true, false},
		{"express mode", "/v1beta1/publishers/anthropic/models/m:rawPredict", "m", "rawPredict", true, false},
		{"project number", "/v1/projects/1234567890/locations/us/publishers/anthropic/models/m:rawPredict", "m", "rawPredict", true, false},
		{"domain-scoped project", "/v1/projects/example.com:my-project/locations/us/publishers/anthropic/models/m:rawPredict", "m", "rawPredict", true, false},
		{"encoded slash", res + "team%2Fclaude:rawPredict", "team/claude", "rawPredict", true, false},
		{"slash as sent", res + "team/claude:rawPredict", "team/claude", "rawPredict", true, false},
		{"colons in the name", res + "a:b%3Ac:rawPredict", "a:b:c", "rawPredict", true, false},
		{"encoded space", res + "my%20model:rawPredict", "my model", "rawPredict", true, false},
		{"another publisher", "/v1/projects/my-project/locations/us/publishers/google/models/m:rawPredict", "", "", false, false},
		{"no method", res + "m", "", "", false, false},
		{"another version", "/v2/projects/my-project/locations/us/publishers/anthropic/models/m:rawPredict", "", "", false, false},
		{"no locations", "/v1/projects/my-project/publishers/anthropic/models/m:rawPredict", "", "", false, false},
		{"empty model", res + ":rawPredict", "", "rawPredict", true, true},
		{"empty segment", res + "a//b:rawPredict", "", "rawPredict", true, true},
		{"dot-dot segment", res + "a/../b:rawPredict", "", "rawPredict", true, true},
		{"doubly encoded", res + "a%252Fb:rawPredict", "", "rawPredict", true, true},
		{"bad escape", res + "a%zzb:rawPredict", "", "rawPredict", true, true},
		{"control character", res + "a%0Ab:rawPredict", "", "rawPredict", true, true},
		{"invalid UTF-8", res + "a%FFb:rawPredict", "", "rawPredict", true, true},
		{"short project", "/v1/projects/abc/locations/us/publishers/anthropic/models/m:rawPredict", "m", "rawPredict", true, true},
		{"upper-case project", "/v1/projects/My-Project/locations/us/publishers/anthropic/models/m:rawPredict", "m", "rawPredict", true, true},
		{"encoded project", "/v1/projects/my%2Dproject/locations/us/publishers/anthropic/models/m:rawPredict", "m", "rawPredict", true, true},
		{"empty location", "/v1/projects/my-project/locations//publishers/anthropic/models/m:rawPredict", "m", "rawPredict", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model, method, ok, err := VertexModelPath(tt.path, "anthropic")
			if model != tt.model || method != tt.method || ok != tt.ok || (err != nil) != tt.wantErrors {
				t.Errorf("got %q %q %v %v, want %q %q %v error %v", model, method, ok, err, tt.model, tt.method, tt.ok, tt.wantErrors)
			}
		})
	}
}

// FuzzVertexModelPath: the matcher never panics; a model it accepts is
// valid UTF-8 without control characters or percent-escapes, and the
// path the Anthropic and genai SDKs build for it (url.PathEscape) reads
// back as the same model and method.
func FuzzVertexModelPath(f *testing.F) {
	for _, s := range []string{
		"/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict",
		"/v1beta1/publishers/google/models/gemini-2.5-flash:generateContent",
		"/v1/projects/example.com:p-123456/locations/global/publishers/google/models/a%2Fb:countTokens",
		"/v1/projects/1/locations/us/publishers/anthropic/models/a%252F:rawPredict",
		"/v1/projects/p/locations/l/publishers/anthropic/models/a/../b:x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		for _, pub := range []string{"anthropic", "google"} {
			model, method, ok, err := VertexModelPath(path, pub)
			if !ok {
				if model != "" || method != "" || err != nil {
					t.Fatalf("%q: not matched, yet %q %q %v", path, model, method, err)
				}
				continue
			}
			if err != nil {
				continue
			}
			if model == "" || !utf8.ValidString(model) || strings.ContainsFunc(model, unicode.IsControl) || stillEscaped(model) {
				t.Fatalf("%q: accepted model %q", path, model)
			}
			again := "/v1beta1/publishers/" + pub + "/models/" + url.PathEscape(model) + ":" + method
			m2, method2, ok2, err2 := VertexModelPath(again, pub)
			if !ok2 || err2 != nil || m2 != model || method2 != method {
				t.Fatalf("%q: model %q method %q reads back from %q as %q %q %v %v", path, model, method, again, m2, method2, ok2, err2)
			}
		}
	})
}
