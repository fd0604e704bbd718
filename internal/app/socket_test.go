package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
)

// dialSocket opens the Responses WebSocket as Codex CLI does: GET
// /v1/responses with Upgrade, the key in Authorization and the WebSocket
// mode's OpenAI-Beta token.
func (s *stack) dialSocket(t *testing.T, key string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+key)
	h.Set("OpenAI-Beta", "responses_websockets=2026-02-06")
	h.Set("Session-Id", "sess-1")
	c, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(s.api, "http")+"/v1/responses",
		&websocket.DialOptions{HTTPHeader: h})
	if err == nil {
		t.Cleanup(func() { _ = c.CloseNow() })
	}
	return c, resp, err
}

// socketEvent is what the tests read of a frame.
type socketEvent struct {
	Type     string `json:"type"`
	Status   int    `json:"status"`
	Delta    string `json:"delta"`
	Response struct {
		ID string `json:"id"`
	} `json:"response"`
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Code string `json:"code"` // an in-band stream error's
	raw  string
}

// send writes one frame.
func send(t *testing.T, c *websocket.Conn, frame string) {
	t.Helper()
	if err := c.Write(t.Context(), websocket.MessageText, []byte(frame)); err != nil {
		t.Fatalf("write frame: %v", err)
	}
}

// readAnswer reads frames up to a terminal event or an error event.
func readAnswer(t *testing.T, c *websocket.Conn) []socketEvent {
	t.Helper()
	var evs []socketEvent
	for {
		typ, data, err := c.Read(t.Context())
		if err != nil {
			t.Fatalf("read after %d events: %v", len(evs), err)
		}
		if typ != websocket.MessageText {
			t.Fatalf("frame of type %v", typ)
		}
		var ev socketEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("frame is not one JSON event (%v): %q", err, data)
		}
		ev.raw = string(data)
		evs = append(evs, ev)
		switch ev.Type {
		case "response.completed", "response.failed", "response.incomplete", "error":
			return evs
		}
	}
}

func types(evs []socketEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// TestSocketTwoResponses: two response.create frames on one socket are two
// attempts sent over HTTP as streams, two usage events, each event relayed
// in order as one frame; the second, which names the first as its
// previous_response_id with only its new input (as Codex does on a socket),
// reaches the provider with the whole input.
func TestSocketTwoResponses(t *testing.T) {
	s := startStack(t, stackOptions{})
	c, _, err := s.dialSocket(t, clientKey)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	send(t, c, `{"type":"response.create","model":"demo-gpt","store":false,"input":[{"type":"message","role":"user","content":"one two"}]}`)
	first := readAnswer(t, c)
	wantTypes := []string{
		"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed",
	}
	if diff := cmp.Diff(types(first), wantTypes); diff != "" {
		t.Fatalf("first answer's events (-got +want):\n%s", diff)
	}
	var text strings.Builder
	for _, ev := range first {
		text.WriteString(ev.Delta)
	}
	if text.String() != "echo: one two" {
		t.Errorf("deltas = %q", text.String())
	}
	req := lastRequest(t, s)
	if !req.Stream || strings.Contains(req.Body, `"type":"response.create"`) || req.Model != openAIProvModel {
		t.Errorf("provider request: stream %v model %q body %s", req.Stream, req.Model, req.Body)
	}
	if beta := req.Header.Get("Openai-Beta"); beta != "" {
		t.Errorf("provider saw OpenAI-Beta %q: the HTTP request is not in WebSocket mode", beta)
	}
	if req.Header.Get("Authorization") != "Bearer "+openAIProvKey {
		t.Errorf("provider credential not sent")
	}

	id := first[len(first)-1].Response.ID
	send(t, c, `{"type":"response.create","model":"demo-gpt","store":false,"previous_response_id":"`+id+`","input":[{"type":"message","role":"user","content":"three"}]}`)
	second := readAnswer(t, c)
	if got := second[len(second)-1].Type; got != "response.completed" {
		t.Fatalf("second answer ended with %q: %s", got, second[len(second)-1].raw)
	}
	var body struct {
		Previous *string          `json:"previous_response_id"`
		Input    []map[string]any `json:"input"`
	}
	if err := json.Unmarshal([]byte(lastRequest(t, s).Body), &body); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, it := range body.Input {
		roles = append(roles, it["role"].(string))
	}
	if body.Previous != nil || cmp.Diff(roles, []string{"user", "assistant", "user"}) != "" {
		t.Errorf("second provider request: previous_response_id %v, input roles %v; want null and user, assistant, user", body.Previous, roles)
	}
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Errorf("close: %v", err)
	}

	s.shutdown()
	evs := s.outboxEvents(t)
	if len(evs) != 2 {
		t.Fatalf("%d usage events, want 2", len(evs))
	}
	for i, ev := range evs {
		if ev.Endpoint != "responses" || !ev.Stream || ev.FailureStage != "" || ev.Usage == nil || ev.Usage.InputTokens == 0 {
			t.Errorf("event %d: %+v", i, ev)
		}
	}
	if evs[0].RequestID == evs[1].RequestID {
		t.Errorf("both attempts have request id %s", evs[0].RequestID)
	}
}

// TestSocketWarmup: Codex's warm-up frame ("generate": false, its next
// turn's context) is answered by the node with an empty completed
// response and reaches no provider; the turn that names it as
// previous_response_id, sending only its new input, reaches the provider
// with the warm-up's input before its own. One attempt, one usage event.
func TestSocketWarmup(t *testing.T) {
	s := startStack(t, stackOptions{})
	c, _, err := s.dialSocket(t, clientKey)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	send(t, c, `{"type":"response.create","model":"demo-gpt","store":false,"generate":false,"instructions":"be brief","input":[{"type":"message","role":"user","content":"context one"}]}`)
	warm := readAnswer(t, c)
	if diff := cmp.Diff(types(warm), []string{"response.created", "response.completed"}); diff != "" {
		t.Fatalf("warm-up events (-got +want):\n%s", diff)
	}
	id := warm[1].Response.ID
	if !strings.HasPrefix(id, "resp_sg-") {
		t.Errorf("warm-up response id %q", id)
	}
	if n := s.prov.RequestCount(); n != 0 {
		t.Fatalf("the warm-up reached the provider (%d requests)", n)
	}
	send(t, c, `{"type":"response.create","model":"demo-gpt","store":false,"previous_response_id":"`+id+`","input":[{"type":"message","role":"user","content":"two"}]}`)
	turn := readAnswer(t, c)
	if got := turn[len(turn)-1].Type; got != "response.completed" {
		t.Fatalf("the turn ended with %q: %s", got, turn[len(turn)-1].raw)
	}
	var body struct {
		Previous *string          `json:"previous_response_id"`
		Input    []map[string]any `json:"input"`
		Generate *bool            `json:"generate"`
	}
	if err := json.Unmarshal([]byte(lastRequest(t, s).Body), &body); err != nil {
		t.Fatal(err)
	}
	var contents []string
	for _, it := range body.Input {
		contents = append(contents, it["content"].(string))
	}
	if body.Previous != nil || body.Generate != nil || cmp.Diff(contents, []string{"context one", "two"}) != "" {
		t.Errorf("the turn's provider request: previous_response_id %v, generate %v, inputs %q", body.Previous, body.Generate, contents)
	}
	if n := s.prov.RequestCount(); n != 1 {
		t.Errorf("%d provider requests, want 1", n)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
	s.shutdown()
	if evs := s.outboxEvents(t); len(evs) != 1 {
		t.Errorf("%d usage events, want 1 (the warm-up is no attempt)", len(evs))
	}
}

// TestSocketUpgradeRefused: the upgrade is authenticated like any request:
// a bad key gets 401 before any WebSocket exists, and a GET without
// Upgrade is still 405.
func TestSocketUpgradeRefused(t *testing.T) {
	s := startStack(t, stackOptions{})
	_, resp, err := s.dialSocket(t, "sk-not-a-key")
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dial with a bad key: err %v, status %d; want 401", err, code)
	}
	if r := s.do(http.MethodGet, "/v1/responses", bearer(clientKey), ""); r.status != http.StatusMethodNotAllowed {
		t.Errorf("plain GET: status %d, want 405", r.status)
	}
}

// TestSocketErrors: what the node refuses and what fails at the provider
// come back as error events on the socket, which stays open for the next
// frame.
func TestSocketErrors(t *testing.T) {
	s := startStack(t, stackOptions{})
	c, _, err := s.dialSocket(t, clientKey)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	cases := []struct {
		name, frame string
		want        []string // the last events' type, status, error code
	}{
		{"unknown model", `{"type":"response.create","model":"no-such-model","input":"hi"}`,
			[]string{"error", "404", "model_not_found"}},
		{"not a create", `{"type":"session.update"}`, []string{"error", "400", "unsupported_event"}},
		{"type twice", `{"type":"response.create","Type":"x","model":"demo-gpt","input":"hi"}`, []string{"error", "400", "duplicate_member"}},
		// The provider drops the stream after two events: they are relayed,
		// then the node's in-band error as the socket's error event, with
		// the status a client acts on (Codex waits for its idle timeout on
		// an error event without one).
		{"cut mid-stream", `{"type":"response.create","model":"demo-gpt","input":"hi [[cut=after_events:2]]"}`,
			[]string{"response.created", "response.in_progress", "error", "502", "server_error"}},
		{"still open", `{"type":"response.create","model":"demo-gpt","input":"hi"}`, []string{"response.completed", "0", ""}},
		// Last: the 429 rests the only target for its Retry-After.
		{"provider 429", `{"type":"response.create","model":"demo-gpt","input":"hi [[status=429]] [[retry_after=7]]"}`,
			[]string{"error", "429", "rate_limit_exceeded"}},
	}
	for _, tc := range cases {
		send(t, c, tc.frame)
		evs := readAnswer(t, c)
		last := evs[len(evs)-1]
		code := last.Error.Code
		if code == "" {
			code = last.Code
		}
		got := []string{last.Type, strconv.Itoa(last.Status), code}
		if len(tc.want) > 3 {
			got = append(types(evs[:len(evs)-1]), got...)
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s\nlast frame: %s", tc.name, diff, last.raw)
		}
	}
}

// TestSocketDrain: a socket that is idle when the node drains is closed
// with 1001 (going away), a close frame, not a dropped connection.
func TestSocketDrain(t *testing.T) {
	s := startStack(t, stackOptions{})
	c, _, err := s.dialSocket(t, clientKey)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	send(t, c, `{"type":"response.create","model":"demo-gpt","input":"hi"}`)
	readAnswer(t, c)
	done := make(chan struct{})
	go func() { s.shutdown(); close(done) }()
	_, _, err = c.Read(context.WithoutCancel(t.Context()))
	if got := websocket.CloseStatus(err); got != websocket.StatusGoingAway {
		t.Errorf("read during drain: %v (status %d), want a close frame with 1001", err, got)
	}
	<-done
}
