package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

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

// bodyFields are the raw values of the top-level members that decide
// capabilities (SPEC §1); nil when absent. Everything else in the body
// passes through untouched.
type bodyFields struct {
	model    []byte
	hasModel bool
	// modelCase is set when a member's key is "model" in another letter
	// case ("Model", "MODEL"): see inspect.
	modelCase bool
	folded    [nFolded][]byte // indexed by the constants below
}

// The members matched the way encoding/json matches struct fields.
const (
	fStream = iota
	fTools
	fFunctions
	fResponseFormat
	fOutputConfig
	fOutputFormat
	nFolded
)

var foldedNames = [nFolded]string{
	fStream:         "stream",
	fTools:          "tools",
	fFunctions:      "functions",
	fResponseFormat: "response_format",
	fOutputConfig:   "output_config",
	fOutputFormat:   "output_format",
}

// inspect validates body as one JSON object and derives the public model
// and the capabilities the request needs.
//
// One jsonedit pass over the top-level members both validates the whole
// document (with encoding/json's grammar and nesting limit) and collects the
// few raw values that matter; only those are decoded. It keeps the matching
// rules of the encoding/json struct decode it replaced: "model" is matched
// exactly (as jsonedit.Replace will rewrite it), the other members the way
// encoding/json matches struct fields, case-insensitively, and the last
// duplicate wins.
func inspect(p routes.Protocol, body []byte) (request, *apierr.Error) {
	f, err := scanBody(body)
	if err != nil {
		return request{}, rejectBody(body)
	}
	if f.modelCase {
		// The node rewrites only "model"; a provider that matched keys
		// case-insensitively (as encoding/json does) could read the
		// client's own "Model" instead and run a model the key was never
		// allowed (SPEC §3). Refuse what cannot be rewritten safely.
		return request{}, apierr.BadRequest("invalid_model", `field "model" must appear only in lower case; the body also has a differently cased "model" member`)
	}
	if !f.hasModel {
		return request{}, apierr.BadRequest("missing_model", `missing required field "model"`)
	}
	var r request
	if m, ok := jsonedit.Unquote(f.model); ok && m != "" {
		r.model = m
	} else {
		return request{}, apierr.BadRequest("invalid_model", `field "model" must be a non-empty string`)
	}
	switch string(f.folded[fStream]) {
	case "", "null", "false":
	case "true":
		r.stream = true
		r.need |= routes.CapStream
	default:
		return request{}, apierr.BadRequest("invalid_stream", `field "stream" must be a boolean`)
	}
	if nonEmptyArray(f.folded[fTools]) || nonEmptyArray(f.folded[fFunctions]) {
		r.need |= routes.CapTools
	}
	if wantsJSONSchema(p, &f) {
		r.need |= routes.CapJSONSchema
	}
	return r, nil
}

// scanBody validates body and collects the members inspect needs.
func scanBody(body []byte) (bodyFields, error) {
	var f bodyFields
	it, err := jsonedit.Members(body)
	if err != nil {
		return f, err
	}
	for {
		m, ok, err := it.Next()
		if err != nil {
			return f, err
		}
		if !ok {
			return f, nil
		}
		// A key that starts with a plain ASCII byte can only match a name
		// that starts with the same letter in either case, so most members
		// ("messages", "temperature", …) take one comparison at most.
		first := byte(0) // a non-ASCII or escaped first byte: try every name
		if k := m.RawKey; len(k) > 0 && k[0] < utf8.RuneSelf && k[0] != '\\' {
			first = k[0] | 0x20 // lower case for letters
		}
		if first == 0 || first == 'm' {
			if m.KeyIs("model") {
				f.model, f.hasModel = m.Value, true
				continue
			}
			if m.KeyFold("model") {
				f.modelCase = true
				continue
			}
		}
		for i, name := range foldedNames {
			if (first == 0 || first == name[0]) && m.KeyFold(name) {
				f.folded[i] = m.Value
				break
			}
		}
	}
}

// rejectBody explains why body is not a JSON object. It runs only for bodies
// jsonedit rejected, and asks encoding/json again so that the message (the
// syntax error's line, column and wording, or the top-level type) stays what
// clients have always seen.
func rejectBody(body []byte) *apierr.Error {
	var v struct{}
	if err := json.Unmarshal(body, &v); err != nil {
		return apierr.BadRequest("invalid_json", jsonProblem(body, err))
	}
	// A top-level null decodes into a struct without error.
	return apierr.BadRequest("invalid_json", "request body must be a JSON object")
}

// wantsJSONSchema reports whether the request asks for structured output
// with a JSON schema. The nested members are read with the semantics of the
// encoding/json struct decode this replaced (see typeIs).
func wantsJSONSchema(p routes.Protocol, f *bodyFields) bool {
	if p == routes.OpenAI {
		return typeIs(f.folded[fResponseFormat], "json_schema")
	}
	if formatTypeIs(f.folded[fOutputConfig], "json_schema") {
		return true
	}
	// The older structured-outputs beta put the format at the top level.
	return typeIs(f.folded[fOutputFormat], "json_schema")
}

// typeIs reports whether decoding raw into struct{ Type string `json:"type"` }
// with encoding/json succeeds with Type == want.
func typeIs(raw []byte, want string) bool {
	var d typeDecode
	d.object(raw)
	return !d.failed && d.match(want)
}

// formatTypeIs is typeIs for
// struct{ Format struct{ Type string `json:"type"` } `json:"format"` }.
func formatTypeIs(raw []byte, want string) bool {
	var d typeDecode
	if !d.isObject(raw) {
		return false
	}
	it, _ := jsonedit.Members(raw) // raw was validated by scanBody
	for {
		m, ok, _ := it.Next()
		if !ok {
			break
		}
		if m.KeyFold("format") {
			// Every "format" decodes into the same struct value, so a
			// later one without "type" keeps the earlier one's type.
			d.object(m.Value)
		}
	}
	return !d.failed && d.match(want)
}

// typeDecode follows encoding/json decoding objects into a struct with a
// string field "type": members match the field case-insensitively and the
// last one wins; null leaves a value unchanged; a value of the wrong type is
// an error that Unmarshal reports after decoding the rest.
type typeDecode struct {
	typ    []byte // raw JSON string of the last "type", nil if none
	failed bool
}

func (d *typeDecode) isObject(raw []byte) bool {
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return false
	case raw[0] != '{':
		d.failed = true
		return false
	}
	return true
}

func (d *typeDecode) object(raw []byte) {
	if !d.isObject(raw) {
		return
	}
	it, _ := jsonedit.Members(raw) // raw was validated by scanBody
	for {
		m, ok, _ := it.Next()
		if !ok {
			return
		}
		if !m.KeyFold("type") {
			continue
		}
		switch m.Value[0] {
		case '"':
			d.typ = m.Value
		case 'n':
		default:
			d.failed = true
		}
	}
}

func (d *typeDecode) match(want string) bool {
	return d.typ != nil && jsonedit.EqualString(d.typ, want)
}

// nonEmptyArray reports whether raw, a validated JSON value, is an array
// with at least one element.
func nonEmptyArray(raw []byte) bool {
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	rest := bytes.TrimLeft(raw[1:], " \t\r\n")
	return len(rest) > 0 && rest[0] != ']'
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
