package gateway

import (
	"os"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/provider/catalog"
)

// TestShutdownInBandDocumented: the in-band error of a stream cut at
// shutdown is what docs/operations.md "Drain" shows for each protocol.
func TestShutdownInBandDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		row  string // the start of the protocol's row in the table
		path string
		want []string // in the event and in the row
	}{
		{"| `openai`, chat completions |", "/v1/chat/completions", []string{`data: {"error":`, `"type":"server_error"`, `"code":"node_shutting_down"`}},
		{"| `openai`, responses |", "/v1/responses", []string{"event: error", `{"type":"error","code":"node_shutting_down"`}},
		{"| `anthropic` |", "/v1/messages", []string{"event: error", `{"type":"error","error":{"type":"overloaded_error"`, "shutting down"}},
		{"| `gemini` |", "/v1beta/models/m:streamGenerateContent", []string{`data: {"error":{"code":503`, `"status":"UNAVAILABLE"`, `"reason":"NODE_SHUTTING_DOWN","domain":"scootgate"`}},
	}
	for _, tt := range tests {
		spec, _ := catalog.ByPath(tt.path)
		if spec == nil || spec.Stream == nil {
			t.Fatalf("%s: no stream endpoint", tt.path)
		}
		ev := string(errStreamCut.InBand(spec, "rid", 3))
		var row string
		for line := range strings.Lines(string(doc)) {
			if strings.HasPrefix(line, tt.row) {
				row = line
			}
		}
		if row == "" {
			t.Errorf("docs/operations.md has no row %q", tt.row)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(ev, w) {
				t.Errorf("%s: the event %q lacks %q", tt.path, ev, w)
			}
			if !strings.Contains(row, w) {
				t.Errorf("%s: docs/operations.md row %q lacks %q", tt.path, row, w)
			}
		}
	}
}
