package fakeprovider

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// The Realtime API over WebSocket (GET /v1/realtime?model=…): a small
// subset of OpenAI's event protocol, enough for clients and the node's
// relay.
//
//	on connect             → session.created (the query's model)
//	session.update         → session.updated (the session object as sent)
//	conversation.item.create → conversation.item.created; a user item's
//	                         input_text is the prompt of the next response
//	input_audio_buffer.append → nothing (its audio counts as input tokens)
//	response.create        → response.created, response.text.delta
//	                         ("echo: " and the prompt), response.audio.delta
//	                         (40 ms of a 440 Hz tone, 24 kHz PCM16, base64),
//	                         response.done with usage
//	anything else          → an error event
//
// Usage of a response: input_tokens = words of the prompt + audio tokens
// (one per 100 bytes of audio appended since the last response; the
// audio is the input_token_details.audio_tokens), output_tokens = 1 text
// token + 2 audio tokens. Every client frame is recorded as a Request
// whose Body is the frame. A prompt with [[hang]] makes the response
// start and never end (response.created and the deltas, no
// response.done), for tests of a session cut in a response; [[flood=N]]
// adds N audio deltas of 64 KiB, for tests of a client that stops
// reading.
const realtimeAudioBytes = 24000 * 2 * 40 / 1000 // 40 ms of 24 kHz PCM16

// realtimeEvent is the part of a client event the fake reads.
type realtimeEvent struct {
	Type    string          `json:"type"`
	EventID string          `json:"event_id"`
	Session json.RawMessage `json:"session"`
	Audio   string          `json:"audio"`
	Item    struct {
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"item"`
}

// serveRealtime serves one realtime session.
func (p *Provider) serveRealtime(w http.ResponseWriter, r *http.Request) {
	model := r.URL.Query().Get("model")
	p.record(Request{Protocol: OpenAI, Method: r.Method, Path: r.URL.Path, Header: r.Header, Model: model})
	if !p.authorized(OpenAI, r.Header) {
		p.writeError(w, OpenAI, 0, errorSpec{status: http.StatusUnauthorized})
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxBody)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	go func() { // owned: ends with the session or the fake
		select {
		case <-p.stop:
			_ = conn.CloseNow()
			cancel()
		case <-ctx.Done():
		}
	}()
	seq := 0
	send := func(ev map[string]any) bool {
		seq++
		ev["event_id"] = fmt.Sprintf("event_%d", seq)
		b, err := json.Marshal(ev)
		return err == nil && conn.Write(ctx, websocket.MessageText, b) == nil
	}
	if !send(map[string]any{"type": "session.created", "session": map[string]any{
		"id": "sess_1", "object": "realtime.session", "model": model, "modalities": []string{"text", "audio"}}}) {
		return
	}
	prompt, audioIn, responses := "", 0, 0
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		p.record(Request{Protocol: OpenAI, Method: "WS", Path: r.URL.Path, Body: data, Model: model})
		var ev realtimeEvent
		if json.Unmarshal(data, &ev) != nil {
			if !send(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "code": "invalid_json", "message": "not JSON"}}) {
				return
			}
			continue
		}
		ok := true
		switch ev.Type {
		case "session.update":
			ok = send(map[string]any{"type": "session.updated", "session": ev.Session})
		case "conversation.item.create":
			for _, c := range ev.Item.Content {
				if c.Text != "" && ev.Item.Role == "user" {
					prompt = c.Text
				}
			}
			ok = send(map[string]any{"type": "conversation.item.created", "item": map[string]any{"role": ev.Item.Role}})
		case "input_audio_buffer.append":
			audioIn += base64.StdEncoding.DecodedLen(len(ev.Audio)) / 100
		case "response.create":
			responses++
			ok = p.realtimeResponse(send, responses, prompt, audioIn)
			audioIn = 0
			if ok && strings.Contains(prompt, "[[hang]]") {
				for { // the response never ends: read until the session does
					if _, _, err := conn.Read(ctx); err != nil {
						return
					}
				}
			}
		default:
			ok = send(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error",
				"code": "unknown_event", "message": "fakeprovider: unknown event " + ev.Type, "event_id": ev.EventID}})
		}
		if !ok {
			return
		}
	}
}

// realtimeResponse sends the events of response n; a prompt with
// [[hang]] leaves out its response.done.
func (p *Provider) realtimeResponse(send func(map[string]any) bool, n int, prompt string, audioIn int) bool {
	id := fmt.Sprintf("resp_%d", n)
	if !send(map[string]any{"type": "response.created", "response": map[string]any{"id": id, "object": "realtime.response", "status": "in_progress"}}) {
		return false
	}
	if !send(map[string]any{"type": "response.text.delta", "response_id": id, "delta": "echo: " + prompt}) {
		return false
	}
	if !send(map[string]any{"type": "response.audio.delta", "response_id": id, "delta": base64.StdEncoding.EncodeToString(tone())}) {
		return false
	}
	if n := flood(prompt); n > 0 {
		big := base64.StdEncoding.EncodeToString(make([]byte, 48<<10))
		for range n {
			if !send(map[string]any{"type": "response.audio.delta", "response_id": id, "delta": big}) {
				return false
			}
		}
	}
	if strings.Contains(prompt, "[[hang]]") {
		return true
	}
	words := len(strings.Fields(prompt))
	usage := map[string]any{
		"total_tokens": words + audioIn + 3, "input_tokens": words + audioIn, "output_tokens": 3,
		"input_token_details":  map[string]any{"text_tokens": words, "audio_tokens": audioIn, "cached_tokens": 0},
		"output_token_details": map[string]any{"text_tokens": 1, "audio_tokens": 2},
	}
	return send(map[string]any{"type": "response.done", "response": map[string]any{
		"id": id, "object": "realtime.response", "status": "completed", "usage": usage}})
}

// flood reads [[flood=N]]: N more audio deltas of 64 KiB each, for tests
// of a client that stops reading.
func flood(prompt string) int {
	_, rest, ok := strings.Cut(prompt, "[[flood=")
	if !ok {
		return 0
	}
	digits, _, _ := strings.Cut(rest, "]]")
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// tone is 40 ms of a 440 Hz sine at 24 kHz, PCM16 little-endian.
func tone() []byte {
	out := make([]byte, realtimeAudioBytes)
	for i := range realtimeAudioBytes / 2 {
		v := int16(8000 * math.Sin(2*math.Pi*440*float64(i)/24000))
		binary.LittleEndian.PutUint16(out[2*i:], uint16(v))
	}
	return out
}
