package openai

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Realtime is GET /v1/realtime?model=…, the Realtime API over WebSocket
// (docs/api.md "Realtime sessions"). The client and the provider exchange
// JSON events as text frames: the client sends session.update,
// input_audio_buffer.append, conversation.item.create, response.create
// and others; the provider answers with session.created,
// session.updated, response.created, deltas (text, audio as base64) and
// response.done, whose response carries the response's usage. The node
// relays every frame as it is, with one exception: a session.update that
// names a model must name the session's public model, and then names the
// target's provider model on its way up.
var Realtime = &provider.Spec{
	Endpoint:     provider.Realtime,
	Method:       http.MethodGet,
	Path:         "/v1/realtime",
	UpstreamPath: "/realtime",
	Header:       Header,
	BodyUsage:    provider.NoUsage,
	Inspect:      inspectRealtimeBody,
	Realtime: &provider.RealtimeSpec{
		Model:         realtimeModel,
		Key:           realtimeKey,
		Subprotocols:  []string{realtimeSubprotocol},
		Header:        realtimeHeader,
		Query:         func(model string) string { return "model=" + url.QueryEscape(model) },
		ClientFrame:   RealtimeClientFrame,
		ProviderFrame: RealtimeProviderFrame,
		ErrorEvent:    RealtimeErrorEvent,
	},
}

// The subprotocols of OpenAI's browser SDK (openai-node
// src/realtime/websocket.ts): "realtime", which the server selects, and
// the key as "openai-insecure-api-key.<key>", because a browser's
// WebSocket cannot send an Authorization header. The beta header travels
// as "openai-beta.realtime-v1" the same way.
const (
	realtimeSubprotocol = "realtime"
	realtimeKeyPrefix   = "openai-insecure-api-key."
	realtimeBetaProto   = "openai-beta.realtime-v1"
)

// inspectRealtimeBody refuses every body: a realtime session has none;
// its frames go through RealtimeClientFrame.
func inspectRealtimeBody([]byte, string) (provider.Request, *provider.BodyError) {
	return provider.Request{}, provider.Problemf("invalid_request", "a realtime session is a WebSocket: GET /v1/realtime?model= with Upgrade: websocket")
}

// realtimeModel reads the model query parameter: present once, not empty.
// A transcription session (intent=transcription, no model) is not served:
// the node routes by model.
func realtimeModel(q url.Values) (string, *provider.BodyError) {
	v, ok := q["model"]
	switch {
	case !ok || len(v) == 0:
		return "", provider.Problemf("missing_model", `a realtime session needs a "model" query parameter`)
	case len(v) > 1:
		return "", provider.Problemf("invalid_model", `the "model" query parameter appears more than once`)
	case v[0] == "":
		return "", provider.Problemf("invalid_model", `the "model" query parameter is empty`)
	}
	return v[0], nil
}

// subprotocols yields the subprotocols a client offers.
func subprotocols(h http.Header) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range h.Values("Sec-Websocket-Protocol") {
			for p := range strings.SplitSeq(v, ",") {
				if p = strings.TrimSpace(p); p != "" && !yield(p) {
					return
				}
			}
		}
	}
}

// realtimeKey returns the key a browser client offers as a subprotocol.
func realtimeKey(h http.Header) string {
	for p := range subprotocols(h) {
		if k, ok := strings.CutPrefix(p, realtimeKeyPrefix); ok {
			return k
		}
	}
	return ""
}

// realtimeHeader is the provider handshake's headers: User-Agent and
// OpenAI-Beta from the client (the beta subprotocol as the header), and
// the credential. Nothing of the client's subprotocols goes up: its key
// is not the provider's, and the node speaks to the provider with the
// credential's header.
func realtimeHeader(client http.Header, credential string) http.Header {
	h := make(http.Header, 3)
	if v := client["User-Agent"]; len(v) > 0 {
		h["User-Agent"] = v
	}
	if v := client["Openai-Beta"]; len(v) > 0 {
		h["Openai-Beta"] = v
	} else {
		for p := range subprotocols(client) {
			if p == realtimeBetaProto {
				h.Set("Openai-Beta", "realtime=v1")
				break
			}
		}
	}
	h.Set("Authorization", "Bearer "+credential)
	return h
}

// RealtimeClientFrame reads a client event (provider.RealtimeSpec.ClientFrame).
// The members the node decides on, "type" and session.update's
// "session"."model", must each appear once and in their exact spelling: a
// provider that reads the last of two, or matches names in any letter
// case, must read what the node read. A session.update whose session
// names a model must name public, and the copy sent names model (a JSON
// string) in its place, every other byte the client's.
func RealtimeClientFrame(frame []byte, public string, model []byte) ([]byte, provider.ClientEvent, *provider.BodyError) {
	var ev provider.ClientEvent
	it, err := jsonedit.Members(frame)
	if err != nil {
		return nil, ev, provider.Problemf("invalid_json", "an event must be a JSON object")
	}
	var typ, session []byte
	sessionAt := 0
	for {
		m, ok, err := it.Next()
		if err != nil {
			return nil, ev, provider.Problemf("invalid_json", "an event must be a JSON object")
		}
		if !ok {
			break
		}
		switch {
		case m.KeyIs("type"):
			if typ != nil {
				return nil, ev, provider.Problemf("duplicate_member", `member "type" appears more than once`)
			}
			typ = m.Value
		case m.KeyLike("type"):
			return nil, ev, provider.Problemf("duplicate_member", `member "type" appears in another letter case`)
		case m.KeyIs("session"):
			if session != nil {
				return nil, ev, provider.Problemf("duplicate_member", `member "session" appears more than once`)
			}
			session, sessionAt = m.Value, m.At
		case m.KeyLike("session"):
			return nil, ev, provider.Problemf("duplicate_member", `member "session" appears in another letter case`)
		case m.KeyIs("event_id"):
			ev.ID = m.Value
		}
	}
	switch {
	case jsonedit.EqualString(typ, "response.create"):
		ev.Kind = provider.ClientResponseCreate
	case jsonedit.EqualString(typ, "session.update"):
		ev.Kind = provider.ClientSessionUpdate
	default:
		return frame, ev, nil
	}
	if ev.Kind != provider.ClientSessionUpdate || len(session) == 0 || session[0] != '{' {
		return frame, ev, nil
	}
	at, end, berr := sessionModel(session, public)
	switch {
	case berr != nil:
		return nil, ev, berr
	case at < 0: // names no model
		return frame, ev, nil
	}
	at, end = sessionAt+at, sessionAt+end
	out := make([]byte, 0, len(frame)-(end-at)+len(model))
	out = append(out, frame[:at]...)
	out = append(out, model...)
	return append(out, frame[end:]...), ev, nil
}

// sessionModel finds the model member of a session object: its value's
// span in session, or at = -1 when there is none. A model that is not
// the session's public model is refused.
func sessionModel(session []byte, public string) (at, end int, err *provider.BodyError) {
	it, jerr := jsonedit.Members(session)
	if jerr != nil {
		return 0, 0, provider.Problemf("invalid_json", "an event must be a JSON object")
	}
	at = -1
	for {
		m, ok, jerr := it.Next()
		if jerr != nil {
			return 0, 0, provider.Problemf("invalid_json", "an event must be a JSON object")
		}
		if !ok {
			break
		}
		switch {
		case m.KeyIs("model"):
			if at >= 0 {
				return 0, 0, provider.Problemf("invalid_model", `member "session.model" appears more than once`)
			}
			name, isString := jsonedit.Unquote(m.Value)
			if !isString || name != public {
				return 0, 0, provider.Problemf("invalid_model", "session.model must name the model the session was opened with (the model query parameter)")
			}
			at, end = m.At, m.At+len(m.Value)
		case m.KeyLike("model"):
			return 0, 0, provider.Problemf("invalid_model", `member "session.model" appears in another letter case`)
		}
	}
	if at < 0 {
		return -1, -1, nil
	}
	return at, end, nil
}

var realtimeKeys = [4]string{"input_tokens", "output_tokens", "input_token_details", "output_token_details"}

// RealtimeProviderFrame reads a provider event
// (provider.RealtimeSpec.ProviderFrame). The usage of a response is in
// response.done's response.usage:
//
//	input     input_tokens (text, audio and cached together)
//	output    output_tokens (text and audio)
//	cache rd  input_token_details.cached_tokens
//
// with the text and audio split in the details, which the usage event
// keeps as the provider's own usage object. It reads only as far as the
// "type" member, except for the end of a response: most events are
// audio deltas, and the type comes first in OpenAI's events.
func RealtimeProviderFrame(frame []byte) provider.ProviderEvent {
	var pe provider.ProviderEvent
	it, err := jsonedit.Members(frame)
	if err != nil {
		return pe
	}
	for {
		m, ok, err := it.Next()
		if err != nil || !ok {
			return pe
		}
		if !m.KeyIs("type") {
			continue
		}
		switch {
		case jsonedit.EqualString(m.Value, "response.created"):
			pe.Kind = provider.ProviderResponseCreated
		case jsonedit.EqualString(m.Value, "response.done"):
			pe.Kind = provider.ProviderResponseDone
			resp, _, _ := jsonedit.Lookup(frame, "response")
			status, _, _ := jsonedit.Lookup(resp, "status")
			pe.Failed = jsonedit.EqualString(status, "failed")
			if raw, ok, _ := jsonedit.Lookup(resp, "usage"); ok && provider.Usable(raw) {
				v := provider.Lookup4(raw, realtimeKeys)
				pe.Usage = provider.Clamp(usageevent.Usage{
					InputTokens:     provider.Count(v[0]),
					OutputTokens:    provider.Count(v[1]),
					CacheReadTokens: provider.Inner(v[2], "cached_tokens"),
				})
				pe.Raw, pe.HasUsage = json.RawMessage(append([]byte(nil), raw...)), true
			}
		}
		return pe
	}
}

// realtimeError is the Realtime API's error event.
type realtimeError struct {
	Type    string             `json:"type"`
	EventID string             `json:"event_id"`
	Error   realtimeErrorInner `json:"error"`
}

type realtimeErrorInner struct {
	Type    string          `json:"type"`
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Param   *string         `json:"param"`
	EventID json.RawMessage `json:"event_id"`
}

// RealtimeErrorEvent renders an error the node found itself as the
// Realtime API's error event (provider.RealtimeSpec.ErrorEvent):
// {"type":"error","event_id":"event_…","error":{"type":…,"code":…,
// "message":…,"param":null,"event_id":<the client event's id or null>}}.
func RealtimeErrorEvent(typ, code, msg string, clientEvent []byte) []byte {
	var id [12]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	ev := realtimeError{Type: "error", EventID: "event_" + hex.EncodeToString(id[:]),
		Error: realtimeErrorInner{Type: typ, Code: code, Message: msg, EventID: json.RawMessage("null")}}
	if _, ok := jsonedit.Unquote(clientEvent); ok {
		ev.Error.EventID = clientEvent
	}
	b, err := json.Marshal(ev)
	if err != nil { // unreachable: strings and a JSON string
		return []byte(`{"type":"error","event_id":"event_0","error":{"type":"server_error","code":"internal_error","message":"internal error","param":null,"event_id":null}}`)
	}
	return b
}
