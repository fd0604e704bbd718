package routes

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/upstream"
)

const doc = `node_id = "n"
[[egress.proxies]]
name = "p"
url = "socks5://127.0.0.1:1080"
[credentials.c]
env = "K"
[backends.oa-b]
protocol = "openai"
base_url = "https://b.example/v1/"
credential = "c"
max_inflight_per_node = 3
include_usage = false
[backends.oa-a]
protocol = "openai"
base_url = "https://a.example/v1"
credential = "c"
max_inflight_per_node = 3
[backends.an]
protocol = "anthropic"
base_url = "https://an.example/v1"
credential = "c"
max_inflight_per_node = 3
[models.mixed]
[[models.mixed.targets]]
backend = "oa-b"
model = "m-b"
weight = 1
tier = 1
[[models.mixed.targets]]
backend = "an"
model = "claude \"x\""
weight = 2
stream = true
[[models.mixed.targets]]
backend = "oa-a"
model = "m-a"
weight = 3
tools = true
json_schema = true
[models.only-oa]
[[models.only-oa.targets]]
backend = "oa-a"
model = "x"
weight = 1
[authz]
source = "file:/dev/null"
`

func compile(t *testing.T, reg *upstream.Registry) *Table {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), func(string) (string, bool) { return "secret", true }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestCompile(t *testing.T) {
	reg := upstream.NewRegistry(upstream.Options{})
	tab := compile(t, reg)
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
	got := map[Protocol][]view{}
	for p, pool := range m.Pools {
		for _, tg := range pool {
			got[Protocol(p)] = append(got[Protocol(p)], view{tg.Backend.ID, tg.Backend.Endpoint, tg.ProviderModel, string(tg.ProviderModelJSON), tg.Weight, tg.Tier, tg.Caps.String(), tg.Backend.InjectUsage})
		}
	}
	want := map[Protocol][]view{
		OpenAI: {
			{"oa-a", "https://a.example/v1/chat/completions", "m-a", `"m-a"`, 3, 0, "tools,json_schema", true}, // include_usage absent: on
			{"oa-b", "https://b.example/v1/chat/completions", "m-b", `"m-b"`, 1, 1, "", false},                 // include_usage = false
		},
		Anthropic: {
			{"an", "https://an.example/v1/messages", `claude "x"`, `"claude \"x\""`, 2, 0, "stream", false}, // never for anthropic
		},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("pools (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(tab.Names(OpenAI), []string{"mixed", "only-oa"}); diff != "" {
		t.Errorf("openai names (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(tab.Names(Anthropic), []string{"mixed"}); diff != "" {
		t.Errorf("anthropic names (-got +want):\n%s", diff)
	}
	if m.Pools[OpenAI][0].Backend.Credential.Reveal() != "secret" {
		t.Error("credential not resolved")
	}
}

func TestStateSurvivesRecompile(t *testing.T) {
	reg := upstream.NewRegistry(upstream.Options{})
	a := compile(t, reg)
	b := compile(t, reg)
	ma, _ := a.Model("only-oa")
	mb, _ := b.Model("only-oa")
	if ma.Pools[OpenAI][0].Backend.State != mb.Pools[OpenAI][0].Backend.State {
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
	compile(t, reg) // three backends
	cfg, err := config.Parse([]byte(strings.Replace(doc, `base_url = "https://b.example/v1/"`, `base_url = "https://b2.example/v1/"`, 1)),
		func(string) (string, bool) { return "secret", true }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	next, err := Compile(cfg, reg) // oa-b changed identity
	if err != nil {
		t.Fatal(err)
	}
	if reg.Len() != 4 {
		t.Fatalf("registry has %d states before prune, want 4", reg.Len())
	}
	reg.Prune(next.Uses)
	if reg.Len() != 3 {
		t.Fatalf("registry has %d states after prune, want 3 (the old oa-b released)", reg.Len())
	}
}
