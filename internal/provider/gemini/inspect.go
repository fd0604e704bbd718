package gemini

import (
	"strconv"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
)

// Google's JSON parser (proto3 JSON) accepts a field by its lowerCamelCase
// name and by its original snake_case name, so "generationConfig" and
// "generation_config" are one member to the provider: the node reads both
// spellings, and refuses a body that has both, as it refuses a member that
// appears twice (docs/api.md "Gemini").

var (
	genNames    = provider.NewNames("model", "tools", "generationConfig", "generation_config", "systemInstruction", "system_instruction", "contents")
	configNames = provider.NewNames("responseSchema", "response_schema", "responseJsonSchema", "response_json_schema", "maxOutputTokens", "max_output_tokens")
	countNames  = provider.NewNames("model", "generateContentRequest", "generate_content_request")
	modelNames  = provider.NewNames("model")
	batchNames  = provider.NewNames("model", "requests")
)

const (
	gModel = iota
	gTools
	gConfig
	gConfigSnake
	gSystem
	gSystemSnake
	gContents
	gNum
)

// inspectGenerate is generateContent: the body's optional "model" must
// name the path's model; tools (non-empty) needs the tools capability; a
// response schema (generationConfig.responseSchema or
// responseJsonSchema, non-null) needs json_schema.
func inspectGenerate(body []byte, pathModel string) (provider.Request, *provider.BodyError) {
	return inspectContent(body, pathModel, false)
}

// inspectStream is streamGenerateContent: generateContent, streamed.
func inspectStream(body []byte, pathModel string) (provider.Request, *provider.BodyError) {
	return inspectContent(body, pathModel, true)
}

func inspectContent(body []byte, pathModel string, stream bool) (provider.Request, *provider.BodyError) {
	r, berr := start(pathModel)
	if berr != nil {
		return provider.Request{}, berr
	}
	var v [gNum][]byte
	var at [gNum]int
	if berr := scan(body, "", genNames, v[:], at[:]); berr != nil {
		return provider.Request{}, berr
	}
	if berr := r.name(v[gModel], at[gModel], "model", pathModel); berr != nil {
		return provider.Request{}, berr
	}
	if r.Need, r.MaxOutput, berr = caps(v[gTools], v[gConfig], v[gConfigSnake], ""); berr != nil {
		return provider.Request{}, berr
	}
	if stream {
		r.Stream = true
		r.Need |= provider.CapStream
	}
	system := v[gSystem]
	if system == nil {
		system = v[gSystemSnake]
	}
	r.Prefix = provider.Prefix{Tools: v[gTools], System: system, Turns: v[gContents]}
	return r.Request, nil
}

// inspectCountTokens is countTokens: the optional top-level "model" and
// generateContentRequest.model must name the path's model;
// generateContentRequest's tools and response schema need the
// capabilities they need in generateContent, as the same request would.
func inspectCountTokens(body []byte, pathModel string) (provider.Request, *provider.BodyError) {
	r, berr := start(pathModel)
	if berr != nil {
		return provider.Request{}, berr
	}
	var v [3][]byte
	var at [3]int
	if berr := scan(body, "", countNames, v[:], at[:]); berr != nil {
		return provider.Request{}, berr
	}
	if berr := r.name(v[0], at[0], "model", pathModel); berr != nil {
		return provider.Request{}, berr
	}
	gcr, gat, parent, berr := pair(v[1], at[1], v[2], at[2], "generateContentRequest", "generate_content_request")
	if berr != nil || !provider.Object(gcr) {
		return r.Request, berr
	}
	var n [gNum][]byte
	var nat [gNum]int
	if berr := scan(gcr, parent, genNames, n[:], nat[:]); berr != nil {
		return provider.Request{}, berr
	}
	if berr := r.name(n[gModel], gat+nat[gModel], parent+".model", pathModel); berr != nil {
		return provider.Request{}, berr
	}
	// countTokens generates nothing: the output cap asks for nothing here.
	if r.Need, _, berr = caps(n[gTools], n[gConfig], n[gConfigSnake], parent); berr != nil {
		return provider.Request{}, berr
	}
	return r.Request, nil
}

// inspectEmbed is embedContent: the optional "model" must name the path's
// model.
func inspectEmbed(body []byte, pathModel string) (provider.Request, *provider.BodyError) {
	r, berr := start(pathModel)
	if berr != nil {
		return provider.Request{}, berr
	}
	var v [1][]byte
	var at [1]int
	if berr := scan(body, "", modelNames, v[:], at[:]); berr != nil {
		return provider.Request{}, berr
	}
	if berr := r.name(v[0], at[0], "model", pathModel); berr != nil {
		return provider.Request{}, berr
	}
	return r.Request, nil
}

// inspectBatchEmbed is batchEmbedContents: the optional top-level "model"
// and the "model" of every element of "requests" (which Google requires)
// must name the path's model.
func inspectBatchEmbed(body []byte, pathModel string) (provider.Request, *provider.BodyError) {
	r, berr := start(pathModel)
	if berr != nil {
		return provider.Request{}, berr
	}
	var v [2][]byte
	var at [2]int
	if berr := scan(body, "", batchNames, v[:], at[:]); berr != nil {
		return provider.Request{}, berr
	}
	if berr := r.name(v[0], at[0], "model", pathModel); berr != nil {
		return provider.Request{}, berr
	}
	if len(v[1]) == 0 || v[1][0] != '[' {
		return r.Request, nil // absent or not a list: the provider refuses it
	}
	it, _ := jsonedit.Elements(v[1]) // validated with the body
	for i := 0; ; i++ {
		el, eat, ok, _ := it.Next()
		if !ok {
			return r.Request, nil
		}
		if !provider.Object(el) {
			continue
		}
		parent := "requests[" + strconv.Itoa(i) + "]"
		var m [1][]byte
		var mat [1]int
		if berr := scan(el, parent, modelNames, m[:], mat[:]); berr != nil {
			return provider.Request{}, berr
		}
		if berr := r.name(m[0], at[1]+eat+mat[0], parent+".model", pathModel); berr != nil {
			return provider.Request{}, berr
		}
	}
}

// request is a Request under construction.
type request struct{ provider.Request }

// start begins the Request of a path that names pathModel.
func start(pathModel string) (request, *provider.BodyError) {
	if pathModel == "" { // Match never reads an empty model: a caller's bug
		return request{}, &provider.BodyError{Code: "missing_model", Msg: "the path names no model: POST /v1beta/models/{model}:{method}"}
	}
	return request{provider.Request{Model: pathModel}}, nil
}

// scan scans the object obj for names, refusing a malformed obj (the body
// as a whole, when parent is "") and ambiguous members.
func scan(obj []byte, parent string, names *provider.Names, v [][]byte, at []int) *provider.BodyError {
	berr, err := provider.Scan(obj, parent, names, &provider.Found{Vals: v, At: at})
	if err != nil {
		return provider.RejectBody(obj)
	}
	return berr
}

// name checks a body member that names the model: absent, or a string
// that names the path's model as "models/{model}" or "{model}". A present
// one is listed in Named, for the attempt to name the provider model
// there. at is the value's offset in the body.
func (r *request) name(raw []byte, at int, path, pathModel string) *provider.BodyError {
	if raw == nil {
		return nil
	}
	if s, ok := jsonedit.Unquote(raw); ok && (s == "models/"+pathModel || s == pathModel) {
		r.Named = append(r.Named, [2]int{at, at + len(raw)})
		return nil
	}
	return provider.Problemf("invalid_model", "field %q must name the model of the path, %q (or %q); the body names another model or is not a string", path, "models/"+pathModel, pathModel)
}

// pair reads the member that the body may spell in camelCase or
// snake_case: the one present, its offset and the name it has. Both at
// once is refused: the node would read one, the provider maybe the other.
func pair(camel []byte, camelAt int, snake []byte, snakeAt int, camelName, snakeName string) ([]byte, int, string, *provider.BodyError) {
	switch {
	case camel != nil && snake != nil:
		return nil, 0, "", provider.Problemf("ambiguous_member", "fields %q and %q are one member to the provider; the body must have only one of them", camelName, snakeName)
	case snake != nil:
		return snake, snakeAt, snakeName, nil
	}
	return camel, camelAt, camelName, nil
}

// caps derives the capabilities a generate request needs from its tools
// and generation config (in either spelling), and reads the output cap
// generationConfig.maxOutputTokens; parent is where they are ("" for the
// top level).
func caps(tools, config, configSnake []byte, parent string) (provider.Caps, int64, *provider.BodyError) {
	var need provider.Caps
	if provider.NonEmptyArray(tools) {
		need |= provider.CapTools
	}
	at := func(name string) string {
		if parent == "" {
			return name
		}
		return parent + "." + name
	}
	gc, _, name, berr := pair(config, 0, configSnake, 0, at("generationConfig"), at("generation_config"))
	if berr != nil || !provider.Object(gc) {
		return need, 0, berr
	}
	var v [6][]byte
	var vat [6]int
	if berr := scan(gc, name, configNames, v[:], vat[:]); berr != nil {
		return 0, 0, berr
	}
	schema, _, _, berr := pair(v[0], 0, v[1], 0, name+".responseSchema", name+".response_schema")
	if berr != nil {
		return 0, 0, berr
	}
	jsonSchema, _, _, berr := pair(v[2], 0, v[3], 0, name+".responseJsonSchema", name+".response_json_schema")
	if berr != nil {
		return 0, 0, berr
	}
	if (schema != nil && string(schema) != "null") || (jsonSchema != nil && string(jsonSchema) != "null") {
		need |= provider.CapJSONSchema
	}
	out, _, outName, berr := pair(v[4], 0, v[5], 0, name+".maxOutputTokens", name+".max_output_tokens")
	if berr != nil {
		return 0, 0, berr
	}
	maxOut, berr := provider.ReadOutputCap(out, outName)
	if berr != nil {
		return 0, 0, berr
	}
	return need, maxOut, nil
}
