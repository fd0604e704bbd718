// Package schematest checks documents against the JSON Schemas in proto/
// with a real JSON Schema validator, so that tests can compare its verdict
// with the node's decoders. Only tests import it (it brings the validator,
// github.com/santhosh-tekuri/jsonschema/v6, which the node never links).
//
// # What "the schema accepts" means
//
// A JSON Schema describes JSON values, in which an object's member names
// are unique; RFC 8259 leaves duplicate names to the parser and RFC 7493
// (I-JSON) forbids them. [Schema.Check] therefore parses the document as
// I-JSON (one value, no duplicate name at any depth, nothing after it) and
// validates the value, with "format" asserted (date-time is checked, not
// just annotated).
//
// # Rules the schemas cannot express
//
// The node's validation is stricter than the schemas by exactly the rules
// in [RouteRules] and [AuthRules]: uniqueness, cross-references and the
// base URL checks, which JSON Schema cannot state, and one spelling rule
// the data model cannot see (an integer member must be written without a
// fraction or exponent: the value 1.0 is the integer 1 to JSON Schema). A
// comparison accepts a document the schema accepts and the node rejects
// only if every problem the node reports is one of them ([Explained]).
package schematest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// Schema is one compiled proto/*.schema.json.
type Schema struct {
	s *jsonschema.Schema
}

// Load compiles the schema file at path.
func Load(path string) (*Schema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const url = "file:///schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Schema{s: s}, nil
}

// MustLoad is Load for test set-up; it panics on error.
func MustLoad(path string) *Schema {
	s, err := Load(path)
	if err != nil {
		panic(err)
	}
	return s
}

// Check returns nil if the schema accepts data, or why not.
func (s *Schema) Check(data []byte) error {
	v, err := ParseIJSON(data)
	if err != nil {
		return err
	}
	return s.s.Validate(v)
}

// ErrDuplicate is returned by ParseIJSON for a repeated member name.
var ErrDuplicate = errors.New("duplicate member name")

// ParseIJSON parses data as one I-JSON value, into the representation the
// validator takes (maps, slices, json.Number, string, bool, nil): invalid
// UTF-8 and an unpaired surrogate escape in a string are errors (RFC 7493
// section 2.1), a repeated member name in any object is ErrDuplicate, and
// anything after the value is an error. Names and strings are decoded as encoding/json
// decodes them.
func ParseIJSON(data []byte) (any, error) {
	if err := ijsonText(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the document")
	}
	return v, nil
}

var (
	jsonString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	stringPart = regexp.MustCompile(`\\u[0-9a-fA-F]{4}|\\.|[^\\]`)
)

// ijsonText checks the text rules of I-JSON: UTF-8, and no escape of half
// a surrogate pair without its other half.
func ijsonText(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("invalid UTF-8")
	}
	for _, lit := range jsonString.FindAll(data, -1) {
		parts := stringPart.FindAll(lit[1:len(lit)-1], -1)
		for i := 0; i < len(parts); i++ {
			r, ok := surrogate(parts[i])
			switch {
			case !ok:
			case r >= 0xdc00:
				return errors.New("unpaired low surrogate escape")
			case i+1 < len(parts):
				if lo, ok := surrogate(parts[i+1]); ok && lo >= 0xdc00 {
					i++
					continue
				}
				fallthrough
			default:
				return errors.New("unpaired high surrogate escape")
			}
		}
	}
	return nil
}

// surrogate returns the code unit of a \uXXXX escape in D800-DFFF.
func surrogate(part []byte) (rune, bool) {
	if len(part) != 6 || part[1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(part[2:]), 16, 16)
	if err != nil || n < 0xd800 || n > 0xdfff {
		return 0, false
	}
	return rune(n), true
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			name := k.(string)
			if _, dup := obj[name]; dup {
				return nil, fmt.Errorf("%w %q", ErrDuplicate, name)
			}
			if obj[name], err = parseValue(dec); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token()
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	}
	return tok, nil
}

// A Rule is one rule the node enforces beyond its schema; Match reports
// whether a problem the node reported (as "path: message") is this rule's.
type Rule struct {
	Name  string
	Match func(problem string) bool
}

func matching(pattern string) func(string) bool {
	return regexp.MustCompile(pattern).MatchString
}

// integerSpelling is the spelling rule shared by both snapshots: an integer
// member written as 1.0 or 1e2 is a number to encoding/json's integer
// fields, and the integer 1 or 100 to JSON Schema.
var integerSpelling = Rule{
	Name:  "an integer member is written without a fraction or exponent",
	Match: matching(`^(line \d+, column \d+: )?[a-z_\[\]0-9.]+: expected (an|a non-negative) integer, got number [-+0-9.eE]+$`),
}

// RouteRules are the rules of the routing snapshot the schema cannot
// express (proto/routesnap.schema.json's $comment lists them for readers).
var RouteRules = []Rule{
	{"backend ids are unique", matching(`^backends\[\d+\]\.id: duplicate of backends\[\d+\]$`)},
	{"model names are unique", matching(`^models\[\d+\]\.name: duplicate of models\[\d+\](: two patterns with the same prefix .*)?$`)},
	{"a star in a target's model only where the model's name is a pattern", matching(`^models\[\d+\]\.targets\[\d+\]\.model: "\*" stands for what a pattern's star matched, `)},
	{"a model with a gemini target, and that target's model, are Gemini path segments (routesnap.GeminiName)", matching(`^models\[\d+\](\.targets\[\d+\])?\.(name|model): a (model with a gemini target is called|gemini backend is sent) `)},
	{"every target names a backend of the document", matching(`^models\[\d+\]\.targets\[\d+\]\.backend: unknown backend "[A-Za-z0-9._-]+"$`)},
	{"no two targets of a model share backend and model", matching(`^models\[\d+\]\.targets\[\d+\]: duplicate of targets\[\d+\] \(same backend and model\); merge their weights$`)},
	{"base_url passes routesnap.CheckBaseURL (loopback-only http, no link-local or metadata host, a valid host and port, no user info, query or fragment)", matching(`^backends\[\d+\]\.base_url: `)},
	{"every credential name is defined in the node's configuration", matching(`^backends\[\d+\]\.credential: unknown credential "[A-Za-z0-9._-]+"; this node's \[credentials\] does not define it$`)},
	integerSpelling,
	{"a member new in schema 2 only in a document of schema 2 or later", matching(`^(backends|models)\[\d+\]\S*: needs schema \d+ or later \(this document is schema \d+\); raise schema or remove the member$`)},
	// Fallbacks and context windows (docs/routing.md "Fallbacks").
	{"a fallback names a model of the document, not itself, not a pattern, of the same one protocol", matching(`^models\[\d+\]\.fallbacks(\[\d+\])?: (unknown model "|names this model itself$|must name a model, not a pattern|model ".*" speaks |a model with fallbacks must have targets of one protocol)`)},
	{"no fallback chain comes back to a model it left", matching(`^models\[\d+\]\.fallbacks: cycle: `)},
	{"max_output_tokens is at most context_window", matching(`^models\[\d+\]\.targets\[\d+\]\.max_output_tokens: must be at most context_window \(\d+\), got \d+$`)},
}

// AuthRules are the rules of the authorization snapshot the schema cannot
// express (proto/authsnap.schema.json's $comment lists them for readers).
var AuthRules = []Rule{
	{"key_id values are unique", matching(`^keys\[\d+\]\.key_id: duplicate of keys\[\d+\]$`)},
	{"digest values are unique", matching(`^keys\[\d+\]\.digest: duplicate of keys\[\d+\]$`)},
	{"tenant_id values in tenants are unique", matching(`^tenants\[\d+\]\.tenant_id: duplicate of tenants\[\d+\]$`)},
	{"a member new in schema 2 needs schema 2", matching(`: needs schema 2 or later \(this document is schema 1\); raise schema or remove the member$`)},
	integerSpelling,
}

// Explained reports whether every problem is one of rules, and returns
// the first that is not.
func Explained(problems []string, rules []Rule) (unexplained string, ok bool) {
	if len(problems) == 0 {
		return "", false
	}
next:
	for _, p := range problems {
		for _, r := range rules {
			if r.Match(p) {
				continue next
			}
		}
		return p, false
	}
	return "", true
}

// Names returns the rules' names, for documentation tests.
func Names(rules []Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.Name
	}
	return out
}

// Short shortens a validator error to its first lines, for test output.
func Short(err error) string {
	if err == nil {
		return "accepted"
	}
	s := err.Error()
	if lines := strings.SplitN(s, "\n", 4); len(lines) > 3 {
		s = strings.Join(lines[:3], "\n") + "\n…"
	}
	return s
}

// Problems lists the problems in an error of a contract package's Decode
// or Validate as "path: message" (with "line L, column C: " first when the
// error has a position), the way scootgate check prints them.
func Problems(err error) []string {
	var (
		rv *routesnap.ValidationError
		av *authsnap.ValidationError
		rd *routesnap.DecodeError
		ad *authsnap.DecodeError
	)
	located := func(line, col int, path, msg string) string {
		s := ""
		if line > 0 {
			s = fmt.Sprintf("line %d, column %d: ", line, col)
		}
		if path != "" {
			s += path + ": "
		}
		return s + msg
	}
	var out []string
	switch {
	case errors.As(err, &rv):
		for _, p := range rv.Problems {
			out = append(out, p.String())
		}
	case errors.As(err, &av):
		for _, p := range av.Problems {
			out = append(out, p.String())
		}
	case errors.As(err, &rd):
		out = append(out, located(rd.Line, rd.Column, rd.Path, rd.Msg))
	case errors.As(err, &ad):
		out = append(out, located(ad.Line, ad.Column, ad.Path, ad.Msg))
	case err != nil:
		out = append(out, err.Error())
	}
	return out
}
