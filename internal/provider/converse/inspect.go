package converse

import (
	"github.com/scootgate/scootgate/internal/provider"
)

// What routing reads of a Converse body: the conversation (messages,
// system) for prefix affinity, toolConfig.tools for the tools capability,
// inferenceConfig.maxTokens for the output bound. "model" and "modelId"
// are read only to refuse them: the path names the model, and a body
// member that named another would be sent to the provider unseen.
var (
	bodyNames      = provider.NewNames("model", "modelId", "messages", "system", "toolConfig", "inferenceConfig")
	toolNames      = provider.NewNames("tools")
	inferenceNames = provider.NewNames("maxTokens")
)

const (
	mModel = iota
	mModelID
	mMessages
	mSystem
	mToolConfig
	mInferenceConfig
	mNum
)

func inspectConverse(body []byte, pathModel string) (provider.Request, *provider.BodyError) {
	return inspect(body, pathModel, false)
}

func inspectConverseStream(body []byte, pathModel string) (provider.Request, *provider.BodyError) {
	return inspect(body, pathModel, true)
}

// inspect reads a Converse body for the model the path names: every
// member it reads exactly once and in its exact spelling (provider.Scan).
// The path decides whether the answer streams.
func inspect(body []byte, pathModel string, stream bool) (provider.Request, *provider.BodyError) {
	var v [mNum][]byte
	berr, err := provider.Scan(body, "", bodyNames, &provider.Found{Vals: v[:]})
	switch {
	case err != nil:
		return provider.Request{}, provider.RejectBody(body)
	case berr != nil:
		return provider.Request{}, berr
	case pathModel == "":
		return provider.Request{}, &provider.BodyError{Code: "missing_model", Msg: "the model id is missing from the path /model/{modelId}/converse"}
	case v[mModel] != nil || v[mModelID] != nil:
		return provider.Request{}, &provider.BodyError{Code: "invalid_model", Msg: "the path /model/{modelId}/… names the model; the body must not"}
	}
	r := provider.Request{Model: pathModel, Stream: stream}
	if stream {
		r.Need |= provider.CapStream
	}
	tools, berr := provider.Nested(v[mToolConfig], "toolConfig", toolNames)
	if berr != nil {
		return provider.Request{}, berr
	}
	if provider.NonEmptyArray(tools) {
		r.Need |= provider.CapTools
	}
	maxTokens, berr := provider.Nested(v[mInferenceConfig], "inferenceConfig", inferenceNames)
	if berr != nil {
		return provider.Request{}, berr
	}
	if r.MaxOutput, berr = provider.ReadOutputCap(maxTokens, "inferenceConfig.maxTokens"); berr != nil {
		return provider.Request{}, berr
	}
	r.Prefix = provider.Prefix{Tools: tools, System: v[mSystem], Turns: v[mMessages]}
	return r, nil
}
