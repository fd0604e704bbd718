package openai

import (
	"github.com/scootgate/scootgate/internal/provider"
)

// The members Inspect reads, per endpoint. Index constants follow each.
var (
	chatNames         = provider.NewNames("model", "stream", "tools", "functions", "response_format", "prompt_cache_key", "stream_options", "messages", "max_tokens", "max_completion_tokens")
	respNames         = provider.NewNames("model", "stream", "tools", "text", "prompt_cache_key", "instructions", "input", "max_output_tokens")
	respJSONNames     = provider.NewNames("model", "tools", "text", "prompt_cache_key")
	embNames          = provider.NewNames("model")
	complNames        = provider.NewNames("model", "stream", "stream_options", "max_tokens")
	imageNames        = provider.NewNames("model", "stream")
	formatNames       = provider.NewNames("format")
	includeUsageNames = provider.NewNames("include_usage")
)

const (
	cModel = iota
	cStream
	cTools
	cFunctions
	cResponseFormat
	cPromptCacheKey
	cStreamOptions
	cMessages
	cMaxTokens
	cMaxCompletionTokens
	cNum
)

const (
	rModel = iota
	rStream
	rTools
	rText
	rPromptCacheKey
	rInstructions
	rInput
	rMaxOutputTokens
	rNum
)

const (
	jModel = iota
	jTools
	jText
	jPromptCacheKey
	jNum
)

// inspectChat reads model, stream, tools/functions (tools capability),
// response_format.type == "json_schema" (json_schema capability), the
// session key prompt_cache_key, the output cap max_completion_tokens (or
// max_tokens), and, for a stream, how to ask for its
// usage ([askUsage]).
func inspectChat(body []byte, _ string) (provider.Request, *provider.BodyError) {
	var v [cNum][]byte
	var at [cNum]int
	f := provider.Found{Vals: v[:], At: at[:]}
	r, berr := provider.ScanRequest(body, chatNames, &f)
	if berr != nil {
		return r, berr
	}
	if r.Stream, berr = provider.ReadStream(v[cStream]); berr != nil {
		return provider.Request{}, berr
	}
	if r.Stream {
		r.Need |= provider.CapStream
		if r.AskUsage, berr = askUsage(v[cStreamOptions], at[cStreamOptions], f.Tail); berr != nil {
			return provider.Request{}, berr
		}
	}
	if provider.NonEmptyArray(v[cTools]) || provider.NonEmptyArray(v[cFunctions]) {
		r.Need |= provider.CapTools
	}
	schema, berr := provider.TypeIs(v[cResponseFormat], "response_format", "json_schema")
	if berr != nil {
		return provider.Request{}, berr
	}
	if schema {
		r.Need |= provider.CapJSONSchema
	}
	r.SessionKey = v[cPromptCacheKey]
	// max_completion_tokens replaced max_tokens; a body with both is the
	// provider's to refuse, and the larger is the safer estimate.
	maxTokens, berr := provider.ReadOutputCap(v[cMaxTokens], "max_tokens")
	if berr != nil {
		return provider.Request{}, berr
	}
	maxCompletion, berr := provider.ReadOutputCap(v[cMaxCompletionTokens], "max_completion_tokens")
	if berr != nil {
		return provider.Request{}, berr
	}
	r.MaxOutput = max(maxTokens, maxCompletion)
	tools := v[cTools]
	if tools == nil {
		tools = v[cFunctions]
	}
	r.Prefix = provider.Prefix{Tools: tools, Turns: v[cMessages]}
	return r, nil
}

var (
	jsonTrue = []byte("true")

	// The edits that ask for stream usage: a stream_options member for a
	// body without one, a stream_options value for one that is null, an
	// include_usage member for a stream_options object without one (with
	// and without the comma that separates it from a member before it).
	addOptions      = []byte(`,"stream_options":{"include_usage":true}`)
	optionsValue    = []byte(`{"include_usage":true}`)
	addIncludeUsage = []byte(`,"include_usage":true`)
	onlyInclude     = []byte(`"include_usage":true`)
)

// askUsage returns the edit that makes a Chat Completions stream report
// its usage (stream_options.include_usage true; docs/usage-events.md), or
// an empty Edit when the client asked for usage itself. opts is the
// stream_options value (nil when absent) at offset at; tail is where a new
// top-level member goes. The edit changes only those bytes:
//
//   - stream_options absent: `"stream_options":{"include_usage":true}` is
//     added after the last member;
//   - stream_options null: its value becomes {"include_usage":true};
//   - stream_options an object without include_usage: `"include_usage":true`
//     is added after its last member;
//   - include_usage false or null: it becomes true;
//   - include_usage true: no edit (the client asked);
//   - stream_options of another type than object or null, or include_usage
//     of another type than boolean or null: a 400. A lax provider would
//     read `"include_usage":0` as false and send no usage; the node
//     promised to ask for it.
//
// include_usage decides what the client sees, so a twin of it in another
// letter case, or a second one, is refused as for every member the node
// reads.
func askUsage(opts []byte, at, tail int) (provider.Edit, *provider.BodyError) {
	switch {
	case opts == nil: // a body with "stream" has a member before the new one
		return provider.Edit{At: tail, End: tail, Value: addOptions}, nil
	case string(opts) == "null":
		return provider.Edit{At: at, End: at + len(opts), Value: optionsValue}, nil
	case !provider.Object(opts):
		return provider.Edit{}, &provider.BodyError{Code: "invalid_stream_options", Msg: `field "stream_options" must be an object`}
	}
	var v [1][]byte
	var vat [1]int
	f := provider.Found{Vals: v[:], At: vat[:]}
	if berr, _ := provider.Scan(opts, "stream_options", includeUsageNames, &f); berr != nil {
		return provider.Edit{}, berr
	}
	inc := v[0]
	switch string(inc) {
	case "":
		add := addIncludeUsage
		if f.Empty {
			add = onlyInclude
		}
		return provider.Edit{At: at + f.Tail, End: at + f.Tail, Value: add}, nil
	case "false", "null":
		start := at + vat[0]
		return provider.Edit{At: start, End: start + len(inc), Value: jsonTrue}, nil
	case "true":
		return provider.Edit{}, nil // the client asked
	}
	return provider.Edit{}, &provider.BodyError{Code: "invalid_stream_options", Msg: `field "stream_options.include_usage" must be a boolean`}
}

// inspectResponses reads model, stream, tools (tools capability),
// text.format.type == "json_schema" (json_schema capability), the
// session key prompt_cache_key and the output cap max_output_tokens.
func inspectResponses(body []byte, _ string) (provider.Request, *provider.BodyError) {
	var v [rNum][]byte
	var at [rNum]int
	r, berr := provider.ScanRequest(body, respNames, &provider.Found{Vals: v[:], At: at[:]})
	if berr != nil {
		return r, berr
	}
	if r.Stream, berr = provider.ReadStream(v[rStream]); berr != nil {
		return provider.Request{}, berr
	}
	if r.Stream {
		r.Need |= provider.CapStream
	}
	need, berr := responsesCaps(v[rTools], v[rText])
	if berr != nil {
		return provider.Request{}, berr
	}
	r.Need |= need
	r.SessionKey = v[rPromptCacheKey]
	if r.MaxOutput, berr = provider.ReadOutputCap(v[rMaxOutputTokens], "max_output_tokens"); berr != nil {
		return provider.Request{}, berr
	}
	r.Prefix = provider.Prefix{Tools: v[rTools], System: v[rInstructions], Turns: v[rInput]}
	return r, nil
}

// inspectResponsesJSON is inspectResponses for the Responses endpoints
// that answer in one JSON document (compaction, input token count): the
// same model, capability members and session key, and no stream. A
// "stream" member is the provider's to refuse or ignore: the node reads
// the answer whole either way.
func inspectResponsesJSON(body []byte, _ string) (provider.Request, *provider.BodyError) {
	var v [jNum][]byte
	var at [jNum]int
	r, berr := provider.ScanRequest(body, respJSONNames, &provider.Found{Vals: v[:], At: at[:]})
	if berr != nil {
		return r, berr
	}
	need, berr := responsesCaps(v[jTools], v[jText])
	if berr != nil {
		return provider.Request{}, berr
	}
	r.Need |= need
	r.SessionKey = v[jPromptCacheKey]
	return r, nil
}

// responsesCaps is what a Responses body needs of its target: tools
// (non-empty) and json_schema (text.format.type).
func responsesCaps(tools, text []byte) (provider.Caps, *provider.BodyError) {
	var need provider.Caps
	if provider.NonEmptyArray(tools) {
		need |= provider.CapTools
	}
	format, berr := provider.Nested(text, "text", formatNames)
	if berr != nil {
		return 0, berr
	}
	schema, berr := provider.TypeIs(format, "text.format", "json_schema")
	if berr != nil {
		return 0, berr
	}
	if schema {
		need |= provider.CapJSONSchema
	}
	return need, nil
}

// inspectEmbeddings reads the model only: embeddings never stream and
// need no capability.
func inspectEmbeddings(body []byte, _ string) (provider.Request, *provider.BodyError) {
	var v [1][]byte
	var at [1]int
	return provider.ScanRequest(body, embNames, &provider.Found{Vals: v[:], At: at[:]})
}

// inspectCompletions reads model, stream and, for a stream, how to ask for
// its usage, as for Chat Completions, and the output cap max_tokens.
// prompt and suffix decide nothing.
func inspectCompletions(body []byte, _ string) (provider.Request, *provider.BodyError) {
	var v [4][]byte
	var at [4]int
	f := provider.Found{Vals: v[:], At: at[:]}
	r, berr := provider.ScanRequest(body, complNames, &f)
	if berr != nil {
		return r, berr
	}
	if r.Stream, berr = provider.ReadStream(v[1]); berr != nil {
		return provider.Request{}, berr
	}
	if r.Stream {
		r.Need |= provider.CapStream
		if r.AskUsage, berr = askUsage(v[2], at[2], f.Tail); berr != nil {
			return provider.Request{}, berr
		}
	}
	if r.MaxOutput, berr = provider.ReadOutputCap(v[3], "max_tokens"); berr != nil {
		return provider.Request{}, berr
	}
	return r, nil
}

// inspectImages reads model and stream (the stream capability).
func inspectImages(body []byte, _ string) (provider.Request, *provider.BodyError) {
	var v [2][]byte
	var at [2]int
	r, berr := provider.ScanRequest(body, imageNames, &provider.Found{Vals: v[:], At: at[:]})
	if berr != nil {
		return r, berr
	}
	if r.Stream, berr = provider.ReadStream(v[1]); berr != nil {
		return provider.Request{}, berr
	}
	if r.Stream {
		r.Need |= provider.CapStream
	}
	return r, nil
}
