package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

func TestDiffRoutes(t *testing.T) {
	old := &routesnap.Snapshot{
		Schema: 1, Version: 41,
		Backends: []routesnap.Backend{
			{ID: "oa-1", Protocol: "openai", BaseURL: "https://a.example/v1", Credential: "c1", MaxInflightPerNode: 256},
			{ID: "gone", Protocol: "openai", BaseURL: "https://gone.example/v1", Credential: "c1", MaxInflightPerNode: 1},
			{ID: "same", Protocol: "anthropic", BaseURL: "https://s.example/v1", Credential: "c2", MaxInflightPerNode: 8},
		},
		Models: []routesnap.Model{
			{Name: "gpt", Targets: []routesnap.Target{
				{Backend: "oa-1", Model: "gpt-x", Weight: 100, Stream: true},
				{Backend: "gone", Model: "gpt-x", Weight: 1},
				{Backend: "same", Model: "claude", Weight: 1},
			}},
			{Name: "retired", Targets: []routesnap.Target{{Backend: "oa-1", Model: "old", Weight: 1}}},
		},
	}
	off := false
	new := &routesnap.Snapshot{
		Schema: 1, Version: 42,
		Backends: []routesnap.Backend{
			{ID: "oa-1", Protocol: "openai", BaseURL: "https://b.example/v1", Credential: "c1", MaxInflightPerNode: 512, Endpoints: []string{"chat_completions", "responses"}},
			{ID: "oa-2", Protocol: "openai", BaseURL: "https://u:p@two.example/v1?k=v", Credential: "c3", MaxInflightPerNode: 64},
			{ID: "same", Protocol: "anthropic", BaseURL: "https://s.example/v1", Credential: "c2", MaxInflightPerNode: 8, Endpoints: []string{"messages"}},
			{ID: "an-2", Protocol: "anthropic", BaseURL: "https://s.example/v1", Credential: "c2", MaxInflightPerNode: 8, Endpoints: []string{"messages", "count_tokens"}},
		},
		Models: []routesnap.Model{
			{Name: "gpt", Targets: []routesnap.Target{
				{Backend: "oa-1", Model: "gpt-x", Weight: 90, Stream: true, Tools: true, Tier: 1},
				{Backend: "oa-2", Model: "gpt-x", Weight: 10, Stream: true, JSONSchema: true, Tier: 2},
				{Backend: "same", Model: "claude", Weight: 1},
			}, Affinity: &off},
			{Name: "new-model", Targets: []routesnap.Target{{Backend: "oa-2", Model: "n", Weight: 1}, {Backend: "oa-1", Model: "n", Weight: 1}}, Affinity: &off},
		},
	}
	got := diffRoutes(old, new).String()
	want := `routes: version 41 -> 42: 10 changes
+ backend an-2 (anthropic https://s.example/v1, credential c2, max_inflight_per_node 8, endpoints messages,count_tokens)
- backend gone
~ backend oa-1: base_url https://a.example/v1 -> https://b.example/v1; max_inflight_per_node 256 -> 512; endpoints chat_completions -> chat_completions,responses
+ backend oa-2 (openai https://two.example/v1, credential c3, max_inflight_per_node 64)
~ model gpt: affinity true -> false
+ model new-model (2 targets, affinity off)
- model retired (1 target)
- target gpt -> gone/gpt-x
~ target gpt -> oa-1/gpt-x: weight 100 -> 90; tools false -> true; tier 0 -> 1
+ target gpt -> oa-2/gpt-x (weight 10, stream, json_schema, tier 2)
`
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("diff mismatch (-got +want):\n%s", diff)
	}
	if got := diffRoutes(old, old).String(); got != "routes: version 41 -> 41: no changes\n" {
		t.Errorf("self diff = %q", got)
	}
}

func TestDiffAuthz(t *testing.T) {
	exp := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		dA = "d1bd6a372daf2838113796bcdb5b3a21c27e86bb91741beb6b6e0335ac1d221f"
		dB = "4b8825d233af905cd4221e89182af177bd5d847ab73118f94b2bb8234b2d899c"
		dC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	)
	old := &authsnap.Snapshot{Schema: 1, Version: 7, Keys: []authsnap.Key{
		{KeyID: "k_rotated", TenantID: "t1", Digest: dA},
		{KeyID: "k_revoked", TenantID: "t1", Digest: dB},
		{KeyID: "k_limited", TenantID: "t1", Digest: dC, Models: []string{"a"}, Limits: authsnap.Limits{RequestsPerMinute: 60}},
	}, Tenants: []authsnap.Tenant{
		{TenantID: "t1", Limits: authsnap.Limits{MaxConcurrent: 10}},
		{TenantID: "t_gone", Limits: authsnap.Limits{TokensPerMinute: 5}},
	}}
	new := &authsnap.Snapshot{Schema: 1, Version: 8, Keys: []authsnap.Key{
		{KeyID: "k_rotated", TenantID: "t2", Digest: dB},
		{KeyID: "k_limited", TenantID: "t1", Digest: dC, ExpiresAt: &exp, Disabled: true},
		{KeyID: "k_new", TenantID: "t3", Digest: dA, Models: []string{}, Limits: authsnap.Limits{MaxConcurrent: 2}},
	}, Tenants: []authsnap.Tenant{
		{TenantID: "t1", Limits: authsnap.Limits{MaxConcurrent: 20, TokensPerMinute: 1000}},
		{TenantID: "t3", Limits: authsnap.Limits{RequestsPerMinute: 6}},
	}}
	got := diffAuthz(old, new).String()
	want := `authz: version 7 -> 8: 7 changes
~ key k_limited: models [a] -> all; expires never -> 2027-01-01T00:00:00Z; disabled false -> true; limits rpm 60 -> none
+ key k_new (tenant t3, models [], expires never, limits concurrent 2)
- key k_revoked
~ key k_rotated: digest changed; tenant t1 -> t2
~ tenant t1: limits concurrent 10 -> tpm 1000, concurrent 20
+ tenant t3 (limits rpm 6)
- tenant t_gone
`
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("diff mismatch (-got +want):\n%s", diff)
	}
	for _, d := range []string{dA, dB, dC, dA[:8], dB[:8]} {
		if strings.Contains(got, d) {
			t.Errorf("diff shows a digest (or its prefix %.8s)", d)
		}
	}
}

// TestDiffPrices: check shows a price added, changed (base and
// long-context tier) and removed, in the document's own decimals.
func TestDiffPrices(t *testing.T) {
	target := func(model string, p *routesnap.Price) routesnap.Target {
		return routesnap.Target{Backend: "b", Model: model, Weight: 1, Price: p}
	}
	doc := func(v uint64, ts ...routesnap.Target) *routesnap.Snapshot {
		return &routesnap.Snapshot{Schema: 2, Version: v,
			Backends: []routesnap.Backend{{ID: "b", Protocol: "anthropic", BaseURL: "https://b.example/v1", Credential: "c", MaxInflightPerNode: 1}},
			Models:   []routesnap.Model{{Name: "m", Targets: ts}}}
	}
	old := doc(1,
		target("a", nil),
		target("b", &routesnap.Price{Input: "3", Output: "15"}),
		target("c", &routesnap.Price{Input: "1", Output: "2"}),
	)
	new := doc(2,
		target("a", &routesnap.Price{Input: "0.8", Output: "4", CacheRead: "0.08"}),
		target("b", &routesnap.Price{Input: "3", Output: "15", LongContext: &routesnap.PriceTier{AboveInputTokens: 200000, Input: "6", Output: "22.5"}}),
		target("c", nil),
		target("d", &routesnap.Price{Input: "1", Output: "2", CacheWrite: "1.25"}),
	)
	got := diffRoutes(old, new).String()
	want := `routes: version 1 -> 2: 4 changes
~ target m -> b/a: price none -> in 0.8 out 4 cache_read 0.08
~ target m -> b/b: price in 3 out 15 -> in 3 out 15 (above 200000 input tokens: in 6 out 22.5)
~ target m -> b/c: price in 1 out 2 -> none
+ target m -> b/d (weight 1, price in 1 out 2 cache_write 1.25)
`
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("diff mismatch (-got +want):\n%s", diff)
	}
}

// TestDiffBudgets: check shows a key's and a tenant's budgets change.
func TestDiffBudgets(t *testing.T) {
	key := func(l authsnap.Limits) authsnap.Key {
		return authsnap.Key{KeyID: "k", TenantID: "t", Digest: authsnap.Digest("x"), Limits: l}
	}
	old := &authsnap.Snapshot{Schema: 2, Version: 1, Keys: []authsnap.Key{key(authsnap.Limits{RequestsPerMinute: 60})}}
	new := &authsnap.Snapshot{Schema: 2, Version: 2, Keys: []authsnap.Key{key(authsnap.Limits{RequestsPerMinute: 60, USDPerDay: "20"})},
		Tenants: []authsnap.Tenant{{TenantID: "t", Limits: authsnap.Limits{USDPerMonth: "500.5", BudgetMode: authsnap.BudgetReserve}}}}
	got := diffAuthz(old, new).String()
	want := `authz: version 1 -> 2: 2 changes
~ key k: limits rpm 60 -> rpm 60, usd/day 20
+ tenant t (limits usd/month 500.5, budget_mode reserve)
`
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("diff mismatch (-got +want):\n%s", diff)
	}
}
