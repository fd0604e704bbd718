package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/scootgate/scootgate/internal/config"
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
	env := map[string]string{"SCOOTGATE_DEV_OPENAI_KEY": "k1", "SCOOTGATE_DEV_ANTHROPIC_KEY": "k2"}
	if _, err := config.Parse(devConfig, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, os.ReadFile); err != nil {
		t.Fatalf("embedded dev config does not parse: %v", err)
	}
}
