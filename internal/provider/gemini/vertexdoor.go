package gemini

import (
	"net/http"

	"github.com/scootgate/scootgate/internal/provider"
)

// The Vertex doors (docs/api.md "Cloud client paths"): what Vertex AI's
// own Gemini clients (google.golang.org/genai and @google/genai with the
// Vertex backend, in express mode too) send, served by any target of the
// endpoint:
//
//	POST /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:{method}
//	POST /v1beta1/projects/{p}/locations/{l}/publishers/google/models/{model}:{method}
//	POST /v1beta1/publishers/google/models/{model}:{method}    (express mode)
//
// for generateContent, streamGenerateContent and countTokens
// ([provider.VertexModelPath]; the project and location are the client's
// view, checked and dropped). The bodies, the streams (alt=sse) and the
// error documents are the Gemini API's: the door only reads the model
// from the path.

var (
	vertexGenerateDoor    = vertexDoor("generateContent")
	vertexStreamDoor      = vertexDoor("streamGenerateContent")
	vertexCountTokensDoor = vertexDoor("countTokens")
)

// vertexDoor is the Vertex door of one Gemini method.
func vertexDoor(method string) *provider.Door {
	return &provider.Door{
		Platform: provider.Vertex,
		Match: func(escapedPath string) (string, bool, bool, *provider.BodyError) {
			model, m, ok, err := provider.VertexModelPath(escapedPath, "google")
			if !ok || m != method {
				return "", false, false, nil
			}
			return model, method == "streamGenerateContent", true, err
		},
		Request: func(body []byte, model string, _ bool, _ http.Header) ([]byte, string, *provider.BodyError) {
			return body, model, nil
		},
		// The Gemini API's framing and error shape are Vertex's.
		Writer: provider.PlainDoorWriter,
	}
}
