package routes

import (
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// TestCompileAzure: an azure backend's base carries its api-version for
// the envelope, and an endpoint Azure OpenAI is not carried on is refused
// at load with the backend named.
func TestCompileAzure(t *testing.T) {
	az := routesnap.Backend{ID: "az", Protocol: "openai", Platform: "azure", APIVersion: "2024-10-21",
		BaseURL: "https://res.example/", Credential: "c", MaxInflightPerNode: 3,
		Endpoints: []string{"chat_completions", "embeddings", "completions", "responses"}}
	ms := []routesnap.Model{{Name: "gpt", Targets: []routesnap.Target{{Backend: "az", Model: "dep", Weight: 1}}}}
	tab, err := Compile([]routesnap.Backend{az}, ms, testCreds, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := tab.Entry("gpt")
	b := m.Pools[provider.Chat][0].Backend
	if b.Platform != provider.Azure || b.PlatformName != "azure" || b.Region != "" {
		t.Errorf("platform %v %q region %q", b.Platform, b.PlatformName, b.Region)
	}
	if got := b.Base.String(); got != "https://res.example?api-version=2024-10-21" {
		t.Errorf("base = %s", got)
	}

	for _, e := range []string{"audio_speech", "rerank", "responses_compact", "image_edits"} {
		bad := az
		bad.Endpoints = []string{"chat_completions", e}
		_, err := Compile([]routesnap.Backend{bad}, ms, testCreds, upstream.NewRegistry(upstream.Options{}))
		if err == nil || !strings.Contains(err.Error(), `backend "az"`) || !strings.Contains(err.Error(), "platform azure") {
			t.Errorf("endpoint %s: err = %v, want a refusal naming the backend", e, err)
		}
	}
}
