package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/scootgate/scootgate/internal/provider"
)

// Claude on Google Vertex AI (docs/routing.md "Platforms"): Vertex carries
// the Messages API under the backend's project and location. The request
// goes to POST {resource}/publishers/anthropic/models/{model}:rawPredict,
// or :streamRawPredict for a stream, where {resource} is
// {base_url}/v1/projects/{project}/locations/{location}
// ([provider.VertexResource]); the body loses its "model" member and gains
// "anthropic_version"; every other byte is the client's, and the
// anthropic-beta header stays a header. Answers, streams included, are
// Anthropic's own bytes, except the errors Google's front end answers
// itself (a token refused, a project without access, a quota), which come
// in Google's error shape and become Anthropic error documents with the
// same status.

// VertexVersion is the anthropic_version Vertex AI requires in the body.
const VertexVersion = "vertex-2023-10-16"

// vertexMessages is Messages on Vertex AI.
var vertexMessages = &provider.Envelope{
	URL:    vertexURL,
	Body:   vertexBody,
	Header: vertexHeader,
	Answer: vertexAnswer,
}

// vertexURL is {resource}/publishers/anthropic/models/{model}:rawPredict
// or :streamRawPredict; base is the backend's Vertex resource URL.
func vertexURL(base *url.URL, model string, stream bool) (*url.URL, error) {
	if model == "" {
		return nil, errors.New("anthropic: empty vertex model id")
	}
	method := "rawPredict"
	if stream {
		method = "streamRawPredict"
	}
	return provider.VertexModelURL(base, "anthropic", model, method), nil
}

// vertexVersionMember replaces the model member.
var vertexVersionMember = []byte(`"anthropic_version":"` + VertexVersion + `"`)

// vertexBody is the body with its model member replaced, in place, by
// "anthropic_version"; nothing else changes.
func vertexBody(r *provider.Request, body []byte, _ http.Header, dst *provider.Pieces) error {
	if !r.SplitMember(body, vertexVersionMember, dst) {
		return errors.New("anthropic: vertex body: no model member where inspection found it")
	}
	return nil
}

// vertexHeader drops what Vertex takes in the body (anthropic-version) and
// Anthropic's key header, and sends the credential (an access token) as
// Authorization: Bearer. anthropic-beta stays: Vertex reads it as a header.
func vertexHeader(h http.Header, credential string) {
	h.Del("Anthropic-Version")
	h.Del("X-Api-Key")
	if credential != "" {
		h.Set("Authorization", "Bearer "+credential)
	}
}

// maxVertexError bounds the error document read to translate it.
const maxVertexError = 64 << 10

// vertexAnswer passes a success and an Anthropic error document through
// and turns Google's error shape ({"error":{"code","message","status"}},
// alone or as the one element of an array) into the Anthropic error
// document with the same status.
func vertexAnswer(resp *http.Response, body io.Reader) io.Reader {
	if resp.StatusCode/100 == 2 {
		return body
	}
	data, err := io.ReadAll(io.LimitReader(body, maxVertexError))
	if err != nil {
		return errReader{err}
	}
	doc, ok := googleToAnthropic(resp.StatusCode, data)
	if !ok {
		return bytes.NewReader(data) // Anthropic's own error document, or not JSON
	}
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return bytes.NewReader(doc)
}

// googleStatusTypes maps google.rpc status names to Anthropic error types;
// the HTTP status decides the others.
var googleStatusTypes = map[string]string{
	"RESOURCE_EXHAUSTED":  "rate_limit_error",
	"UNAVAILABLE":         "overloaded_error",
	"INVALID_ARGUMENT":    "invalid_request_error",
	"FAILED_PRECONDITION": "invalid_request_error",
	"PERMISSION_DENIED":   "permission_error",
	"UNAUTHENTICATED":     "authentication_error",
	"NOT_FOUND":           "not_found_error",
	"DEADLINE_EXCEEDED":   "timeout_error",
	"INTERNAL":            "api_error",
}

// googleToAnthropic reads Google's error shape; ok is false for a body
// that is not one (Anthropic's own error document passes unchanged).
func googleToAnthropic(status int, body []byte) ([]byte, bool) {
	if len(body) > 0 && body[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) != nil || len(arr) == 0 {
			return nil, false
		}
		body = arr[0]
	}
	var doc struct {
		Type  string `json:"type"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.Error == nil || doc.Type == "error" || doc.Error.Status == "" && doc.Error.Code == 0 {
		return nil, false
	}
	msg := doc.Error.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	kind, ok := googleStatusTypes[doc.Error.Status]
	if !ok {
		kind = ErrorType(status)
	}
	return errorDoc(kind, msg), true
}
