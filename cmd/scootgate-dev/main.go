// Command scootgate-dev is the `make run` demo: in one process it starts a
// fake OpenAI-and-Anthropic provider, a loopback SOCKS5 egress proxy and a
// ScootGate node on the embedded dev config, then prints curl lines that
// work with the demo key. It is a development tool: the node binary
// (cmd/scootgate) never links the fake provider or the proxies.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/scootgate/scootgate/internal/app"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

//go:embed dev.toml
var devConfig []byte

// DemoKey is the client key the demo accepts. It is a public, documented
// development key; its digest is what the demo authorization snapshot holds.
const DemoKey = "sk-scootgate-demo"

const (
	providerAddr = "127.0.0.1:18080"
	socksAddr    = "127.0.0.1:11090"
	// The fake provider checks these; the node reads them from the env,
	// like real provider keys.
	fakeOpenAIKey    = "fake-openai-provider-key"
	fakeAnthropicKey = "fake-anthropic-provider-key"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scootgate-dev:", err)
		os.Exit(1)
	}
}

func run() error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	prov := fakeprovider.New(fakeprovider.Options{OpenAIKey: fakeOpenAIKey, AnthropicKey: fakeAnthropicKey})
	if _, err := prov.Start(providerAddr); err != nil {
		return fmt.Errorf("fake provider on %s: %w", providerAddr, err)
	}
	defer prov.Close()
	socks, _, err := socks5proxy.Listen(socksAddr, socks5proxy.Options{})
	if err != nil {
		return fmt.Errorf("socks5 proxy on %s: %w", socksAddr, err)
	}
	defer socks.Close()

	dir, err := os.MkdirTemp("", "scootgate-dev-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgPath := filepath.Join(dir, "dev.toml")
	if err := os.WriteFile(cfgPath, devConfig, 0o600); err != nil {
		return err
	}
	if err := writeAuthz(filepath.Join(dir, "dev-authz.json")); err != nil {
		return err
	}
	os.Setenv("SCOOTGATE_DEV_OPENAI_KEY", fakeOpenAIKey)
	os.Setenv("SCOOTGATE_DEV_ANTHROPIC_KEY", fakeAnthropicKey)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	return app.Run(ctx, cfg, app.Options{
		Logger:  log,
		BaseDir: dir,
		Listening: func(api, health net.Addr) {
			printBanner(api.String(), health.String(), dir)
		},
	})
}

func writeAuthz(path string) error {
	doc := authsnap.Snapshot{
		Schema:      authsnap.Schema,
		Version:     1,
		GeneratedAt: time.Now().UTC().Truncate(time.Second),
		Keys: []authsnap.Key{{
			KeyID: "demo", TenantID: "demo-tenant", Digest: authsnap.Digest(DemoKey),
		}},
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func printBanner(api, health, dir string) {
	fmt.Printf(`
ScootGate dev stack is up.
  node API      http://%[1]s   (models: demo-gpt = OpenAI, demo-claude = Anthropic)
  health        http://%[2]s/readyz
  fake provider http://%[3]s   reached only through SOCKS5 %[4]s
  config        %[5]s/dev.toml

Try:
  curl -s http://%[1]s/v1/chat/completions -H 'Authorization: Bearer %[6]s' \
    -H 'Content-Type: application/json' \
    -d '{"model":"demo-gpt","messages":[{"role":"user","content":"hello"}]}'

  curl -sN http://%[1]s/v1/messages -H 'x-api-key: %[6]s' -H 'anthropic-version: 2023-06-01' \
    -H 'Content-Type: application/json' \
    -d '{"model":"demo-claude","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}'

Fault directives in the last user message, e.g. "[[status=429]]", "[[delay_ms=500]]",
"[[cut=after_events:2]]". Ctrl-C drains and stops.

`, api, health, providerAddr, socksAddr, dir, DemoKey)
}
