package openai

import (
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/scootgate/scootgate/internal/provider"
)

// GPT on Azure OpenAI (docs/routing.md "Platforms"): the OpenAI API under
// the resource's endpoint (the backend's base_url,
// https://{resource}.openai.azure.com), on one of two surfaces:
//
//   - The deployment surface, for a backend with a dated api_version: POST
//     {base_url}/openai/deployments/{deployment}/{chat/completions,
//     completions, embeddings}?api-version={api_version}, the deployment
//     being the target's model. Azure ignores the body's "model" member
//     there; the node rewrites it to the deployment name all the same (the
//     byte-faithful rewrite every OpenAI target gets), so the body is the
//     one a first-party target would get. Responses has no deployment
//     path: POST {base_url}/openai/responses?api-version=…, the
//     deployment named by the body's model.
//   - The v1 surface, for a backend whose api_version is "v1": POST
//     {base_url}/openai/v1/{path}, OpenAI's own paths, the deployment
//     named by the body's model.
//
// Either way the body is the one a first-party OpenAI target gets, the
// answers (errors included) are OpenAI's shapes, and a static credential
// is sent as Azure's api-key header (an azure_entra token as
// Authorization: Bearer).

// AzureAPIVersion is the query parameter of the deployment surface.
const AzureAPIVersion = "api-version"

// AzureV1 is the api_version that chooses the v1 surface.
const AzureV1 = "v1"

// azureEnvelope carries one endpoint on Azure OpenAI: path is its path
// under /openai/v1 (OpenAI's own) and deployment whether the deployment
// surface names the deployment in the path.
func azureEnvelope(path string, deployment bool) *provider.Envelope {
	return &provider.Envelope{
		URL: func(base *url.URL, model string, _ bool) (*url.URL, error) {
			return AzureURL(base, model, path, deployment)
		},
		Header: azureHeader,
		Answer: azureAnswer,
	}
}

// AzureURL builds the provider URL of an endpoint whose path under
// /openai/v1 is path, for a backend whose base URL (the resource's
// endpoint) is base, whose query holds the backend's api-version (routes
// puts it there): on the v1 surface when it is [AzureV1], the deployment
// surface otherwise. deployment says whether the deployment surface names model
// in the path ({base}/openai/deployments/{model}{path}) or only in the
// body ({base}/openai{path}).
func AzureURL(base *url.URL, model, path string, deployment bool) (*url.URL, error) {
	if model == "" {
		return nil, errors.New("openai: empty azure deployment name")
	}
	version := base.Query().Get(AzureAPIVersion)
	u := *base
	u.Fragment, u.RawFragment = "", ""
	switch {
	case version == "":
		return nil, errors.New("openai: azure backend without an api_version")
	case version == AzureV1:
		u.Path = base.Path + "/openai/v1" + path
		u.RawPath = base.EscapedPath() + "/openai/v1" + path
		u.RawQuery = ""
	case deployment:
		u.Path = base.Path + "/openai/deployments/" + model + path
		u.RawPath = base.EscapedPath() + "/openai/deployments/" + url.PathEscape(model) + path
		u.RawQuery = AzureAPIVersion + "=" + url.QueryEscape(version)
	default:
		u.Path = base.Path + "/openai" + path
		u.RawPath = base.EscapedPath() + "/openai" + path
		u.RawQuery = AzureAPIVersion + "=" + url.QueryEscape(version)
	}
	return &u, nil
}

// azureHeader sends a static credential as Azure's api-key header in
// place of Authorization: Bearer. An empty credential (an azure_entra
// backend, whose token the request path sets as Authorization: Bearer)
// sends none.
func azureHeader(h http.Header, credential string) {
	h.Del("Authorization")
	if credential != "" {
		h.Set("Api-Key", credential)
	}
}

// azureAnswer passes the answer unchanged: Azure's answers, error
// documents included ({"error":{"code":"content_filter",…}}), are
// OpenAI's shapes.
func azureAnswer(_ *http.Response, body io.Reader) io.Reader { return body }

// The endpoints Azure OpenAI serves; the others are refused at load for
// an azure backend (routes.Compile).
var (
	azureChat        = azureEnvelope("/chat/completions", true)
	azureCompletions = azureEnvelope("/completions", true)
	azureEmbeddings  = azureEnvelope("/embeddings", true)
	azureResponses   = azureEnvelope("/responses", false)
)
