package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
)

// The Vertex doors (docs/api.md "Cloud client paths"): what Vertex AI's
// own Claude clients (anthropic-sdk-go/vertex, @anthropic-ai/vertex-sdk,
// Claude Code in its Vertex mode) send, served by any Messages target:
//
//	POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{model}:rawPredict
//	POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{model}:streamRawPredict
//	POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/count-tokens:rawPredict
//
// ([provider.VertexModelPath]; the project and location are the client's
// view, checked and dropped). The Messages body names no model (the path
// does), carries "anthropic_version", may carry "stream" (which must agree
// with the path) and "anthropic_beta". At the entrance it gains the model
// (and "stream": true on the streaming path) as its first members and
// loses the envelope's; it is then a Messages request like any other. The
// count-tokens body keeps its model and loses the envelope's members.
// Answers, streams included, go back as Anthropic's bytes, as Vertex sends
// them; an error goes back in Google's error shape, which Vertex's front
// end answers in.

// VertexRawPredictDoor is Messages through Vertex AI's rawPredict paths.
var VertexRawPredictDoor = &provider.Door{
	Platform: provider.Vertex,
	Match:    matchVertexRawPredict,
	Request:  vertexDoorRequest,
	Writer:   func(w http.ResponseWriter) provider.DoorWriter { return &googleErrorWriter{w: w} },
}

// VertexCountTokensDoor is count_tokens through Vertex AI's count-tokens
// model.
var VertexCountTokensDoor = &provider.Door{
	Platform: provider.Vertex,
	Match:    matchVertexCountTokens,
	Request:  vertexCountTokensRequest,
	Writer:   func(w http.ResponseWriter) provider.DoorWriter { return &googleErrorWriter{w: w} },
}

// vertexCountTokensModel is the model segment Vertex reserves for
// count_tokens.
const vertexCountTokensModel = "count-tokens"

func matchVertexRawPredict(escapedPath string) (model string, stream, ok bool, err *provider.BodyError) {
	model, method, ok, err := provider.VertexModelPath(escapedPath, "anthropic")
	switch {
	case !ok:
		return "", false, false, nil
	case method == "rawPredict" && model == vertexCountTokensModel:
		return "", false, false, nil // the count-tokens door's
	case method == "rawPredict":
		return model, false, true, err
	case method == "streamRawPredict":
		return model, true, true, err
	}
	return "", false, false, nil
}

func matchVertexCountTokens(escapedPath string) (model string, stream, ok bool, err *provider.BodyError) {
	model, method, ok, err := provider.VertexModelPath(escapedPath, "anthropic")
	if !ok || method != "rawPredict" || model != vertexCountTokensModel {
		return "", false, false, nil
	}
	return "", false, true, err
}

// vertexDoorNames are the members the doors read: the envelope's, and the
// ones the path stands for.
var vertexDoorNames = provider.NewNames("anthropic_version", "anthropic_beta", "model", "stream")

// vertexDoorRequest is the Messages request of a Vertex-shaped one.
func vertexDoorRequest(body []byte, model string, stream bool, h http.Header) ([]byte, string, *provider.BodyError) {
	f, berr := scanVertexEnvelope(body, h)
	switch {
	case berr != nil:
		return nil, "", berr
	case f.Vals[2] != nil:
		return nil, "", &provider.BodyError{Code: "invalid_request", Msg: "model is named by the path; the body must not name it"}
	case f.Vals[3] != nil && string(f.Vals[3]) != strconv.FormatBool(stream):
		want := ":rawPredict answers whole: stream, when present, must be false"
		if stream {
			want = ":streamRawPredict streams: stream, when present, must be true"
		}
		return nil, "", &provider.BodyError{Code: "invalid_request", Msg: want}
	}
	quoted, _ := json.Marshal(model) // a string always marshals
	out := make([]byte, 0, len(body)+len(quoted)+24)
	out = append(out, `{"model":`...)
	out = append(out, quoted...)
	if stream {
		out = append(out, `,"stream":true`...)
	}
	return appendMembersBut(out, body, "stream"), "", nil
}

// vertexCountTokensRequest is the count_tokens request of a Vertex-shaped
// one: the body names the model itself.
func vertexCountTokensRequest(body []byte, _ string, _ bool, h http.Header) ([]byte, string, *provider.BodyError) {
	if _, berr := scanVertexEnvelope(body, h); berr != nil {
		return nil, "", berr
	}
	return appendMembersBut([]byte{'{'}, body, ""), "", nil
}

// scanVertexEnvelope reads the envelope's members (vertexDoorNames, in
// order) and applies them: a date-form anthropic_version, which is what
// anthropic-sdk-go/vertex sends (the API version its requests are written
// for), becomes the anthropic-version header unless the client sent one;
// VertexVersion says no more than that the body is Vertex's; betas join
// the anthropic-beta headers.
func scanVertexEnvelope(body []byte, h http.Header) (provider.Found, *provider.BodyError) {
	f := provider.Found{Vals: make([][]byte, 4)}
	berr, err := provider.Scan(body, "", vertexDoorNames, &f)
	switch {
	case err != nil:
		return f, &provider.BodyError{Code: "invalid_json", Msg: "request body is not a JSON object: " + err.Error()}
	case berr != nil:
		return f, berr
	case f.Vals[0] == nil:
		return f, &provider.BodyError{Code: "invalid_request", Msg: "anthropic_version is required: " + strconv.Quote(VertexVersion)}
	}
	if berr := takeEnvelope(f.Vals[0], f.Vals[1], h, VertexVersion); berr != nil {
		return f, berr
	}
	return f, nil
}

// apiVersion reports whether s has the form of an Anthropic API version:
// YYYY-MM-DD.
func apiVersion(s string) bool {
	if len(s) != len("2023-06-01") {
		return false
	}
	for i := range len(s) {
		if i == 4 || i == 7 {
			if s[i] != '-' {
				return false
			}
		} else if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// appendMembersBut appends to out (which ends in "{" or in a member) the
// members of the validated object body but the envelope's and skip (""
// none), each with its bytes, in their order, and the closing brace.
func appendMembersBut(out, body []byte, skip string) []byte {
	first := len(out) > 0 && out[len(out)-1] == '{'
	it, _ := jsonedit.Members(body) // scanned before
	for {
		m, ok, _ := it.Next()
		if !ok {
			break
		}
		if m.KeyIs("anthropic_version") || m.KeyIs("anthropic_beta") || skip != "" && m.KeyIs(skip) {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '"')
		out = append(out, m.RawKey...)
		out = append(out, "\":"...)
		out = append(out, m.Value...)
	}
	return append(out, '}')
}

// googleStatuses names the google.rpc status Vertex's errors carry for an
// Anthropic error type (the reverse of googleStatusTypes); the HTTP status
// decides the others.
var googleStatuses = errorNames{
	byType: map[string]string{
		"invalid_request_error": "INVALID_ARGUMENT",
		"request_too_large":     "INVALID_ARGUMENT",
		"authentication_error":  "UNAUTHENTICATED",
		"permission_error":      "PERMISSION_DENIED",
		"not_found_error":       "NOT_FOUND",
		"rate_limit_error":      "RESOURCE_EXHAUSTED",
		"timeout_error":         "DEADLINE_EXCEEDED",
		"overloaded_error":      "UNAVAILABLE",
		"api_error":             "INTERNAL",
	},
	throttled: "RESOURCE_EXHAUSTED", unavailable: "UNAVAILABLE",
	invalid: "INVALID_ARGUMENT", internal: "INTERNAL",
}

// googleErrorDoc is Google's error shape,
// {"error":{"code":N,"message":…,"status":…,"details":[…]}}, with the
// node's request id as a google.rpc.RequestInfo detail when there is one.
func googleErrorDoc(status int, kind, msg, requestID string) []byte {
	type detail struct {
		Type      string `json:"@type"`
		RequestID string `json:"requestId"`
	}
	var doc struct {
		Error struct {
			Code    int      `json:"code"`
			Message string   `json:"message"`
			Status  string   `json:"status"`
			Details []detail `json:"details,omitempty"`
		} `json:"error"`
	}
	doc.Error.Code, doc.Error.Message, doc.Error.Status = status, msg, googleStatuses.name(kind, status)
	if requestID != "" {
		doc.Error.Details = []detail{{"type.googleapis.com/google.rpc.RequestInfo", requestID}}
	}
	b, _ := json.Marshal(doc) // strings and an int always marshal
	return b
}

// googleErrorWriter is the Vertex doors' response writer: an error answer
// is held back and rewritten in Google's error shape; every other answer
// (a message, an SSE stream) passes unchanged.
type googleErrorWriter struct {
	w      http.ResponseWriter
	status int
	held   *bytes.Buffer // the error document, once the status says there is one
}

func (g *googleErrorWriter) Header() http.Header         { return g.w.Header() }
func (g *googleErrorWriter) Unwrap() http.ResponseWriter { return g.w }

func (g *googleErrorWriter) WriteHeader(status int) {
	if g.status != 0 {
		return
	}
	g.status = status
	if status >= 400 {
		g.held = &bytes.Buffer{} // written by Finish
		return
	}
	g.w.WriteHeader(status)
}

func (g *googleErrorWriter) Write(p []byte) (int, error) {
	if g.status == 0 {
		g.WriteHeader(http.StatusOK)
	}
	if g.held != nil {
		if g.held.Len()+len(p) <= maxDoorError {
			g.held.Write(p)
		}
		return len(p), nil
	}
	return g.w.Write(p)
}

func (g *googleErrorWriter) FlushError() error {
	if g.held != nil {
		return nil // nothing of an error answer goes before Finish
	}
	return http.NewResponseController(g.w).Flush()
}

func (g *googleErrorWriter) Finish() error {
	if g.held == nil {
		return nil
	}
	kind, msg := anthropicError(g.held.Bytes())
	h := g.w.Header()
	h.Set("Content-Type", "application/json; charset=UTF-8")
	h.Del("Content-Length")
	g.w.WriteHeader(g.status)
	_, err := g.w.Write(googleErrorDoc(g.status, kind, msg, h.Get("X-Request-Id")))
	return err
}
