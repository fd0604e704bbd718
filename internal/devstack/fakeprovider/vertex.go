package fakeprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Google Vertex AI, as far as Claude and Gemini use it:
// POST /v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:rawPredict
// (or :streamRawPredict), the Messages body without "model" and with
// anthropic_version "vertex-2023-10-16", answered as Anthropic answers;
// .../publishers/anthropic/models/count-tokens:rawPredict, the
// count_tokens body with its "model" (the Vertex model id) and
// anthropic_version optional, answered as Anthropic's count_tokens;
// and .../publishers/google/models/{model}:generateContent,
// :streamGenerateContent, :countTokens, answered as the Gemini API
// answers. Every request carries an OAuth 2 access token as
// Authorization: Bearer, which must be one the VertexTokens issuer
// handed out and is still live (Google's 401 UNAUTHENTICATED otherwise),
// for the VertexProject when one is set (403 PERMISSION_DENIED).

// VertexVersion is the anthropic_version Vertex AI requires.
const VertexVersion = "vertex-2023-10-16"

// TokenChecker tells a live access token (faketoken's issuers).
type TokenChecker interface {
	Live(token string) bool
}

// vertexCall is a Vertex request being answered by the Anthropic or
// Gemini path: what it records instead of that path's own.
type vertexCall struct {
	path, model string
}

type vertexKey struct{}

// vertexRoute reads a Vertex model path: project, publisher, model and
// method.
func vertexRoute(path string) (project, publisher, model, method string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v1/projects/")
	if !ok {
		return "", "", "", "", false
	}
	parts := strings.SplitN(rest, "/", 7) // p, "locations", l, "publishers", pub, "models", model:method
	if len(parts) != 7 || parts[1] != "locations" || parts[3] != "publishers" || parts[5] != "models" {
		return "", "", "", "", false
	}
	i := strings.LastIndexByte(parts[6], ':')
	if i <= 0 {
		return "", "", "", "", false
	}
	return parts[0], parts[4], parts[6][:i], parts[6][i+1:], true
}

// serveVertex checks a Vertex request's token and envelope and answers it
// on the Anthropic or Gemini path.
func (p *Provider) serveVertex(w http.ResponseWriter, r *http.Request, body []byte, project, publisher, model, method string) {
	googleFail := func(status int, state, msg string) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(status)
		_, _ = w.Write(mustJSON(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": state}}))
	}
	if p.o.VertexTokens != nil {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !p.o.VertexTokens.Live(tok) {
			p.record(Request{Method: r.Method, Path: r.URL.Path, Header: r.Header, Body: body, Model: model})
			googleFail(http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
			return
		}
	}
	if want := *p.vertexProject.Load(); want != "" && project != want {
		p.record(Request{Method: r.Method, Path: r.URL.Path, Header: r.Header, Body: body, Model: model})
		googleFail(http.StatusForbidden, "PERMISSION_DENIED", "Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/projects/"+project+"' (or it may not exist).")
		return
	}
	call := vertexCall{path: r.URL.Path, model: model}
	if publisher == "anthropic" && model == "count-tokens" {
		// The model to count for is the body's.
		var in struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &in)
		call.model = in.Model
	}
	r2 := r.Clone(context.WithValue(r.Context(), vertexKey{}, call))
	r2.Body = io.NopCloser(bytes.NewReader(body))
	switch {
	case publisher == "anthropic" && model == "count-tokens" && method == "rawPredict":
		var env struct {
			Version *string `json:"anthropic_version"`
		}
		switch {
		case json.Unmarshal(body, &env) != nil:
			googleFail(http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.")
			return
		case call.model == "":
			googleFail(http.StatusBadRequest, "INVALID_ARGUMENT", "model: Field required")
			return
		case env.Version != nil && *env.Version != VertexVersion:
			googleFail(http.StatusBadRequest, "INVALID_ARGUMENT", "anthropic_version: Input should be '"+VertexVersion+"'")
			return
		}
		r2.URL.Path = "/v1/messages/count_tokens"
	case publisher == "anthropic" && (method == "rawPredict" || method == "streamRawPredict"):
		var env struct {
			Model   *json.RawMessage `json:"model"`
			Version string           `json:"anthropic_version"`
		}
		switch {
		case json.Unmarshal(body, &env) != nil:
			googleFail(http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.")
			return
		case env.Model != nil:
			googleFail(http.StatusBadRequest, "INVALID_ARGUMENT", "model: Extra inputs are not permitted")
			return
		case env.Version != VertexVersion:
			googleFail(http.StatusBadRequest, "INVALID_ARGUMENT", "anthropic_version: Input should be '"+VertexVersion+"'")
			return
		}
		r2.URL.Path = "/v1/messages" // its anthropic_version stands for the header
	case publisher == "google" && (method == "generateContent" || method == "streamGenerateContent" || method == "countTokens"):
		r2.URL.Path = "/v1beta/models/" + model + ":" + method
	default:
		googleFail(http.StatusNotFound, "NOT_FOUND", "Publisher model `"+publisher+"/"+model+"` method "+method+" is not served by the fake.")
		return
	}
	p.serve1(w, r2)
}
