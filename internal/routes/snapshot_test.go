package routes

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// tableView is everything a Table exposes, in comparable form.
type tableView struct {
	Names  [numProtocols][]string
	Models map[string][numProtocols][]targetView
}

type targetView struct {
	Backend, Endpoint, Credential, Model, JSON string
	Weight, Tier                               int
	Caps                                       string
	Cap                                        int64
	InjectUsage                                bool
}

func viewOf(tab *Table) tableView {
	v := tableView{Names: tab.names, Models: map[string][numProtocols][]targetView{}}
	for name, m := range tab.models {
		var pools [numProtocols][]targetView
		for p, pool := range m.Pools {
			for _, tg := range pool {
				b := tg.Backend
				pools[p] = append(pools[p], targetView{
					b.ID, b.Endpoint, b.Credential.Reveal(), tg.ProviderModel, string(tg.ProviderModelJSON),
					tg.Weight, tg.Tier, tg.Caps.String(), b.State.Cap(), b.InjectUsage,
				})
			}
		}
		v.Models[name] = pools
	}
	return v
}

var testCreds = map[string]secret.Secret{"c": secret.New("secret"), "c2": secret.New("other")}

// staticDoc is the routing snapshot equivalent of routes_test.go's doc.
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

// TestCompileSnapshotMatchesStatic: a snapshot compiles to exactly the
// Table its static-config equivalent compiles to.
func TestCompileSnapshotMatchesStatic(t *testing.T) {
	fromSnapshot, err := CompileSnapshot(staticDoc(), testCreds, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	fromStatic := compile(t, upstream.NewRegistry(upstream.Options{}))
	if diff := cmp.Diff(viewOf(fromSnapshot), viewOf(fromStatic)); diff != "" {
		t.Errorf("snapshot table differs from the static one (-snapshot +static):\n%s", diff)
	}
}

func TestCompileSnapshotFixture(t *testing.T) {
	data, err := os.ReadFile("../../testdata/routesnap/valid.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := routesnap.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]secret.Secret{"openai-main": secret.New("a"), "anthropic-main": secret.New("b")}
	tab, err := CompileSnapshot(doc, creds, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tab.Names(OpenAI), []string{"gpt-4o", "mixed"}); diff != "" {
		t.Errorf("openai names (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(tab.Names(Anthropic), []string{"claude-sonnet", "mixed"}); diff != "" {
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

func TestCheckSnapshot(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*routesnap.Snapshot)
		creds  map[string]secret.Secret
		want   []routesnap.Problem
	}{
		{name: "valid", mutate: func(*routesnap.Snapshot) {}, creds: testCreds},
		{
			name:   "every unknown credential is listed",
			mutate: func(s *routesnap.Snapshot) { s.Backends[1].Credential = "c2" },
			creds:  map[string]secret.Secret{},
			want: []routesnap.Problem{
				{Path: "backends[0].credential", Msg: `unknown credential "c"; this node's [credentials] does not define it`},
				{Path: "backends[1].credential", Msg: `unknown credential "c2"; this node's [credentials] does not define it`},
				{Path: "backends[2].credential", Msg: `unknown credential "c"; this node's [credentials] does not define it`},
			},
		},
		{
			name: "document problems first, no double report",
			mutate: func(s *routesnap.Snapshot) {
				s.Backends[0].Credential = "bad name"
				s.Backends[2].Credential = "missing"
				s.Models[1].Targets[0].Weight = 0
			},
			creds: testCreds,
			want: []routesnap.Problem{
				{Path: "backends[0].credential", Msg: "must be a credential name: 1-64 characters from [A-Za-z0-9._-]"},
				{Path: "models[1].targets[0].weight", Msg: "must be 1..1000000, got 0"},
				{Path: "backends[2].credential", Msg: `unknown credential "missing"; this node's [credentials] does not define it`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := staticDoc()
			tt.mutate(doc)
			err := CheckSnapshot(doc, tt.creds)
			_, cerr := CompileSnapshot(doc, tt.creds, upstream.NewRegistry(upstream.Options{}))
			if tt.want == nil {
				if err != nil || cerr != nil {
					t.Fatalf("CheckSnapshot = %v, CompileSnapshot = %v; want nil", err, cerr)
				}
				return
			}
			var ve *routesnap.ValidationError
			if !errors.As(err, &ve) || !errors.As(cerr, new(*routesnap.ValidationError)) {
				t.Fatalf("CheckSnapshot = %v, CompileSnapshot = %v; want *ValidationError", err, cerr)
			}
			if diff := cmp.Diff(ve.Problems, tt.want); diff != "" {
				t.Errorf("problems (-got +want):\n%s", diff)
			}
		})
	}
	if err := CheckSnapshot(nil, testCreds); err == nil {
		t.Error("CheckSnapshot(nil) = nil")
	}
}

// TestSnapshotKeepsHotState: across snapshots, a backend keeps its state
// exactly when its identity (id, protocol, base URL, credential name,
// cap) is unchanged (SPEC §7).
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
		tab, err := CompileSnapshot(doc, testCreds, reg)
		if err != nil {
			t.Fatal(err)
		}
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

func TestSnapshotDecoder(t *testing.T) {
	var h Holder
	decode := SnapshotDecoder(&h, testCreds, upstream.NewRegistry(upstream.Options{}))
	good, err := json.Marshal(staticDoc())
	if err != nil {
		t.Fatal(err)
	}
	bad := staticDoc()
	bad.Backends[0].Credential = "nope"
	badData, err := json.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"truncated": good[:len(good)-1], "unknown credential": badData} {
		if _, apply, err := decode(data); err == nil || apply != nil {
			t.Errorf("%s: decode = %v, %v; want an error and no apply", name, apply != nil, err)
		}
	}
	version, apply, err := decode(good)
	if err != nil || version != 1 {
		t.Fatalf("decode = %d, %v", version, err)
	}
	if h.Load() != nil {
		t.Fatal("decode stored a table before apply")
	}
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Load().Model("mixed"); !ok {
		t.Error("apply did not store the table")
	}
}

// TestSwapPinsInFlight is catalogue B4 at the table level: 100 requests
// that loaded the table before a swap keep using it (and the backend the
// new table removes) while requests after the swap see the new table.
// Run with -race.
func TestSwapPinsInFlight(t *testing.T) {
	reg := upstream.NewRegistry(upstream.Options{})
	old, err := CompileSnapshot(staticDoc(), testCreds, reg)
	if err != nil {
		t.Fatal(err)
	}
	next := staticDoc()
	next.Version = 2
	next.Backends = next.Backends[1:] // oa-b is removed
	next.Models[0].Targets = next.Models[0].Targets[1:]
	nextTab, err := CompileSnapshot(next, testCreds, reg)
	if err != nil {
		t.Fatal(err)
	}
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
			pool := m.Pools[OpenAI]
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
	if got := len(m.Pools[OpenAI]); got != 1 {
		t.Errorf("new requests see %d openai targets, want 1", got)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
