package app

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"google.golang.org/genai"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/devstack/faketoken"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Claude and Gemini on Google Vertex AI, end to end: the official SDKs ask
// the node for models whose targets are on Vertex; the node mints access
// tokens for a service account from a fake Google token endpoint (over
// TLS, through the egress proxy) and the fake provider takes only those
// that are live.
const (
	vertexModel         = "claude-vertex"
	vertexProvModel     = "claude-sonnet-4-5@20250929"
	vertexGeminiModel   = "gemini-vertex"
	vertexGeminiProv    = "gemini-2.5-flash"
	vertexProject       = "scootgate-demo"
	vertexLocation      = "us-east5"
	vertexResource      = "/v1/projects/" + vertexProject + "/locations/" + vertexLocation
	vertexAnthropicPath = vertexResource + "/publishers/anthropic/models/" + vertexProvModel
	vertexGeminiPath    = vertexResource + "/publishers/google/models/" + vertexGeminiProv
	tokenLifetime       = 10 * time.Minute
)

// startVertex serves the fake Google token endpoint and returns the TOML
// of the Vertex credential, backends and models (startStack fills in
// #VERTEX_BASE# and #CAP#).
func (s *stack) startVertex(now func() time.Time) string {
	t := s.t
	g, err := faketoken.NewGoogle(faketoken.GoogleOptions{Options: faketoken.Options{Now: now, Lifetime: tokenLifetime}})
	if err != nil {
		t.Fatal(err)
	}
	s.google = g
	s.tokens = &gate{entered: make(chan struct{}, 64)}
	srv := httptest.NewTLSServer(s.tokens.wrap(g))
	t.Cleanup(srv.Close)
	t.Cleanup(s.tokens.release) // before Close: a held grant must go for Close to return
	keyFile := filepath.Join(s.dir, "service-account.json")
	if err := os.WriteFile(keyFile, g.KeyJSON(srv.URL+"/token"), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(s.dir, "token-ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
[egress.provider_tls]
ca_file = %q
[credentials.gcp]
kind = "gcp_service_account"
key_file = %q
hosts = ["127.0.0.1"]
[backends.vx]
protocol = "anthropic"
platform = "vertex"
project = %q
location = %q
base_url = "#VERTEX_BASE#"
credential = "gcp"
max_inflight_per_node = #CAP#
endpoints = ["messages", "count_tokens"]
[backends.vg]
protocol = "gemini"
platform = "vertex"
project = %q
location = %q
base_url = "#VERTEX_BASE#"
credential = "gcp"
max_inflight_per_node = #CAP#
[models.%s]
[[models.%s.targets]]
backend = "vx"
model = %q
weight = 1
stream = true
tools = true
[[models.%s.targets]]
backend = "an"
model = %q
weight = 1
tier = 1
stream = true
tools = true
[models.%s]
[[models.%s.targets]]
backend = "vg"
model = %q
weight = 1
stream = true
tools = true
`, caFile, keyFile, vertexProject, vertexLocation, vertexProject, vertexLocation,
		vertexModel, vertexModel, vertexProvModel, vertexModel, anthProvModel,
		vertexGeminiModel, vertexGeminiModel, vertexGeminiProv)
}

func vertexParams(prompt string) anthropic.MessageNewParams {
	p := anthropicParams(prompt)
	p.Model = vertexModel
	return p
}

// TestVertexSDK: anthropic-sdk-go and Google's Gen AI SDK, streaming and
// not, through SOCKS5 and CONNECT: the provider sees Vertex's paths, the
// body without its model and with anthropic_version, the beta header as a
// header, and a live minted token as Bearer; never the client's key.
func TestVertexSDK(t *testing.T) {
	for _, o := range []stackOptions{{egress: "socks", vertex: true}, {egress: "connect", proxyAuth: true, vertex: true}} {
		t.Run(o.egress, func(t *testing.T) {
			s := startStack(t, o)
			runVertexSuite(t, s)
		})
	}
}

func runVertexSuite(t *testing.T, s *stack) {
	ctx := t.Context()
	ac := anthropicClient(s, clientKey)
	t.Run("claude", func(t *testing.T) {
		msg, err := ac.Messages.New(ctx, vertexParams("hello vertex"), option.WithHeader("anthropic-beta", "beta-one"))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := msg.Content[0].Text; got != "echo: hello vertex" || msg.Usage.InputTokens == 0 {
			t.Errorf("content %q usage %+v", got, msg.Usage)
		}
		last := lastProvRequest(t, s)
		if last.Path != vertexAnthropicPath+":rawPredict" || last.Model != vertexProvModel {
			t.Fatalf("provider saw %s (%s)", last.Path, last.Model)
		}
		checkVertexAuth(t, s, last)
		if got := last.Header.Get("Anthropic-Beta"); got != "beta-one" {
			t.Errorf("anthropic-beta header %q, want it kept as a header", got)
		}
		if last.Header.Get("Anthropic-Version") != "" || last.Header.Get("X-Api-Key") != "" {
			t.Errorf("headers Vertex does not take were sent: %v", last.Header)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(last.Body, &body); err != nil {
			t.Fatal(err)
		}
		if _, ok := body["model"]; ok || string(body["anthropic_version"]) != `"vertex-2023-10-16"` {
			t.Errorf("body %s: want no model and anthropic_version vertex-2023-10-16", last.Body)
		}
	})
	t.Run("claude count_tokens", func(t *testing.T) {
		// Vertex's one count-tokens URL; the body keeps its model member,
		// naming the target's Vertex model.
		res, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    vertexModel,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("one two three"))},
		})
		if err != nil {
			t.Fatalf("CountTokens: %v", err)
		}
		if res.InputTokens != 3 {
			t.Errorf("input tokens = %d, want 3", res.InputTokens)
		}
		last := lastProvRequest(t, s)
		if last.Path != vertexResource+"/publishers/anthropic/models/count-tokens:rawPredict" || last.Model != vertexProvModel {
			t.Fatalf("provider saw %s (%s)", last.Path, last.Model)
		}
		checkVertexAuth(t, s, last)
		var body map[string]json.RawMessage
		if err := json.Unmarshal(last.Body, &body); err != nil {
			t.Fatal(err)
		}
		if string(body["model"]) != `"`+vertexProvModel+`"` {
			t.Errorf("body %s: want the model member naming %s", last.Body, vertexProvModel)
		}
	})
	t.Run("claude stream", func(t *testing.T) {
		st := ac.Messages.NewStreaming(ctx, vertexParams("stream on vertex"))
		var text strings.Builder
		var types []string
		for st.Next() {
			ev := st.Current()
			types = append(types, string(ev.Type))
			if d, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok {
				text.WriteString(d.Delta.Text)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v (events %v)", err, types)
		}
		if text.String() != "echo: stream on vertex" || types[len(types)-1] != "message_stop" {
			t.Errorf("text %q events %v", text.String(), types)
		}
		if last := lastProvRequest(t, s); last.Path != vertexAnthropicPath+":streamRawPredict" {
			t.Errorf("provider path %q", last.Path)
		}
	})
	gc := geminiClient(t, s, clientKey)
	t.Run("gemini", func(t *testing.T) {
		resp, err := gc.Models.GenerateContent(ctx, vertexGeminiModel, genai.Text("one two three"), nil)
		if err != nil {
			t.Fatalf("GenerateContent: %v", err)
		}
		if got := resp.Text(); !strings.Contains(got, "one two three") {
			t.Errorf("text %q", got)
		}
		last := lastProvRequest(t, s)
		if last.Path != vertexGeminiPath+":generateContent" {
			t.Fatalf("provider path %q", last.Path)
		}
		checkVertexAuth(t, s, last)
		if last.Header.Get("X-Goog-Api-Key") != "" {
			t.Error("an API key header reached Vertex")
		}
	})
	t.Run("gemini stream", func(t *testing.T) {
		var text strings.Builder
		for chunk, err := range gc.Models.GenerateContentStream(ctx, vertexGeminiModel, genai.Text("stream me please"), nil) {
			if err != nil {
				t.Fatalf("GenerateContentStream: %v", err)
			}
			text.WriteString(chunk.Text())
		}
		if !strings.Contains(text.String(), "stream me please") {
			t.Errorf("streamed text %q", text.String())
		}
		if last := lastProvRequest(t, s); last.Path != vertexGeminiPath+":streamGenerateContent" || !last.Stream {
			t.Errorf("provider path %q stream %v (want alt=sse kept)", last.Path, last.Stream)
		}
	})
}

// checkVertexAuth: the request carried a token the endpoint issued and
// that is live.
func checkVertexAuth(t *testing.T, s *stack, r fakeprovider.Request) {
	t.Helper()
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !strings.HasPrefix(tok, "ya29.fake-") {
		t.Errorf("Authorization is not a minted bearer token")
	}
	if strings.Contains(r.Header.Get("Authorization"), clientKey) {
		t.Error("the client's key reached the provider")
	}
}

// TestVertexTokenRefresh: the node's clock passes a token's expiry; the
// next request waits for one new grant and carries the new token, which
// the provider accepts (the old one it would refuse).
func TestVertexTokenRefresh(t *testing.T) {
	// Starts at the real time: the grant's assertion is stamped by
	// x/oauth2/jwt with the real clock, which the endpoint checks.
	fc := clock.NewFake(time.Now())
	s := startStack(t, stackOptions{vertex: true, tokenClock: fc.Now})
	ac := anthropicClient(s, clientKey)
	if _, err := ac.Messages.New(t.Context(), vertexParams("first")); err != nil {
		t.Fatal(err)
	}
	if last := lastProvRequest(t, s); last.Path != vertexAnthropicPath+":rawPredict" {
		t.Fatalf("first request went to %s", last.Path)
	}
	first := lastProvRequest(t, s).Header.Get("Authorization")
	if n := s.google.Grants(); n != 1 {
		t.Fatalf("%d grants after the first request, want 1", n)
	}
	fc.Advance(tokenLifetime + time.Minute)
	if _, err := ac.Messages.New(t.Context(), vertexParams("second")); err != nil {
		t.Fatal(err)
	}
	last := lastProvRequest(t, s)
	if last.Protocol != fakeprovider.Anthropic || last.Path != vertexAnthropicPath+":rawPredict" {
		t.Fatalf("second request went to %s", last.Path)
	}
	if second := last.Header.Get("Authorization"); second == first {
		t.Error("the expired token was sent again")
	}
	if n := s.google.Grants(); n != 2 {
		t.Errorf("%d grants, want 2", n)
	}
}

// TestVertexTokenEndpointFailing: with no token to send, the Vertex
// target is not sent to and not blamed: Claude goes to the Anthropic
// target (tier 1); Gemini, with no other target, gets the node's 502;
// /readyz names the credential's state and the node stays ready.
func TestVertexTokenEndpointFailing(t *testing.T) {
	s := startStack(t, stackOptions{vertex: true})
	s.google.Fail(http.StatusServiceUnavailable)
	ac := anthropicClient(s, clientKey)
	if _, err := ac.Messages.New(t.Context(), vertexParams("fallback")); err != nil {
		t.Fatalf("New: %v", err)
	}
	if last := lastProvRequest(t, s); last.Path != "/v1/messages" {
		t.Errorf("provider saw %s, want the Anthropic target", last.Path)
	}
	r := s.do(http.MethodPost, "/v1beta/models/"+vertexGeminiModel+":generateContent", map[string]string{"x-goog-api-key": clientKey},
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, "no valid token") {
		t.Errorf("gemini: status %d body %s, want 502 about the token", r.status, r.body)
	}
	for _, req := range s.prov.Requests() {
		if strings.HasPrefix(req.Path, "/v1/projects/") {
			t.Errorf("a request reached Vertex without a token: %s", req.Path)
		}
	}
	hr, err := http.Get(s.health + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	var rep ReadyReport
	if err := json.NewDecoder(hr.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if hr.StatusCode != http.StatusOK || !strings.HasPrefix(rep.Details["credential gcp"], "expired") {
		t.Errorf("/readyz %d %+v, want ready with the credential expired", hr.StatusCode, rep)
	}
	text := s.scrapeMetrics()
	for _, want := range []string{
		`scootgate_credential_token_state{credential="gcp",state="expired"} 1`,
		`scootgate_credential_token_state{credential="gcp",state="ok"} 0`,
		`scootgate_credential_token_state{credential="gcp",state="pending"} 0`,
		`scootgate_credential_token_state{credential="gcp",state="refresh_failing"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// The endpoint recovers: the backoff passes, the next request mints.
	s.google.Fail(0)
	if !strings.Contains(s.logs.String(), "gcp") {
		t.Error("no log line names the failing credential")
	}
}

// TestVertexUsageEvent: a Vertex attempt's usage event names the platform
// and, as its region, the location; its attempt metric the platform.
func TestVertexUsageEvent(t *testing.T) {
	s := startStack(t, stackOptions{vertex: true})
	ac := anthropicClient(s, clientKey)
	if _, err := ac.Messages.New(t.Context(), vertexParams("hello")); err != nil {
		t.Fatal(err)
	}
	// The attempt metrics name the platform too.
	if want := `scootgate_upstream_attempts_total{backend="vx",outcome="success",platform="vertex"} 1`; !strings.Contains(s.scrapeMetrics(), want) {
		t.Errorf("metrics lack %s", want)
	}
	s.shutdown()
	var ev *usageevent.Event
	for _, e := range s.outboxEvents(t) {
		if e.Backend == "vx" {
			ev = e
		}
	}
	if ev == nil {
		t.Fatal("no event of the Vertex backend")
	}
	if ev.Platform != "vertex" || ev.Region != vertexLocation || ev.Usage == nil || ev.Usage.InputTokens == 0 {
		t.Errorf("platform %q region %q usage %+v", ev.Platform, ev.Region, ev.Usage)
	}
}

// TestVertexWrongProject: Google's 403 PERMISSION_DENIED on the project
// disables the backend (the node's 502, never a 403 about the client's
// key); the next request goes to the Anthropic target.
func TestVertexWrongProject(t *testing.T) {
	s := startStack(t, stackOptions{vertex: true})
	s.prov.SetVertexProject("another-project")
	hdr := map[string]string{"x-api-key": clientKey, "anthropic-version": "2023-06-01"}
	body := `{"model":"` + vertexModel + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	r := s.do(http.MethodPost, "/v1/messages", hdr, body)
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, "rejected the gateway's credential") {
		t.Fatalf("status %d body %s, want 502 about the gateway's credential", r.status, r.body)
	}
	if r = s.do(http.MethodPost, "/v1/messages", hdr, body); r.status != http.StatusOK {
		t.Fatalf("second request: %d %s", r.status, r.body)
	}
	if last := lastProvRequest(t, s); last.Path != "/v1/messages" {
		t.Errorf("second request went to %s, want the Anthropic target (Vertex disabled)", last.Path)
	}
}
