package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/scootgate/scootgate/internal/jsonedit"
)

// Names is a list of member names prepared for [Scan]. Build it once with
// [NewNames].
type Names struct {
	list []string
	// byFirst[c] has bit i set when list[i] starts with byte c (names are
	// lower-case ASCII; a key's first letter is folded to lower case).
	byFirst [utf8.RuneSelf]uint32
	all     uint32
}

// NewNames prepares names (at most 32 lower-case ASCII names) for Scan.
func NewNames(names ...string) *Names {
	if len(names) > 32 {
		panic("protocol: NewNames takes at most 32 names")
	}
	n := &Names{list: names}
	for i, name := range names {
		n.byFirst[name[0]] |= 1 << i
		n.all |= 1 << i
	}
	return n
}

// Found is what [Scan] read from one object.
type Found struct {
	// Vals[i] is the raw value of the i-th name, nil when absent. The
	// caller gives the storage: at least one element per name.
	Vals [][]byte
	// At, when not nil, receives where each value starts in the object
	// (At[i] for Vals[i]); the same length as Vals.
	At []int
	// Tail is where a member added to the object would go, and Empty says
	// it has none (jsonedit.Iter.Tail).
	Tail  int
	Empty bool
}

// Scan reads the members named by names of the JSON object obj into f,
// validating obj as a whole in the same pass.
//
// A name that appears twice, or a member whose key differs from a name only
// in letter case (under the case folding encoding/json uses to match struct
// fields: "Stream", "STREAM" and "ſtream" all fold to "stream") or in what
// lax readers ignore (a NUL and what follows it, the Turkish dotless or
// dotted I for "i": jsonedit.Member.KeyLike), is refused
// with a *BodyError naming the member by its path (parent + "." + name, or
// name when parent is ""): the node reads the exact member once, a provider
// might read the other one. Keys are compared unescaped, so "mod\u0065l" is
// "model".
//
// A malformed obj returns the jsonedit error as err (bodyErr nil), even
// when an ambiguity came first. Scan does not allocate unless it refuses
// the object.
func Scan(obj []byte, parent string, names *Names, f *Found) (bodyErr *BodyError, err error) {
	it, err := jsonedit.Members(obj)
	if err != nil {
		return nil, err
	}
	for {
		m, ok, err := it.Next()
		if err != nil {
			return nil, err // a malformed body is reported as such first
		}
		if !ok {
			f.Tail, f.Empty = it.Tail()
			return bodyErr, nil
		}
		if bodyErr != nil {
			continue // the first ambiguity is reported; the rest is only validated
		}
		// A key that starts with a plain ASCII byte can only match a name
		// that starts with the same letter in either case, so most members
		// ("messages", "temperature", …) cost one table lookup.
		cand := names.all // a non-ASCII or escaped first byte: try every name
		if k := m.RawKey; len(k) > 0 && k[0] < utf8.RuneSelf && k[0] != '\\' {
			cand = names.byFirst[k[0]|0x20] // lower case for letters
		}
		for i := 0; cand != 0; i, cand = i+1, cand>>1 {
			if cand&1 == 0 {
				continue
			}
			name := names.list[i]
			if m.KeyIs(name) {
				if f.Vals[i] != nil {
					bodyErr = ambiguous(parent, name, "appears more than once")
				}
				f.Vals[i] = m.Value
				if f.At != nil {
					f.At[i] = m.At
				}
				break
			}
			if m.KeyFold(name) {
				bodyErr = ambiguous(parent, name, "has a differently cased twin")
				break
			}
			if m.KeyLike(name) {
				// "stream\u0000", "funct\u0131ons": a C-string or
				// locale-aware reader takes it for the member.
				bodyErr = ambiguous(parent, name, "has a twin that some readers take for it")
				break
			}
		}
	}
}

// ScanRequest scans the top level of a request body as [Scan] does, with
// names[0] "model" and f.At set, and reads the model and where it is: the
// start of every endpoint's Inspect. A malformed body is refused with
// [RejectBody]'s explanation.
func ScanRequest(body []byte, names *Names, f *Found) (Request, *BodyError) {
	berr, err := Scan(body, "", names, f)
	if err != nil {
		return Request{}, RejectBody(body)
	}
	if berr != nil {
		return Request{}, berr
	}
	m, berr := ReadModel(f.Vals[0])
	if berr != nil {
		return Request{}, berr
	}
	at := f.At[0]
	return Request{Model: m, ModelAt: [2]int{at, at + len(f.Vals[0])}}, nil
}

// ambiguous is Scan's refusal. The client's own key is not quoted: it may
// be long or not printable; the message names the member the node reads.
func ambiguous(parent, name, what string) *BodyError {
	path := name
	if parent != "" {
		path = parent + "." + name
	}
	if path == "model" {
		// The message clients have seen since the node first refused a
		// differently cased "model".
		if what == "appears more than once" {
			return &BodyError{Code: "invalid_model", Msg: `field "model" must appear only once`}
		}
		return &BodyError{Code: "invalid_model", Msg: `field "model" must appear only in lower case; the body also has a differently cased "model" member`}
	}
	return Problemf("ambiguous_member", "field %q %s in the body (a member spelled the same in another letter case counts); it must appear exactly once, spelled exactly so, because the provider might read the other one", path, what)
}

// Object reports whether raw, a validated JSON value, is an object.
func Object(raw []byte) bool { return len(raw) > 0 && raw[0] == '{' }

// NonEmptyArray reports whether raw, a validated JSON value, is an array
// with at least one element.
func NonEmptyArray(raw []byte) bool {
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	for _, c := range raw[1:] {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case ']':
			return false
		}
		return true
	}
	return false
}

// ReadModel reads the top-level "model" value: a non-empty JSON string.
func ReadModel(raw []byte) (string, *BodyError) {
	if raw == nil {
		return "", &BodyError{Code: "missing_model", Msg: `missing required field "model"`}
	}
	if m, ok := jsonedit.Unquote(raw); ok && m != "" {
		return m, nil
	}
	return "", &BodyError{Code: "invalid_model", Msg: `field "model" must be a non-empty string`}
}

// ReadStream reads a "stream" value: true, false, null or absent.
func ReadStream(raw []byte) (bool, *BodyError) {
	switch string(raw) {
	case "", "null", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, &BodyError{Code: "invalid_stream", Msg: `field "stream" must be a boolean`}
}

// ReadOutputCap reads the output cap a body asks for (OpenAI max_tokens,
// max_completion_tokens and max_output_tokens, Anthropic max_tokens,
// Gemini generationConfig.maxOutputTokens) from its raw JSON value: 0
// when absent or null, otherwise a whole number of tokens (saturating at
// the largest int64). Anything else is refused, naming field: the cap
// decides which targets can hold the request (docs/routing.md "Context
// windows"), so the node reads it exactly or not at all.
func ReadOutputCap(raw []byte, field string) (int64, *BodyError) {
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return 0, nil
	case raw[0] >= '0' && raw[0] <= '9':
		if n := Count(raw); n > 0 {
			return n, nil
		}
		if f, err := strconv.ParseFloat(string(raw), 64); err == nil && f == 0 {
			return 0, nil
		}
	}
	return 0, Problemf("invalid_output_cap", "field %q must be a whole number of tokens, at least 0", field)
}

// TypeIs reports whether raw is an object whose one "type" member is the
// JSON string want (escapes decoded). An ambiguous "type" is refused as in
// Scan; any other shape is simply not a match (the provider rejects it).
func TypeIs(raw []byte, parent, want string) (bool, *BodyError) {
	if !Object(raw) {
		return false, nil
	}
	var v [1][]byte
	berr, _ := Scan(raw, parent, typeName, &Found{Vals: v[:]}) // raw was validated with the body
	if berr != nil {
		return false, berr
	}
	return v[0] != nil && v[0][0] == '"' && jsonedit.EqualString(v[0], want), nil
}

var typeName = NewNames("type")

// Nested returns the member of the object raw that name names (nil when
// raw is not an object or lacks it), refusing an ambiguous one as Scan
// does.
func Nested(raw []byte, parent string, name *Names) ([]byte, *BodyError) {
	if !Object(raw) {
		return nil, nil
	}
	var v [1][]byte
	berr, _ := Scan(raw, parent, name, &Found{Vals: v[:]}) // raw was validated with the body
	return v[0], berr
}

// RejectBody explains why body, which [Scan] found malformed, is not a
// JSON object. It asks encoding/json again so that the message (the syntax
// error's line, column and wording, or the top-level type) stays what
// clients have always seen. It runs only on the error path.
func RejectBody(body []byte) *BodyError {
	var v struct{}
	if err := json.Unmarshal(body, &v); err != nil {
		return &BodyError{Code: "invalid_json", Msg: JSONProblem(body, err)}
	}
	// A top-level null decodes into a struct without error.
	return &BodyError{Code: "invalid_json", Msg: "request body must be a JSON object"}
}

// JSONProblem says where and what: line and column for syntax errors, the
// field for type errors.
func JSONProblem(body []byte, err error) string {
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
