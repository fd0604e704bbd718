package routes

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// testCreds may go to any host of the tests: *.example.
var testCreds = map[string]credential.Credential{
	"c":  {Secret: secret.New("secret"), Hosts: []string{"*.example"}},
	"c2": {Secret: secret.New("other"), Hosts: []string{"*.example"}},
}

// staticDoc is a small routing snapshot with both protocols, tiers,
// capabilities and include_usage.
func staticDoc() *routesnap.Snapshot {
	return &routesnap.Snapshot{
		Schema: 1, Version: 1,
		Backends: []routesnap.Backend{
			{ID: "oa-b", Protocol: "openai", BaseURL: "https://b.example/v1/", Credential: "c", MaxInflightPerNode: 3, IncludeUsage: new(false)},
			{ID: "oa-a", Protocol: "openai", BaseURL: "https://a.example/v1", Credential: "c", MaxInflightPerNode: 3},
			{ID: "an", Protocol: "anthropic", BaseURL: "https://an.example/v1", Credential: "c", MaxInflightPerNode: 3},
		},
		Models: []routesnap.Model{
			{Name: "mixed", Targets: []routesnap.Target{
				{Backend: "oa-b", Model: "m-b", Weight: 1, Tier: 1},
				{Backend: "an", Model: `claude "x"`, Weight: 2, Stream: true},
				{Backend: "oa-a", Model: "m-a", Weight: 3, Tools: true, JSONSchema: true},
			}},
			{Name: "only-oa", Targets: []routesnap.Target{{Backend: "oa-a", Model: "x", Weight: 1}}},
		},
	}
}

func TestCompileFixture(t *testing.T) {
	data, err := os.ReadFile("../../testdata/routesnap/valid.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := routesnap.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]credential.Credential{
		"openai-main":    {Secret: secret.New("a"), Hosts: []string{"api.openai.com", "eu.api.openai.com"}},
		"anthropic-main": {Secret: secret.New("b"), Hosts: []string{"api.anthropic.com"}},
	}
	if err := doc.ValidateCredentials(hasCred(creds)); err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(doc.Backends, doc.Models, creds, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tab.Names(provider.OpenAI), []string{"gpt-4o", "mixed"}); diff != "" {
		t.Errorf("openai names (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(tab.Names(provider.Anthropic), []string{"claude-sonnet", "mixed"}); diff != "" {
		t.Errorf("anthropic names (-got +want):\n%s", diff)
	}
	inject := map[string]bool{}
	for _, m := range tab.models {
		for _, pool := range m.Pools {
			for _, tg := range pool {
				inject[tg.Backend.ID] = tg.Backend.InjectUsage
			}
		}
	}
	if diff := cmp.Diff(inject, map[string]bool{"openai-1": true, "openai-eu": false, "anthropic-1": false}); diff != "" {
		t.Errorf("InjectUsage by backend (-got +want):\n%s", diff)
	}
}

// TestSnapshotKeepsHotState: across snapshots, a backend keeps its state
// exactly when its identity (id, protocol, base URL, credential name,
// cap) is unchanged (docs/snapshots.md).
func TestSnapshotKeepsHotState(t *testing.T) {
	reg := upstream.NewRegistry(upstream.Options{})
	v1 := staticDoc()
	v1.Backends = append(v1.Backends,
		routesnap.Backend{ID: "cap", Protocol: "openai", BaseURL: "https://cap.example", Credential: "c", MaxInflightPerNode: 3},
		routesnap.Backend{ID: "cred", Protocol: "openai", BaseURL: "https://cred.example", Credential: "c", MaxInflightPerNode: 3},
	)
	for _, id := range []string{"cap", "cred"} {
		v1.Models[1].Targets = append(v1.Models[1].Targets, routesnap.Target{Backend: id, Model: "x", Weight: 1})
	}
	v2 := staticDoc()
	v2.Version = 2
	v2.Backends = append(v2.Backends,
		routesnap.Backend{ID: "cap", Protocol: "openai", BaseURL: "https://cap.example", Credential: "c", MaxInflightPerNode: 4},
		routesnap.Backend{ID: "cred", Protocol: "openai", BaseURL: "https://cred.example", Credential: "c2", MaxInflightPerNode: 3},
	)
	v2.Backends[0].BaseURL = "https://b.example/v1" // only the trailing slash differs: same identity
	v2.Backends[0].IncludeUsage = nil               // nor is include_usage part of it
	v2.Backends[1].BaseURL = "https://a2.example/v1"
	for _, id := range []string{"cap", "cred"} {
		v2.Models[1].Targets = append(v2.Models[1].Targets, routesnap.Target{Backend: id, Model: "x", Weight: 1})
	}
	states := func(doc *routesnap.Snapshot) map[string]*upstream.State {
		tab := compile(t, doc, reg)
		out := map[string]*upstream.State{}
		for _, m := range tab.models {
			for _, pool := range m.Pools {
				for _, tg := range pool {
					out[tg.Backend.ID] = tg.Backend.State
				}
			}
		}
		return out
	}
	a, b := states(v1), states(v2)
	got := map[string]bool{}
	for id := range a {
		got[id] = a[id] == b[id]
	}
	want := map[string]bool{"oa-b": true, "an": true, "oa-a": false, "cap": false, "cred": false}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("state kept (-got +want):\n%s", diff)
	}
}

// TestSwapPinsInFlight checks pinning at the table level: 100 requests
// that loaded the table before a swap keep using it (and the backend the
// new table removes) while requests after the swap see the new table.
// Run with -race.
func TestSwapPinsInFlight(t *testing.T) {
	reg := upstream.NewRegistry(upstream.Options{})
	old := compile(t, staticDoc(), reg)
	next := staticDoc()
	next.Version = 2
	next.Backends = next.Backends[1:] // oa-b is removed
	next.Models[0].Targets = next.Models[0].Targets[1:]
	nextTab := compile(t, next, reg)
	var h Holder
	h.Store(old)

	const streams = 100
	var started, wg sync.WaitGroup
	swapped := make(chan struct{})
	errs := make(chan error, streams)
	started.Add(streams)
	for range streams {
		wg.Go(func() {
			tab := h.Load() // pinned at request start
			started.Done()
			<-swapped // the stream is still running when the table changes
			m, _ := tab.Model("mixed")
			pool := m.Pools[provider.Chat]
			if len(pool) != 2 || pool[1].Backend.ID != "oa-b" {
				errs <- fmt.Errorf("pinned table lost oa-b: %d targets", len(pool))
				return
			}
			if s := pool[1].Backend.State; s.Cap() != 3 || s.InFlight() < 0 {
				errs <- fmt.Errorf("pinned backend state: cap %d, in flight %d", s.Cap(), s.InFlight())
			}
		})
	}
	started.Wait()
	h.Store(nextTab)
	close(swapped)
	m, _ := h.Load().Model("mixed")
	if got := len(m.Pools[provider.Chat]); got != 1 {
		t.Errorf("new requests see %d openai targets, want 1", got)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCompileRefusesUnlistedHost: Compile is where a backend gets its
// credential, so it refuses to pair one with a host the credential does
// not list, whatever validation was skipped before it (docs/egress.md
// "Where a credential may go").
func TestCompileRefusesUnlistedHost(t *testing.T) {
	creds := map[string]credential.Credential{"c": {Secret: secret.New("sk-compile-canary"), Hosts: []string{"api.example.com"}}}
	ms := []routesnap.Model{{Name: "m", Targets: []routesnap.Target{{Backend: "b", Model: "x", Weight: 1}}}}
	for _, tt := range []struct {
		base, wantErr string
	}{
		{base: "https://API.Example.com.:8443/v1"},
		{base: "https://collector.example/v1", wantErr: `routes: backend "b": credential "c" may not be sent to host "collector.example"`},
		{base: "https://api.example.com.collector.example/v1", wantErr: `routes: backend "b": credential "c" may not be sent to host "api.example.com.collector.example"`},
	} {
		bs := []routesnap.Backend{{ID: "b", Protocol: "openai", BaseURL: tt.base, Credential: "c", MaxInflightPerNode: 1}}
		_, err := Compile(bs, ms, creds, upstream.NewRegistry(upstream.Options{}))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.wantErr {
			t.Errorf("Compile(%s) = %q, want %q", tt.base, got, tt.wantErr)
		}
	}
}
