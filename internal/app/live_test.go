package app

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/genai"

	"github.com/scootgate/scootgate/internal/devstack/cpserver"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

const liveModel = "demo-gemini-live"

// startLiveStack is a stack with the Gemini backend and a backend "gl"
// on the same fake provider serving Gemini Live sessions, with the model
// demo-gemini-live on it (the provider model geminiProvModel).
func startLiveStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	o.gemini = true
	o.extraTOML += fmt.Sprintf(`
[backends.gl]
protocol = "gemini"
base_url = "#GEMINI_BASE#"
credential = "gm"
max_inflight_per_node = 4
endpoints = ["bidi_generate_content"]
[models.%s]
[[models.%s.targets]]
backend = "gl"
model = %q
weight = 1
stream = true
`, liveModel, liveModel, geminiProvModel)
	return startStack(t, o)
}

// liveClient is Google's Gen AI SDK for Go with its Live client pointed
// at the node: the SDK dials {BaseURL}/ws/google.ai.generativelanguage.
// v1beta.GenerativeService.BidiGenerateContent with the key in
// x-goog-api-key, and keeps a ws:// base URL's scheme (live.go in
// google.golang.org/genai).
func liveClient(t *testing.T, s *stack, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{},
		HTTPOptions: genai.HTTPOptions{BaseURL: "ws" + strings.TrimPrefix(s.api, "http") + "/", APIVersion: "v1beta"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// liveTurn receives server messages up to the end of a turn and returns
// its text, whether audio came, and the turn's usage.
func liveTurn(t *testing.T, sess *genai.Session) (string, bool, *genai.UsageMetadata) {
	t.Helper()
	var text strings.Builder
	audio := false
	for {
		msg, err := sess.Receive()
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if sc := msg.ServerContent; sc != nil && sc.ModelTurn != nil {
			for _, p := range sc.ModelTurn.Parts {
				text.WriteString(p.Text)
				if p.InlineData != nil && strings.HasPrefix(p.InlineData.MIMEType, "audio/pcm") && len(p.InlineData.Data) > 0 {
					audio = true
				}
			}
		}
		if msg.ServerContent != nil && msg.ServerContent.TurnComplete {
			return text.String(), audio, msg.UsageMetadata
		}
	}
}

// TestGeminiLive: Google's Gen AI SDK's Live client through a whole node
// and the SOCKS5 egress: the session opens with the public model in the
// setup message, a text turn and an audio turn come back with text,
// audio and usage, the provider sees its own key and the provider model
// in the setup (every other byte as the SDK sent it), and each turn is
// one usage event with the turn's usage.
func TestGeminiLive(t *testing.T) {
	runGeminiLive(t, startLiveStack(t, stackOptions{}))
}

// TestGeminiLiveThroughDante is TestGeminiLive with Debian's
// dante-server as the SOCKS5 egress proxy.
func TestGeminiLiveThroughDante(t *testing.T) {
	addr := requireDaemon(t, "SCOOTGATE_DANTE_ADDR", "dante-server (SOCKS5)")
	runGeminiLive(t, startLiveStack(t, stackOptions{proxyURL: "socks5://" + addr}))
}

// TestGeminiLiveThroughTinyproxy is TestGeminiLive with Debian's
// tinyproxy as the HTTP CONNECT egress proxy, with Basic auth.
func TestGeminiLiveThroughTinyproxy(t *testing.T) {
	u := requireDaemon(t, "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)")
	runGeminiLive(t, startLiveStack(t, stackOptions{proxyURL: u}))
}

// runGeminiLive is TestGeminiLive's body against s, which it shuts down.
func runGeminiLive(t *testing.T, s *stack) {
	t.Helper()
	c := liveClient(t, s, clientKey)
	sess, err := c.Live.Connect(t.Context(), liveModel, &genai.LiveConnectConfig{
		ResponseModalities: []genai.Modality{genai.ModalityAudio},
		SystemInstruction:  genai.NewContentFromText("be brief", genai.RoleUser),
	})
	if err != nil {
		t.Fatalf("Live.Connect: %v", err)
	}
	defer sess.Close()
	if sess.SetupComplete == nil {
		t.Fatal("no setupComplete")
	}
	if err := sess.SendClientContent(genai.LiveClientContentInput{Turns: []*genai.Content{genai.NewContentFromText("one two", genai.RoleUser)}}); err != nil {
		t.Fatalf("SendClientContent: %v", err)
	}
	text, audio, usage := liveTurn(t, sess)
	if text != "echo: one two" || !audio || usage == nil || usage.PromptTokenCount != 2 || usage.ResponseTokenCount != 3 {
		t.Errorf("first turn: text %q, audio %v, usage %+v", text, audio, usage)
	}
	pcm := make([]byte, 1000) // 10 audio tokens at the fake
	if err := sess.SendRealtimeInput(genai.LiveRealtimeInput{Audio: &genai.Blob{MIMEType: "audio/pcm;rate=16000", Data: pcm}}); err != nil {
		t.Fatalf("SendRealtimeInput audio: %v", err)
	}
	if err := sess.SendRealtimeInput(genai.LiveRealtimeInput{Text: "three"}); err != nil {
		t.Fatalf("SendRealtimeInput text: %v", err)
	}
	if text, _, usage := liveTurn(t, sess); text != "echo: three" || usage == nil || usage.PromptTokenCount != 11 {
		t.Errorf("second turn: text %q, usage %+v", text, usage)
	}
	if err := sess.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// What the provider saw: its key on the handshake, and the setup
	// naming the provider model.
	var frames []string
	for _, r := range s.prov.Requests() {
		if r.Path != fakeprovider.LivePath {
			continue
		}
		if r.Method == http.MethodGet {
			if r.Header.Get("X-Goog-Api-Key") != geminiProvKey {
				t.Errorf("handshake at the provider: x-goog-api-key is not the provider's")
			}
			continue
		}
		frames = append(frames, string(r.Body))
	}
	if len(frames) != 4 || !strings.HasPrefix(frames[0], `{"setup":{`) || !strings.Contains(frames[0], `"model":"models/`+geminiProvModel+`"`) ||
		strings.Contains(frames[0], liveModel) || !strings.Contains(frames[0], `"be brief"`) {
		t.Errorf("frames at the provider: %q", frames)
	}

	s.shutdown()
	var evs []*usageevent.Event
	for _, ev := range s.outboxEvents(t) {
		if ev.Endpoint == usageevent.EndpointBidiGenerateContent {
			evs = append(evs, ev)
		}
	}
	if len(evs) != 2 {
		t.Fatalf("%d Live usage events, want one per turn (2): %+v", len(evs), evs)
	}
	want := []usageevent.Usage{{InputTokens: 2, OutputTokens: 3}, {InputTokens: 11, OutputTokens: 3}}
	for i, ev := range evs {
		if ev.Usage == nil || *ev.Usage != want[i] || ev.FailureStage != "" || ev.HTTPStatus != 101 || ev.Protocol != usageevent.ProtocolGemini ||
			ev.PublicModel != liveModel || ev.ProviderModel != geminiProvModel || ev.Backend != "gl" || ev.RequestID != evs[0].RequestID {
			t.Errorf("event %d: %+v usage %+v", i, ev, ev.Usage)
		}
		if !strings.Contains(string(ev.ProviderUsage), `"responseTokensDetails"`) {
			t.Errorf("event %d: provider usage %s lacks the modality split", i, ev.ProviderUsage)
		}
	}
}

// dialLive opens a Live socket as a raw client would (a browser, or
// @google/genai's URL form): the key in ?key=.
func (s *stack) dialLive(t *testing.T, query string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	c, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(s.api, "http")+fakeprovider.LivePath+query, nil)
	if err == nil {
		t.Cleanup(func() { _ = c.CloseNow() })
	}
	return c, resp, err
}

// liveClose reads until the session is closed and returns the close
// status and reason.
func liveClose(t *testing.T, c *websocket.Conn) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code, ce.Reason
			}
			return -1, err.Error()
		}
	}
}

// TestGeminiLiveRefusals: the key in ?key= opens a session; a wrong key
// is a 401 before the upgrade; after it, what the node refuses closes the
// session as Google closes its own, with the reason: a first message that
// is not a setup, a setup naming its model twice or in another letter
// case, and a later setup naming another model with 1007, a model the
// node does not serve with 1008. Nothing of a refused session reaches a
// provider.
func TestGeminiLiveRefusals(t *testing.T) {
	s := startLiveStack(t, stackOptions{})
	c, _, err := s.dialLive(t, "?key="+clientKey)
	if err != nil {
		t.Fatalf("dial with ?key=: %v", err)
	}
	send(t, c, `{"setup":{"model":"models/`+liveModel+`"}}`)
	if _, data, err := c.Read(t.Context()); err != nil || string(data) != `{"setupComplete":{}}` {
		t.Fatalf("after setup: %q, %v", data, err)
	}
	send(t, c, `{"setup":{"model":"models/gemini-2.0-flash-live-001"}}`)
	if code, reason := liveClose(t, c); code != 1007 || !strings.Contains(reason, "setup.model") {
		t.Errorf("a later setup naming another model: close %v %q, want 1007", code, reason)
	}

	if _, resp, err := s.dialLive(t, "?key=sk-wrong"); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong key: %v %v, want 401 before the upgrade", err, resp)
	}
	before := len(s.prov.Requests())
	for _, tc := range []struct {
		name, first string
		code        websocket.StatusCode
		reason      string
	}{
		{"no setup", `{"clientContent":{"turns":[],"turnComplete":true}}`, 1007, "setup"},
		{"not JSON", `setup`, 1007, "JSON object"},
		{"setup twice", `{"setup":{"model":"models/` + liveModel + `"},"setup":{"model":"models/x"}}`, 1007, "more than once"},
		{"setup case", `{"setup":{"model":"models/` + liveModel + `"},"Setup":{"model":"models/x"}}`, 1007, "letter case"},
		{"model twice", `{"setup":{"model":"models/` + liveModel + `","model":"models/x"}}`, 1007, "more than once"},
		{"bare model", `{"setup":{"model":"` + liveModel + `"}}`, 1007, "models/"},
		{"unknown model", `{"setup":{"model":"models/nope"}}`, 1008, "does not exist"},
		{"not served", `{"setup":{"model":"models/` + geminiModel + `"}}`, 1007, "no backend"},
	} {
		c, _, err := s.dialLive(t, "?key="+clientKey)
		if err != nil {
			t.Fatalf("%s: dial: %v", tc.name, err)
		}
		send(t, c, tc.first)
		if code, reason := liveClose(t, c); code != tc.code || !strings.Contains(reason, tc.reason) || strings.Contains(reason, clientKey) {
			t.Errorf("%s: close %v %q, want %v with %q", tc.name, code, reason, tc.code, tc.reason)
		}
	}
	if r := s.do(http.MethodGet, fakeprovider.LivePath+"?key="+clientKey, nil, ""); r.status != http.StatusUpgradeRequired ||
		!strings.Contains(r.body, `"status"`) || strings.Contains(r.body, "?model") {
		t.Errorf("GET without the upgrade: %d %s, want 426 in Google's error shape", r.status, r.body)
	}
	// A key whose allowlist leaves the model out: 1008.
	c, _, err = s.dialLive(t, "?key="+limitedKey)
	if err != nil {
		t.Fatalf("dial with the limited key: %v", err)
	}
	send(t, c, `{"setup":{"model":"models/`+liveModel+`"}}`)
	if code, reason := liveClose(t, c); code != 1008 || !strings.Contains(reason, "may not use model") {
		t.Errorf("a model the key may not use: close %v %q, want 1008", code, reason)
	}
	if got := len(s.prov.Requests()); got != before {
		t.Errorf("refused sessions reached the provider: %d requests", got-before)
	}
}

// TestGeminiLiveDrain: a drain sends a Live session between turns
// Google's goAway message and closes it with 1001; what the session did
// since its last turn is recorded as shutdown.
func TestGeminiLiveDrain(t *testing.T) {
	s := startLiveStack(t, stackOptions{grace: "1s"})
	c, _, err := s.dialLive(t, "?key="+clientKey)
	if err != nil {
		t.Fatal(err)
	}
	send(t, c, `{"setup":{"model":"models/`+liveModel+`"}}`)
	if _, _, err := c.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	go s.shutdown()
	if _, data, err := c.Read(t.Context()); err != nil || string(data) != `{"goAway":{"timeLeft":"0s"}}` {
		t.Errorf("draining: %q, %v; want the goAway message", data, err)
	}
	if code, _ := liveClose(t, c); code != websocket.StatusGoingAway {
		t.Errorf("closed with %v, want 1001", code)
	}
	s.shutdown()
	var got []string
	for _, ev := range s.outboxEvents(t) {
		got = append(got, ev.Endpoint+" "+ev.FailureStage)
	}
	if diff := cmp.Diff(got, []string{"bidi_generate_content shutdown"}); diff != "" {
		t.Errorf("events (-got +want):\n%s", diff)
	}
}

// TestGeminiLiveAudioTurnCut: a client that leaves in the middle of a
// turn (Google's audio still coming) has that turn recorded as
// client_cancelled, after the events of its completed turns.
func TestGeminiLiveAudioTurnCut(t *testing.T) {
	s := startLiveStack(t, stackOptions{})
	c, _, err := s.dialLive(t, "?key="+clientKey)
	if err != nil {
		t.Fatal(err)
	}
	send(t, c, `{"setup":{"model":"models/`+liveModel+`"}}`)
	read := func() string {
		t.Helper()
		_, data, err := c.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	read() // setupComplete
	audio := base64.StdEncoding.EncodeToString(make([]byte, 500))
	send(t, c, `{"realtimeInput":{"audio":{"data":"`+audio+`","mimeType":"audio/pcm;rate=16000"}}}`)
	send(t, c, `{"realtimeInput":{"audioStreamEnd":true}}`)
	for !strings.Contains(read(), `"turnComplete"`) {
	}
	send(t, c, `{"clientContent":{"turns":[{"role":"user","parts":[{"text":"wait [[hang]]"}]}],"turnComplete":true}}`)
	read() // the turn's text
	_ = c.CloseNow()
	s.waitLog(t, `"stage":"client_cancelled"`, 10*time.Second)
	s.shutdown()
	var got []string
	for _, ev := range s.outboxEvents(t) {
		u := "no usage"
		if ev.Usage != nil {
			u = fmt.Sprintf("in %d out %d", ev.Usage.InputTokens, ev.Usage.OutputTokens)
		}
		got = append(got, ev.FailureStage+" "+u)
	}
	if diff := cmp.Diff(got, []string{" in 5 out 3", "client_cancelled no usage"}); diff != "" {
		t.Errorf("events (-got +want):\n%s", diff)
	}
}

// TestGeminiLiveRevocation: a Live session whose key an authorization
// snapshot swap revokes is closed with 1007 and the reason, as Google
// closes a session over an invalid key; the key opens no new one (401);
// another key's session goes on.
func TestGeminiLiveRevocation(t *testing.T) {
	cp := startControlPlane(t)
	keyOther := authsnap.Key{KeyID: "k-other", TenantID: "t-2", Digest: authsnap.Digest(limitedKey)}
	cp.publish("authz.json", authzDoc(1, keyFull, keyOther))
	s := startLiveStack(t, stackOptions{
		authzSource:  cp.srv.URL(cpserver.AuthzPath),
		controlPlane: "poll_interval = \"1s\"\nlong_poll = \"30s\"\nstale_after = \"1m\"",
	})
	open := func(key string) *websocket.Conn {
		c, _, err := s.dialLive(t, "?key="+key)
		if err != nil {
			t.Fatal(err)
		}
		send(t, c, `{"setup":{"model":"models/`+liveModel+`"}}`)
		if _, data, err := c.Read(t.Context()); err != nil || string(data) != `{"setupComplete":{}}` {
			t.Fatalf("after setup: %q, %v", data, err)
		}
		return c
	}
	doomed, other := open(clientKey), open(limitedKey)
	cp.publish("authz.json", authzDoc(2, keyOther))
	s.events.waitFor(t, applied("authz", 2), 5*time.Second)
	if code, reason := liveClose(t, doomed); code != 1007 || !strings.Contains(reason, "no longer valid") {
		t.Errorf("revoked key's session: close %v %q, want 1007", code, reason)
	}
	if _, resp, err := s.dialLive(t, "?key="+clientKey); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("revoked key opening a session: %v %v, want 401", err, resp)
	}
	send(t, other, `{"clientContent":{"turns":[{"role":"user","parts":[{"text":"still here"}]}],"turnComplete":true}}`)
	for {
		_, data, err := other.Read(t.Context())
		if err != nil {
			t.Fatalf("the other key's session: %v", err)
		}
		if strings.Contains(string(data), `"turnComplete":true`) {
			break
		}
	}
}

// TestGeminiLiveProviderClose: a provider that ends a Live session with a
// close code (Google's way of saying an error: 1011 for a quota, 1008,
// 1007) is relayed to the client with that code and reason, and the
// session's event has stage stream.
func TestGeminiLiveProviderClose(t *testing.T) {
	s := startLiveStack(t, stackOptions{})
	c, _, err := s.dialLive(t, "?key="+clientKey)
	if err != nil {
		t.Fatal(err)
	}
	send(t, c, `{"setup":{"model":"models/`+liveModel+`"}}`)
	if _, _, err := c.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	send(t, c, `{"clientContent":{"turns":[{"role":"user","parts":[{"text":"[[close=1011]]"}]}],"turnComplete":true}}`)
	if code, reason := liveClose(t, c); code != 1011 || reason != "fakeprovider: closed as asked" {
		t.Errorf("closed with %v %q, want the provider's 1011 and reason", code, reason)
	}
	s.waitLog(t, `"stage":"stream"`, 10*time.Second)
}
