package provider_test

import (
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/gemini"
	"github.com/scootgate/scootgate/internal/provider/openai"
)

// TestPrefixDigest: every turn of one conversation has the same digest
// (its beginning does not change as turns are added), two conversations
// that differ in their tools, instructions or first turn differ, and a
// request with no turn has none. Through each API's inspection, as the
// request path reads it.
func TestPrefixDigest(t *testing.T) {
	digest := func(spec *provider.Spec, path, body string) (string, bool) {
		t.Helper()
		pathModel := ""
		if spec.Match != nil {
			pathModel, _ = spec.Match(path)
		}
		r, berr := spec.Inspect([]byte(body), pathModel)
		if berr != nil {
			t.Fatalf("%s: %s", body, berr.Msg)
		}
		var d [12]byte
		ok := provider.PrefixDigest(&r.Prefix, &d)
		return string(d[:]), ok
	}
	sys := `{"role":"system","content":"You are a coding agent. ` + strings.Repeat("Rules. ", 200) + `"}`
	chat := func(tools string, msgs ...string) string {
		return `{"model":"m"` + tools + `,"messages":[` + strings.Join(msgs, ",") + `]}`
	}
	u1, a1, u2 := `{"role":"user","content":"fix the bug in main.go"}`, `{"role":"assistant","content":"done"}`, `{"role":"user","content":"now test it"}`
	tools := `,"tools":[{"type":"function","function":{"name":"read"}}]`
	gen := "/v1beta/models/m:generateContent"
	for _, tc := range []struct {
		name       string
		spec       *provider.Spec
		path       string
		same, diff []string // same: all one digest; diff: each differs from same[0]
	}{
		{"chat", openai.Chat, "",
			[]string{chat(tools, sys, u1), chat(tools, sys, u1, a1, u2), chat(tools, sys, u1, a1, u2, a1, u2)},
			[]string{chat(tools, sys, u2), chat("", sys, u1), chat(tools, `{"role":"system","content":"other"}`, u1), chat(tools, u1)}},
		{"chat, developer and system instructions first", openai.Chat, "",
			[]string{chat("", `{"role":"developer","content":"d"}`, sys, u1), chat("", `{"role":"developer","content":"d"}`, sys, u1, a1, u2)},
			[]string{chat("", `{"role":"developer","content":"d"}`, sys, u2)}},
		{"responses", openai.Responses, "",
			[]string{`{"model":"m","instructions":"be brief","input":[` + u1 + `]}`, `{"model":"m","instructions":"be brief","input":[` + u1 + `,` + a1 + `,` + u2 + `]}`},
			[]string{`{"model":"m","instructions":"be long","input":[` + u1 + `]}`, `{"model":"m","instructions":"be brief","input":"fix the bug in main.go"}`}},
		{"anthropic", anthropic.Messages, "",
			[]string{`{"model":"m","max_tokens":1,"system":"sys","messages":[` + u1 + `]}`, `{"model":"m","max_tokens":1,"system":"sys","messages":[` + u1 + `,` + a1 + `,` + u2 + `]}`},
			[]string{`{"model":"m","max_tokens":1,"system":"other","messages":[` + u1 + `]}`, `{"model":"m","max_tokens":1,"system":"sys","messages":[` + u2 + `]}`}},
		{"gemini", gemini.GenerateContent, gen,
			[]string{`{"systemInstruction":{"parts":[{"text":"sys"}]},"contents":[{"role":"user","parts":[{"text":"a"}]}]}`,
				`{"systemInstruction":{"parts":[{"text":"sys"}]},"contents":[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[{"text":"b"}]},{"role":"user","parts":[{"text":"c"}]}]}`,
				`{"system_instruction":{"parts":[{"text":"sys"}]},"contents":[{"role":"user","parts":[{"text":"a"}]}]}`},
			[]string{`{"contents":[{"role":"user","parts":[{"text":"a"}]}]}`, `{"systemInstruction":{"parts":[{"text":"sys"}]},"contents":[{"parts":[{"text":"c"}]}]}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, ok := digest(tc.spec, tc.path, tc.same[0])
			if !ok {
				t.Fatal("no digest for a request with turns")
			}
			for i, b := range tc.same[1:] {
				if d, ok := digest(tc.spec, tc.path, b); !ok || d != first {
					t.Errorf("same[%d]: another digest than the conversation's first turn", i+1)
				}
			}
			for i, b := range tc.diff {
				if d, _ := digest(tc.spec, tc.path, b); d == first {
					t.Errorf("diff[%d]: the same digest as same[0]", i)
				}
			}
		})
	}
	for _, body := range []string{`{"model":"m"}`, `{"model":"m","messages":[]}`, `{"model":"m","messages":null}`} {
		if _, ok := digest(openai.Chat, "", body); ok {
			t.Errorf("%s: a digest without a turn", body)
		}
	}
	if _, ok := digest(openai.Responses, "", `{"model":"m","input":""}`); ok {
		t.Error("an empty string input has a digest")
	}
}

// BenchmarkPrefixDigest is the cost of prefix affinity for a keyless
// request with a 24 KiB system prompt, 8 tools and a 40-turn history,
// next to the inspection every request pays.
func BenchmarkPrefixDigest(b *testing.B) {
	sys := `{"role":"system","content":"` + strings.Repeat("You are a careful coding agent. ", 800) + `"}`
	var turns []string
	for range 20 {
		turns = append(turns, `{"role":"user","content":"`+strings.Repeat("x", 400)+`"}`, `{"role":"assistant","content":"`+strings.Repeat("y", 800)+`"}`)
	}
	tools := strings.Repeat(`{"type":"function","function":{"name":"read","parameters":{"type":"object"}}},`, 8)
	body := []byte(`{"model":"m","tools":[` + strings.TrimSuffix(tools, ",") + `],"messages":[` + sys + `,` + strings.Join(turns, ",") + `]}`)
	r, berr := openai.Chat.Inspect(body, "")
	if berr != nil {
		b.Fatal(berr.Msg)
	}
	// Inspect, which every request pays, is the yardstick on a shared
	// machine: compare the two in one run.
	b.Run("inspect", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, berr := openai.Chat.Inspect(body, ""); berr != nil {
				b.Fatal(berr.Msg)
			}
		}
	})
	b.Run("digest", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		var d [12]byte
		for b.Loop() {
			if !provider.PrefixDigest(&r.Prefix, &d) {
				b.Fatal("no digest")
			}
		}
	})
}
