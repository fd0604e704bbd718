package anthropic

import (
	"github.com/scootgate/scootgate/internal/provider"
)

var (
	msgNames    = provider.NewNames("model", "stream", "tools", "output_config", "output_format", "metadata", "system", "messages", "max_tokens")
	countNames  = provider.NewNames("model", "tools", "output_config", "output_format")
	formatNames = provider.NewNames("format")
	userIDNames = provider.NewNames("user_id")
)

const (
	mModel = iota
	mStream
	mTools
	mOutputConfig
	mOutputFormat
	mMetadata
	mSystem
	mMessages
	mMaxTokens
	mNum
)

// inspectMessages reads model, stream, tools (tools capability),
// output_config.format.type or the older beta top-level output_format.type
// == "json_schema" (json_schema capability), the session key
// metadata.user_id and the output cap max_tokens.
func inspectMessages(body []byte, _ string) (provider.Request, *provider.BodyError) {
	var v [mNum][]byte
	var at [mNum]int
	r, berr := provider.ScanRequest(body, msgNames, &provider.Found{Vals: v[:], At: at[:]})
	if berr != nil {
		return r, berr
	}
	if r.Stream, berr = provider.ReadStream(v[mStream]); berr != nil {
		return provider.Request{}, berr
	}
	if r.Stream {
		r.Need |= provider.CapStream
	}
	if r.Need, berr = caps(r.Need, v[mTools], v[mOutputConfig], v[mOutputFormat]); berr != nil {
		return provider.Request{}, berr
	}
	if r.SessionKey, berr = provider.Nested(v[mMetadata], "metadata", userIDNames); berr != nil {
		return provider.Request{}, berr
	}
	if r.MaxOutput, berr = provider.ReadOutputCap(v[mMaxTokens], "max_tokens"); berr != nil {
		return provider.Request{}, berr
	}
	r.Prefix = provider.Prefix{Tools: v[mTools], System: v[mSystem], Turns: v[mMessages]}
	return r, nil
}

// inspectCountTokens is inspectMessages without stream and session key:
// the same model, tools and output format decide the targets.
func inspectCountTokens(body []byte, _ string) (provider.Request, *provider.BodyError) {
	var v [4][]byte
	var at [4]int
	r, berr := provider.ScanRequest(body, countNames, &provider.Found{Vals: v[:], At: at[:]})
	if berr != nil {
		return r, berr
	}
	if r.Need, berr = caps(0, v[1], v[2], v[3]); berr != nil {
		return provider.Request{}, berr
	}
	return r, nil
}

func caps(need provider.Caps, tools, outputConfig, outputFormat []byte) (provider.Caps, *provider.BodyError) {
	if provider.NonEmptyArray(tools) {
		need |= provider.CapTools
	}
	format, berr := provider.Nested(outputConfig, "output_config", formatNames)
	if berr != nil {
		return 0, berr
	}
	a, berr := provider.TypeIs(format, "output_config.format", "json_schema")
	if berr != nil {
		return 0, berr
	}
	b, berr := provider.TypeIs(outputFormat, "output_format", "json_schema")
	if berr != nil {
		return 0, berr
	}
	if a || b {
		need |= provider.CapJSONSchema
	}
	return need, nil
}
