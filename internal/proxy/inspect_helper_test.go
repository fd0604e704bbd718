package proxy

import (
	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/protocol"
	"github.com/scootgate/scootgate/internal/protocol/anthropic"
	"github.com/scootgate/scootgate/internal/protocol/openai"
	"github.com/scootgate/scootgate/internal/routes"
)

// request is the part of protocol.Request the inspect tests compare.
type request struct {
	model  string
	stream bool
	need   routes.Caps
}

// inspect runs the body inspection of the chat completions (OpenAI) or
// messages (Anthropic) endpoint, as the request path does.
func inspect(p protocol.Protocol, body []byte) (request, *apierr.Error) {
	spec := openai.Chat
	if p == protocol.Anthropic {
		spec = anthropic.Messages
	}
	r, berr := spec.Inspect(body)
	if berr != nil {
		return request{}, apierr.BadRequest(berr.Code, berr.Msg)
	}
	return request{model: r.Model, stream: r.Stream, need: r.Need}, nil
}
