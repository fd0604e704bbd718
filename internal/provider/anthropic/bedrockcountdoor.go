package anthropic

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
)

// The Bedrock door of count_tokens (docs/api.md "Cloud client paths"):
// Bedrock Runtime's CountTokens operation,
//
//	POST /model/{modelId}/count-tokens
//	{"input":{"invokeModel":{"body":"<base64 of an InvokeModel body>"}}}
//
// answered {"inputTokens":N}. At the entrance the InvokeModel body is
// decoded and made a Messages request as the invoke door makes it, less
// the members that only steer generation, which count_tokens does not
// take (countDropped); the count answer {"input_tokens":N} goes back as
// {"inputTokens":N}, errors in Bedrock's shape.

// BedrockCountTokensDoor is count_tokens through Bedrock Runtime's
// CountTokens path.
var BedrockCountTokensDoor = &provider.Door{
	Platform:   provider.Bedrock,
	Match:      matchBedrockCount,
	Request:    bedrockCountDoorRequest,
	Writer:     func(w http.ResponseWriter) provider.DoorWriter { return &bedrockWriter{w: w, count: true} },
	MissingKey: bedrockMissingKey,
}

func matchBedrockCount(escapedPath string) (model string, stream, ok bool, err *provider.BodyError) {
	model, op, ok, err := BedrockModelSegment(escapedPath)
	if !ok || op != "count-tokens" {
		return "", false, false, nil
	}
	return model, false, true, err
}

// countDropped are the members of an InvokeModel body that only steer
// generation: an InvokeModel body needs max_tokens, and Anthropic's
// count_tokens refuses every one of them.
var countDropped = [...]string{"max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "metadata", "service_tier"}

// bedrockCountDoorRequest is the count_tokens request of a CountTokens
// one. Its shape is closed: each level holds exactly the one member named,
// in exact case. A Converse input ("input.converse") is refused: counting
// it is the Converse API's.
func bedrockCountDoorRequest(body []byte, model string, _ bool, h http.Header) ([]byte, string, *provider.BodyError) {
	input, berr := soleMember(body, "", "input")
	if berr != nil {
		return nil, "", berr
	}
	invoke, berr := soleMember(input, "input", "invokeModel")
	if berr != nil {
		return nil, "", berr
	}
	raw, berr := soleMember(invoke, "input.invokeModel", "body")
	if berr != nil {
		return nil, "", berr
	}
	encoded, ok := jsonedit.Unquote(raw)
	if !ok {
		return nil, "", &provider.BodyError{Code: "invalid_request", Msg: "input.invokeModel.body must be a string: the InvokeModel body, base64-encoded"}
	}
	decoded, err := base64.StdEncoding.Strict().DecodeString(encoded)
	if err != nil {
		return nil, "", &provider.BodyError{Code: "invalid_request", Msg: "input.invokeModel.body is not valid base64: " + err.Error()}
	}
	out, pathModel, berr := fromEnvelope(decoded, model, false, h, bedrockDoorNames, BedrockVersion)
	if berr != nil {
		berr.Msg = "input.invokeModel.body: " + berr.Msg
		return nil, "", berr
	}
	return withoutMembers(out, countDropped[:]), pathModel, nil
}

// soleMember is the value of the object obj's one member, which must be
// name; parent is obj's path in the request ("" for the top level), for
// the refusals.
func soleMember(obj []byte, parent, name string) ([]byte, *provider.BodyError) {
	path := name
	if parent != "" {
		path = parent + "." + name
	}
	where := "the request body"
	if parent != "" {
		where = parent
	}
	it, err := jsonedit.Members(obj)
	if err != nil {
		return nil, &provider.BodyError{Code: "invalid_request", Msg: where + " must be an object with the one member " + strconv.Quote(name)}
	}
	var val []byte
	for {
		m, more, err := it.Next()
		if err != nil {
			return nil, &provider.BodyError{Code: "invalid_json", Msg: "request body is not valid JSON: " + err.Error()}
		}
		if !more {
			break
		}
		switch {
		case !m.KeyIs(name):
			if parent == "input" && m.KeyIs("converse") {
				return nil, &provider.BodyError{Code: "invalid_request", Msg: "input.converse: this path counts InvokeModel bodies only; send input.invokeModel"}
			}
			return nil, &provider.BodyError{Code: "invalid_request", Msg: where + " holds an unknown member " + strconv.Quote(string(m.RawKey)) + "; want only " + strconv.Quote(name)}
		case val != nil:
			return nil, &provider.BodyError{Code: "invalid_request", Msg: path + " is given twice"}
		}
		val = m.Value
	}
	if val == nil {
		return nil, &provider.BodyError{Code: "invalid_request", Msg: path + " is required"}
	}
	return val, nil
}

// withoutMembers is the valid object obj without its top-level members
// named in drop; the others keep their bytes and order.
func withoutMembers(obj []byte, drop []string) []byte {
	out := make([]byte, 0, len(obj))
	out = append(out, '{')
	it, _ := jsonedit.Members(obj)
	for {
		m, ok, _ := it.Next()
		if !ok {
			break
		}
		dropped := false
		for _, d := range drop {
			if m.KeyIs(d) {
				dropped = true
				break
			}
		}
		if dropped {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, m.RawKey...)
		out = append(out, "\":"...)
		out = append(out, m.Value...)
	}
	return append(out, '}')
}

// bedrockCount is Bedrock's CountTokens answer of Anthropic's count_tokens
// answer doc: {"inputTokens":N}. ok is false when doc is not a count
// (it then goes back as it came).
func bedrockCount(doc []byte) (out []byte, ok bool) {
	raw, found, err := jsonedit.Lookup(doc, "input_tokens")
	if err != nil || !found {
		return nil, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 {
		return nil, false
	}
	return append(strconv.AppendInt([]byte(`{"inputTokens":`), n, 10), '}'), true
}
