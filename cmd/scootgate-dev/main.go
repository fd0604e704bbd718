// Command scootgate-dev is the `make run` demo: in one process it starts a
// fake OpenAI-and-Anthropic provider, a loopback SOCKS5 egress proxy, a dev
// control plane and a ScootGate node on the embedded dev config, then
// prints curl lines that work with the demo key. It is a development tool:
// the node binary (cmd/scootgate) never links the fake provider, the
// proxies or the control plane.
//
// The control plane (internal/devstack/cpserver) serves the routing and
// authorization snapshots from .scootgate-dev/ in the working directory,
// which `make run` (re)writes at every start with the demo routes and key.
// Editing a file there and raising its "version" publishes a new snapshot:
// the node long-polls the control plane (long_poll in the dev config), which
// answers as soon as the file gets a new version.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/scootgate/scootgate/internal/app"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/broker"
	"github.com/scootgate/scootgate/internal/devstack/cpserver"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/devstack/faketoken"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

//go:embed dev.toml
var devConfig []byte

// DemoKey is the client key the demo accepts. It is a public, documented
// development key; its digest is what the demo authorization snapshot holds.
const DemoKey = "sk-scootgate-demo"

// Demo caps (max_inflight_per_node): demoCap for the demo models, far
// above a first load test; cappedCap for demo-capped, which shows what a
// backend at its cap answers (503 with Retry-After, nothing sent).
const (
	demoCap   = 10000
	cappedCap = 2
)

const (
	providerAddr = "127.0.0.1:18080"
	socksAddr    = "127.0.0.1:11090"
	// controlPlaneAddr is where dev.toml's [routes] and [authz] sources
	// point.
	controlPlaneAddr = "127.0.0.1:18090"
	// brokerAddr is the embedded MQTT broker dev.toml's [mqtt] names.
	brokerAddr = "127.0.0.1:11883"
	// snapshotDir holds the documents the control plane serves, relative
	// to the working directory (`make run` runs in the repository root).
	snapshotDir = ".scootgate-dev"
	// The fake provider checks these; the node reads them from the env,
	// like real provider keys.
	fakeOpenAIKey    = "fake-openai-provider-key"
	fakeAnthropicKey = "fake-anthropic-provider-key"
	fakeGeminiKey    = "fake-gemini-provider-key"
)

// Claude on Bedrock in the dev stack (docs/routing.md "Platforms"): the
// fake provider checks SigV4 signatures made with these demo AWS keys,
// which dev.toml's aws credential reads from the environment.
var fakeBedrockKeys = fakeprovider.BedrockKeys{
	AccessKeyID:     "AKIAFAKEBEDROCKDEMO1",
	SecretAccessKey: "fake-bedrock-secret-access-key",
}

// Claude and Gemini on Vertex AI in the dev stack (docs/routing.md
// "Platforms"): a fake Google token endpoint on googleTokenAddr (TLS, its
// certificate trusted through egress.provider_tls) mints access tokens for
// a demo service account whose key dev.toml's gcp_service_account
// credential reads from the environment; the fake provider takes only
// those tokens, for vertexProject only.
const (
	googleTokenAddr = "127.0.0.1:18091"
	vertexProject   = "scootgate-demo"
	vertexLocation  = "us-east5"
)

// fakeAzureKey is the demo Azure OpenAI api-key the fake provider takes
// on its Azure paths.
const fakeAzureKey = "fake-azure-api-key"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scootgate-dev:", err)
		os.Exit(1)
	}
}

// newLogger writes the node's log lines as the production binary does
// (logline: readable durations, reordering controls escaped), so what
// `make run` prints is what an operator will see.
func newLogger(w io.Writer) *slog.Logger { return slog.New(logline.NewHandler(w, nil)) }

func run() error {
	log := newLogger(os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	google, err := startGoogle()
	if err != nil {
		return err
	}
	defer google.srv.Close()
	prov := fakeprovider.New(fakeprovider.Options{OpenAIKey: fakeOpenAIKey, AnthropicKey: fakeAnthropicKey, GeminiKey: fakeGeminiKey,
		BedrockKeys: fakeBedrockKeys, VertexTokens: google.g, VertexProject: vertexProject,
		AzureKey: fakeAzureKey})
	if _, err := prov.Start(providerAddr); err != nil {
		return fmt.Errorf("fake provider on %s: %w", providerAddr, err)
	}
	defer prov.Close()
	socks, _, err := socks5proxy.Listen(socksAddr, socks5proxy.Options{})
	if err != nil {
		return fmt.Errorf("socks5 proxy on %s: %w", socksAddr, err)
	}
	defer socks.Close()

	snapDir, err := filepath.Abs(snapshotDir)
	if err != nil {
		return err
	}
	if err := writeSnapshots(snapDir, time.Now()); err != nil {
		return fmt.Errorf("dev snapshots: %w", err)
	}
	cp, err := cpserver.Listen(controlPlaneAddr, snapDir)
	if err != nil {
		return fmt.Errorf("dev control plane on %s: %w", controlPlaneAddr, err)
	}
	defer cp.Close()

	// The config, the node's state directory (last good snapshots) and its
	// usage outbox are fresh at every start and removed at exit, so the
	// version floor starts over with the rewritten snapshots.
	dir, err := os.MkdirTemp("", "scootgate-dev-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgPath := filepath.Join(dir, "dev.toml")
	if err := os.WriteFile(cfgPath, append(devConfig[:len(devConfig):len(devConfig)], google.tlsTOML...), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, googleCAFile), google.caPEM, 0o600); err != nil {
		return err
	}
	os.Setenv("SCOOTGATE_DEV_OPENAI_KEY", fakeOpenAIKey)
	os.Setenv("SCOOTGATE_DEV_ANTHROPIC_KEY", fakeAnthropicKey)
	os.Setenv("SCOOTGATE_DEV_GEMINI_KEY", fakeGeminiKey)
	os.Setenv("SCOOTGATE_DEV_AWS_ACCESS_KEY_ID", fakeBedrockKeys.AccessKeyID)
	os.Setenv("SCOOTGATE_DEV_AWS_SECRET_ACCESS_KEY", fakeBedrockKeys.SecretAccessKey)
	os.Setenv("SCOOTGATE_DEV_GCP_KEY", google.keyJSON)
	os.Setenv("SCOOTGATE_DEV_AZURE_KEY", fakeAzureKey)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}

	// The embedded broker the node publishes usage events to, and a
	// consumer that prints each event once (at-least-once delivery: it
	// de-duplicates by event_id, as every consumer must). It subscribes
	// to the node's usage topic only, never to "#": the broker's own $SYS
	// statistics would otherwise print as undecodable every second.
	consumer := newConsumer(os.Stdout)
	mq, err := broker.Start(broker.Options{Addr: brokerAddr, OnMessage: consumer.handle, Filter: consumerFilter(cfg)})
	if err != nil {
		return fmt.Errorf("mqtt broker on %s: %w", brokerAddr, err)
	}
	defer mq.Close()

	return app.Run(ctx, cfg, app.Options{
		Logger:  log,
		BaseDir: dir,
		Listening: func(api, health net.Addr) {
			printBanner(banner{
				API: api.String(), Health: health.String(), ConfigDir: dir, SnapshotDir: snapDir,
				RoutesURL: cfg.Routes.Source, AuthzURL: cfg.Authz.Source, Poll: cfg.ControlPlane.PollInterval,
			})
		},
	})
}

// googleCAFile is the fake token endpoint's certificate, written next to
// the config.
const googleCAFile = "fake-google-ca.pem"

// fakeGoogle is the dev stack's Google token endpoint.
type fakeGoogle struct {
	g       *faketoken.Google
	srv     *httptest.Server
	keyJSON string // the demo service account's key, on one line
	caPEM   []byte
	tlsTOML []byte // the config section that trusts srv's certificate
}

// startGoogle serves a fake Google token endpoint over TLS on
// googleTokenAddr.
func startGoogle() (*fakeGoogle, error) {
	g, err := faketoken.NewGoogle(faketoken.GoogleOptions{})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", googleTokenAddr)
	if err != nil {
		return nil, fmt.Errorf("fake google token endpoint on %s: %w", googleTokenAddr, err)
	}
	srv := httptest.NewUnstartedServer(g)
	srv.Listener.Close()
	srv.Listener = ln
	srv.StartTLS()
	var key bytes.Buffer
	if err := json.Compact(&key, g.KeyJSON(srv.URL+"/token")); err != nil {
		srv.Close()
		return nil, err
	}
	return &fakeGoogle{
		g: g, srv: srv, keyJSON: key.String(),
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		tlsTOML: []byte("\n# scootgate-dev: trust the fake Google token endpoint's certificate.\n[egress.provider_tls]\nca_file = \"" + googleCAFile + "\"\n"),
	}, nil
}

// consumerFilter is the dev consumer's subscription: the topic the node
// publishes usage events to, exactly.
func consumerFilter(cfg *config.Config) string { return cfg.MQTT.Topic }

// consumer prints usage events the broker receives, once per event_id.
type consumer struct {
	out  io.Writer
	mu   sync.Mutex
	seen map[string]bool // guarded by mu
}

func newConsumer(out io.Writer) *consumer { return &consumer{out: out, seen: map[string]bool{}} }

func (c *consumer) handle(_ string, payload []byte) {
	ev, err := usageevent.Decode(payload)
	if err != nil {
		fmt.Fprintf(c.out, "usage: undecodable message (%v)\n", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[ev.EventID] {
		return // a replay after a reconnect: same event_id, counted once
	}
	c.seen[ev.EventID] = true
	fmt.Fprintln(c.out, describe(ev))
}

// describe is the one-line summary the dev stack prints per event.
func describe(ev *usageevent.Event) string {
	model := ev.PublicModel
	if ev.ModelPattern != "" {
		model += " [" + ev.ModelPattern + "]"
	}
	if ev.ServedModel != "" && ev.ServedModel != ev.PublicModel {
		model += " served by " + ev.ServedModel // a fallback (docs/routing.md "Fallbacks")
	}
	line := fmt.Sprintf("usage event %s: %s %s -> %s (%s) attempt %d %s status %d",
		ev.EventID, ev.Protocol, model, ev.Backend, ev.ProviderModel, ev.Attempt, ev.SendState, ev.HTTPStatus)
	if ev.FailureStage != "" {
		line += " failed at " + ev.FailureStage
	}
	if ev.Placement != "" {
		line += " placement " + ev.Placement
	}
	if ev.Usage != nil {
		line += fmt.Sprintf(" tokens in=%d out=%d", ev.Usage.InputTokens, ev.Usage.OutputTokens)
	}
	if c := ev.Cost; c != nil {
		line += " cost $" + c.USD
		if c.Estimated {
			line += " (estimated)"
		}
	}
	return line
}

// writeSnapshots (re)writes the documents the dev control plane serves:
// the routes that used to be static in dev.toml, and the demo key.
func writeSnapshots(dir string, now time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	now = now.UTC().Truncate(time.Second)
	if err := writeJSON(filepath.Join(dir, "routes.json"), devRoutes(now)); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "authz.json"), devAuthz(now))
}

// devRoutes: demo-gpt (chat completions, responses and its compaction and
// token count, legacy completions), demo-embed (embeddings), demo-rerank
// (rerank), demo-tts (speech), demo-whisper (transcriptions, translations)
// demo-image (image generations and edits) and demo-realtime (realtime
// sessions over WebSocket) on the fake provider's
// OpenAI side, demo-claude (messages and count_tokens) on its Anthropic
// side, the patterns claude-* and gpt-* (every name Claude Code and Codex
// CLI ask for) on the same backends, demo-gemini (every Gemini
// method) on its Gemini side, with the credentials dev.toml
// defines; demo-pool and demo-claude-pool spread over three backends each,
// so that balancing and prompt-cache affinity show in the usage events;
// demo-pool with prefix affinity too.
func devRoutes(now time.Time) routesnap.Snapshot {
	base := "http://" + providerAddr + "/v1" // plaintext: loopback only (docs/egress.md)
	snap := devSingles(now, base)
	// demo-pool also places keyless requests by their prompt's beginning
	// (docs/routing.md "Prefix affinity"), for agents that name no session.
	pool := routesnap.Model{Name: "demo-pool", PrefixAffinity: new(true)}
	claudePool := routesnap.Model{Name: "demo-claude-pool"}
	for _, x := range poolSuffixes {
		snap.Backends = append(snap.Backends,
			routesnap.Backend{ID: "fake-openai-" + x, Protocol: routesnap.ProtocolOpenAI, BaseURL: base, Credential: "fake-openai", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointChatCompletions, routesnap.EndpointResponses, routesnap.EndpointCompletions}},
			routesnap.Backend{ID: "fake-anthropic-" + x, Protocol: routesnap.ProtocolAnthropic, BaseURL: base, Credential: "fake-anthropic", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointMessages, routesnap.EndpointCountTokens}})
		pool.Targets = append(pool.Targets, routesnap.Target{Backend: "fake-openai-" + x, Model: "fake-gpt-1", Weight: 1, Stream: true, Tools: true, JSONSchema: true})
		claudePool.Targets = append(claudePool.Targets, routesnap.Target{Backend: "fake-anthropic-" + x, Model: "fake-claude-1", Weight: 1, Stream: true, Tools: true, JSONSchema: true})
	}
	snap.Models = append(snap.Models, pool, claudePool)
	snap.Models = append(snap.Models, demoFallback())
	addClouds(&snap, base)
	addAzure(&snap, base)
	addConverse(&snap, base)
	addDemoPrices(&snap)
	return snap
}

// demoFallback is demo-fallback (docs/routing.md "Fallbacks"): its own
// target declares a context window of one token, which no request fits,
// so every request is served by the next model of its chain, demo-gpt,
// and says so (X-Scootgate-Served-Model, the usage event's served_model).
func demoFallback() routesnap.Model {
	return routesnap.Model{Name: "demo-fallback", Fallbacks: []string{"demo-gpt"}, Targets: []routesnap.Target{
		{Backend: "fake-openai", Model: "fake-gpt-small", Weight: 1, Stream: true, Tools: true, JSONSchema: true, ContextWindow: new(1)},
	}}
}

// addClouds adds the cloud-platform demo: the backend fake-bedrock (Claude
// on Amazon Bedrock Runtime, SigV4-signed with the aws credential
// fake-aws), the backends fake-vertex-claude and fake-vertex-gemini (Claude
// and Gemini on Vertex AI, with access tokens minted for the
// gcp_service_account credential fake-gcp), the models
// demo-claude-bedrock, demo-claude-vertex and demo-gemini-vertex on each
// alone, and the pool demo-claude-clouds with one target on each of the
// Anthropic API, Bedrock and Vertex.
func addClouds(snap *routesnap.Snapshot, base string) {
	root := strings.TrimSuffix(base, "/v1") // Bedrock paths start at /model/, Vertex's at /v1/projects/
	snap.Backends = append(snap.Backends, routesnap.Backend{
		ID: "fake-bedrock", Protocol: routesnap.ProtocolAnthropic, Platform: routesnap.PlatformBedrock, Region: "us-east-1",
		BaseURL: root, Credential: "fake-aws", MaxInflightPerNode: demoCap,
		Endpoints: []string{routesnap.EndpointMessages, routesnap.EndpointCountTokens},
	},
		routesnap.Backend{ID: "fake-vertex-claude", Protocol: routesnap.ProtocolAnthropic, Platform: routesnap.PlatformVertex,
			Project: vertexProject, Location: vertexLocation, BaseURL: root, Credential: "fake-gcp", MaxInflightPerNode: demoCap,
			Endpoints: []string{routesnap.EndpointMessages, routesnap.EndpointCountTokens}},
		routesnap.Backend{ID: "fake-vertex-gemini", Protocol: routesnap.ProtocolGemini, Platform: routesnap.PlatformVertex,
			Project: vertexProject, Location: vertexLocation, BaseURL: root, Credential: "fake-gcp", MaxInflightPerNode: demoCap,
			Endpoints: []string{routesnap.EndpointGenerateContent, routesnap.EndpointStreamGenerateContent, routesnap.EndpointGeminiCountTokens}},
	)
	bedrock := routesnap.Target{Backend: "fake-bedrock", Model: "us.anthropic.fake-claude-1:0", Weight: 1, Stream: true, Tools: true, JSONSchema: true}
	vertex := routesnap.Target{Backend: "fake-vertex-claude", Model: "fake-claude-1@20250929", Weight: 1, Stream: true, Tools: true, JSONSchema: true}
	snap.Models = append(snap.Models,
		routesnap.Model{Name: "demo-claude-bedrock", Targets: []routesnap.Target{bedrock}},
		routesnap.Model{Name: "demo-claude-vertex", Targets: []routesnap.Target{vertex}},
		routesnap.Model{Name: "demo-gemini-vertex", Targets: []routesnap.Target{
			{Backend: "fake-vertex-gemini", Model: "fake-gemini-1", Weight: 1, Stream: true, Tools: true, JSONSchema: true},
		}},
		routesnap.Model{Name: "demo-claude-clouds", Targets: []routesnap.Target{
			{Backend: "fake-anthropic", Model: "fake-claude-1", Weight: 1, Stream: true, Tools: true, JSONSchema: true},
			bedrock,
			vertex,
		}})
}

// addConverse adds Amazon Bedrock's Converse API (protocol
// bedrock_converse, docs/api.md "Bedrock Converse"): the backend
// fake-bedrock-converse on the fake's Bedrock Runtime, SigV4-signed with
// the aws credential fake-aws, and the model demo-nova on it, which the
// AWS SDKs' Converse and ConverseStream call at
// /model/demo-nova/converse[-stream].
func addConverse(snap *routesnap.Snapshot, base string) {
	snap.Backends = append(snap.Backends, routesnap.Backend{
		ID: "fake-bedrock-converse", Protocol: routesnap.ProtocolBedrockConverse, Platform: routesnap.PlatformBedrock, Region: "us-east-1",
		BaseURL: strings.TrimSuffix(base, "/v1"), Credential: "fake-aws", MaxInflightPerNode: demoCap,
	})
	snap.Models = append(snap.Models, routesnap.Model{Name: "demo-nova", Targets: []routesnap.Target{
		{Backend: "fake-bedrock-converse", Model: "us.amazon.fake-nova-1:0", Weight: 1, Stream: true, Tools: true},
	}})
}

// demoPrices are the demo models' prices, USD per million tokens
// (docs/routing.md "Prices"): made up, in the shape of real ones, so that
// every usage line shows a cost and a budget on the demo key
// (README "Prices and budgets") has something to count.
var demoPrices = map[string]*routesnap.Price{
	"demo-gpt":         {Input: "2.5", Output: "10", CacheRead: "1.25"},
	"demo-pool":        {Input: "2.5", Output: "10", CacheRead: "1.25"},
	"demo-claude":      {Input: "3", Output: "15", CacheRead: "0.3", CacheWrite: "3.75"},
	"demo-claude-pool": {Input: "3", Output: "15", CacheRead: "0.3", CacheWrite: "3.75"},
	"demo-gemini": {Input: "1.25", Output: "10", CacheRead: "0.125",
		LongContext: &routesnap.PriceTier{AboveInputTokens: 200000, Input: "2.5", Output: "15", CacheRead: "0.25"}},
}

// addDemoPrices gives the demo models' targets their demoPrices.
func addDemoPrices(snap *routesnap.Snapshot) {
	for i := range snap.Models {
		p := demoPrices[snap.Models[i].Name]
		for j := range snap.Models[i].Targets {
			snap.Models[i].Targets[j].Price = p
		}
	}
}

// addAzure adds GPT on Azure OpenAI: the backend fake-azure (the
// deployment surface, api-version 2024-10-21, the api-key credential
// fake-azure) and the model demo-gpt-azure, whose deployment is
// fake-gpt-1 (chat completions, embeddings and responses).
func addAzure(snap *routesnap.Snapshot, base string) {
	snap.Backends = append(snap.Backends, routesnap.Backend{
		ID: "fake-azure", Protocol: routesnap.ProtocolOpenAI, Platform: routesnap.PlatformAzure, APIVersion: "2024-10-21",
		BaseURL:    strings.TrimSuffix(base, "/v1"), // Azure paths start at /openai/
		Credential: "fake-azure", MaxInflightPerNode: demoCap,
		Endpoints: []string{routesnap.EndpointChatCompletions, routesnap.EndpointEmbeddings, routesnap.EndpointResponses},
	})
	snap.Models = append(snap.Models, routesnap.Model{Name: "demo-gpt-azure", Targets: []routesnap.Target{
		{Backend: "fake-azure", Model: "fake-gpt-1", Weight: 1, Stream: true, Tools: true, JSONSchema: true},
	}})
}

// poolSuffixes name the three backends of demo-pool and demo-claude-pool.
var poolSuffixes = []string{"a", "b", "c"}

func devSingles(now time.Time, base string) routesnap.Snapshot {
	return routesnap.Snapshot{
		Schema:      routesnap.Schema,
		Version:     1,
		GeneratedAt: now,
		// The demo backends' caps are far above what a first load test
		// sends (hundreds of concurrent streams); demo-capped shows a cap
		// on a backend of its own.
		Backends: []routesnap.Backend{
			{ID: "fake-openai", Protocol: routesnap.ProtocolOpenAI, BaseURL: base, Credential: "fake-openai", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointChatCompletions, routesnap.EndpointResponses,
					routesnap.EndpointResponsesCompact, routesnap.EndpointResponsesInputTokens, routesnap.EndpointCompletions}},
			{ID: "fake-openai-embed", Protocol: routesnap.ProtocolOpenAI, BaseURL: base, Credential: "fake-openai", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointEmbeddings}},
			{ID: "fake-openai-rerank", Protocol: routesnap.ProtocolOpenAI, BaseURL: base, Credential: "fake-openai", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointRerank}},
			{ID: "fake-openai-audio", Protocol: routesnap.ProtocolOpenAI, BaseURL: base, Credential: "fake-openai", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointAudioSpeech, routesnap.EndpointAudioTranscriptions, routesnap.EndpointAudioTranslations}},
			{ID: "fake-openai-image", Protocol: routesnap.ProtocolOpenAI, BaseURL: base, Credential: "fake-openai", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointImageGenerations, routesnap.EndpointImageEdits}},
			// Realtime sessions (a WebSocket each; schema 2).
			{ID: "fake-openai-realtime", Protocol: routesnap.ProtocolOpenAI, BaseURL: base, Credential: "fake-openai", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointRealtime}},
			{ID: "fake-anthropic", Protocol: routesnap.ProtocolAnthropic, BaseURL: base, Credential: "fake-anthropic", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointMessages, routesnap.EndpointCountTokens}},
			{ID: "fake-openai-capped", Protocol: routesnap.ProtocolOpenAI, BaseURL: base, Credential: "fake-openai", MaxInflightPerNode: cappedCap,
				Endpoints: []string{routesnap.EndpointChatCompletions}},
			// Gemini's base URL ends before "models", at the API version.
			{ID: "fake-gemini", Protocol: routesnap.ProtocolGemini, BaseURL: strings.TrimSuffix(base, "/v1") + "/v1beta", Credential: "fake-gemini", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointGenerateContent, routesnap.EndpointStreamGenerateContent,
					routesnap.EndpointGeminiCountTokens, routesnap.EndpointEmbedContent, routesnap.EndpointBatchEmbedContents}},
			// Gemini Live sessions (a WebSocket each; schema 2).
			{ID: "fake-gemini-live", Protocol: routesnap.ProtocolGemini, BaseURL: strings.TrimSuffix(base, "/v1") + "/v1beta", Credential: "fake-gemini", MaxInflightPerNode: demoCap,
				Endpoints: []string{routesnap.EndpointBidiGenerateContent}},
		},
		Models: []routesnap.Model{
			{Name: "demo-gpt", Targets: []routesnap.Target{
				// docs/routing.md "Context windows": a request asking for
				// more output than 16384 tokens is refused before sending.
				{Backend: "fake-openai", Model: "fake-gpt-1", Weight: 1, Stream: true, Tools: true, JSONSchema: true,
					ContextWindow: new(131072), MaxOutputTokens: new(16384)},
			}},
			{Name: "demo-claude", Targets: []routesnap.Target{
				{Backend: "fake-anthropic", Model: "fake-claude-1", Weight: 1, Stream: true, Tools: true, JSONSchema: true},
			}},
			{Name: "demo-embed", Targets: []routesnap.Target{
				{Backend: "fake-openai-embed", Model: "fake-embedding-1", Weight: 1},
			}},
			{Name: "demo-rerank", Targets: []routesnap.Target{
				{Backend: "fake-openai-rerank", Model: "fake-rerank-1", Weight: 1},
			}},
			{Name: "demo-tts", Targets: []routesnap.Target{
				{Backend: "fake-openai-audio", Model: "fake-tts-1", Weight: 1},
			}},
			{Name: "demo-whisper", Targets: []routesnap.Target{
				{Backend: "fake-openai-audio", Model: "fake-whisper-1", Weight: 1, Stream: true},
			}},
			{Name: "demo-image", Targets: []routesnap.Target{
				{Backend: "fake-openai-image", Model: "fake-image-1", Weight: 1, Stream: true},
			}},
			{Name: "demo-realtime", Targets: []routesnap.Target{
				{Backend: "fake-openai-realtime", Model: "fake-realtime-1", Weight: 1, Stream: true},
			}},
			{Name: "demo-gemini", Targets: []routesnap.Target{
				{Backend: "fake-gemini", Model: "fake-gemini-1", Weight: 1, Stream: true, Tools: true, JSONSchema: true},
			}},
			{Name: "demo-gemini-live", Targets: []routesnap.Target{
				{Backend: "fake-gemini-live", Model: "fake-gemini-live-1", Weight: 1, Stream: true},
			}},
			{Name: "demo-capped", Targets: []routesnap.Target{
				{Backend: "fake-openai-capped", Model: "fake-gpt-1", Weight: 1, Stream: true, Tools: true, JSONSchema: true},
			}},
			// Patterns (docs/routing.md "Aliases and patterns"): Claude
			// Code's and Codex CLI's own model names answer with no model
			// setting; the fake provider sees the name as asked.
			{Name: "claude-*", Targets: []routesnap.Target{
				{Backend: "fake-anthropic", Model: "claude-*", Weight: 1, Stream: true, Tools: true, JSONSchema: true},
			}},
			{Name: "gpt-*", Targets: []routesnap.Target{
				{Backend: "fake-openai", Model: "gpt-*", Weight: 1, Stream: true, Tools: true, JSONSchema: true},
			}},
		},
	}
}

func devAuthz(now time.Time) authsnap.Snapshot {
	return authsnap.Snapshot{
		Schema:      authsnap.Schema,
		Version:     1,
		GeneratedAt: now,
		Keys: []authsnap.Key{{
			KeyID: "demo", TenantID: "demo-tenant", Digest: authsnap.Digest(DemoKey),
		}},
	}
}

// writeJSON writes v indented (people edit these files) and atomically:
// the control plane never serves half of it.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// banner is what printBanner shows; the control-plane lines come from the
// loaded config, so they cannot drift from what the node polls.
type banner struct {
	API, Health         string // listener addresses
	ConfigDir           string
	SnapshotDir         string
	RoutesURL, AuthzURL string
	Poll                time.Duration
}

func printBanner(b banner) {
	fmt.Printf(`
ScootGate dev stack is up.
  node API      http://%[1]s   (models: demo-gpt = OpenAI chat + responses + completions,
                demo-embed = OpenAI embeddings, demo-rerank = rerank,
                demo-tts = speech, demo-whisper = transcriptions
                + translations, demo-image = images, demo-realtime = realtime sessions (WebSocket
                /v1/realtime?model=demo-realtime), demo-claude = Anthropic messages + count_tokens,
                demo-gemini = every Gemini method (/v1beta/models/demo-gemini:generateContent, …),
                demo-gemini-live = Gemini Live sessions (WebSocket /ws/google.ai.generativelanguage.
                v1beta.GenerativeService.BidiGenerateContent, setup naming models/demo-gemini-live);
                demo-pool and demo-claude-pool: the same over three backends each, with affinity;
                demo-fallback: served by its fallback demo-gpt, whose window is 131072 tokens;
                demo-claude-bedrock = Claude on Amazon Bedrock (SigV4, event stream),
                demo-claude-vertex, demo-gemini-vertex = Claude and Gemini on Vertex AI
                (minted service-account tokens), demo-claude-clouds = one pool over
                the Anthropic API, Bedrock and Vertex;
                demo-gpt-azure = GPT on Azure OpenAI (a deployment, api-key);
                demo-nova = Bedrock's Converse API (/model/demo-nova/converse, -stream);
                the patterns claude-* and gpt-*: any such name, sent to the provider as asked;
                each backend takes %[12]d concurrent requests, demo-capped only %[13]d)
  health        http://%[2]s/readyz
  fake provider http://%[3]s   reached only through SOCKS5 %[4]s
  control plane %[7]s
                %[8]s
                serving %[9]s/ (rewritten at every start)
  config        %[5]s/dev.toml
  usage events  MQTT %[11]s (embedded broker); each delivered event is printed below

Try:
  curl -s http://%[1]s/v1/chat/completions -H 'Authorization: Bearer %[6]s' \
    -H 'Content-Type: application/json' \
    -d '{"model":"demo-gpt","messages":[{"role":"user","content":"hello"}]}'

  curl -sN http://%[1]s/v1/messages -H 'x-api-key: %[6]s' -H 'anthropic-version: 2023-06-01' \
    -H 'Content-Type: application/json' \
    -d '{"model":"demo-claude","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}'

  curl -sN 'http://%[1]s/v1beta/models/demo-gemini:streamGenerateContent?alt=sse' \
    -H 'x-goog-api-key: %[6]s' -H 'Content-Type: application/json' \
    -d '{"contents":[{"role":"user","parts":[{"text":"hello"}]}]}'

  curl -sN http://%[1]s/v1/responses -H 'Authorization: Bearer %[6]s' \
    -H 'Content-Type: application/json' -d '{"model":"demo-gpt","stream":true,"input":"hello"}'

  Affinity: the same prompt_cache_key lands on the same backend of demo-pool
  (each usage event below names its backend and "placement affinity"):
  curl -s http://%[1]s/v1/chat/completions -H 'Authorization: Bearer %[6]s' \
    -H 'Content-Type: application/json' \
    -d '{"model":"demo-pool","prompt_cache_key":"my-session","messages":[{"role":"user","content":"hello"}]}'

  More (embeddings, count_tokens, models, Codex CLI, Claude Code): README.md

Publish a new snapshot: edit %[9]s/routes.json (or authz.json),
raise its "version" and save. The node long-polls the control plane, which
answers as soon as the file changes: the node logs "snapshot applied" within
a moment (after an error it waits poll_interval, %[10]s, before asking again). A document that does not validate is rejected whole (the
log says why) and the previous one keeps serving. Validate before publishing:
  go run ./cmd/scootgate check --routes %[9]s/routes.json

Fault directives in the last user message, e.g. "[[status=429]]", "[[delay_ms=500]]",
"[[cut=after_events:2]]". Ctrl-C drains and stops.

`, b.API, b.Health, providerAddr, socksAddr, b.ConfigDir, DemoKey, b.RoutesURL, b.AuthzURL, b.SnapshotDir, b.Poll, brokerAddr, demoCap, cappedCap)
}
