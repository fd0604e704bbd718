package openai

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
)

func TestAzureURL(t *testing.T) {
	dated := &url.URL{Scheme: "https", Host: "res.openai.azure.com", RawQuery: "api-version=2024-10-21"}
	v1 := &url.URL{Scheme: "https", Host: "res.openai.azure.com", RawQuery: "api-version=v1"}
	tests := []struct {
		name  string
		spec  *provider.Spec
		base  *url.URL
		model string
		want  string
	}{
		{"chat on deployments", Chat, dated, "gpt-4o-prod", "https://res.openai.azure.com/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"},
		{"completions on deployments", Completions, dated, "gpt-35", "https://res.openai.azure.com/openai/deployments/gpt-35/completions?api-version=2024-10-21"},
		{"embeddings on deployments", Embeddings, dated, "emb", "https://res.openai.azure.com/openai/deployments/emb/embeddings?api-version=2024-10-21"},
		{"responses with a version", Responses, dated, "gpt-4o-prod", "https://res.openai.azure.com/openai/responses?api-version=2024-10-21"},
		{"deployment escaped", Chat, dated, "a b/c", "https://res.openai.azure.com/openai/deployments/a%20b%2Fc/chat/completions?api-version=2024-10-21"},
		{"chat on v1", Chat, v1, "gpt-4o-prod", "https://res.openai.azure.com/openai/v1/chat/completions"},
		{"responses on v1", Responses, v1, "gpt-4o-prod", "https://res.openai.azure.com/openai/v1/responses"},
		{"embeddings on v1", Embeddings, v1, "emb", "https://res.openai.azure.com/openai/v1/embeddings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.spec.Envelopes[provider.Azure]
			if env == nil {
				t.Fatal("no azure envelope")
			}
			u, err := env.URL(tt.base, tt.model, true)
			if err != nil {
				t.Fatal(err)
			}
			if got := u.String(); got != tt.want {
				t.Errorf("URL = %s, want %s", got, tt.want)
			}
			if env.Body != nil {
				t.Error("the azure body must be the protocol's own rewrite")
			}
		})
	}
	if _, err := Chat.Envelopes[provider.Azure].URL(dated, "", false); err == nil {
		t.Error("an empty deployment made a URL")
	}
	if _, err := Chat.Envelopes[provider.Azure].URL(&url.URL{Scheme: "https", Host: "res.openai.azure.com"}, "d", false); err == nil {
		t.Error("a base without an api-version made a URL")
	}
}

func TestAzureCarries(t *testing.T) {
	for _, s := range API.Endpoints {
		carried := s.Envelopes[provider.Azure] != nil
		want := s == Chat || s == Completions || s == Embeddings || s == Responses
		if carried != want {
			t.Errorf("%s carried on azure: %v, want %v", s.Endpoint, carried, want)
		}
	}
}

func TestAzureHeader(t *testing.T) {
	h := Header(http.Header{"User-Agent": {"x"}}, "k1")
	azureHeader(h, "k1")
	if h.Get("Authorization") != "" || h.Get("Api-Key") != "k1" {
		t.Errorf("static credential: %v", h)
	}
	h = Header(http.Header{}, "")
	azureHeader(h, "")
	if h.Get("Authorization") != "" || h.Get("Api-Key") != "" {
		t.Errorf("no credential: %v", h)
	}
}
