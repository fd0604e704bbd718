package routes

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// compile validates doc as the node does before it compiles one, then
// compiles it.
func compile(t *testing.T, doc *routesnap.Snapshot, reg *upstream.Registry) *Table {
	t.Helper()
	if err := routesnap.ValidateRoutes(doc.Backends, doc.Models, hasCred(testCreds)); err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(doc.Backends, doc.Models, testCreds, reg)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func hasCred(creds map[string]credential.Credential) func(string) bool {
	return func(name string) bool { _, ok := creds[name]; return ok }
}

func TestCompile(t *testing.T) {
	reg := upstream.NewRegistry(upstream.Options{})
	tab := compile(t, staticDoc(), reg)
	m, ok := tab.Model("mixed")
	if !ok {
		t.Fatal("model mixed missing")
	}
	type view struct {
		Backend, Endpoint, Model, JSON string
		Weight, Tier                   int
		Caps                           string
		InjectUsage                    bool
	}
	got := map[provider.Endpoint][]view{}
	for p, pool := range m.Pools {
		for _, tg := range pool {
			got[provider.Endpoint(p)] = append(got[provider.Endpoint(p)], view{tg.Backend.ID, tg.Backend.URL[p], tg.ProviderModel, string(tg.ProviderModelJSON), tg.Weight, tg.Tier, tg.Caps.String(), tg.Backend.InjectUsage})
		}
	}
	want := map[provider.Endpoint][]view{
		provider.Chat: {
			{"oa-a", "https://a.example/v1/chat/completions", "m-a", `"m-a"`, 3, 0, "tools,json_schema", true}, // include_usage absent: on
			{"oa-b", "https://b.example/v1/chat/completions", "m-b", `"m-b"`, 1, 1, "", false},                 // include_usage = false
		},
		provider.Messages: {
			{"an", "https://an.example/v1/messages", `claude "x"`, `"claude \"x\""`, 2, 0, "stream", false}, // never for anthropic
		},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("pools (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(tab.Names(provider.OpenAI), []string{"mixed", "only-oa"}); diff != "" {
		t.Errorf("openai names (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(tab.Names(provider.Anthropic), []string{"mixed"}); diff != "" {
		t.Errorf("anthropic names (-got +want):\n%s", diff)
	}
	if m.Pools[provider.Chat][0].Backend.Credential.Reveal() != "secret" || m.Pools[provider.Chat][0].Backend.State.Cap() != 3 {
		t.Error("credential not resolved")
	}
}

func TestStateSurvivesRecompile(t *testing.T) {
	reg := upstream.NewRegistry(upstream.Options{})
	a := compile(t, staticDoc(), reg)
	b := compile(t, staticDoc(), reg)
	ma, _ := a.Model("only-oa")
	mb, _ := b.Model("only-oa")
	if ma.Pools[provider.Chat][0].Backend.State != mb.Pools[provider.Chat][0].Backend.State {
		t.Fatal("an unchanged backend got fresh state on recompile")
	}
	var h Holder
	if h.Load() != nil {
		t.Fatal("zero Holder is not empty")
	}
	h.Store(a)
	if h.Load() != a {
		t.Fatal("Holder did not publish the table")
	}
}

func TestPruneAfterSwap(t *testing.T) {
	reg := upstream.NewRegistry(upstream.Options{})
	compile(t, staticDoc(), reg) // three backends
	changed := staticDoc()
	changed.Backends[0].BaseURL = "https://b2.example/v1/"
	next := compile(t, changed, reg) // oa-b changed identity
	if reg.Len() != 4 {
		t.Fatalf("registry has %d states before prune, want 4", reg.Len())
	}
	reg.Prune(next.Uses)
	if reg.Len() != 3 {
		t.Fatalf("registry has %d states after prune, want 3 (the old oa-b released)", reg.Len())
	}
}
