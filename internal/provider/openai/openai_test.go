package openai

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
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

// TestInspectResponses: the Responses members the node decides on, each
// refused when repeated or differently cased, and the capabilities and
// session key read from the exact ones.
func TestInspectResponses(t *testing.T) {
	for _, tt := range []struct {
		body    string
		need    string // Caps.String(); "" none
		session string // raw session key
		refuse  string // the member the 400 names; "" = accepted
	}{
		{body: `{"model":"m","input":"hi"}`},
		{body: `{"model":"m","stream":true,"tools":[{"type":"function"}],"text":{"format":{"type":"json_schema","schema":{}}},"prompt_cache_key":"s-1"}`,
			need: "stream,tools,json_schema", session: `"s-1"`},
		{body: `{"model":"m","text":{"format":{"type":"text"}},"tools":[]}`},
		{body: `{"model":"m","text":"json_schema"}`},
		{body: `{"model":"m","stream":true,"Stream":false}`, refuse: "stream"},
		{body: `{"model":"m","tools":[],"tools":[{}]}`, refuse: "tools"},
		{body: `{"model":"m","text":{"format":{"type":"text"}},"Text":{"format":{"type":"json_schema"}}}`, refuse: "text"},
		{body: `{"model":"m","text":{"format":{"type":"text"},"FORMAT":{"type":"json_schema"}}}`, refuse: "text.format"},
		{body: `{"model":"m","text":{"format":{"type":"json_schema","type":"text"}}}`, refuse: "text.format.type"},
		{body: `{"model":"m","prompt_cache_key":"a","prompt_cache_key":"b"}`, refuse: "prompt_cache_key"},
		{body: `{"model":"m","Model":"x"}`, refuse: "model"},
	} {
		r, berr := Responses.Inspect([]byte(tt.body), "")
		switch {
		case tt.refuse != "":
			if berr == nil || !strings.Contains(berr.Msg, `"`+tt.refuse+`"`) {
				t.Errorf("Inspect(%s) = %+v, %v; want a refusal naming %q", tt.body, r, berr, tt.refuse)
			}
		case berr != nil:
			t.Errorf("Inspect(%s) refused: %s", tt.body, berr.Msg)
		case r.Need.String() != tt.need || string(r.SessionKey) != tt.session || r.Model != "m":
			t.Errorf("Inspect(%s) = need %q session %s model %q; want %q %s", tt.body, r.Need, r.SessionKey, r.Model, tt.need, tt.session)
		}
	}
	// Embeddings read the model only, exactly once.
	if _, berr := Embeddings.Inspect([]byte(`{"model":"m","input":"x","stream":true,"Stream":1}`), ""); berr != nil {
		t.Errorf("embeddings refused members it does not read: %s", berr.Msg)
	}
	if _, berr := Embeddings.Inspect([]byte(`{"model":"m","MODEL":"n"}`), ""); berr == nil {
		t.Error("embeddings accepted a differently cased model")
	}
}

// TestInspectMaxOutput: the declared output cap of each endpoint, exactly:
// 0 when absent or null, a whole number otherwise, and refused when it is
// anything else or repeated (it decides which targets can hold the
// request, docs/routing.md "Context windows").
func TestInspectMaxOutput(t *testing.T) {
	for _, tt := range []struct {
		spec   *provider.Spec
		body   string
		want   int64
		refuse bool
	}{
		{spec: Chat, body: `{"model":"m","max_tokens":500}`, want: 500},
		{spec: Chat, body: `{"model":"m","max_completion_tokens":700,"max_tokens":500}`, want: 700},
		{spec: Chat, body: `{"model":"m"}`},
		{spec: Chat, body: `{"model":"m","max_tokens":null}`},
		{spec: Chat, body: `{"model":"m","max_tokens":0}`},
		{spec: Chat, body: `{"model":"m","max_tokens":1e3}`, want: 1000},
		{spec: Chat, body: `{"model":"m","max_tokens":99999999999999999999999}`, want: math.MaxInt64},
		{spec: Chat, body: `{"model":"m","max_tokens":"500"}`, refuse: true},
		{spec: Chat, body: `{"model":"m","max_tokens":-5}`, refuse: true},
		{spec: Chat, body: `{"model":"m","max_tokens":2.5}`, refuse: true},
		{spec: Chat, body: `{"model":"m","max_completion_tokens":true}`, refuse: true},
		{spec: Chat, body: `{"model":"m","max_completion_tokens":5,"max_completion_tokens":6}`, refuse: true},
		{spec: Completions, body: `{"model":"m","max_tokens":64}`, want: 64},
		{spec: Completions, body: `{"model":"m","max_tokens":64,"MAX_TOKENS":65}`, refuse: true},
		{spec: Completions, body: `{"model":"m","max_tokens":[]}`, refuse: true},
		{spec: Chat, body: `{"model":"m","max_tokens":5,"Max_Tokens":9}`, refuse: true},
		{spec: Responses, body: `{"model":"m","max_output_tokens":300}`, want: 300},
		{spec: Responses, body: `{"model":"m","max_tokens":300}`},
		{spec: Responses, body: `{"model":"m","max_output_tokens":3,"max_output_tokens":4}`, refuse: true},
		{spec: Responses, body: `{"model":"m","max_output_tokens":{}}`, refuse: true},
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
