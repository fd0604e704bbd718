package gateway

import (
	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/openai"
	"github.com/scootgate/scootgate/internal/routes"
)

// request is the part of provider.Request the inspect tests compare.
type request struct {
	model  string
	stream bool
	need   routes.Caps
}

// inspect runs the body inspection of the chat completions (OpenAI) or
// messages (Anthropic) endpoint, as the request path does.
func inspect(p provider.Protocol, body []byte) (request, *apierr.Error) {
	spec := openai.Chat
	if p == provider.Anthropic {
		spec = anthropic.Messages
	}
	r, berr := spec.Inspect(body, "")
	if berr != nil {
		return request{}, apierr.BadRequest(berr.Code, berr.Msg)
	}
	return request{model: r.Model, stream: r.Stream, need: r.Need}, nil
}
