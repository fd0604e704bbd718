// Package catalog lists every endpoint the node serves, by Endpoint and by
// client path. Adding an endpoint is one Spec in its provider package
// (internal/protocol/openai, internal/protocol/anthropic) and one line
// here.
package catalog

import (
	"github.com/scootgate/scootgate/internal/protocol"
	"github.com/scootgate/scootgate/internal/protocol/anthropic"
	"github.com/scootgate/scootgate/internal/protocol/openai"
)

var specs = [protocol.NumEndpoints]*protocol.Spec{
	protocol.Chat:        openai.Chat,
	protocol.Responses:   openai.Responses,
	protocol.Embeddings:  openai.Embeddings,
	protocol.Messages:    anthropic.Messages,
	protocol.CountTokens: anthropic.CountTokens,
}

// Spec returns the description of e.
func Spec(e protocol.Endpoint) *protocol.Spec { return specs[e] }

// ByPath returns the endpoint whose client path is path, or nil.
func ByPath(path string) *protocol.Spec {
	for _, s := range specs {
		if s.Path == path {
			return s
		}
	}
	return nil
}

// ErrorBody renders a gateway error in the error document of protocol p.
// code is the OpenAI error code; the Anthropic shape has none and carries
// the request id instead.
func ErrorBody(p protocol.Protocol, status int, code, msg, requestID string) []byte {
	if p == protocol.Anthropic {
		return anthropic.ErrorBody(status, msg, requestID)
	}
	return openai.ErrorBody(status, code, msg)
}
