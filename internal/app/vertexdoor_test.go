package app

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"cloud.google.com/go/auth"
	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/genai"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Vertex AI's own clients pointed at a whole node (docs/api.md "Cloud
// client paths"): anthropic-sdk-go/vertex and google.golang.org/genai
// with its Vertex backend, project-scoped and in express mode. The node's
// key stands where they put a Google credential: an access token
// (Authorization: Bearer) or express mode's API key (x-goog-api-key).
// Each asks for a model served on Vertex (the fake Vertex, with the
// node's own minted tokens) and for one served on the platform's
// first-party API.

// vertexPublicModel is a public model named the way Vertex names Claude
// (a "@" version) and holding a "/", which the SDK sends percent-encoded.
const vertexPublicModel = "team/claude-sonnet-4@20250514"

// staticToken is a Google token source that always holds the node's key.
type staticToken string

func (s staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: string(s), Type: "Bearer"}, nil
}

// vertexAnthropicClient is anthropic-sdk-go's Vertex client pointed at the
// node, with a token source whose access token is key.
func vertexAnthropicClient(t *testing.T, s *stack, key string) anthropic.Client {
	t.Helper()
	creds := &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: key})}
	return anthropic.NewClient(
		vertex.WithCredentials(t.Context(), "us-east5", "my-project", creds),
		option.WithBaseURL(s.api+"/"),
		option.WithMaxRetries(0),
	)
}

// vertexGenaiClient is genai's Vertex client pointed at the node: with
// express true it is configured by the environment variables README gives
// (Vertex mode, an API key, the base URL) and sends key as its API key;
// otherwise it sends key as the access token of its credentials, under a
// project and location.
func vertexGenaiClient(t *testing.T, s *stack, key string, express bool) *genai.Client {
	t.Helper()
	cfg := &genai.ClientConfig{}
	for _, v := range []string{"GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION", "GOOGLE_GEMINI_BASE_URL"} {
		t.Setenv(v, "")
	}
	if express {
		t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
		t.Setenv("GOOGLE_API_KEY", key)
		t.Setenv("GOOGLE_VERTEX_BASE_URL", s.api+"/")
	} else {
		cfg.Backend, cfg.HTTPOptions.BaseURL = genai.BackendVertexAI, s.api+"/"
		cfg.Project, cfg.Location = "my-project", "us-central1"
		cfg.Credentials = auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken(key)})
	}
	c, err := genai.NewClient(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestVertexClientSDKs: both SDKs answer, whole and streamed, for models on
// Vertex and on first-party APIs; the provider never sees the client's
// key or its project; every call is one usage event.
func TestVertexClientSDKs(t *testing.T) {
	s := startStack(t, stackOptions{vertex: true, gemini: true, extraTOML: `
[models."` + vertexPublicModel + `"]
[[models."` + vertexPublicModel + `".targets]]
backend = "an"
model = "` + anthProvModel + `"
weight = 1
stream = true
`})
	ctx := t.Context()
	calls := 0
	ac := vertexAnthropicClient(t, s, clientKey)
	for _, tt := range []struct{ model, provPath string }{
		{vertexModel, vertexAnthropicPath + ":rawPredict"},
		{anthropicModel, "/v1/messages"},
		{vertexPublicModel, "/v1/messages"},
	} {
		t.Run("claude "+tt.model, func(t *testing.T) {
			p := anthropicParams("hello vertex client")
			p.Model = anthropic.Model(tt.model)
			msg, err := ac.Messages.New(ctx, p)
			calls++
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got := msg.Content[0].Text; got != "echo: hello vertex client" {
				t.Errorf("content %q", got)
			}
			if last := lastProvRequest(t, s); last.Path != tt.provPath || strings.Contains(string(last.Body), "my-project") {
				t.Errorf("provider saw %s: %s", last.Path, last.Body)
			}

			st := ac.Messages.NewStreaming(ctx, p)
			calls++
			var text strings.Builder
			for st.Next() {
				if d, ok := st.Current().AsAny().(anthropic.ContentBlockDeltaEvent); ok {
					text.WriteString(d.Delta.Text)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if text.String() != "echo: hello vertex client" {
				t.Errorf("streamed %q", text.String())
			}
			if last := lastProvRequest(t, s); !last.Stream {
				t.Errorf("provider saw %s without a stream", last.Path)
			}
		})
	}
	t.Run("claude count tokens", func(t *testing.T) {
		res, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    anthropicModel,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("four words right here"))},
		})
		calls++
		if err != nil {
			t.Fatalf("CountTokens: %v", err)
		}
		if last := lastProvRequest(t, s); res.InputTokens == 0 || last.Path != "/v1/messages/count_tokens" || last.Model != anthProvModel {
			t.Errorf("input tokens %d; provider saw %s for %q", res.InputTokens, last.Path, last.Model)
		}
	})
	t.Run("claude error in Google's shape", func(t *testing.T) {
		p := anthropicParams("x")
		p.Model = "no-such-model"
		_, err := ac.Messages.New(ctx, p)
		calls++ // refused: no usage event, counted below
		var aerr *anthropic.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound || !strings.Contains(aerr.RawJSON(), `"status":"NOT_FOUND"`) {
			t.Errorf("error %v, want a 404 in Google's shape", err)
		}
	})

	for _, express := range []bool{false, true} {
		name := "project"
		if express {
			name = "express"
		}
		gc := vertexGenaiClient(t, s, clientKey, express)
		for _, tt := range []struct{ model, provPath string }{
			{vertexGeminiModel, vertexGeminiPath},
			{geminiModel, "/v1beta/models/" + geminiProvModel},
		} {
			t.Run("gemini "+name+" "+tt.model, func(t *testing.T) {
				resp, err := gc.Models.GenerateContent(ctx, tt.model, genai.Text("one two three"), nil)
				calls++
				if err != nil {
					t.Fatalf("GenerateContent: %v", err)
				}
				if !strings.Contains(resp.Text(), "one two three") {
					t.Errorf("text %q", resp.Text())
				}
				if last := lastProvRequest(t, s); last.Path != tt.provPath+":generateContent" {
					t.Errorf("provider path %q", last.Path)
				}
				var text strings.Builder
				for chunk, err := range gc.Models.GenerateContentStream(ctx, tt.model, genai.Text("stream me please"), nil) {
					if err != nil {
						t.Fatalf("GenerateContentStream: %v", err)
					}
					text.WriteString(chunk.Text())
				}
				calls++
				if !strings.Contains(text.String(), "stream me please") {
					t.Errorf("streamed %q", text.String())
				}
				if last := lastProvRequest(t, s); last.Path != tt.provPath+":streamGenerateContent" || !last.Stream {
					t.Errorf("provider path %q stream %v", last.Path, last.Stream)
				}
				if tt.model == vertexGeminiModel {
					return // the stack's Vertex backend serves no countTokens
				}
				ct, err := gc.Models.CountTokens(ctx, tt.model, genai.Text("four words right here"), nil)
				calls++
				if err != nil {
					t.Fatalf("CountTokens: %v", err)
				}
				if last := lastProvRequest(t, s); ct.TotalTokens == 0 || last.Path != tt.provPath+":countTokens" {
					t.Errorf("total tokens %d; provider path %q", ct.TotalTokens, last.Path)
				}
			})
		}
	}

	for _, r := range s.prov.Requests() {
		for _, k := range []string{"Authorization", "X-Goog-Api-Key", "X-Api-Key"} {
			if strings.Contains(r.Header.Get(k), clientKey) {
				t.Errorf("the client's key reached the provider in %s", k)
			}
		}
	}
	s.shutdown()
	// The clients used the paths they use against Vertex AI.
	for _, path := range []string{
		"/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/" + vertexModel + ":streamRawPredict",
		"/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict",
		"/v1beta1/projects/my-project/locations/us-central1/publishers/google/models/" + geminiModel + ":countTokens",
		"/v1beta1/publishers/google/models/" + vertexGeminiModel + ":streamGenerateContent",
	} {
		s.logs.mustContain(t, `"path":"`+path+`"`)
	}
	events := s.outboxEvents(t)
	if len(events) != calls-1 { // the refused model is no attempt
		t.Errorf("%d usage events for %d calls that reached a target", len(events), calls-1)
	}
	for _, ev := range events {
		if ev.Protocol != usageevent.ProtocolAnthropic && ev.Protocol != usageevent.ProtocolGemini || ev.FailureStage != "" {
			t.Errorf("event %s %s failed at %q", ev.Protocol, ev.Endpoint, ev.FailureStage)
		}
	}
}
