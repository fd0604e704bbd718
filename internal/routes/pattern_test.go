package routes

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// patternDoc has exact names, nested patterns and a catch-all, on an
// Anthropic, an OpenAI and a Gemini backend.
func patternDoc() *routesnap.Snapshot {
	target := func(backend, model string) []routesnap.Target {
		return []routesnap.Target{{Backend: backend, Model: model, Weight: 1}}
	}
	return &routesnap.Snapshot{
		Schema: 1, Version: 1,
		Backends: []routesnap.Backend{
			{ID: "an", Protocol: "anthropic", BaseURL: "https://an.example/v1", Credential: "c", MaxInflightPerNode: 3},
			{ID: "oa", Protocol: "openai", BaseURL: "https://oa.example/v1", Credential: "c", MaxInflightPerNode: 3},
			{ID: "gm", Protocol: "gemini", BaseURL: "https://gm.example/v1beta", Credential: "c", MaxInflightPerNode: 3},
		},
		Models: []routesnap.Model{
			{Name: "claude-*", Targets: target("an", "claude-*")},
			{Name: "claude-haiku-4-5-*", Targets: target("an", "claude-haiku-4-5-20251001")},
			{Name: "claude-sonnet-4-5", Targets: target("an", "claude-sonnet-4-5-20250929")},
			{Name: "openai/*", Targets: target("oa", "*")},
			{Name: "gemini-*", Targets: target("gm", "gemini-*")},
			{Name: "*", Targets: target("oa", "default-model")},
		},
	}
}

// TestPatternLookup: an exact name wins over every pattern, then the
// longest prefix; the star stands for at least one character; the
// provider model is fixed or made from what the star matched.
func TestPatternLookup(t *testing.T) {
	tab := compile(t, patternDoc(), upstream.NewRegistry(upstream.Options{}))
	type result struct {
		Entry, Star, Sent string
		OK                bool
	}
	tests := []struct {
		asked string
		e     provider.Endpoint
		want  result
	}{
		{"claude-sonnet-4-5", provider.Messages, result{"claude-sonnet-4-5", "", "claude-sonnet-4-5-20250929", true}},                    // exact wins
		{"claude-sonnet-4-5-20250929", provider.Messages, result{"claude-*", "sonnet-4-5-20250929", "claude-sonnet-4-5-20250929", true}}, // whole name passed
		{"claude-haiku-4-5-20251001", provider.Messages, result{"claude-haiku-4-5-*", "20251001", "claude-haiku-4-5-20251001", true}},    // the longer prefix
		{"claude-haiku-4-5-latest", provider.Messages, result{"claude-haiku-4-5-*", "latest", "claude-haiku-4-5-20251001", true}},        // fixed model
		{"claude-haiku-4-5", provider.Messages, result{"claude-*", "haiku-4-5", "claude-haiku-4-5", true}},                               // not the longer prefix's: nothing after it
		{"openai/gpt-4o", provider.Chat, result{"openai/*", "gpt-4o", "gpt-4o", true}},                                                   // the rest only
		{"openai/", provider.Chat, result{"*", "openai/", "default-model", true}},                                                        // the star matches at least one character
		{"gpt-4o", provider.Chat, result{"*", "gpt-4o", "default-model", true}},                                                          // the catch-all
		{"claude-", provider.Chat, result{"*", "claude-", "default-model", true}},                                                        // falls through to the catch-all
	}
	for _, tt := range tests {
		t.Run(tt.asked, func(t *testing.T) {
			m, ok := tab.Model(tt.asked)
			got := result{OK: ok}
			if ok {
				got.Entry, got.Star = m.Name, m.Star(tt.asked)
				pool := m.Pools[tt.e]
				if len(pool) != 1 {
					t.Fatalf("pool of %s has %d targets", tt.e, len(pool))
				}
				r, err := pool[0].Resolve(got.Star, tt.e)
				if err != nil {
					t.Fatal(err)
				}
				got.Sent = r.Model
				if want := `"` + r.Model + `"`; string(r.JSON) != want {
					t.Errorf("JSON %s, want %s", r.JSON, want)
				}
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("Model(%q) (-got +want):\n%s", tt.asked, diff)
			}
		})
	}

	// Without the catch-all, a name no pattern matches is unknown, and so
	// is one that is no valid model name (too long, a control character,
	// invalid UTF-8).
	doc := patternDoc()
	doc.Models = doc.Models[:len(doc.Models)-1]
	tab = compile(t, doc, upstream.NewRegistry(upstream.Options{}))
	for _, name := range []string{"gpt-4o", "claude-", "claude-" + strings.Repeat("x", routesnap.MaxModelNameLength), "claude-\x01", "claude-\xff"} {
		if m, ok := tab.Model(name); ok {
			t.Errorf("Model(%.20q) = %s, want none", name, m.Name)
		}
	}
}

// TestPatternNamesAndEntries: patterns are not listed as model names,
// and Entry finds an entry by the name the routes give it.
func TestPatternNamesAndEntries(t *testing.T) {
	tab := compile(t, patternDoc(), upstream.NewRegistry(upstream.Options{}))
	if diff := cmp.Diff(tab.Names(provider.Anthropic), []string{"claude-sonnet-4-5"}); diff != "" {
		t.Errorf("anthropic names (-got +want):\n%s", diff)
	}
	if got := tab.Names(provider.OpenAI); len(got) != 0 {
		t.Errorf("openai names %v, want none (only patterns)", got)
	}
	for name, want := range map[string]bool{"claude-*": true, "claude-sonnet-4-5": true, "claude-x": false, "openai/*": true, "nope-*": false} {
		if _, ok := tab.Entry(name); ok != want {
			t.Errorf("Entry(%q) = %v, want %v", name, ok, want)
		}
	}
}

// TestPatternGeminiURL: a Gemini pattern target's model is in the path,
// path-escaped, made per request.
func TestPatternGeminiURL(t *testing.T) {
	tab := compile(t, patternDoc(), upstream.NewRegistry(upstream.Options{}))
	m, ok := tab.Model("gemini-2.5-flash")
	if !ok {
		t.Fatal("no model")
	}
	r, err := m.Pools[provider.GenerateContent][0].Resolve(m.Star("gemini-2.5-flash"), provider.GenerateContent)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.URL.String(), "https://gm.example/v1beta/models/gemini-2.5-flash:generateContent"; got != want {
		t.Errorf("URL %s, want %s", got, want)
	}
	if string(r.NamedJSON) != `"models/gemini-2.5-flash"` {
		t.Errorf("named %s", r.NamedJSON)
	}
}
