package routesnap

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"time"

	"github.com/scootgate/scootgate/pkg/internal/contract"
)

// DecodeError reports why [Decode] could not read a document.
type DecodeError struct {
	// Path names the offending member, such as "version" or
	// "models[2].targets[0].weight"; "" means the document as a whole.
	Path string
	// Line and Column (1-based, column in bytes) locate syntax errors,
	// truncation and trailing data; both are 0 when not known.
	Line, Column int
	// Msg says what was expected.
	Msg string
	// Err is the underlying encoding/json or time error, if any.
	Err error
}

func (e *DecodeError) Error() string {
	return contract.Located{Path: e.Path, Line: e.Line, Column: e.Column, Msg: e.Msg}.Text("routesnap: decode: ")
}

func (e *DecodeError) Unwrap() error { return e.Err }

// shape is the members a document may have, from the Go types.
var shape = contract.ShapeOf(reflect.TypeFor[Snapshot]())

// The wire types mirror the JSON document. Elements of arrays are pointers
// so that a null element is visible; generated_at stays raw so that a bad
// timestamp can name its member.
type (
	wireSnapshot struct {
		Schema      int             `json:"schema"`
		Version     uint64          `json:"version"`
		GeneratedAt json.RawMessage `json:"generated_at"`
		Backends    []*Backend      `json:"backends"`
		Models      []*wireModel    `json:"models"`
	}
	wireModel struct {
		Name           string    `json:"name"`
		Targets        []*Target `json:"targets"`
		Affinity       *bool     `json:"affinity"`
		PrefixAffinity *bool     `json:"prefix_affinity"`
		Fallbacks      []string  `json:"fallbacks"` // schema 2
	}
)

// The locate types have the same members, with array elements kept raw so
// that each one is decoded on its own and an error can name its index.
type (
	locateSnapshot struct {
		Schema      int               `json:"schema"`
		Version     uint64            `json:"version"`
		GeneratedAt json.RawMessage   `json:"generated_at"`
		Backends    []json.RawMessage `json:"backends"`
		Models      []json.RawMessage `json:"models"`
	}
	locateModel struct {
		Name           string            `json:"name"`
		Targets        []json.RawMessage `json:"targets"`
		Affinity       *bool             `json:"affinity"`
		PrefixAffinity *bool             `json:"prefix_affinity"`
		Fallbacks      []string          `json:"fallbacks"` // schema 2
	}
)

// Decode reads one snapshot document. It rejects anything but exactly one
// JSON object with only known members and values of the right JSON types;
// errors are [*DecodeError]. Decode does not check meaning: call
// [Snapshot.Validate] on the result.
//
// Member names are matched exactly, as the JSON Schema
// (proto/routesnap.schema.json) reads them: a member name that appears
// twice in one object, at any depth, is an error, and so is one that
// differs from a known member only in letter case ("BASE_URL"). The error
// names the member's path. (encoding/json alone would match "BASE_URL" to
// base_url and let the last duplicate win, so a document reviewed with the
// schema could route differently on the node.)
func Decode(data []byte) (*Snapshot, error) {
	l, exact, syntax := contract.Exact(data, shape)
	if !exact && !syntax {
		return nil, &DecodeError{Path: l.Path, Line: l.Line, Column: l.Column, Msg: l.Msg}
	}
	var w *wireSnapshot // a pointer, so that a top-level null stays visible
	end, err := decodeStrict(data, &w)
	if err == nil && syntax {
		// Exact and encoding/json disagree on the grammar: refuse.
		return nil, &DecodeError{Msg: "malformed JSON"}
	}
	if err != nil {
		// One pass over the whole document is twice as fast as decoding
		// element by element, so that is only done to find the path of
		// an error (see locate).
		return nil, locate(data, err)
	}
	if i := int(end) + contract.ContentStart(data[end:]); i < len(data) {
		line, col := contract.Position(data, i)
		return nil, &DecodeError{Line: line, Column: col, Msg: "unexpected data after the document"}
	}
	if w == nil {
		return nil, &DecodeError{Msg: "expected an object, got null"}
	}

	s := &Snapshot{Schema: w.Schema, Version: w.Version}
	t, err := decodeTime("generated_at", w.GeneratedAt)
	if err != nil {
		return nil, err
	}
	s.GeneratedAt = t
	if w.Backends != nil {
		s.Backends = make([]Backend, len(w.Backends))
	}
	for i, b := range w.Backends {
		if b == nil {
			return nil, nullElement("backends[" + strconv.Itoa(i) + "]")
		}
		s.Backends[i] = *b
	}
	if w.Models != nil {
		s.Models = make([]Model, len(w.Models))
	}
	for i, m := range w.Models {
		path := "models[" + strconv.Itoa(i) + "]"
		if m == nil {
			return nil, nullElement(path)
		}
		s.Models[i].Name = m.Name
		s.Models[i].Affinity, s.Models[i].PrefixAffinity = m.Affinity, m.PrefixAffinity
		s.Models[i].Fallbacks = m.Fallbacks
		if m.Targets == nil {
			continue
		}
		s.Models[i].Targets = make([]Target, len(m.Targets))
		for j, tg := range m.Targets {
			if tg == nil {
				return nil, nullElement(path + ".targets[" + strconv.Itoa(j) + "]")
			}
			s.Models[i].Targets[j] = *tg
		}
	}
	return s, nil
}

// decodeStrict decodes the first JSON value in data into v, rejecting
// unknown members, and returns the offset just past that value.
func decodeStrict(data []byte, v any) (end int64, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	return dec.InputOffset(), err
}

// locate turns err, the failure of decoding the whole document, into a
// *DecodeError that names the offending member with its array indices
// (encoding/json names fields but not indices). Syntax errors and
// truncation are located by offset instead.
func locate(data []byte, err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return jsonError(data, "", err)
	}
	var w locateSnapshot
	if _, e := decodeStrict(data, &w); e != nil {
		return jsonError(data, "", e)
	}
	for i, raw := range w.Backends {
		if _, e := decodeStrict(raw, new(Backend)); e != nil {
			return jsonError(nil, "backends["+strconv.Itoa(i)+"]", e)
		}
	}
	for i, raw := range w.Models {
		path := "models[" + strconv.Itoa(i) + "]"
		var m locateModel
		if _, e := decodeStrict(raw, &m); e != nil {
			return jsonError(nil, path, e)
		}
		for j, raw := range m.Targets {
			if _, e := decodeStrict(raw, new(Target)); e != nil {
				return jsonError(nil, path+".targets["+strconv.Itoa(j)+"]", e)
			}
		}
	}
	// Unreachable unless the two passes disagree; report what is known.
	return jsonError(data, "", err)
}

func nullElement(path string) error {
	return &DecodeError{Path: path, Msg: "expected an object, got null"}
}

// timeMsg is the error for a timestamp contract.ParseTime refuses.
const timeMsg = "expected an RFC 3339 timestamp string such as \"2026-11-29T10:00:00Z\" (upper-case T and Z, two-digit fields, no leap second)"

// decodeTime parses an optional RFC 3339 timestamp member; absent and null
// both give the zero time.
func decodeTime(path string, raw json.RawMessage) (time.Time, error) {
	if raw == nil || string(raw) == "null" {
		return time.Time{}, nil
	}
	t, ok := contract.ParseTime(raw)
	if !ok {
		return time.Time{}, &DecodeError{Path: path, Msg: timeMsg}
	}
	return t, nil
}

// jsonError turns an encoding/json error into a *DecodeError. data is the
// whole document when offsets in err are relative to it, nil otherwise;
// path prefixes the member path reported by encoding/json.
func jsonError(data []byte, path string, err error) error {
	l := contract.JSONError(data, path, err)
	return &DecodeError{Path: l.Path, Line: l.Line, Column: l.Column, Msg: l.Msg, Err: err}
}
