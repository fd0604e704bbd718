package openai

import (
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
)

// The Azure OpenAI doors (docs/api.md "Cloud client paths"): the paths
// that Azure OpenAI clients (openai-go's azure options, the Azure SDKs,
// LangChain's AzureChatOpenAI) send, served by any target of the
// endpoint. Three shapes:
//
//	POST /openai/deployments/{deployment}/{path}?api-version=…   the deployment is the public model
//	POST /openai/v1/{path}[?api-version=…]                        the body names the model
//	POST /openai/responses?api-version=…                          the body names the model
//
// where {path} is the endpoint's OpenAI path without /v1. The api-version
// is the client's view of the API: it is checked, never forwarded (each
// Azure target sends its own). The body is OpenAI's; on the deployment
// path a JSON body that names no model gains the deployment as its
// "model", and one that names another is refused. Answers are OpenAI's,
// which is what Azure's are.

// azureDoor is the door of the endpoint whose path under /v1 is path;
// deployment says whether Azure serves it on a deployment path, plain
// whether on /openai{path} with an api-version (Responses).
func azureDoor(path string, deployment, plain bool) *provider.Door {
	return &provider.Door{
		Platform: provider.Azure,
		Match: func(escapedPath string) (string, bool, bool, *provider.BodyError) {
			return matchAzure(escapedPath, path, deployment, plain)
		},
		Query:   checkAzureQuery,
		Request: azureDoorRequest,
		Writer:  provider.PlainDoorWriter,
	}
}

// matchAzure reads an Azure path of the endpoint at path: the deployment
// it names ("" on the v1 and plain paths).
func matchAzure(escaped, path string, deployment, plain bool) (model string, stream, ok bool, err *provider.BodyError) {
	rest, found := strings.CutPrefix(escaped, "/openai/")
	switch {
	case !found:
		return "", false, false, nil
	case rest == "v1"+path || plain && "/"+rest == path:
		return "", false, true, nil
	}
	rest, found = strings.CutPrefix(rest, "deployments/")
	if !found || !deployment {
		return "", false, false, nil
	}
	name, found := strings.CutSuffix(rest, path)
	if !found || name == "" || strings.IndexByte(name, '/') >= 0 {
		return "", false, false, nil
	}
	if !validDeployment(name) {
		return "", false, true, &provider.BodyError{Code: "invalid_model",
			Msg: "the deployment name in the path must be letters, digits, '-', '_' and '.' (written without percent-encoding)"}
	}
	return name, false, true, nil
}

// validDeployment reports whether name is a deployment name as Azure
// allows them: 1 to 64 letters, digits, '-', '_' and '.'.
func validDeployment(name string) bool {
	if len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// checkAzureQuery checks the client's api-version: at most one, and a
// version as Azure writes them (2024-10-21, 2025-04-01-preview, preview,
// latest, v1). The v1 paths take none as well; the node sends its
// backends' own versions whatever the client's.
func checkAzureQuery(q url.Values) *provider.BodyError {
	vs, ok := q[AzureAPIVersion]
	switch {
	case !ok:
		return nil
	case len(vs) != 1 || !validAPIVersion(vs[0]):
		return &provider.BodyError{Code: "invalid_api_version",
			Msg: "api-version must be given once, as a date (2024-10-21), a dated preview (2025-04-01-preview), preview, latest or v1"}
	}
	return nil
}

func validAPIVersion(v string) bool {
	switch v {
	case "preview", "latest", AzureV1:
		return true
	}
	v = strings.TrimSuffix(v, "-preview")
	if len(v) != len("2024-10-21") || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if i != 4 && i != 7 && (v[i] < '0' || v[i] > '9') {
			return false
		}
	}
	return true
}

// azureDoorRequest gives a JSON body on a deployment path the deployment
// as its model when it names none. A body that names a model, and a
// multipart form, pass unchanged: the request path checks that the model
// they name is the deployment.
func azureDoorRequest(body []byte, model string, _ bool, h http.Header) ([]byte, string, *provider.BodyError) {
	if model == "" {
		return body, "", nil
	}
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && mt == "multipart/form-data" {
		return body, "", nil
	}
	if _, ok, err := jsonedit.Lookup(body, "model"); err != nil || ok {
		return body, "", nil // Inspect reports a malformed body, and reads the model
	}
	out, err := jsonedit.Insert(body, "model", quoteString(model))
	if err != nil {
		return body, "", nil
	}
	return out, "", nil
}

// quoteString is s as a JSON string; deployment names need no escapes.
func quoteString(s string) []byte { return []byte(`"` + s + `"`) }

// The Azure doors of the endpoints Azure OpenAI serves.
var (
	azureChatDoor           = azureDoor("/chat/completions", true, false)
	azureCompletionsDoor    = azureDoor("/completions", true, false)
	azureEmbeddingsDoor     = azureDoor("/embeddings", true, false)
	azureResponsesDoor      = azureDoor("/responses", true, true)
	azureSpeechDoor         = azureDoor("/audio/speech", true, false)
	azureTranscriptionsDoor = azureDoor("/audio/transcriptions", true, false)
	azureTranslationsDoor   = azureDoor("/audio/translations", true, false)
	azureImagesDoor         = azureDoor("/images/generations", true, false)
	azureImageEditsDoor     = azureDoor("/images/edits", true, false)
)
