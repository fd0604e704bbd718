package openai

import (
	"encoding/json"
	"testing"

	"github.com/scootgate/scootgate/internal/sse"
)

// refTerminal is ResponsesTerminal written with encoding/json: the event
// type, else the data's top-level "type" string (the last one, as a map
// decode keeps it), names the kind.
func refTerminal(ev *sse.Event) (done, failed bool) {
	t := ev.Type
	if t == "" {
		var m map[string]json.RawMessage
		if !json.Valid(ev.Data) || json.Unmarshal(ev.Data, &m) != nil {
			return false, false
		}
		if json.Unmarshal(m["type"], &t) != nil {
			return false, false
		}
	}
	switch t {
	case "response.completed", "response.incomplete":
		return true, false
	case "response.failed":
		return true, true
	case "error":
		return false, true
	}
	return false, false
}

var terminalSeeds = []struct {
	typ  string
	data string
}{
	{"response.completed", `{"type":"response.completed","response":{"usage":{}}}`},
	{"response.output_text.delta", `{"type":"response.output_text.delta","delta":"response.completed"}`},
	{"", `{"type":"response.completed"}`},
	{"", `{"type":"response.incomplete","sequence_number":9}`},
	{"", `{"type":"response.failed"}`},
	{"", `{"type":"error","code":"x"}`},
	{"", `{"type":"response.complete\u0064"}`},
	{"", `{"type":"response.output_text.delta","x":{"type":"response.completed"}}`},
	{"", `{"Type":"response.completed"}`},
	{"", `{"type":"response.completed","type":"response.in_progress"}`},
	{"", `{"type":"response.in_progress","type":"response.completed"}`},
	{"", `{"type":["response.completed"]}`},
	{"", `[DONE]`},
	{"", `{"type":"response.completed"`},
	{"", ``},
	{"error", `{}`},
	{"response.failed", `not json`},
	{"Response.Completed", `{"type":"response.completed"}`},
}

func TestResponsesTerminal(t *testing.T) {
	for _, s := range terminalSeeds {
		ev := &sse.Event{Type: s.typ, Data: []byte(s.data)}
		gd, gf := ResponsesTerminal(ev)
		wd, wf := refTerminal(ev)
		if gd != wd || gf != wf {
			t.Errorf("ResponsesTerminal(%q, %s) = %v, %v; want %v, %v", s.typ, s.data, gd, gf, wd, wf)
		}
	}
	// The named event decides, whatever the data says.
	if done, _ := ResponsesTerminal(&sse.Event{Type: "response.output_text.delta", Data: []byte(`{"type":"response.completed"}`)}); done {
		t.Error("a delta event whose data claims completion ended the stream")
	}
}

// FuzzResponsesTerminal: the hand-written detection agrees with the
// encoding/json reference on any event, and a stream is never complete
// without one of the three terminal types.
func FuzzResponsesTerminal(f *testing.F) {
	for _, s := range terminalSeeds {
		f.Add(s.typ, []byte(s.data))
	}
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		ev := &sse.Event{Type: typ, Data: data}
		gd, gf := ResponsesTerminal(ev)
		wd, wf := refTerminal(ev)
		if gd != wd || gf != wf {
			t.Fatalf("ResponsesTerminal(%q, %q) = %v, %v; reference %v, %v", typ, data, gd, gf, wd, wf)
		}
	})
}
