package gemini

import (
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/scootgate/scootgate/internal/provider"
)

// Gemini on Google Vertex AI (docs/routing.md "Platforms"): Vertex serves
// the same generateContent, streamGenerateContent and countTokens methods
// under the backend's project and location:
// POST {resource}/publishers/google/models/{model}:{method}, where
// {resource} is {base_url}/v1/projects/{project}/locations/{location}
// ([provider.VertexResource]). The body is the one the Gemini API gets (the
// client's, byte for byte: the model is in the path); a stream keeps the
// client's alt=sse; the credential is an access token sent as
// Authorization: Bearer rather than an API key. Answers and error
// documents are Google's on both, so they pass unchanged.

var (
	vertexGenerate      = vertexEnvelope("generateContent")
	vertexStream        = vertexEnvelope("streamGenerateContent")
	vertexCountTokens   = vertexEnvelope("countTokens")
	errEmptyVertexModel = errors.New("gemini: empty vertex model id")
	errVertexNamed      = errors.New("gemini: vertex body: a model named inside the body is not carried")
)

// vertexEnvelope is the envelope of one Gemini method on Vertex AI.
func vertexEnvelope(method string) *provider.Envelope {
	return &provider.Envelope{
		URL: func(base *url.URL, model string, _ bool) (*url.URL, error) {
			if model == "" {
				return nil, errEmptyVertexModel
			}
			return provider.VertexModelURL(base, "google", model, method), nil
		},
		Body:   vertexBody,
		Header: vertexHeader,
		Answer: vertexAnswer,
	}
}

// vertexBody is the body the Gemini API would get: the model is in the
// path, so every byte is the client's. A body that names a model itself
// ("models/…" in a countTokens generateContentRequest) is refused: Vertex
// names models by their full resource name there.
func vertexBody(r *provider.Request, body []byte, _ http.Header, dst *provider.Pieces) error {
	if len(r.Named) > 0 {
		return errVertexNamed
	}
	r.Split(body, nil, nil, false, dst)
	return nil
}

// vertexAnswer passes Vertex's answer as it is: Google's framing and error
// documents on both.
func vertexAnswer(_ *http.Response, body io.Reader) io.Reader { return body }

// vertexHeader sends the credential (an access token) as Authorization:
// Bearer instead of the Gemini API's key header.
func vertexHeader(h http.Header, credential string) {
	h.Del("X-Goog-Api-Key")
	if credential != "" {
		h.Set("Authorization", "Bearer "+credential)
	}
}
