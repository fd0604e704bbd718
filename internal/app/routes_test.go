package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// staticTOML is a node config whose static routes are the same as
// snapshotJSON's: both protocols, tiers, capabilities, include_usage, a
// trailing slash and a provider model that needs JSON escaping.
const staticTOML = `node_id = "n"
[[egress.proxies]]
name = "p"
url = "socks5://127.0.0.1:1080"
[credentials.c]
env = "K"
hosts = ["a.example", "b.example", "an.example"]
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

const snapshotJSON = `{"schema": 1, "version": 1,
 "backends": [
  {"id": "oa-b", "protocol": "openai", "base_url": "https://b.example/v1/", "credential": "c", "max_inflight_per_node": 3, "include_usage": false},
  {"id": "oa-a", "protocol": "openai", "base_url": "https://a.example/v1", "credential": "c", "max_inflight_per_node": 3},
  {"id": "an", "protocol": "anthropic", "base_url": "https://an.example/v1", "credential": "c", "max_inflight_per_node": 3}],
 "models": [
  {"name": "mixed", "targets": [
   {"backend": "oa-b", "model": "m-b", "weight": 1, "tier": 1},
   {"backend": "an", "model": "claude \"x\"", "weight": 2, "stream": true},
   {"backend": "oa-a", "model": "m-a", "weight": 3, "tools": true, "json_schema": true}]},
  {"name": "only-oa", "targets": [{"backend": "oa-a", "model": "x", "weight": 1}]}]}`

// tableView is what a routes.Table serves, in comparable form.
type tableView map[string][provider.NumEndpoints][]string

func viewTable(t *testing.T, tab *routes.Table) tableView {
	t.Helper()
	v := tableView{}
	for _, p := range []provider.Protocol{provider.OpenAI, provider.Anthropic} {
		for _, name := range tab.Names(p) {
			m, _ := tab.Model(name)
			pools := v[name]
			for e := range provider.NumEndpoints {
				if e.Protocol() != p {
					continue
				}
				for _, tg := range m.Pools[e] {
					b := tg.Backend
					pools[e] = append(pools[e], fmt.Sprintf("%s %s %s %s w=%d tier=%d caps=%s cap=%d inject=%v",
						b.ID, b.URL[e], b.Credential.Reveal(), tg.ProviderModelJSON, tg.Weight, tg.Tier, tg.Caps, b.State.Cap(), b.InjectUsage))
				}
			}
			v[name] = pools
		}
	}
	return v
}

// TestStaticRoutesMatchSnapshot: the config file's routes and a routing
// snapshot with the same content compile to the same table.
func TestStaticRoutesMatchSnapshot(t *testing.T) {
	cfg, err := config.Parse([]byte(staticTOML), func(string) (string, bool) { return "secret", true }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	fromStatic, err := staticRoutes(cfg, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	var h routes.Holder
	_, apply, err := routesDecoder(&h, cfg.CredentialPolicy(), upstream.NewRegistry(upstream.Options{}))([]byte(snapshotJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	got, want := viewTable(t, fromStatic), viewTable(t, h.Load())
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("static table differs from the snapshot one (-static +snapshot):\n%s", diff)
	}
	if len(got) != 2 || len(got["mixed"][provider.Chat]) != 2 {
		t.Errorf("unexpected table: %v", got)
	}
}

// TestStaticAndSnapshotProblemsMatch: the same mistake in the config
// file and in a snapshot is one message, at the TOML key path and the
// JSON member path.
func TestStaticAndSnapshotProblemsMatch(t *testing.T) {
	badTOML := []byte(replaceOnce(t, replaceOnce(t, staticTOML,
		"weight = 3\n", "weight = 0\n"),
		"credential = \"c\"\nmax_inflight_per_node = 3\ninclude_usage = false", "credential = \"nope\"\nmax_inflight_per_node = 3\ninclude_usage = false"))
	_, err := config.Parse(badTOML, func(string) (string, bool) { return "secret", true }, os.ReadFile)
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("config.Parse = %v; want a *config.Error", err)
	}
	badJSON := replaceOnce(t, replaceOnce(t, snapshotJSON, `"weight": 3`, `"weight": 0`), `b.example/v1/", "credential": "c"`, `b.example/v1/", "credential": "nope"`)
	_, _, err = routesDecoder(new(routes.Holder), policyOf([]string{"a.example", "b.example", "an.example"}, "c"), upstream.NewRegistry(upstream.Options{}))([]byte(badJSON))
	var ve *routesnap.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("decode = %v; want a *routesnap.ValidationError", err)
	}
	type problem struct{ Path, Msg string }
	var gotTOML, gotJSON []problem
	for _, p := range ce.Problems {
		gotTOML = append(gotTOML, problem{p.Path, p.Msg})
	}
	for _, p := range ve.Problems {
		gotJSON = append(gotJSON, problem{p.Path, p.Msg})
	}
	unknown := `unknown credential "nope"; this node's [credentials] does not define it`
	weight := "must be 1..1000000, got 0"
	if diff := cmp.Diff(gotTOML, []problem{{"backends.oa-b.credential", unknown}, {"models.mixed.targets[2].weight", weight}}); diff != "" {
		t.Errorf("config problems (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(gotJSON, []problem{{"backends[0].credential", unknown}, {"models[0].targets[2].weight", weight}}); diff != "" {
		t.Errorf("snapshot problems (-got +want):\n%s", diff)
	}
}

func TestRoutesDecoder(t *testing.T) {
	var h routes.Holder
	decode := routesDecoder(&h, policyOf([]string{"a.example", "b.example", "an.example"}, "c"), upstream.NewRegistry(upstream.Options{}))
	good := []byte(snapshotJSON)
	bad := []byte(replaceOnce(t, snapshotJSON, `b.example/v1/", "credential": "c"`, `b.example/v1/", "credential": "nope"`))
	// docs/egress.md "Where a credential may go": a document can name a
	// credential only for the hosts the node lists for it.
	elsewhere := []byte(replaceOnce(t, snapshotJSON, `https://b.example/v1/`, `https://collector.example/v1/`))
	for name, data := range map[string][]byte{"truncated": good[:len(good)-1], "unknown credential": bad, "credential to an unlisted host": elsewhere} {
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

// largeSnapshot returns a valid snapshot with models × targets targets
// spread over 64 backends of both protocols.
func largeSnapshot(models, targets int) *routesnap.Snapshot {
	const backends = 64
	s := &routesnap.Snapshot{Schema: 1, Version: 1}
	for i := range backends {
		proto := routesnap.ProtocolOpenAI
		if i%4 == 3 {
			proto = routesnap.ProtocolAnthropic
		}
		s.Backends = append(s.Backends, routesnap.Backend{
			ID: fmt.Sprintf("backend-%02d", i), Protocol: proto, BaseURL: fmt.Sprintf("https://p%d.example.com/v1", i),
			Credential: fmt.Sprintf("cred-%d", i%3), MaxInflightPerNode: 256,
		})
	}
	for i := range models {
		m := routesnap.Model{Name: fmt.Sprintf("public-model-%05d", i)}
		for j := range targets {
			m.Targets = append(m.Targets, routesnap.Target{
				Backend: fmt.Sprintf("backend-%02d", (i+j*7)%backends), Model: fmt.Sprintf("provider-model-%05d-%d", i, j),
				Weight: 10 * (j + 1), Stream: true, Tools: j%2 == 0, Tier: j / 2,
			})
		}
		s.Models = append(s.Models, m)
	}
	return s
}

// BenchmarkSnapshotApply measures what a new routing snapshot costs the
// poller off the request path: decode, validate (with credentials),
// compile, swap; the goal is at most 200 ms for 10k models × 3 targets.
// The request path never waits on it: it only loads the Holder's pointer.
func BenchmarkSnapshotApply(b *testing.B) {
	creds := policyOf([]string{"*.example.com"}, "cred-0", "cred-1", "cred-2")
	for _, size := range []struct{ models, targets int }{{100, 3}, {10000, 3}} {
		data, err := json.Marshal(largeSnapshot(size.models, size.targets))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("models=%d/targets=%d", size.models, size.targets), func(b *testing.B) {
			reg := upstream.NewRegistry(upstream.Options{})
			var h routes.Holder
			decode := routesDecoder(&h, creds, reg)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				_, apply, err := decode(data)
				if err != nil {
					b.Fatal(err)
				}
				if err := apply(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// policyOf is a credential policy whose credentials names may each go to
// hosts, with loopback egress only.
func policyOf(hosts []string, names ...string) credential.Policy {
	p := credential.Policy{Credentials: map[string]credential.Credential{}}
	for _, n := range names {
		p.Credentials[n] = credential.Credential{Secret: secret.New("secret-of-" + n), Hosts: hosts}
	}
	return p
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	i := strings.Index(s, old)
	if i < 0 || strings.Contains(s[i+len(old):], old) {
		t.Fatalf("%q does not occur exactly once", old)
	}
	return s[:i] + new + s[i+len(old):]
}

// TestNewRoutingVersionEndsHeadroom: a provider whose rate-limit headers
// name a reset a year ahead holds its backend for the node's
// rate_limit_max at most, and applying a newer routing document ends
// the hold at once, keeping the backend's other state (its cooldown).
func TestNewRoutingVersionEndsHeadroom(t *testing.T) {
	var h routes.Holder
	at := time.Unix(1000, 0)
	reg := upstream.NewRegistry(upstream.Options{Clock: func() time.Time { return at }})
	decode := routesDecoder(&h, policyOf([]string{"a.example", "b.example", "an.example"}, "c"), reg)
	apply := func() {
		t.Helper()
		_, apply, err := decode([]byte(snapshotJSON))
		if err != nil {
			t.Fatal(err)
		}
		if err := apply(); err != nil {
			t.Fatal(err)
		}
	}
	apply()
	m, _ := h.Load().Model("mixed")
	var states []*upstream.State
	for _, pool := range m.Pools {
		for _, tg := range pool {
			states = append(states, tg.Backend.State)
		}
	}
	if len(states) < 2 {
		t.Fatalf("%d targets", len(states))
	}
	held, cooled := states[0], states[len(states)-1]
	year := upstream.Budget{Stated: true, Limit: 100, Remaining: 0, Reset: 8760 * time.Hour}
	if !held.Acquire() || !cooled.Acquire() {
		t.Fatal("Acquire refused")
	}
	held.Finish(upstream.Result{Outcome: upstream.Success, Sent: held.Acquired(), Headroom: upstream.Headroom{Requests: year}})
	cooled.Finish(upstream.Result{Outcome: upstream.RateLimited, RetryAfter: 30 * time.Second})
	if held.ReadyNow() {
		t.Fatal("a used-up budget does not hold")
	}
	if until := held.EligibleAt(); until.After(at.Add(upstream.DefaultRateLimitMax)) {
		t.Errorf("held until %v, past rate_limit_max", until)
	}
	apply() // the next version
	if !held.ReadyNow() {
		t.Error("a newer routing document did not end the headroom hold")
	}
	if cooled.ReadyNow() {
		t.Error("a newer routing document ended a 429's cooldown")
	}
}
