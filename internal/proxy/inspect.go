package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/routes"
)

// request is what the node needs to know about a client body.
type request struct {
	model  string
	stream bool
	need   routes.Caps
}

// bodyFields are the top-level members that decide capabilities (SPEC §1).
// Everything else in the body passes through untouched.
type bodyFields struct {
	Stream         json.RawMessage `json:"stream"`
	Tools          json.RawMessage `json:"tools"`
	Functions      json.RawMessage `json:"functions"`
	ResponseFormat json.RawMessage `json:"response_format"`
	OutputConfig   json.RawMessage `json:"output_config"`
	OutputFormat   json.RawMessage `json:"output_format"`
}

// inspect validates body as one JSON object and derives the public model
// and the capabilities the request needs.
func inspect(p routes.Protocol, body []byte) (request, *apierr.Error) {
	var f bodyFields
	if err := json.Unmarshal(body, &f); err != nil {
		return request{}, apierr.BadRequest("invalid_json", jsonProblem(body, err))
	}
	raw, ok, err := jsonedit.Lookup(body, "model")
	if err != nil {
		return request{}, apierr.BadRequest("invalid_json", "request body must be a JSON object")
	}
	if !ok {
		return request{}, apierr.BadRequest("missing_model", `missing required field "model"`)
	}
	var r request
	if err := json.Unmarshal(raw, &r.model); err != nil || r.model == "" {
		return request{}, apierr.BadRequest("invalid_model", `field "model" must be a non-empty string`)
	}
	if !isNull(f.Stream) {
		if err := json.Unmarshal(f.Stream, &r.stream); err != nil {
			return request{}, apierr.BadRequest("invalid_stream", `field "stream" must be a boolean`)
		}
	}
	if r.stream {
		r.need |= routes.CapStream
	}
	if nonEmptyArray(f.Tools) || nonEmptyArray(f.Functions) {
		r.need |= routes.CapTools
	}
	if wantsJSONSchema(p, &f) {
		r.need |= routes.CapJSONSchema
	}
	return r, nil
}

func wantsJSONSchema(p routes.Protocol, f *bodyFields) bool {
	var typed struct {
		Type string `json:"type"`
	}
	if p == routes.OpenAI {
		return !isNull(f.ResponseFormat) && json.Unmarshal(f.ResponseFormat, &typed) == nil && typed.Type == "json_schema"
	}
	var oc struct {
		Format struct {
			Type string `json:"type"`
		} `json:"format"`
	}
	// Absent members are skipped: unmarshalling empty input allocates an
	// error on every request (docs/performance.md).
	if !isNull(f.OutputConfig) && json.Unmarshal(f.OutputConfig, &oc) == nil && oc.Format.Type == "json_schema" {
		return true
	}
	// The older structured-outputs beta put the format at the top level.
	return !isNull(f.OutputFormat) && json.Unmarshal(f.OutputFormat, &typed) == nil && typed.Type == "json_schema"
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

func nonEmptyArray(raw json.RawMessage) bool {
	if isNull(raw) {
		return false
	}
	var items []json.RawMessage
	return json.Unmarshal(raw, &items) == nil && len(items) > 0
}

// jsonProblem says where and what: line and column for syntax errors, the
// field for type errors.
func jsonProblem(body []byte, err error) string {
	if len(bytes.TrimSpace(body)) == 0 {
		return "request body is empty; expected a JSON object"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(body, se.Offset)
		return fmt.Sprintf("malformed JSON body at line %d, column %d: %s", line, col, se.Error())
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "request body must be a JSON object, got " + te.Value
		}
		return fmt.Sprintf("field %q has the wrong type: got %s", te.Field, te.Value)
	}
	return "malformed JSON body: " + err.Error()
}

func position(b []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < off-1 && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}
