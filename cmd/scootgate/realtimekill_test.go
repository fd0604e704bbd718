package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/scootgate/scootgate/internal/devstack/broker"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/outbox"
)

// Realtime sessions and kill -9 (docs/usage-events.md "Realtime
// sessions", "Crash bound"): a session is recorded one event per
// response as it goes, so a node killed with sessions open loses only
// the unsynced events (and the part of each session since its last
// response), never the responses its sessions completed before.

const (
	rtKillModel     = "rt-kill"
	rtKillProvModel = "fake-realtime-1"
	liveKillModel   = "live-kill"
)

// rtKillTOML is a realtime backend on the fake provider and the model
// rt-kill on it, and a Gemini Live backend and the model live-kill.
func rtKillTOML(provURL string) string {
	return fmt.Sprintf(`
[backends.gl]
protocol = "gemini"
base_url = %q
credential = "c"
max_inflight_per_node = 100
endpoints = ["bidi_generate_content"]
[models.%s]
[[models.%s.targets]]
backend = "gl"
model = "fake-gemini-1"
weight = 1
stream = true`, strings.TrimSuffix(provURL, "/v1")+"/v1beta", liveKillModel, liveKillModel) + fmt.Sprintf(`
[backends.rt]
protocol = "openai"
base_url = %q
credential = "c"
max_inflight_per_node = 100
endpoints = ["realtime"]
[models.%s]
[[models.%s.targets]]
backend = "rt"
model = %q
weight = 1
stream = true
`, provURL, rtKillModel, rtKillModel, rtKillProvModel)
}

// mqttBroker returns a real MQTT broker's address: Mosquitto's when
// SCOOTGATE_MOSQUITTO_ADDR names one (CI), else an embedded broker
// started for the test.
func mqttBroker(t *testing.T) string {
	t.Helper()
	if addr := os.Getenv("SCOOTGATE_MOSQUITTO_ADDR"); addr != "" {
		t.Logf("broker: Mosquitto at %s", addr)
		return addr
	}
	b, err := broker.Start(broker.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	t.Logf("broker: embedded at %s (SCOOTGATE_MOSQUITTO_ADDR unset)", b.Addr())
	return b.Addr()
}

// rtKillSession is one client session of the test.
type rtKillSession struct {
	c    *websocket.Conn
	rid  string // the upgrade's X-Request-Id: every event of the session has it
	done int    // responses the client saw end (response.done)
}

func openKillSession(t *testing.T, api string) *rtKillSession {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+crashKey)
	c, resp, err := websocket.Dial(t.Context(), "ws://"+api+"/v1/realtime?model="+rtKillModel, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("open a session: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	s := &rtKillSession{c: c, rid: resp.Header.Get("X-Request-Id")}
	if typ := s.read(t); typ != "session.created" {
		t.Fatalf("first event %q, want session.created", typ)
	}
	return s
}

// read returns the type of the next server event.
func (s *rtKillSession) read(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, data, err := s.c.Read(ctx)
	if err != nil {
		t.Fatalf("session %s: read: %v", s.rid, err)
	}
	var ev struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("session %s: not an event: %q", s.rid, data)
	}
	return ev.Type
}

func (s *rtKillSession) send(t *testing.T, frame string) {
	t.Helper()
	if err := s.c.Write(t.Context(), websocket.MessageText, []byte(frame)); err != nil {
		t.Fatalf("session %s: write: %v", s.rid, err)
	}
}

// respond runs one response: a user item, response.create, and the
// events up to until.
func (s *rtKillSession) respond(t *testing.T, prompt, until string) {
	t.Helper()
	s.send(t, `{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"`+prompt+`"}]}}`)
	if typ := s.read(t); typ != "conversation.item.created" {
		t.Fatalf("session %s: %q, want conversation.item.created", s.rid, typ)
	}
	s.send(t, `{"type":"response.create"}`)
	for {
		typ := s.read(t)
		if typ == "error" {
			t.Fatalf("session %s: an error event", s.rid)
		}
		if typ == until {
			if typ == "response.done" {
				s.done++
			}
			return
		}
	}
}

// liveKillSession is a Gemini Live session of the test, as a raw client
// (the key in ?key=).
type liveKillSession struct {
	c    *websocket.Conn
	rid  string
	done int // turns the client saw end (turnComplete)
}

func openLiveKillSession(t *testing.T, api string) *liveKillSession {
	t.Helper()
	u := "ws://" + api + "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent?key=" + crashKey
	c, resp, err := websocket.Dial(t.Context(), u, nil)
	if err != nil {
		t.Fatalf("open a Live session: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	s := &liveKillSession{c: c, rid: resp.Header.Get("X-Request-Id")}
	s.send(t, `{"setup":{"model":"models/`+liveKillModel+`"}}`)
	if !strings.Contains(s.read(t), "setupComplete") {
		t.Fatal("no setupComplete")
	}
	return s
}

func (s *liveKillSession) read(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, data, err := s.c.Read(ctx)
	if err != nil {
		t.Fatalf("Live session %s: read: %v", s.rid, err)
	}
	return string(data)
}

func (s *liveKillSession) send(t *testing.T, msg string) {
	t.Helper()
	if err := s.c.Write(t.Context(), websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("Live session %s: write: %v", s.rid, err)
	}
}

// turn runs one turn, reading up to its end (or, with hang, its first
// message).
func (s *liveKillSession) turn(t *testing.T, prompt string, hang bool) {
	t.Helper()
	s.send(t, `{"clientContent":{"turns":[{"role":"user","parts":[{"text":"`+prompt+`"}]}],"turnComplete":true}}`)
	for {
		msg := s.read(t)
		if hang {
			return
		}
		if strings.Contains(msg, `"turnComplete":true`) {
			s.done++
			return
		}
	}
}

// TestRealtimeKill9: the real node with three realtime sessions and two
// Gemini Live sessions open, each having completed responses (turns),
// killed with SIGKILL (one of each in the middle of one) and restarted on
// the same outbox. The first
// node publishes nowhere, so what reaches the broker is what its outbox
// file kept. Every response completed before the node reported its
// events synced is delivered by the restarted node, with the session's
// request id, its usage and no failure stage; of all the responses the
// clients saw end, at most the crash bound's unsynced events
// (outbox.DefaultMaxUnsynced) are missing; every row the kill left is
// delivered with its event_id.
func TestRealtimeKill9(t *testing.T) {
	brokerAddr := mqttBroker(t)
	exe := buildBinary(t)
	prov := fakeprovider.New(fakeprovider.Options{OpenAIKey: crashProviderKey})
	provURL, socksAddr := startProviderAndProxy(t, prov)
	topic := fmt.Sprintf("scootgate-test/rtkill-%d-%d/usage", os.Getpid(), time.Now().UnixNano())
	sub := subscribeEvents(t, brokerAddr, topic)

	dir := t.TempDir()
	api, health := freePort(t), freePort(t)
	cfg := crashConfig{api: api, health: health, provider: provURL, egress: "socks5://" + socksAddr,
		delay: "0s", extra: rtKillTOML(provURL)}
	writeCrashConfig(t, dir, cfg) // no [mqtt]: the events stay in the outbox
	first := startCrashNode(t, exe, dir, health, 0)
	first.waitReady(t, 20*time.Second)

	sessions := make([]*rtKillSession, 3)
	for i := range sessions {
		sessions[i] = openKillSession(t, api)
	}
	lives := []*liveKillSession{openLiveKillSession(t, api), openLiveKillSession(t, api)}
	// Settled: two responses (turns) each, then the node says their
	// events are on disk (committed, nothing unsynced).
	for _, s := range sessions {
		s.respond(t, "one two", "response.done")
		s.respond(t, "three four five", "response.done")
	}
	for _, s := range lives {
		s.turn(t, "one two", false)
		s.turn(t, "three", false)
	}
	settled := map[string]int{}
	for _, s := range sessions {
		settled[s.rid] = s.done
	}
	for _, s := range lives {
		settled[s.rid] = s.done
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := first.metrics()
		if m.ok && m.unsynced == 0 && m.committed >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not sync the settled responses' events: %+v", m)
		}
		time.Sleep(10 * time.Millisecond) // polling an external process's metrics
	}
	// Fresh: one more response each, the last session's left hanging, and
	// the kill right after the last response.done the clients saw.
	sessions[0].respond(t, "six", "response.done")
	sessions[1].respond(t, "seven", "response.done")
	sessions[2].respond(t, "wait [[hang]]", "response.audio.delta")
	lives[0].turn(t, "six", false)
	lives[1].turn(t, "wait [[hang]]", true)
	first.kill(t)

	rows := outboxRows(t, filepath.Join(dir, "outbox.db"))
	perSession := map[string]int{}
	for _, rid := range rows {
		perSession[rid]++
	}
	for rid, n := range settled {
		if perSession[rid] < n {
			t.Errorf("session %s: %d rows in the outbox after the kill, want at least its %d settled responses", rid, perSession[rid], n)
		}
	}

	// The restart on the same outbox, now with the broker.
	cfg.broker, cfg.topic = "tcp://"+brokerAddr, topic
	writeCrashConfig(t, dir, cfg)
	second := startCrashNode(t, exe, dir, health, 1)
	second.waitReady(t, 20*time.Second)
	deadline = time.Now().Add(30 * time.Second)
	for {
		m := second.metrics()
		if m.ok && m.depth == 0 && len(sub.snapshot()) >= len(rows) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted node did not deliver the outbox: %+v, %d delivered of %d rows", m, len(sub.snapshot()), len(rows))
		}
		time.Sleep(20 * time.Millisecond) // polling an external process's metrics
	}
	second.term(t)
	sub.quiesce(500 * time.Millisecond)

	delivered := sub.snapshot()
	for id, rid := range rows {
		if _, ok := delivered[id]; !ok {
			t.Errorf("row %s (session %s) was in the outbox after the kill but never delivered", id, rid)
		}
	}
	responses := map[string]int{} // by session: delivered events of completed responses
	for _, ev := range delivered {
		if ev.endpoint != "realtime" && ev.endpoint != "bidi_generate_content" {
			t.Errorf("event of endpoint %q", ev.endpoint)
			continue
		}
		if ev.stage == "" && ev.usage {
			responses[ev.rid]++
		}
	}
	completed, lost := 0, 0
	done := map[string]int{}
	for _, s := range sessions {
		done[s.rid] = s.done
	}
	for _, s := range lives {
		done[s.rid] = s.done
	}
	for rid, n := range done {
		completed += n
		if responses[rid] < settled[rid] {
			t.Errorf("session %s: %d responses delivered, want at least the %d completed before the node synced", rid, responses[rid], settled[rid])
		}
		if responses[rid] > n {
			t.Errorf("session %s: %d response events delivered for %d responses", rid, responses[rid], n)
		}
		lost += max(0, n-responses[rid])
	}
	if lost > outbox.DefaultMaxUnsynced {
		t.Errorf("the kill lost %d events of completed responses; the crash bound is %d", lost, outbox.DefaultMaxUnsynced)
	}
	t.Logf("%d responses and turns completed in 5 sessions, %d rows left by the kill, %d delivered, %d lost (the crash bound is %d)",
		completed, len(rows), len(delivered), lost, outbox.DefaultMaxUnsynced)
	for _, n := range []*crashNode{first, second} {
		if strings.Contains(n.output(), crashProviderKey) || strings.Contains(n.output(), crashKey) {
			t.Errorf("round %d: a key appeared in the node's log", n.round)
		}
	}
}
