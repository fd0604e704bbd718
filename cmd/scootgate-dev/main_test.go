package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/cpserver"
	"github.com/scootgate/scootgate/internal/devstack/faketoken"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// The embedded demo config is a copy of testdata/config/dev.toml (go:embed
// cannot reach outside the package); this keeps the two from drifting.
func TestEmbeddedConfigMatchesTestdata(t *testing.T) {
	want, err := os.ReadFile("../../testdata/config/dev.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(devConfig, want) {
		t.Fatal("cmd/scootgate-dev/dev.toml differs from testdata/config/dev.toml; copy one over the other")
	}
	env := map[string]string{"SCOOTGATE_DEV_OPENAI_KEY": "k1", "SCOOTGATE_DEV_ANTHROPIC_KEY": "k2", "SCOOTGATE_DEV_GEMINI_KEY": "k3",
		"SCOOTGATE_DEV_AWS_ACCESS_KEY_ID": "k4", "SCOOTGATE_DEV_AWS_SECRET_ACCESS_KEY": "k5", "SCOOTGATE_DEV_GCP_KEY": demoGCPKey(t),
		"SCOOTGATE_DEV_AZURE_KEY": "k6"}
	if _, err := config.Parse(devConfig, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, os.ReadFile); err != nil {
		t.Fatalf("embedded dev config does not parse: %v", err)
	}
}

// TestDevSnapshots: the documents `make run` publishes are what the dev
// config polls, and the node accepts them: the routes compile against the
// config's credentials, and the demo key authenticates.
func TestDevSnapshots(t *testing.T) {
	env := map[string]string{"SCOOTGATE_DEV_OPENAI_KEY": "k1", "SCOOTGATE_DEV_ANTHROPIC_KEY": "k2", "SCOOTGATE_DEV_GEMINI_KEY": "k3",
		"SCOOTGATE_DEV_AWS_ACCESS_KEY_ID": "k4", "SCOOTGATE_DEV_AWS_SECRET_ACCESS_KEY": "k5", "SCOOTGATE_DEV_GCP_KEY": demoGCPKey(t),
		"SCOOTGATE_DEV_AZURE_KEY": "k6"}
	cfg, err := config.Parse(devConfig, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(
		[]string{cfg.Routes.Source, cfg.Authz.Source},
		[]string{"http://" + controlPlaneAddr + cpserver.RoutesPath, "http://" + controlPlaneAddr + cpserver.AuthzPath},
	); diff != "" {
		t.Errorf("dev.toml sources differ from what the dev control plane serves (-got +want):\n%s", diff)
	}

	dir := t.TempDir()
	if err := writeSnapshots(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	// A second start rewrites them.
	if err := writeSnapshots(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}

	rdoc, err := routesnap.Decode(read("routes.json"))
	if err != nil {
		t.Fatal(err)
	}
	// As the node checks it: credentials defined, each sent only to a host it
	// lists, and the plaintext fake provider only behind a loopback proxy.
	if err := cfg.CredentialPolicy().Validate(rdoc); err != nil {
		t.Fatalf("dev routes are invalid: %v", err)
	}
	table, err := routes.Compile(rdoc.Backends, rdoc.Models, cfg.Credentials, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatalf("dev routes do not compile: %v", err)
	}
	// Each demo model serves the endpoints the banner and README name.
	for m, eps := range map[string][]provider.Endpoint{
		"demo-gpt":         {provider.Chat, provider.Responses, provider.Completions},
		"demo-claude":      {provider.Messages, provider.CountTokens},
		"demo-embed":       {provider.Embeddings},
		"demo-rerank":      {provider.Rerank},
		"demo-tts":         {provider.AudioSpeech},
		"demo-whisper":     {provider.AudioTranscriptions, provider.AudioTranslations},
		"demo-image":       {provider.ImageGenerations, provider.ImageEdits},
		"demo-realtime":    {provider.Realtime},
		"demo-gemini-live": {provider.BidiGenerateContent},
		"demo-capped":      {provider.Chat},
		"demo-pool":        {provider.Chat},
		"demo-claude-pool": {provider.Messages},
		// Cloud platforms.
		"demo-claude-bedrock": {provider.Messages},
		"demo-claude-clouds":  {provider.Messages},
		"demo-claude-vertex":  {provider.Messages},
		"demo-gemini-vertex":  {provider.GenerateContent, provider.StreamGenerateContent, provider.GeminiCountTokens},
		"demo-gpt-azure":      {provider.Chat, provider.Embeddings, provider.Responses},
	} {
		model, ok := table.Model(m)
		if !ok {
			t.Errorf("dev routes lack %s", m)
			continue
		}
		for _, e := range eps {
			if len(model.Pools[e]) == 0 {
				t.Errorf("%s does not serve %s", m, e)
			}
		}
	}
	// The pools show balancing and affinity: three targets on three
	// distinct backends each, affinity on.
	for m, e := range map[string]provider.Endpoint{"demo-pool": provider.Chat, "demo-claude-pool": provider.Messages} {
		model, _ := table.Model(m)
		seen := map[string]bool{}
		for _, tg := range model.Pools[e] {
			seen[tg.Backend.ID] = true
		}
		if len(model.Pools[e]) != 3 || len(seen) != 3 || !model.Affinity {
			t.Errorf("%s: %d targets on %d backends, affinity %v; want 3 on 3, on", m, len(model.Pools[e]), len(seen), model.Affinity)
		}
	}
	// demo-fallback's own target holds no request and its chain is
	// demo-gpt, whose target declares the window the README shows
	// (docs/routing.md "Fallbacks").
	fb, _ := table.Model("demo-fallback")
	gpt, _ := table.Model("demo-gpt")
	if fb == nil || len(fb.Chain) != 1 || fb.Chain[0] != gpt || fb.Pools[provider.Chat][0].Holds(2, 0) {
		t.Errorf("demo-fallback: want a chain of demo-gpt and a target that holds no request")
	}
	if tg := gpt.Pools[provider.Chat][0]; tg.ContextWindow != 131072 || tg.MaxOutput != 16384 {
		t.Errorf("demo-gpt's window %d and output cap %d, want 131072 and 16384", tg.ContextWindow, tg.MaxOutput)
	}
	// A first load test (hundreds of concurrent streams) must not meet a
	// demo cap; demo-capped shows one on a backend of its own.
	for _, b := range rdoc.Backends {
		want := demoCap
		if b.ID == "fake-openai-capped" {
			want = cappedCap
		}
		if b.MaxInflightPerNode != want {
			t.Errorf("backend %s: max_inflight_per_node %d, want %d", b.ID, b.MaxInflightPerNode, want)
		}
	}
	if demoCap < 1000 || cappedCap > 10 {
		t.Errorf("demo caps %d and %d: want the demo far above a first load test, the capped one small", demoCap, cappedCap)
	}
	capped := 0
	for _, m := range rdoc.Models {
		for _, tg := range m.Targets {
			if tg.Backend == "fake-openai-capped" {
				capped++
				if m.Name != "demo-capped" {
					t.Errorf("model %s routes to the capped backend", m.Name)
				}
			}
		}
	}
	if capped != 1 {
		t.Errorf("%d targets on the capped backend, want demo-capped's one", capped)
	}

	// The consumer subscribes to the node's usage topic, never to a
	// wildcard that also matches the broker's $SYS statistics.
	if f := consumerFilter(cfg); f != cfg.MQTT.Topic || strings.ContainsAny(f, "#+") {
		t.Errorf("consumer filter %q, want the usage topic %q", f, cfg.MQTT.Topic)
	}

	adoc, err := authsnap.Decode(read("authz.json"))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := authz.Compile(adoc)
	if err != nil {
		t.Fatalf("dev authz does not compile: %v", err)
	}
	var st authz.Store
	st.Swap(ix)
	if _, err := st.Authenticate(http.Header{"Authorization": {"Bearer " + DemoKey}}, nil, time.Now()); err != nil {
		t.Errorf("demo key rejected: %v", err)
	}
	if etag, ok := cpserver.ETag(read("routes.json")); !ok || etag != `"1"` {
		t.Errorf("routes.json ETag = %q, %v; want \"1\"", etag, ok)
	}
}

// TestConsumerDeduplicates: a replayed event (same event_id) prints once.
func TestConsumerDeduplicates(t *testing.T) {
	var out bytes.Buffer
	c := newConsumer(&out)
	ev := `{"event_id":"0192f0c4-0000-7000-8000-000000000001","schema":2,"authoritative":false,"node_id":"dev-1","request_id":"sg-1","tenant_id":"t","key_id":"k","public_model":"demo-gpt","provider_model":"fake-gpt-1","backend":"fake-openai","protocol":"openai","placement":"affinity","stream":false,"attempt":1,"send_state":"response_received","failure_stage":"","http_status":200,"request_bytes":10,"response_bytes":20,"ttfb_ms":1,"duration_ms":2,"started_at":"2026-11-29T00:00:00Z","usage":{"input_tokens":3,"output_tokens":4,"cache_read_tokens":0,"cache_write_tokens":0,"reasoning_tokens":0},"provider_usage":{"prompt_tokens":3,"completion_tokens":4}}`
	c.handle("scootgate/usage", []byte(ev))
	c.handle("scootgate/usage", []byte(ev))
	if n := strings.Count(out.String(), "usage event"); n != 1 {
		t.Fatalf("printed %d lines for one event id, want 1:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "placement affinity tokens in=3 out=4") {
		t.Fatalf("summary lacks usage: %s", out.String())
	}
}

// TestLogLinesAsProduction holds the dev stack's log to the node's line
// format: a duration as Go writes it, not integer nanoseconds.
func TestLogLinesAsProduction(t *testing.T) {
	var buf bytes.Buffer
	newLogger(&buf).Info("drained: every request finished", "took", 3*time.Second)
	if got, want := buf.String(), `"took":"3s"`; !strings.Contains(got, want) {
		t.Errorf("log line %s does not contain %s", got, want)
	}
}

// TestDescribeCost: a priced attempt's line shows its cost, and says when
// it was estimated; the demo models carry prices.
func TestDescribeCost(t *testing.T) {
	ev := &usageevent.Event{PublicModel: "demo-gpt", Protocol: "openai", Backend: "fake-openai", ProviderModel: "fake-gpt-1",
		Attempt: 1, SendState: "response_received", HTTPStatus: 200,
		Usage: &usageevent.Usage{InputTokens: 3, OutputTokens: 4}, Cost: &usageevent.Cost{USD: "0.0000475", PriceVersion: 1}}
	if got := describe(ev); !strings.HasSuffix(got, "tokens in=3 out=4 cost $0.0000475") {
		t.Errorf("line %q does not end with the cost", got)
	}
	ev.Usage, ev.Cost = nil, &usageevent.Cost{USD: "0.00001", Estimated: true}
	if got := describe(ev); !strings.HasSuffix(got, "cost $0.00001 (estimated)") {
		t.Errorf("line %q does not say the cost was estimated", got)
	}
	snap := devRoutes(time.Now())
	if err := snap.Validate(); err != nil {
		t.Fatal(err)
	}
	priced := 0
	for _, m := range snap.Models {
		for _, tg := range m.Targets {
			if tg.Price != nil {
				priced++
			}
		}
	}
	if priced < 5 {
		t.Errorf("%d demo targets are priced, want the demo chat models' (at least 5)", priced)
	}
}

// demoGCPKey is a demo service account's key on one line, as scootgate-dev
// puts it in the environment, naming the dev token endpoint.
func demoGCPKey(t *testing.T) string {
	t.Helper()
	g, err := faketoken.NewGoogle(faketoken.GoogleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, g.KeyJSON("https://"+googleTokenAddr+"/token")); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDevCloudsPool: demo-claude-clouds has one target on each of the
// Anthropic API, Bedrock and Vertex.
func TestDevCloudsPool(t *testing.T) {
	snap := devRoutes(time.Now())
	platform := map[string]string{}
	for _, b := range snap.Backends {
		platform[b.ID] = b.Platform
	}
	for _, m := range snap.Models {
		if m.Name != "demo-claude-clouds" {
			continue
		}
		var got []string
		for _, tg := range m.Targets {
			got = append(got, platform[tg.Backend])
		}
		if diff := cmp.Diff(got, []string{"", routesnap.PlatformBedrock, routesnap.PlatformVertex}); diff != "" {
			t.Errorf("demo-claude-clouds platforms (-got +want):\n%s", diff)
		}
		return
	}
	t.Fatal("no demo-claude-clouds")
}
