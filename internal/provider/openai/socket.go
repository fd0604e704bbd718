package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
)

// The Responses API's WebSocket mode (docs/api.md "Responses over
// WebSocket"), as Codex CLI speaks it: the client opens a WebSocket on
// /v1/responses and sends one {"type":"response.create", …} frame per
// answer, whose other members are the HTTP create body; the server sends
// each event of the answer's stream as one text frame, its SSE data
// exactly, and an error as {"type":"error","status":…,"error":{…}}.
// Codex also sends {"type":"response.processed"} acknowledgements, which
// get no answer.
var responsesSocket = &provider.SocketSpec{
	Header:       socketHeader,
	Frame:        socketFrame,
	ErrorEvent:   socketErrorEvent,
	StreamError:  socketStreamError,
	LimitReached: socketLimitReached,
	Whole:        socketWhole,
	Continue:     socketContinue,
	Remember:     socketRemember,
	Prepare:      socketPrepare,
}

// socketBeta is the OpenAI-Beta token that asks for the WebSocket mode;
// the HTTP request of a frame is not in that mode.
const socketBeta = "responses_websockets="

// socketHeader is the upgrade request's headers as the HTTP request of
// each frame carries them: the WebSocket handshake headers gone, the
// OpenAI-Beta token of the WebSocket mode removed, and a JSON body that
// asks for a stream. The session headers stay (affinity reads them);
// Header's allowlist still decides what reaches the provider.
func socketHeader(upgrade http.Header) http.Header {
	h := upgrade.Clone()
	for k := range h {
		if strings.HasPrefix(k, "Sec-Websocket-") {
			delete(h, k)
		}
	}
	h.Del("Upgrade")
	h.Del("Connection")
	h.Del("Openai-Beta")
	for _, v := range upgrade.Values("Openai-Beta") {
		var keep []string
		for tok := range strings.SplitSeq(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" && !strings.HasPrefix(tok, socketBeta) {
				keep = append(keep, tok)
			}
		}
		if len(keep) > 0 {
			h.Add("Openai-Beta", strings.Join(keep, ","))
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	return h
}

// socketFrame reads a client frame. A response.create frame becomes the
// HTTP create body: its members byte for byte without "type", and
// "stream": true in place of any stream member the client sent (in the
// WebSocket mode every answer streams). "type" is the member the node
// decides on, so a second one, or one in another letter case, is refused
// (docs/api.md "Responses over WebSocket").
func socketFrame(frame []byte) ([]byte, bool, *provider.BodyError) {
	it, err := jsonedit.Members(frame)
	if err != nil {
		return nil, false, provider.Problemf("invalid_json", "a frame must be a JSON object")
	}
	var typ []byte
	out := make([]byte, 0, len(frame)+16)
	out = append(out, '{')
	for {
		m, ok, err := it.Next()
		if err != nil {
			return nil, false, provider.Problemf("invalid_json", "a frame must be a JSON object")
		}
		if !ok {
			break
		}
		switch {
		case m.KeyIs("type"):
			if typ != nil {
				return nil, false, provider.Problemf("duplicate_member", `member "type" appears more than once`)
			}
			typ = m.Value
			continue
		case m.KeyLike("type"):
			return nil, false, provider.Problemf("duplicate_member", `member "type" appears in another letter case`)
		case m.KeyLike("stream"):
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, m.RawKey...)
		out = append(out, '"', ':')
		out = append(out, m.Value...)
	}
	switch {
	case typ == nil:
		return nil, false, provider.Problemf("missing_required_parameter", `a frame needs a "type"`)
	case jsonedit.EqualString(typ, "response.create"):
		if len(out) > 1 {
			out = append(out, ',')
		}
		return append(out, `"stream":true}`...), false, nil
	case jsonedit.EqualString(typ, "response.processed"):
		return nil, true, nil
	}
	return nil, false, provider.Problemf("unsupported_event", "only response.create frames are served; got type %s", typ)
}

// socketError is the WebSocket mode's error event. Codex reads status and
// error, and headers for its retry advice.
type socketError struct {
	Type    string            `json:"type"`
	Status  int               `json:"status"`
	Error   json.RawMessage   `json:"error"`
	Headers map[string]string `json:"headers,omitempty"`
}

// socketErrorEvent wraps an error answer: the error object of the OpenAI
// error document, or a generic one for a body in another shape.
func socketErrorEvent(status int, body []byte, header http.Header) []byte {
	obj, ok, err := jsonedit.Lookup(body, "error")
	if err != nil || !ok || len(obj) == 0 || obj[0] != '{' {
		obj, _, _ = jsonedit.Lookup(ErrorBody(status, "upstream_error", fmt.Sprintf("the provider answered with status %d", status)), "error")
	}
	return wrapError(status, obj, header)
}

// socketStreamError wraps a stream's in-band error event, the Responses
// stream's {"type":"error","code":…,"message":…,"param":…,
// "sequence_number":…}, in the socket's error event, with the status an
// HTTP answer would have had. The OpenAI WebSocket mode's error events
// carry a status and an error object, and Codex acts on an error event
// only when it has a status: without one it waits for its stream idle
// timeout before it gives up on the answer (docs/api.md "Responses over
// WebSocket").
func socketStreamError(data []byte, header http.Header) []byte {
	var ev struct {
		Code    *string         `json:"code"`
		Message string          `json:"message"`
		Param   *string         `json:"param"`
		Error   json.RawMessage `json:"error"`
	}
	// Best effort: an event in another shape still ends as an error event.
	_ = json.Unmarshal(data, &ev)
	if len(ev.Error) > 0 && ev.Error[0] == '{' { // {"type":"error","error":{…}}, as some servers send it
		code, _, _ := jsonedit.Lookup(ev.Error, "code")
		s, _ := jsonedit.Unquote(code)
		return wrapError(streamErrorStatus(s), ev.Error, header)
	}
	code := ""
	if ev.Code != nil {
		code = *ev.Code
	}
	if ev.Message == "" {
		ev.Message = "the stream failed"
	}
	status := streamErrorStatus(code)
	obj, err := json.Marshal(errorObject{Message: ev.Message, Type: ErrorType(status), Param: ev.Param, Code: ev.Code})
	if err != nil { // unreachable: only strings are marshalled
		obj = []byte(`{"message":"the stream failed","type":"server_error","param":null,"code":null}`)
	}
	return wrapError(status, obj, header)
}

// streamErrorStatus is the status of an answer that failed in band with
// code: 503 for the node's own cut at the end of a drain (nothing more
// will come from this node; retry elsewhere), the provider's status for
// the codes that name a refusal of the request, and 502 for everything
// else (the provider's stream failed).
func streamErrorStatus(code string) int {
	switch code {
	case "node_shutting_down":
		return http.StatusServiceUnavailable
	case "rate_limit_exceeded", "insufficient_quota":
		return http.StatusTooManyRequests
	case "context_length_exceeded", "invalid_prompt", "invalid_request_error":
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

// limitReachedCode is the error code of the OpenAI WebSocket mode's
// connection lifetime (60 minutes there); Codex treats it as retryable and
// opens a new socket.
const limitReachedCode = "websocket_connection_limit_reached"

// socketLimitReached is the error event that ends a socket at the end of
// its lifetime: the one OpenAI's WebSocket mode sends at its own limit,
// status 400, type invalid_request_error, code
// websocket_connection_limit_reached.
func socketLimitReached(header http.Header) []byte {
	code := limitReachedCode
	obj, err := json.Marshal(errorObject{
		Message: "Responses websocket connection limit reached. Create a new websocket connection to continue.",
		Type:    ErrorType(http.StatusBadRequest),
		Code:    &code,
	})
	if err != nil { // unreachable: only strings are marshalled
		obj = []byte(`{"message":"connection limit reached","type":"invalid_request_error","param":null,"code":"` + limitReachedCode + `"}`)
	}
	return wrapError(http.StatusBadRequest, obj, header)
}

// wrapError is the socket's error event of an answer with status whose
// error object is obj.
func wrapError(status int, obj []byte, header http.Header) []byte {
	ev := socketError{Type: "error", Status: status, Error: obj}
	for k, v := range header {
		if len(v) > 0 && socketErrorHeader(k) {
			if ev.Headers == nil {
				ev.Headers = make(map[string]string, 4)
			}
			ev.Headers[strings.ToLower(k)] = v[0]
		}
	}
	b, err := json.Marshal(ev)
	if err != nil { // unreachable: obj is a JSON object
		return []byte(`{"type":"error","status":500,"error":{"message":"internal error","type":"server_error"}}`)
	}
	return b
}

// socketErrorHeader reports whether an answer header goes into the error
// event: the request ids and the retry advice.
func socketErrorHeader(k string) bool {
	switch k {
	case "X-Request-Id", "X-Provider-Request-Id", "Retry-After", "Retry-After-Ms", "X-Should-Retry":
		return true
	}
	return strings.HasPrefix(k, "X-Ratelimit-")
}

// socketWhole is a whole successful answer (a provider that ignored
// "stream": true) as the stream's terminal event.
func socketWhole(body []byte) []byte {
	out := make([]byte, 0, len(body)+48)
	out = append(out, `{"type":"response.completed","response":`...)
	out = append(out, body...)
	return append(out, '}')
}

// socketRemember keeps the items of a completed answer: the request's
// input (an array, or a string as one user message) and the response's
// output. In the WebSocket mode the provider keeps them in memory for the
// socket, even with "store": false, and Codex then sends only the new
// items with previous_response_id; over HTTP the node must send them all.
//
// What it keeps is {"id":…,"items":[…]} ("items":null without any),
// written with appends from the values jsonedit found, byte for byte as
// the client and the provider wrote them: every answer on a socket leaves
// it, and socketContinue splices the items as they are.
func socketRemember(body, done []byte) []byte {
	typ, _, _ := jsonedit.Lookup(done, "type")
	if !jsonedit.EqualString(typ, "response.completed") {
		return nil
	}
	resp, _, _ := jsonedit.Lookup(done, "response")
	id, _, _ := jsonedit.Lookup(resp, "id")
	output, _, _ := jsonedit.Lookup(resp, "output")
	input, _, _ := jsonedit.Lookup(body, "input")
	if len(id) == 0 || id[0] != '"' { // not a string
		return nil
	}
	out := make([]byte, 0, len(id)+len(input)+len(output)+64)
	out = append(append(append(out, `{"id":`...), id...), `,"items":`...)
	var items itemList
	if len(input) > 0 && input[0] == '"' { // a string input is one user message
		out = items.message(out, input)
		input = nil
	}
	for _, arr := range [...][]byte{input, output} {
		var ok bool
		if out, ok = items.elements(out, arr); !ok {
			return nil
		}
	}
	return append(items.end(out), '}')
}

// socketContinue expands a frame that builds on the socket's last answer
// (previous_response_id is its id) into a request that stands on its own:
// input is the last answer's items and then the frame's own, and
// previous_response_id is null. Any other frame goes as it is: a
// previous_response_id the socket does not know is the provider's to
// resolve (a stored response). The items are spliced byte for byte, as
// the node edits a body everywhere else: a long conversation costs a
// copy per frame, not a decoding and an encoding.
func socketContinue(body, last []byte) []byte {
	prev, ok, err := jsonedit.Lookup(body, "previous_response_id")
	if err != nil || !ok || len(last) == 0 {
		return body
	}
	id, _, err := jsonedit.Lookup(last, "id")
	if err != nil || !bytes.Equal(prev, id) {
		return body
	}
	kept, _, _ := jsonedit.Lookup(last, "items")
	input, ok, _ := jsonedit.Lookup(body, "input")
	all := make([]byte, 0, len(kept)+len(input)+64)
	var items itemList
	good := true
	if string(kept) != "null" { // none kept
		all, good = items.elements(all, kept)
	}
	switch {
	case !good:
		return body
	case !ok:
	case input[0] == '[':
		if all, good = items.elements(all, input); !good {
			return body
		}
	case input[0] == '"':
		all = items.message(all, input)
	default:
		return body
	}
	all = items.end(all)
	out, _, err := jsonedit.Replace(body, "input", all)
	if err != nil {
		return body
	}
	if !ok {
		if out, err = jsonedit.Insert(out, "input", all); err != nil {
			return body
		}
	}
	if out, _, err = jsonedit.Replace(out, "previous_response_id", []byte("null")); err != nil {
		return body
	}
	return out
}

// itemList writes a JSON array of items with appends: the opening
// bracket with the first item, and null for a list that has none.
type itemList struct{ n int }

// next appends what comes before an item.
func (l *itemList) next(out []byte) []byte {
	if l.n++; l.n == 1 {
		return append(out, '[')
	}
	return append(out, ',')
}

// message appends a string input as the one user message it stands for.
func (l *itemList) message(out, text []byte) []byte {
	out = append(l.next(out), `{"type":"message","role":"user","content":`...)
	return append(append(out, text...), '}')
}

// elements appends the elements of arr, an array, or nothing when arr
// is empty; ok is false for anything else.
func (l *itemList) elements(out, arr []byte) ([]byte, bool) {
	if len(arr) == 0 {
		return out, true
	}
	it, err := jsonedit.Elements(arr)
	if err != nil {
		return out, false
	}
	for {
		v, _, more, err := it.Next()
		if err != nil {
			return out, false
		}
		if !more {
			return out, true
		}
		out = append(l.next(out), v...)
	}
}

// end closes the list.
func (l *itemList) end(out []byte) []byte {
	if l.n == 0 {
		return append(out, "null"...)
	}
	return append(out, ']')
}

// socketPrepare answers a warm-up frame ("generate": false, which Codex
// sends on a new socket with the context of its next turn) on the node:
// response.created and response.completed for an empty response with the
// node's id, and the frame's input kept as that response's items, so that
// the next frame, which names the id as previous_response_id and sends
// only its new items, is sent to the provider whole (socketContinue). The
// response id is resp_ and the node's request id.
func socketPrepare(body []byte, requestID string) (events [][]byte, last []byte, ok bool) {
	gen, found, err := jsonedit.Lookup(body, "generate")
	if err != nil || !found || string(gen) != "false" {
		return nil, nil, false
	}
	id := "resp_" + requestID
	model, _, _ := jsonedit.Lookup(body, "model")
	if len(model) == 0 {
		model = []byte("null")
	}
	quoted, _ := json.Marshal(id)
	resp := func(status string) []byte {
		return []byte(`{"id":` + string(quoted) + `,"object":"response","status":"` + status + `","model":` + string(model) +
			`,"output":[],"usage":{"input_tokens":0,"input_tokens_details":{"cached_tokens":0},"output_tokens":0,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":0}}`)
	}
	created := append(append([]byte(`{"type":"response.created","sequence_number":0,"response":`), resp("in_progress")...), '}')
	completed := append(append([]byte(`{"type":"response.completed","sequence_number":1,"response":`), resp("completed")...), '}')
	// What the answer leaves: the request's input items and no output,
	// as socketRemember keeps a generated answer's.
	return [][]byte{created, completed}, socketRemember(body, completed), true
}
