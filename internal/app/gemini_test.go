package app

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/genai"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// geminiClient is Google's Gen AI SDK for Go pointed at the node, with the
// client key as the SDK sends it (x-goog-api-key).
func geminiClient(t *testing.T, s *stack, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{},
		HTTPOptions: genai.HTTPOptions{BaseURL: s.api + "/", APIVersion: "v1beta"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGeminiSDK: Google's Gen AI SDK for Go works through the node
// unchanged: generate, stream, count tokens, embed (one and a batch), get
// and list models, and errors in Google's shape. The provider sees its own
// model in the path, its own key, never the client's, and one usage event
// per call lands in the outbox with the usage the SDK saw.
func TestGeminiSDK(t *testing.T) {
	runGeminiSDKSuite(t, startStack(t, stackOptions{gemini: true}))
}

// TestGeminiSDKThroughDante runs the Gemini SDK suite with Debian's
// dante-server as the SOCKS5 egress proxy.
func TestGeminiSDKThroughDante(t *testing.T) {
	addr := requireDaemon(t, "SCOOTGATE_DANTE_ADDR", "dante-server (SOCKS5)")
	runGeminiSDKSuite(t, startStack(t, stackOptions{gemini: true, proxyURL: "socks5://" + addr}))
}

// TestGeminiSDKThroughTinyproxy runs the Gemini SDK suite with Debian's
// tinyproxy as the HTTP CONNECT egress proxy, with Basic auth.
func TestGeminiSDKThroughTinyproxy(t *testing.T) {
	u := requireDaemon(t, "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)")
	runGeminiSDKSuite(t, startStack(t, stackOptions{gemini: true, proxyURL: u}))
}

// runGeminiSDKSuite is TestGeminiSDK's body against the stack s, which it
// shuts down.
func runGeminiSDKSuite(t *testing.T, s *stack) {
	t.Helper()
	c := geminiClient(t, s, clientKey)
	ctx := t.Context()

	resp, err := c.Models.GenerateContent(ctx, geminiModel, genai.Text("one two three"), nil)
	if err != nil {
		t.Fatalf("GenerateContent: %v", err)
	}
	if got := resp.Text(); !strings.Contains(got, "one two three") {
		t.Errorf("GenerateContent text %q", got)
	}
	if resp.UsageMetadata == nil || resp.UsageMetadata.PromptTokenCount != 3 {
		t.Errorf("GenerateContent usage %+v", resp.UsageMetadata)
	}

	var text strings.Builder
	chunks := 0
	for chunk, err := range c.Models.GenerateContentStream(ctx, geminiModel, genai.Text("stream me please"), nil) {
		if err != nil {
			t.Fatalf("GenerateContentStream: %v", err)
		}
		chunks++
		text.WriteString(chunk.Text())
	}
	if chunks < 2 || !strings.Contains(text.String(), "stream me please") {
		t.Errorf("stream: %d chunks, text %q", chunks, text.String())
	}

	count, err := c.Models.CountTokens(ctx, geminiModel, genai.Text("four words right here"), nil)
	if err != nil || count.TotalTokens != 4 {
		t.Fatalf("CountTokens = %+v, %v", count, err)
	}
	one, err := c.Models.EmbedContent(ctx, geminiModel, genai.Text("embed this"), nil)
	if err != nil || len(one.Embeddings) != 1 || len(one.Embeddings[0].Values) == 0 {
		t.Fatalf("EmbedContent = %+v, %v", one, err)
	}
	two, err := c.Models.EmbedContent(ctx, geminiModel, []*genai.Content{genai.NewContentFromText("a", genai.RoleUser), genai.NewContentFromText("b", genai.RoleUser)}, nil)
	if err != nil || len(two.Embeddings) != 2 {
		t.Fatalf("EmbedContent (batch) = %+v, %v", two, err)
	}

	// The Go SDK embeds through batchEmbedContents even for one content;
	// embedContent as other clients send it, with the key in ?key=.
	if r := s.do(http.MethodPost, "/v1beta/models/"+geminiModel+":embedContent?key="+clientKey, nil,
		`{"content":{"parts":[{"text":"embed this"}]}}`); r.status != 200 || !strings.Contains(r.body, `"embedding"`) {
		t.Fatalf("embedContent with ?key=: %d %s", r.status, r.body)
	}

	m, err := c.Models.Get(ctx, geminiModel, nil)
	if err != nil || m.Name != "models/"+geminiModel {
		t.Fatalf("Models.Get = %+v, %v", m, err)
	}
	page, err := c.Models.List(ctx, nil)
	if err != nil {
		t.Fatalf("Models.List: %v", err)
	}
	var names []string
	for _, m := range page.Items {
		names = append(names, m.Name)
	}
	if strings.Join(names, ",") != "models/"+geminiModel {
		t.Errorf("Models.List = %v, want only the Gemini model", names)
	}

	_, err = c.Models.GenerateContent(ctx, "no-such-model", genai.Text("hi"), nil)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 404 || apiErr.Status != "NOT_FOUND" {
		t.Errorf("unknown model: %v, want a 404 NOT_FOUND in Google's shape", err)
	}
	_, err = geminiClient(t, s, "sk-not-a-key").Models.GenerateContent(ctx, geminiModel, genai.Text("hi"), nil)
	if !errors.As(err, &apiErr) || apiErr.Code != 401 {
		t.Errorf("bad key: %v, want a 401", err)
	}

	for _, r := range s.prov.Requests() {
		if !strings.Contains(r.Path, "/models/"+geminiProvModel+":") {
			t.Errorf("the provider saw %s, not its own model", r.Path)
		}
		if got := r.Header.Get("X-Goog-Api-Key"); got != geminiProvKey {
			t.Errorf("%s: provider key %q", r.Path, got)
		}
		if strings.Contains(r.Path+strings.Join(r.Header.Values("Authorization"), ""), clientKey) || strings.Contains(string(r.Body), geminiModel) {
			t.Errorf("%s: the client's key or public model reached the provider", r.Path)
		}
	}

	s.shutdown()
	endpoints := map[string]int{}
	for _, ev := range s.outboxEvents(t) {
		if ev.Protocol != usageevent.ProtocolGemini || ev.ProviderModel != geminiProvModel {
			t.Errorf("event %s %s %s", ev.Protocol, ev.Endpoint, ev.ProviderModel)
		}
		endpoints[ev.Endpoint]++
		if ev.Endpoint == usageevent.EndpointGenerateContent && (ev.Usage == nil || ev.Usage.InputTokens != 3) {
			t.Errorf("generate_content usage %+v", ev.Usage)
		}
		if ev.Endpoint == usageevent.EndpointStreamGenerateContent && (ev.Usage == nil || ev.Usage.InputTokens != 3 || !ev.Stream) {
			t.Errorf("stream_generate_content usage %+v stream %v", ev.Usage, ev.Stream)
		}
	}
	want := map[string]int{
		usageevent.EndpointGenerateContent: 1, usageevent.EndpointStreamGenerateContent: 1,
		usageevent.EndpointGeminiCountTokens: 1, usageevent.EndpointEmbedContent: 1, usageevent.EndpointBatchEmbedContents: 2,
	}
	for e, n := range want {
		if endpoints[e] != n {
			t.Errorf("%d events for %s, want %d (all: %v)", endpoints[e], e, n, endpoints)
		}
	}
}

// TestGeminiAnswersCoolTarget: the failure rules hold on the Gemini path
// as on the others, through a whole node. Google's daily-quota 429 is
// passed through and rests the target, so the next requests go to the
// other target (that it rests it for cooldown.quota rather than a rate
// limit's cooldown is the catalog tables' case); an ordinary 400 about the
// request is passed through and rests nothing.
func TestGeminiAnswersCoolTarget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		b        fakeprovider.Behaviour
		status   int
		wantCool bool
	}{
		{"daily quota", fakeprovider.Behaviour{Quota: true}, 429, true},
		{"an ordinary 400", fakeprovider.Behaviour{Status: 400, ErrorMessage: "Invalid value at 'contents[0].role'"}, 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first atomic.Bool
			s := startStack(t, stackOptions{gemini: true, weight: 1000,
				extraTOML: `
[backends.gm2]
protocol = "gemini"
base_url = "#GEMINI_BASE#"
credential = "gm"
max_inflight_per_node = 16
endpoints = ["generate_content"]
[[models.demo-gemini.targets]]
backend = "gm2"
model = "fake-gemini-2"
weight = 1
`,
				script: func(r fakeprovider.Request) *fakeprovider.Behaviour {
					if r.Model == geminiProvModel && first.CompareAndSwap(false, true) {
						return &tc.b
					}
					return nil
				},
			})
			c := geminiClient(t, s, clientKey)
			_, err := c.Models.GenerateContent(t.Context(), geminiModel, genai.Text("hi"), nil)
			var apiErr genai.APIError
			if !errors.As(err, &apiErr) || apiErr.Code != tc.status {
				t.Fatalf("first answer %v, want the provider's %d passed through", err, tc.status)
			}
			for range 5 {
				if _, err := c.Models.GenerateContent(t.Context(), geminiModel, genai.Text("hi"), nil); err != nil {
					t.Fatalf("after the answer: %v", err)
				}
			}
			// Weight 1000 against 1: without a cooldown the first target
			// takes the next requests too.
			n := 0
			for _, r := range s.prov.Requests() {
				if strings.Contains(r.Path, "/models/"+geminiProvModel+":") {
					n++
				}
			}
			want := 6
			if tc.wantCool {
				want = 1
			}
			if n != want {
				t.Fatalf("first target received %d requests, want %d", n, want)
			}
		})
	}
}

// TestGeminiSendStates: the send-state, breaker and disable rules hold on
// the Gemini path as on the others, through a whole node with two Gemini
// backends on two providers: a CONNECT the proxy refuses is re-picked
// (nothing was sent), a reset after the body is never re-sent and the
// client is told not to retry, a cut stream ends with an in-band error in
// Google's shape and no finishReason, and a refused credential is a 502
// that disables the backend.
func TestGeminiSendStates(t *testing.T) {
	const gen = "/v1beta/models/" + geminiModel + ":generateContent"
	body := func(text string) string { return `{"contents":[{"parts":[{"text":"` + text + `"}]}]}` }
	key := map[string]string{"X-Goog-Api-Key": clientKey}

	t.Run("proxy refuses: re-picked", func(t *testing.T) {
		var blocked int
		s := startStack(t, stackOptions{gemini: true, second: true, weight: 1000, egress: "connect",
			connectAllow: func(_ string, p int) bool { return p != blocked }})
		blocked = port(t, s.provURL)
		if r := s.do(http.MethodPost, gen, key, body("hi")); r.status != 200 {
			t.Fatalf("status %d, want 200 after a re-pick: %s", r.status, r.body)
		}
		if n := s.prov.ConnCount(); n != 0 {
			t.Errorf("the refused provider accepted %d connections", n)
		}
		if n := s.prov2.RequestCount(); n != 1 {
			t.Errorf("the other provider got %d requests, want 1", n)
		}
	})

	t.Run("reset after the body: sent once", func(t *testing.T) {
		s := startStack(t, stackOptions{gemini: true, second: true, weight: 1000, attempts: 3})
		r := s.do(http.MethodPost, gen, key, body("x [[reset=after_body]]"))
		if r.status != 502 || r.header.Get("X-Should-Retry") != "false" || !strings.Contains(r.body, `"reason":"UPSTREAM_FAILED"`) {
			t.Fatalf("status %d x-should-retry %q body %s, want a 502 in Google's shape, not to be retried", r.status, r.header.Get("X-Should-Retry"), r.body)
		}
		if n := s.prov.RequestCount(); n != 1 {
			t.Errorf("the reset provider received %d attempts, want 1", n)
		}
		if n := s.prov2.RequestCount(); n != 0 {
			t.Errorf("a possibly-sent request was re-sent to the other backend (%d)", n)
		}
	})

	t.Run("cut stream: in-band error", func(t *testing.T) {
		s := startStack(t, stackOptions{gemini: true})
		r := s.do(http.MethodPost, "/v1beta/models/"+geminiModel+":streamGenerateContent?alt=sse", key, body("a b c d [[cut=after_events:2]]"))
		if r.status != 200 {
			t.Fatalf("status %d, want the committed 200", r.status)
		}
		if !strings.HasSuffix(r.body, "\n\n") || !strings.Contains(r.body, `data: {"error":{"code":`) {
			t.Fatalf("the stream does not end with an in-band error:\n%s", r.body)
		}
		if strings.Contains(r.body, "finishReason") {
			t.Fatalf("a cut stream carries a finishReason:\n%s", r.body)
		}
	})

	t.Run("refused credential: disabled", func(t *testing.T) {
		var first atomic.Bool
		s := startStack(t, stackOptions{gemini: true, second: true, weight: 1000,
			script: func(fakeprovider.Request) *fakeprovider.Behaviour {
				if first.CompareAndSwap(false, true) {
					return &fakeprovider.Behaviour{Status: 401}
				}
				return nil
			}})
		if r := s.do(http.MethodPost, gen, key, body("hi")); r.status != 502 {
			t.Fatalf("status %d, want 502 (never the provider's 401)", r.status)
		}
		for i := range 3 {
			if r := s.do(http.MethodPost, gen, key, body("hi")); r.status != 200 {
				t.Fatalf("request %d after the 401: status %d, want 200 from the other backend", i, r.status)
			}
		}
		if n := s.prov.RequestCount(); n != 1 {
			t.Errorf("the disabled backend received %d requests, want only the first", n)
		}
	})
}
