package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/devstack/cpserver"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

const (
	realtimeModel     = "demo-realtime"
	realtimeProvModel = "fake-realtime-1"
)

// realtimeTOML adds a backend "rt" on the fake provider serving realtime
// sessions, and the model demo-realtime on it, its target in tier.
func realtimeTOML(provURL string, tier int) string {
	return fmt.Sprintf(`
[backends.rt]
protocol = "openai"
base_url = %q
credential = "oa"
max_inflight_per_node = 4
endpoints = ["realtime"]
[models.%s]
[[models.%s.targets]]
backend = "rt"
model = %q
weight = 1
stream = true
tier = %d
`, provURL, realtimeModel, realtimeModel, realtimeProvModel, tier)
}

// startRealtimeStack is a stack whose fake provider also serves demo-realtime.
func startRealtimeStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	// The provider's URL is known only once it runs: the stack puts
	// "#PROV#" in place of it.
	tier := 0
	if strings.Contains(o.extraTOML, "rt-dead") {
		tier = 1 // behind the dead one, which is tried first
	}
	o.extraTOML = realtimeTOML("#PROV#", tier) + o.extraTOML
	return startStack(t, o)
}

// dialRealtime opens a realtime session as the openai-node SDK's ws
// client does: the key in Authorization, the beta header.
func (s *stack) dialRealtime(t *testing.T, model string, h http.Header, protocols ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	c, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(s.api, "http")+"/v1/realtime?model="+model,
		&websocket.DialOptions{HTTPHeader: h, Subprotocols: protocols})
	if err == nil {
		t.Cleanup(func() { _ = c.CloseNow() })
	}
	return c, resp, err
}

func realtimeHeader(key string) http.Header {
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	h.Set("OpenAI-Beta", "realtime=v1")
	return h
}

// rtEvent is what the tests read of a server event.
type rtEvent struct {
	Type    string `json:"type"`
	EventID string `json:"event_id"`
	Delta   string `json:"delta"`
	Session struct {
		Model string `json:"model"`
	} `json:"session"`
	Response struct {
		Status string          `json:"status"`
		Usage  json.RawMessage `json:"usage"`
	} `json:"response"`
	Error struct {
		Type    string          `json:"type"`
		Code    string          `json:"code"`
		Message string          `json:"message"`
		EventID json.RawMessage `json:"event_id"`
	} `json:"error"`
}

func readEvent(t *testing.T, c *websocket.Conn) rtEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	typ, data, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.MessageText {
		t.Fatalf("frame of type %v", typ)
	}
	var ev rtEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("not a JSON event (%v): %q", err, data)
	}
	return ev
}

// readUntil reads events up to one of type typ, and returns them all.
func readUntil(t *testing.T, c *websocket.Conn, typ string) []rtEvent {
	t.Helper()
	var evs []rtEvent
	for {
		ev := readEvent(t, c)
		evs = append(evs, ev)
		if ev.Type == typ || ev.Type == "error" {
			return evs
		}
	}
}

// readClose reads until the session is closed and returns its status.
func readClose(t *testing.T, c *websocket.Conn) websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

func realtimeEvents(evs []*usageevent.Event) []*usageevent.Event {
	var out []*usageevent.Event
	for _, ev := range evs {
		if ev.Endpoint == usageevent.EndpointRealtime {
			out = append(out, ev)
		}
	}
	return out
}

// TestRealtimeSession: a session through a whole node and the SOCKS5
// egress: the provider gets the provider model and credential, the
// client's frames and the provider's come across unchanged, a
// session.update naming the public model reaches the provider naming
// the provider model, one naming another model is refused with an error
// event and not relayed, and each response is one usage event with its
// usage (text, audio and cached tokens as the provider reported them).
func TestRealtimeSession(t *testing.T) {
	runRealtimeSession(t, startRealtimeStack(t, stackOptions{}))
}

// TestRealtimeSessionThroughDante is TestRealtimeSession with Debian's
// dante-server as the SOCKS5 egress proxy: the provider's WebSocket is a
// tunnel through it for the session's life.
func TestRealtimeSessionThroughDante(t *testing.T) {
	addr := requireDaemon(t, "SCOOTGATE_DANTE_ADDR", "dante-server (SOCKS5)")
	runRealtimeSession(t, startRealtimeStack(t, stackOptions{proxyURL: "socks5://" + addr}))
}

// TestRealtimeSessionThroughTinyproxy is TestRealtimeSession with
// Debian's tinyproxy as the HTTP CONNECT egress proxy, with Basic auth.
func TestRealtimeSessionThroughTinyproxy(t *testing.T) {
	u := requireDaemon(t, "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)")
	runRealtimeSession(t, startRealtimeStack(t, stackOptions{proxyURL: u}))
}

// runRealtimeSession is TestRealtimeSession's body against s, which it
// shuts down.
func runRealtimeSession(t *testing.T, s *stack) {
	t.Helper()
	c, resp, err := s.dialRealtime(t, realtimeModel, realtimeHeader(clientKey))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if got := resp.Header.Get("X-Request-Id"); got == "" {
		t.Error("the upgrade's answer has no X-Request-Id")
	}
	if ev := readEvent(t, c); ev.Type != "session.created" || ev.Session.Model != realtimeProvModel {
		t.Fatalf("first event %+v, want session.created", ev)
	}
	send(t, c, `{"type":"session.update","event_id":"u1","session":{"model":"demo-realtime","modalities":["text","audio"]}}`)
	if ev := readEvent(t, c); ev.Type != "session.updated" || ev.Session.Model != realtimeProvModel {
		t.Fatalf("after session.update: %+v, want session.updated naming the provider model", ev)
	}
	send(t, c, `{"type":"session.update","event_id":"u2","session":{"model":"gpt-4o-realtime"}}`)
	if ev := readEvent(t, c); ev.Type != "error" || ev.Error.Code != "invalid_model" || string(ev.Error.EventID) != `"u2"` || ev.Error.Type != "invalid_request_error" {
		t.Fatalf("session.update naming another model: %+v, want an invalid_model error event about u2", ev)
	}
	audio := base64.StdEncoding.EncodeToString(make([]byte, 1000)) // 10 audio tokens at the fake
	send(t, c, `{"type":"input_audio_buffer.append","audio":"`+audio+`"}`)
	send(t, c, `{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"one two"}]}}`)
	if ev := readEvent(t, c); ev.Type != "conversation.item.created" {
		t.Fatalf("got %+v, want conversation.item.created", ev)
	}
	send(t, c, `{"type":"response.create"}`)
	evs := readUntil(t, c, "response.done")
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type)
	}
	if diff := cmp.Diff(got, []string{"response.created", "response.text.delta", "response.audio.delta", "response.done"}); diff != "" {
		t.Fatalf("response events (-got +want):\n%s", diff)
	}
	if evs[1].Delta != "echo: one two" {
		t.Errorf("text delta %q", evs[1].Delta)
	}
	if pcm, err := base64.StdEncoding.DecodeString(evs[2].Delta); err != nil || len(pcm) != 1920 {
		t.Errorf("audio delta: %d bytes, %v; want 40 ms of 24 kHz PCM16", len(pcm), err)
	}
	send(t, c, `{"type":"response.create"}`)
	readUntil(t, c, "response.done")
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatalf("close: %v", err)
	}

	// What the provider saw: the handshake and the frames.
	reqs := s.prov.Requests()
	var frames []string
	for _, r := range reqs {
		if r.Path != "/v1/realtime" {
			continue
		}
		if r.Method == http.MethodGet {
			if r.Model != realtimeProvModel || r.Header.Get("Authorization") != "Bearer "+openAIProvKey || r.Header.Get("Openai-Beta") != "realtime=v1" {
				t.Errorf("handshake: model %q, beta %q, authorization is the provider's: %v",
					r.Model, r.Header.Get("Openai-Beta"), r.Header.Get("Authorization") == "Bearer "+openAIProvKey)
			}
			continue
		}
		frames = append(frames, string(r.Body))
	}
	want := []string{
		`{"type":"session.update","event_id":"u1","session":{"model":"fake-realtime-1","modalities":["text","audio"]}}`,
		`{"type":"input_audio_buffer.append","audio":"` + audio + `"}`,
		`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"one two"}]}}`,
		`{"type":"response.create"}`,
		`{"type":"response.create"}`,
	}
	if diff := cmp.Diff(frames, want); diff != "" {
		t.Errorf("frames at the provider (-got +want):\n%s", diff)
	}

	s.shutdown()
	rt := realtimeEvents(s.outboxEvents(t))
	if len(rt) != 2 {
		for _, ev := range rt {
			t.Logf("event %+v usage %+v", *ev, ev.Usage)
		}
		t.Fatalf("%d realtime usage events, want one per response (2)", len(rt))
	}
	wantUsage := []usageevent.Usage{{InputTokens: 12, OutputTokens: 3}, {InputTokens: 2, OutputTokens: 3}}
	for i, ev := range rt {
		if ev.Usage == nil || *ev.Usage != wantUsage[i] || ev.FailureStage != "" || ev.HTTPStatus != 101 ||
			ev.PublicModel != realtimeModel || ev.ProviderModel != realtimeProvModel || ev.Backend != "rt" ||
			ev.SendState != usageevent.SendResponseReceived || ev.RequestID != rt[0].RequestID || !ev.Stream {
			t.Errorf("event %d: %+v usage %+v", i, ev, ev.Usage)
		}
		if !strings.Contains(string(ev.ProviderUsage), `"audio_tokens"`) {
			t.Errorf("event %d: provider usage %s lacks the audio split", i, ev.ProviderUsage)
		}
		if ev.RequestBytes == 0 || ev.ResponseBytes == 0 {
			t.Errorf("event %d: request %d and response %d bytes", i, ev.RequestBytes, ev.ResponseBytes)
		}
	}
}

// TestRealtimeBrowserKey: the key OpenAI's browser SDK sends as a
// subprotocol ("openai-insecure-api-key.<key>", beside "realtime") opens
// a session; the node answers with "realtime", never the key; the beta
// subprotocol reaches the provider as its header. A wrong key, a missing
// model, an unknown one and a GET without the upgrade are HTTP answers in
// the OpenAI error shape.
func TestRealtimeBrowserKey(t *testing.T) {
	s := startRealtimeStack(t, stackOptions{})
	c, resp, err := s.dialRealtime(t, realtimeModel, nil, "realtime", "openai-insecure-api-key."+clientKey, "openai-beta.realtime-v1")
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if got := resp.Header.Values("Sec-Websocket-Protocol"); len(got) != 1 || got[0] != "realtime" {
		t.Errorf("subprotocol answered: %q, want realtime", got)
	}
	if ev := readEvent(t, c); ev.Type != "session.created" {
		t.Fatalf("first event %+v", ev)
	}
	for _, r := range s.prov.Requests() {
		if r.Path == "/v1/realtime" && r.Method == http.MethodGet && (r.Header.Get("Openai-Beta") != "realtime=v1" || r.Header.Get("Sec-Websocket-Protocol") != "") {
			t.Errorf("handshake at the provider: beta %q, subprotocols %q", r.Header.Get("Openai-Beta"), r.Header.Get("Sec-Websocket-Protocol"))
		}
	}
	_ = c.Close(websocket.StatusNormalClosure, "")

	for _, tc := range []struct {
		name, model string
		protocols   []string
		status      int
		code        string
	}{
		{"wrong subprotocol key", realtimeModel, []string{"realtime", "openai-insecure-api-key.sk-wrong"}, 401, "invalid_api_key"},
		{"no key", realtimeModel, []string{"realtime"}, 401, "invalid_api_key"},
		{"empty model", "", []string{"realtime", "openai-insecure-api-key." + clientKey}, 400, "invalid_model"},
		{"unknown model", "nope", []string{"realtime", "openai-insecure-api-key." + clientKey}, 404, "model_not_found"},
		{"not served", openAIModel, []string{"realtime", "openai-insecure-api-key." + clientKey}, 400, "endpoint_not_served"},
	} {
		path := tc.model
		_, resp, err := s.dialRealtime(t, path, nil, tc.protocols...)
		if err == nil || resp == nil || resp.StatusCode != tc.status {
			t.Errorf("%s: %v, %v; want HTTP %d", tc.name, err, resp, tc.status)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `"code":"`+tc.code+`"`) || strings.Contains(string(body), clientKey) {
			t.Errorf("%s: body %s, want the OpenAI error with code %s", tc.name, body, tc.code)
		}
	}
	r := s.do(http.MethodGet, "/v1/realtime?model="+realtimeModel, bearer(clientKey), "")
	if r.status != http.StatusUpgradeRequired || !strings.Contains(r.body, `"code":"websocket_required"`) {
		t.Errorf("GET without the upgrade: %d %s", r.status, r.body)
	}
}

// TestRealtimeDrain: a drain closes a session between responses at once
// and one in a response when the grace ends, each with the error event
// and 1001; the cut response is recorded as shutdown.
func TestRealtimeDrain(t *testing.T) {
	s := startRealtimeStack(t, stackOptions{grace: "1s"})
	idle, _, err := s.dialRealtime(t, realtimeModel, realtimeHeader(clientKey))
	if err != nil {
		t.Fatal(err)
	}
	readEvent(t, idle)
	busy, _, err := s.dialRealtime(t, realtimeModel, realtimeHeader(clientKey))
	if err != nil {
		t.Fatal(err)
	}
	readEvent(t, busy)
	send(t, busy, `{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"wait [[hang]]"}]}}`)
	readEvent(t, busy)
	send(t, busy, `{"type":"response.create"}`)
	readUntil(t, busy, "response.audio.delta")

	go s.shutdown() // the drain
	for name, c := range map[string]*websocket.Conn{"idle": idle, "busy": busy} {
		ev := readEvent(t, c)
		if ev.Type != "error" || ev.Error.Code != "node_shutting_down" {
			t.Errorf("%s session: %+v, want the node_shutting_down error event", name, ev)
		}
		if code := readClose(t, c); code != websocket.StatusGoingAway {
			t.Errorf("%s session closed with %v, want 1001", name, code)
		}
	}
	s.shutdown()
	stages := map[string]int{}
	for _, ev := range realtimeEvents(s.outboxEvents(t)) {
		stages[ev.FailureStage]++
	}
	if stages["shutdown"] != 2 {
		t.Errorf("event stages %v, want both sessions recorded as shutdown", stages)
	}
}

// TestRealtimeRevocation: a session whose key is revoked by an
// authorization snapshot swap gets an error event and is closed with
// 1008; the key opens no new one; another key's session goes on.
func TestRealtimeRevocation(t *testing.T) {
	cp := startControlPlane(t)
	keyOther := authsnap.Key{KeyID: "k-other", TenantID: "t-2", Digest: authsnap.Digest(limitedKey)}
	cp.publish("authz.json", authzDoc(1, keyFull, keyOther))
	s := startRealtimeStack(t, stackOptions{
		authzSource:  cp.srv.URL(cpserver.AuthzPath),
		controlPlane: "poll_interval = \"1s\"\nlong_poll = \"30s\"\nstale_after = \"1m\"",
	})
	doomed, _, err := s.dialRealtime(t, realtimeModel, realtimeHeader(clientKey))
	if err != nil {
		t.Fatal(err)
	}
	readEvent(t, doomed)
	other, _, err := s.dialRealtime(t, realtimeModel, realtimeHeader(limitedKey))
	if err != nil {
		t.Fatal(err)
	}
	readEvent(t, other)

	cp.publish("authz.json", authzDoc(2, keyOther))
	s.events.waitFor(t, applied("authz", 2), 5*time.Second)
	if ev := readEvent(t, doomed); ev.Type != "error" || ev.Error.Code != "invalid_api_key" {
		t.Errorf("revoked key's session: %+v, want the invalid_api_key error event", ev)
	}
	if code := readClose(t, doomed); code != websocket.StatusPolicyViolation {
		t.Errorf("revoked key's session closed with %v, want 1008", code)
	}
	if _, resp, err := s.dialRealtime(t, realtimeModel, realtimeHeader(clientKey)); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("revoked key opening a session: %v %v, want 401", err, resp)
	}
	send(t, other, `{"type":"response.create"}`)
	if evs := readUntil(t, other, "response.done"); evs[len(evs)-1].Type != "response.done" {
		t.Errorf("the other key's session: %+v", evs)
	}
}

// TestRealtimeStalledClient: a client that stops reading while the
// provider sends is cut within stream_idle, the provider side closed, and
// the response recorded as client_stalled.
func TestRealtimeStalledClient(t *testing.T) {
	s := startRealtimeStack(t, stackOptions{idle: "1s"})
	c, _, err := s.dialRealtime(t, realtimeModel, realtimeHeader(clientKey))
	if err != nil {
		t.Fatal(err)
	}
	readEvent(t, c)
	send(t, c, `{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"[[flood=400]]"}]}}`)
	send(t, c, `{"type":"response.create"}`)
	// Read nothing: the node's writes block once the socket buffers fill.
	s.waitLog(t, `"stage":"client_stalled"`, 20*time.Second)
	s.shutdown()
	var stalled bool
	for _, ev := range realtimeEvents(s.outboxEvents(t)) {
		stalled = stalled || ev.FailureStage == usageevent.StageClientStalled
	}
	if !stalled {
		t.Error("no realtime event with stage client_stalled")
	}
}

// waitLog waits until the node's log holds substr.
func (s *stack) waitLog(t *testing.T, substr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(s.logs.String(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the node's log within %v:\n%s", substr, d, s.logs.String())
		}
		<-tick.C
	}
}

// TestRealtimeBounds: [realtime] idle_timeout closes a session in which
// nothing went either way (the session_idle error event, 1000), and a
// client message over frame_bytes closes it with 1009.
func TestRealtimeBounds(t *testing.T) {
	s := startRealtimeStack(t, stackOptions{extraTOML: "\n[realtime]\nidle_timeout = \"300ms\"\nframe_bytes = 4096\n"})
	c, _, err := s.dialRealtime(t, realtimeModel, realtimeHeader(clientKey))
	if err != nil {
		t.Fatal(err)
	}
	readEvent(t, c)
	if ev := readEvent(t, c); ev.Type != "error" || ev.Error.Code != "session_idle" {
		t.Errorf("idle session: %+v, want the session_idle error event", ev)
	}
	if code := readClose(t, c); code != websocket.StatusNormalClosure {
		t.Errorf("idle session closed with %v, want 1000", code)
	}

	big, _, err := s.dialRealtime(t, realtimeModel, realtimeHeader(clientKey))
	if err != nil {
		t.Fatal(err)
	}
	readEvent(t, big)
	send(t, big, `{"type":"input_audio_buffer.append","audio":"`+strings.Repeat("A", 5000)+`"}`)
	if code := readClose(t, big); code != websocket.StatusMessageTooBig {
		t.Errorf("a message over frame_bytes closed the session with %v, want 1009", code)
	}
}

// TestRealtimeNodeSDK: the official OpenAI Node SDK's browser-style
// realtime client (OpenAIRealtimeWebSocket: the runtime's WebSocket, the
// key as the openai-insecure-api-key subprotocol, always wss) through a
// node serving TLS: a response with its text and audio deltas and its
// done event.
func TestRealtimeNodeSDK(t *testing.T) {
	node := requireAgent(t, "node", "nodejs")
	sdk := filepath.Join(nodeSDKPrefix, "node_modules")
	if _, err := os.Stat(filepath.Join(sdk, "openai", "realtime", "websocket.js")); err != nil {
		msg := "the OpenAI Node SDK (with its realtime client) is not installed in " + nodeSDKPrefix + " (scripts/ci-agents.sh installs it)"
		if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
			t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
		}
		t.Skip("SKIPPING: " + msg)
	}
	cf, kf, _ := selfSigned(t)
	s := startRealtimeStack(t, stackOptions{tlsCert: cf, tlsKey: kf})
	script := filepath.Join(t.TempDir(), "realtime.cjs")
	if err := os.WriteFile(script, []byte(`const OpenAI = require('openai');
const { OpenAIRealtimeWebSocket } = require('openai/realtime/websocket');
const client = new OpenAI({ baseURL: process.env.BASE, apiKey: process.env.KEY });
const rt = new OpenAIRealtimeWebSocket({ model: process.env.MODEL, dangerouslyAllowBrowser: true }, client);
const seen = [];
rt.on('error', (e) => { console.error('error: ' + e.message); process.exit(1); });
rt.on('event', (ev) => { seen.push(ev.type); });
rt.on('session.created', () => {
  rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'one two' }] } });
  rt.send({ type: 'response.create' });
});
rt.on('response.done', (ev) => {
  process.stdout.write(JSON.stringify({ seen, usage: ev.response.usage }));
  rt.close();
});
setTimeout(() => { console.error('timeout: ' + seen.join(',')); process.exit(1); }, 20000).unref();
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Node 20 has the WebSocket global behind a flag (22 by default).
	cmd := exec.CommandContext(ctx, node, "--experimental-websocket", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NODE_PATH=" + sdk, "NODE_EXTRA_CA_CERTS=" + cf,
		"BASE=" + s.api + "/v1", "KEY=" + clientKey, "MODEL=" + realtimeModel}
	out, err := cmd.CombinedOutput()
	shown := strings.ReplaceAll(string(out), clientKey, "<client key>")
	if err != nil {
		t.Fatalf("node: %v\n%s", err, shown)
	}
	for _, want := range []string{`"session.created"`, `"response.text.delta"`, `"response.audio.delta"`, `"response.done"`, `"input_tokens":2`} {
		if !strings.Contains(shown, want) {
			t.Errorf("the SDK's session lacks %s: %s", want, shown)
		}
	}
}

// TestRealtimeHandshakeRepicked: a provider whose handshake fails (nothing
// listens) is an attempt of its own, definitely_not_sent, and the session
// is opened on the next target: nothing of the client's had been sent.
func TestRealtimeHandshakeRepicked(t *testing.T) {
	s := startRealtimeStack(t, stackOptions{extraTOML: fmt.Sprintf(`
[backends.rt-dead]
protocol = "openai"
base_url = "http://%s/v1"
credential = "oa"
max_inflight_per_node = 4
endpoints = ["realtime"]
[[models.%s.targets]]
backend = "rt-dead"
model = %q
weight = 1
tier = 0
`, deadAddr(t), realtimeModel, realtimeProvModel)})
	c, _, err := s.dialRealtime(t, realtimeModel, realtimeHeader(clientKey))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if ev := readEvent(t, c); ev.Type != "session.created" {
		t.Fatalf("first event %+v", ev)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
	// The session's end is recorded after the close handshake the client
	// waited for: a drain before that would cut the session (shutdown).
	s.waitLog(t, `"attempt":2`, 10*time.Second)
	s.shutdown()
	var got []string
	for _, ev := range s.outboxEvents(t) {
		got = append(got, fmt.Sprintf("%d %s %s %s %s", ev.Attempt, ev.Backend, ev.SendState, ev.FailureStage, ev.Endpoint))
	}
	want := []string{"1 rt-dead definitely_not_sent connect realtime", "2 rt response_received  realtime"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("events (-got +want):\n%s", diff)
	}
}
