package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// GPT on Azure OpenAI, end to end: the official OpenAI SDK asks the node
// for a model whose preferred target is an Azure deployment; the fake
// provider serves Azure's paths, requires the api-version on the
// deployment surface and the api-key.
const (
	azureModel      = "gpt-clouds"
	azureDeployment = "gpt-4o-prod"
	azureKey        = "azure-key-canary-3f9c"
	azureVersion    = "2024-10-21"
)

func TestAzureSDK(t *testing.T) {
	for _, tc := range []struct {
		version, chatPath, respPath string
	}{
		{azureVersion, "/openai/deployments/" + azureDeployment + "/chat/completions", "/openai/responses"},
		{"v1", "/openai/v1/chat/completions", "/openai/v1/responses"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			s := startStack(t, stackOptions{egress: "socks", azure: true, azureVersion: tc.version})
			runAzureSuite(t, s, openAIClient(s, clientKey), tc.chatPath, tc.respPath)
		})
	}
}

func runAzureSuite(t *testing.T, s *stack, oc openai.Client, chatPath, respPath string) {
	ctx := t.Context()
	checkAzure := func(t *testing.T, path string) fakeprovider.Request {
		t.Helper()
		last := lastProvRequest(t, s)
		if !last.Azure || last.Path != path {
			t.Fatalf("provider saw %s (azure %v), want %s", last.Path, last.Azure, path)
		}
		if last.Header.Get("Api-Key") != azureKey || last.Header.Get("Authorization") != "" {
			t.Error("the credential did not go as api-key alone")
		}
		var body struct{ Model string }
		if err := json.Unmarshal(last.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Model != azureDeployment {
			t.Errorf("body model %q, want the deployment %q", body.Model, azureDeployment)
		}
		return last
	}
	t.Run("chat", func(t *testing.T) {
		p := openAIParams("hello azure")
		p.Model = azureModel
		c, err := oc.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := c.Choices[0].Message.Content; got != "echo: hello azure" {
			t.Errorf("content = %q", got)
		}
		checkAzure(t, chatPath)
	})
	t.Run("chat stream", func(t *testing.T) {
		p := openAIParams("hello stream [[chunks=4]]")
		p.Model = azureModel
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		st := oc.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if got := acc.Choices[0].Message.Content; got != "echo: hello stream" {
			t.Errorf("content = %q", got)
		}
		if acc.Usage.TotalTokens == 0 {
			t.Error("no usage")
		}
		if last := checkAzure(t, chatPath); !last.Stream {
			t.Error("the provider request does not stream")
		}
	})
	t.Run("responses", func(t *testing.T) {
		r, err := oc.Responses.New(ctx, responses.ResponseNewParams{
			Model: azureModel,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello responses")},
		})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if !strings.Contains(r.OutputText(), "hello responses") {
			t.Errorf("output = %q", r.OutputText())
		}
		checkAzure(t, respPath)
	})
}

// TestAzureAnswers: Azure's error answers are read as OpenAI's. A 400
// (content filter) is the request's and leaves the backend in use; a 429
// is relayed and cools it, and a 401 disables it (a 502 for the client), so the next
// request goes to the OpenAI target.
func TestAzureAnswers(t *testing.T) {
	var mu sync.Mutex
	var current *fakeprovider.Behaviour
	script := func(r fakeprovider.Request) *fakeprovider.Behaviour {
		mu.Lock()
		defer mu.Unlock()
		if !r.Azure || current == nil {
			return nil
		}
		b := *current
		return &b
	}
	set := func(b *fakeprovider.Behaviour) {
		mu.Lock()
		current = b
		mu.Unlock()
	}
	for _, tc := range []struct {
		name       string
		b          fakeprovider.Behaviour
		wantStatus int
		nextAzure  bool
	}{
		{"content filter", fakeprovider.Behaviour{Status: 400, ErrorMessage: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy."}, 400, true},
		{"throttled", fakeprovider.Behaviour{Status: 429, RetryAfter: time.Minute}, 429, false},
		{"unauthorised", fakeprovider.Behaviour{Status: 401}, 502, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startStack(t, stackOptions{azure: true, azureVersion: azureVersion, script: script})
			set(&tc.b)
			r := s.do(http.MethodPost, "/v1/chat/completions", map[string]string{"Authorization": "Bearer " + clientKey},
				`{"model":"`+azureModel+`","messages":[{"role":"user","content":"hi"}]}`)
			if r.status != tc.wantStatus {
				t.Fatalf("status %d body %s, want %d", r.status, r.body, tc.wantStatus)
			}
			set(nil)
			r = s.do(http.MethodPost, "/v1/chat/completions", map[string]string{"Authorization": "Bearer " + clientKey},
				`{"model":"`+azureModel+`","messages":[{"role":"user","content":"hi"}]}`)
			if r.status != http.StatusOK {
				t.Fatalf("next request: status %d body %s", r.status, r.body)
			}
			if last := lastProvRequest(t, s); last.Azure != tc.nextAzure {
				t.Errorf("next request to azure: %v, want %v", last.Azure, tc.nextAzure)
			}
			if strings.Contains(s.logs.String(), azureKey) {
				t.Error("the api-key appeared in the logs")
			}
		})
	}
}

// TestAzureUsageEvent: the usage event of an Azure attempt names the
// platform.
func TestAzureUsageEvent(t *testing.T) {
	s := startStack(t, stackOptions{azure: true, azureVersion: azureVersion})
	p := openAIParams("hello")
	p.Model = azureModel
	oc := openAIClient(s, clientKey)
	if _, err := oc.Chat.Completions.New(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	s.shutdown()
	var ev *usageevent.Event
	for _, e := range s.outboxEvents(t) {
		if e.Backend == "az" {
			ev = e
		}
	}
	if ev == nil {
		t.Fatal("no event of the Azure backend")
	}
	if ev.Platform != usageevent.PlatformAzure || ev.Region != "" {
		t.Errorf("platform %q region %q, want azure and no region", ev.Platform, ev.Region)
	}
}

// azureClient is the official OpenAI SDK configured for Azure OpenAI with
// the node as the resource's endpoint: deployment paths, api-version,
// the client key as api-key.
func azureClient(s *stack, key, version string) openai.Client {
	return openai.NewClient(
		azure.WithEndpoint(s.api, version),
		azure.WithAPIKey(key),
		azure.WithUnsafeAllowHTTP(), // the test node listens on loopback without TLS
		ooption.WithMaxRetries(0),
		ooption.WithRequestTimeout(20*time.Second),
	)
}

// TestAzureClientPaths: an application built on the Azure OpenAI client
// uses the node as its Azure resource. Its deployment paths reach the
// Azure target as they reach it from OpenAI's own paths, and a model whose
// target is OpenAI's own API is served through them too.
func TestAzureClientPaths(t *testing.T) {
	s := startStack(t, stackOptions{egress: "socks", azure: true, azureVersion: azureVersion})
	runAzureSuite(t, s, azureClient(s, clientKey, "2025-04-01-preview"),
		"/openai/deployments/"+azureDeployment+"/chat/completions", "/openai/responses")

	t.Run("first-party target", func(t *testing.T) {
		p := openAIParams("hello first party")
		p.Model = openAIModel
		oc := azureClient(s, clientKey, azureVersion)
		c, err := oc.Chat.Completions.New(t.Context(), p)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := c.Choices[0].Message.Content; got != "echo: hello first party" {
			t.Errorf("content = %q", got)
		}
		if last := lastProvRequest(t, s); last.Azure || last.Model != openAIProvModel {
			t.Errorf("provider saw %s for %q (azure %v), want OpenAI's path for %q", last.Path, last.Model, last.Azure, openAIProvModel)
		}
	})
	s.shutdown()
	if n := len(s.outboxEvents(t)); n != 4 {
		t.Errorf("%d usage events, want one per request (4)", n)
	}
}

// TestAzureClientPathRefusals: what an Azure path cannot serve is refused
// before anything is sent, in OpenAI's shape.
func TestAzureClientPathRefusals(t *testing.T) {
	s := startStack(t, stackOptions{azure: true, azureVersion: azureVersion})
	key := map[string]string{"Api-Key": clientKey}
	chat := `{"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"no such deployment", "/openai/deployments/nope/chat/completions?api-version=2024-10-21", chat, 404, "model_not_found"},
		{"body names another model", "/openai/deployments/" + openAIModel + "/chat/completions?api-version=2024-10-21", `{"model":"` + azureModel + `","messages":[]}`, 400, "invalid_model"},
		{"api-version twice", "/openai/deployments/" + openAIModel + "/chat/completions?api-version=2024-10-21&api-version=2024-06-01", chat, 400, "invalid_api_version"},
		{"api-version not a version", "/openai/deployments/" + openAIModel + "/chat/completions?api-version=yesterday", chat, 400, "invalid_api_version"},
		{"encoded deployment", "/openai/deployments/demo%2Dgpt/chat/completions?api-version=2024-10-21", chat, 400, "invalid_model"},
		{"no key", "/openai/v1/chat/completions", `{"model":"` + openAIModel + `","messages":[]}`, 401, "invalid_api_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.prov.RequestCount()
			h := key
			if tc.status == 401 {
				h = nil
			}
			r := s.do(http.MethodPost, tc.path, h, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d body %s, want %d", r.status, r.body, tc.status)
			}
			var doc struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(r.body), &doc); err != nil || doc.Error.Code != tc.code {
				t.Errorf("body %s, want OpenAI's error with code %q", r.body, tc.code)
			}
			if n := s.prov.RequestCount(); n != before {
				t.Errorf("the provider saw %d requests", n-before)
			}
		})
	}
	// The v1 surface and a deployment path without a model in the body.
	for _, path := range []string{"/openai/v1/chat/completions", "/openai/deployments/" + openAIModel + "/chat/completions?api-version=2024-10-21"} {
		body := chat
		if strings.HasPrefix(path, "/openai/v1/") {
			body = `{"model":"` + openAIModel + `","messages":[{"role":"user","content":"hi"}]}`
		}
		if r := s.do(http.MethodPost, path, key, body); r.status != http.StatusOK {
			t.Errorf("%s: status %d body %s", path, r.status, r.body)
		} else if last := lastProvRequest(t, s); last.Model != openAIProvModel {
			t.Errorf("%s: provider model %q, want %q", path, last.Model, openAIProvModel)
		}
	}
}
