package fakeprovider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// LivePath is the Gemini Live socket, at the root as Google serves it
// (not under the /v1beta of the REST methods).
const LivePath = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"

// Gemini Live over WebSocket (LivePath): a small subset of Google's
// BidiGenerateContent protocol, enough for Google's Gen AI SDK's Live
// client and the node's relay. Like Google, it accepts the upgrade
// whatever the key, and sends every message as a binary frame holding
// JSON.
//
//	a wrong key (x-goog-api-key or ?key=) → close 1007 "API key not valid. …"
//	first message not {"setup":{"model":"models/…"}} → close 1007
//	setup                  → {"setupComplete":{}}
//	clientContent (turnComplete) → a turn: serverContent.modelTurn with
//	                         the text "echo: " and the prompt, one with
//	                         40 ms of 24 kHz PCM16 audio (inlineData,
//	                         audio/pcm;rate=24000), generationComplete,
//	                         then turnComplete with the turn's usageMetadata
//	realtimeInput audio    → nothing (its audio counts as input tokens)
//	realtimeInput text, or audioStreamEnd → a turn, as clientContent
//	anything else          → close 1007
//
// Usage of a turn: promptTokenCount = words of the prompt + audio tokens
// (one per 100 bytes of audio since the last turn), responseTokenCount =
// 1 text token + 2 audio tokens, with the modality split in
// promptTokensDetails and responseTokensDetails. Every client message is
// recorded as a Request whose Body is the message and Model the setup's
// model. A prompt with [[hang]] starts the turn and never ends it;
// [[flood=N]] adds N audio messages of 64 KiB; [[close=N]] closes the
// session with code N instead (as Google does over an error).

// liveMessage is the part of a client message the fake reads.
type liveMessage struct {
	Setup *struct {
		Model string `json:"model"`
	} `json:"setup"`
	ClientContent *struct {
		Turns []struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"turns"`
		TurnComplete bool `json:"turnComplete"`
	} `json:"clientContent"`
	RealtimeInput *struct {
		Audio *struct {
			Data string `json:"data"`
		} `json:"audio"`
		Text           string `json:"text"`
		AudioStreamEnd bool   `json:"audioStreamEnd"`
	} `json:"realtimeInput"`
}

// serveLive serves one Gemini Live session.
func (p *Provider) serveLive(w http.ResponseWriter, r *http.Request) {
	p.record(Request{Protocol: Gemini, Method: r.Method, Path: r.URL.Path, Header: r.Header})
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxBody)
	if p.o.GeminiKey != "" && !same(r.Header.Get("x-goog-api-key"), p.o.GeminiKey) && !same(r.URL.Query().Get("key"), p.o.GeminiKey) {
		_ = conn.Close(1007, "API key not valid. Please pass a valid API key.")
		return
	}
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
	send := func(msg map[string]any) bool {
		b, err := json.Marshal(msg)
		return err == nil && conn.Write(ctx, websocket.MessageBinary, b) == nil
	}
	model, prompt, audioIn := "", "", 0
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		var m liveMessage
		if json.Unmarshal(data, &m) != nil {
			_ = conn.Close(1007, "Invalid JSON payload received.")
			return
		}
		if model == "" {
			if m.Setup == nil || !strings.HasPrefix(m.Setup.Model, "models/") {
				_ = conn.Close(1007, "Request contains an invalid argument.")
				return
			}
			model = strings.TrimPrefix(m.Setup.Model, "models/")
		}
		p.record(Request{Protocol: Gemini, Method: "WS", Path: r.URL.Path, Body: data, Model: model})
		turn := false
		switch {
		case m.Setup != nil:
			if !send(map[string]any{"setupComplete": map[string]any{}}) {
				return
			}
		case m.ClientContent != nil:
			for _, t := range m.ClientContent.Turns {
				for _, part := range t.Parts {
					if part.Text != "" {
						prompt = part.Text
					}
				}
			}
			turn = m.ClientContent.TurnComplete
		case m.RealtimeInput != nil && m.RealtimeInput.Audio != nil:
			audioIn += base64.StdEncoding.DecodedLen(len(m.RealtimeInput.Audio.Data)) / 100
		case m.RealtimeInput != nil && m.RealtimeInput.Text != "":
			prompt, turn = m.RealtimeInput.Text, true
		case m.RealtimeInput != nil && m.RealtimeInput.AudioStreamEnd:
			turn = true
		default:
			_ = conn.Close(1007, "Request contains an invalid argument.")
			return
		}
		if !turn {
			continue
		}
		if code, ok := closeAsked(prompt); ok {
			_ = conn.Close(code, "fakeprovider: closed as asked")
			return
		}
		if !p.liveTurn(send, prompt, audioIn) {
			return
		}
		audioIn = 0
		if strings.Contains(prompt, "[[hang]]") {
			for { // the turn never ends: read until the session does
				if _, _, err := conn.Read(ctx); err != nil {
					return
				}
			}
		}
	}
}

// closeAsked reads [[close=N]]: the session is closed with code N
// instead of a turn, as Google closes one over an error.
func closeAsked(prompt string) (websocket.StatusCode, bool) {
	_, rest, ok := strings.Cut(prompt, "[[close=")
	if !ok {
		return 0, false
	}
	digits, _, _ := strings.Cut(rest, "]]")
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1000 || n > 4999 {
		return 0, false
	}
	return websocket.StatusCode(n), true
}

// liveTurn sends the messages of one model turn; a prompt with [[hang]]
// leaves out its end.
func (p *Provider) liveTurn(send func(map[string]any) bool, prompt string, audioIn int) bool {
	part := func(v map[string]any) map[string]any {
		return map[string]any{"serverContent": map[string]any{"modelTurn": map[string]any{"parts": []any{v}}}}
	}
	if !send(part(map[string]any{"text": "echo: " + prompt})) {
		return false
	}
	audio := map[string]any{"inlineData": map[string]any{"mimeType": "audio/pcm;rate=24000", "data": base64.StdEncoding.EncodeToString(tone())}}
	if !send(part(audio)) {
		return false
	}
	if n := flood(prompt); n > 0 {
		big := map[string]any{"inlineData": map[string]any{"mimeType": "audio/pcm;rate=24000", "data": base64.StdEncoding.EncodeToString(make([]byte, 48<<10))}}
		for range n {
			if !send(part(big)) {
				return false
			}
		}
	}
	if strings.Contains(prompt, "[[hang]]") {
		return true
	}
	if !send(map[string]any{"serverContent": map[string]any{"generationComplete": true}}) {
		return false
	}
	words := len(strings.Fields(prompt))
	usage := map[string]any{
		"promptTokenCount": words + audioIn, "responseTokenCount": 3, "totalTokenCount": words + audioIn + 3,
		"promptTokensDetails": []any{
			map[string]any{"modality": "TEXT", "tokenCount": words},
			map[string]any{"modality": "AUDIO", "tokenCount": audioIn},
		},
		"responseTokensDetails": []any{
			map[string]any{"modality": "TEXT", "tokenCount": 1},
			map[string]any{"modality": "AUDIO", "tokenCount": 2},
		},
	}
	return send(map[string]any{"serverContent": map[string]any{"turnComplete": true}, "usageMetadata": usage})
}
