package authsnap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"
)

// DecodeError reports why [Decode] could not read a document.
type DecodeError struct {
	// Path names the offending member, such as "version" or
	// "keys[2].models"; "" means the document as a whole.
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
	var b []byte
	b = append(b, "authsnap: decode: "...)
	if e.Line > 0 {
		b = fmt.Appendf(b, "line %d, column %d: ", e.Line, e.Column)
	}
	if e.Path != "" {
		b = append(b, e.Path...)
		b = append(b, ": "...)
	}
	b = append(b, e.Msg...)
	return string(b)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// wireSnapshot and wireKey mirror the JSON document. Keys stay raw so that
// each one is decoded on its own and errors can name its index; times stay
// raw so that a bad timestamp can name its member (encoding/json reports
// errors from UnmarshalJSON methods without a field path).
type wireSnapshot struct {
	Schema      int               `json:"schema"`
	Version     uint64            `json:"version"`
	GeneratedAt json.RawMessage   `json:"generated_at"`
	Keys        []json.RawMessage `json:"keys"`
}

type wireKey struct {
	KeyID     string          `json:"key_id"`
	TenantID  string          `json:"tenant_id"`
	Digest    string          `json:"digest"`
	Models    []string        `json:"models"`
	ExpiresAt json.RawMessage `json:"expires_at"`
	Disabled  bool            `json:"disabled"`
}

// Decode reads one snapshot document. It rejects anything but exactly one
// JSON object with only known members and values of the right JSON types;
// errors are [*DecodeError]. Decode does not check meaning: call
// [Snapshot.Validate] on the result.
func Decode(data []byte) (*Snapshot, error) {
	var w *wireSnapshot // a pointer, so that a top-level null stays visible
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, jsonError(data, "", err)
	}
	if rest := dec.InputOffset(); hasContent(data[rest:]) {
		line, col := position(data, int(rest)+contentStart(data[rest:]))
		return nil, &DecodeError{Line: line, Column: col, Msg: "unexpected data after the document"}
	}
	if w == nil {
		return nil, &DecodeError{Msg: "expected an object, got null"}
	}

	s := &Snapshot{Schema: w.Schema, Version: w.Version}
	if t, err := decodeTime("generated_at", w.GeneratedAt); err != nil {
		return nil, err
	} else if t != nil {
		s.GeneratedAt = *t
	}
	if w.Keys != nil {
		s.Keys = make([]Key, len(w.Keys))
	}
	for i, raw := range w.Keys {
		k, err := decodeKey(fmt.Sprintf("keys[%d]", i), raw)
		if err != nil {
			return nil, err
		}
		s.Keys[i] = k
	}
	return s, nil
}

// decodeKey decodes one element of keys. raw is already known to be
// well-formed JSON: the first pass checked the whole document's syntax.
func decodeKey(path string, raw json.RawMessage) (Key, error) {
	if string(raw) == "null" {
		return Key{}, &DecodeError{Path: path, Msg: "expected an object, got null"}
	}
	var w wireKey
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Key{}, jsonError(nil, path, err)
	}
	exp, err := decodeTime(path+".expires_at", w.ExpiresAt)
	if err != nil {
		return Key{}, err
	}
	return Key{
		KeyID:     w.KeyID,
		TenantID:  w.TenantID,
		Digest:    w.Digest,
		Models:    w.Models,
		ExpiresAt: exp,
		Disabled:  w.Disabled,
	}, nil
}

// decodeTime parses an optional RFC 3339 timestamp member; absent and null
// both give nil.
func decodeTime(path string, raw json.RawMessage) (*time.Time, error) {
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	var t time.Time
	if err := t.UnmarshalJSON(raw); err != nil {
		return nil, &DecodeError{Path: path, Msg: "expected an RFC 3339 timestamp string", Err: err}
	}
	return &t, nil
}

// jsonError turns an encoding/json error into a *DecodeError. data is the
// whole document when offsets in err are relative to it, nil otherwise;
// path prefixes the member path reported by encoding/json.
func jsonError(data []byte, path string, err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, io.EOF):
		return &DecodeError{Path: path, Msg: "empty document", Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := position(data, len(data))
		return &DecodeError{Line: line, Column: col, Path: path, Msg: "unexpected end of document (truncated?)", Err: err}
	case errors.As(err, &syntax):
		// Offset counts the bytes read including the offending one.
		line, col := position(data, int(syntax.Offset)-1)
		return &DecodeError{Line: line, Column: col, Path: path, Msg: syntax.Error(), Err: err}
	case errors.As(err, &typ):
		return &DecodeError{
			Path: joinPath(path, typ.Field),
			Msg:  "expected " + jsonKind(typ.Type) + ", got " + typ.Value,
			Err:  err,
		}
	default:
		// DisallowUnknownFields reports `json: unknown field "x"` as a
		// plain error; its text is the most precise message there is.
		return &DecodeError{Path: path, Msg: err.Error(), Err: err}
	}
}

// joinPath appends a dotted encoding/json field path ("keys" or "models")
// to prefix.
func joinPath(prefix, field string) string {
	switch {
	case field == "":
		return prefix
	case prefix == "":
		return field
	default:
		return prefix + "." + field
	}
}

// jsonKind describes the JSON value that decodes into a Go type.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	default:
		return t.Kind().String()
	}
}

// position converts a byte offset in data to a 1-based line and column.
// It returns 0, 0 when data is nil (offsets are not document-relative).
func position(data []byte, off int) (line, col int) {
	if data == nil {
		return 0, 0
	}
	off = max(0, min(off, len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = off - bytes.LastIndexByte(before, '\n') // LastIndexByte is -1 on line 1
	return line, col
}

// hasContent reports whether b holds anything but JSON whitespace.
func hasContent(b []byte) bool { return contentStart(b) < len(b) }

// contentStart returns the index of the first non-whitespace byte in b, or
// len(b). JSON whitespace is exactly space, tab, CR and LF (RFC 8259 §2).
func contentStart(b []byte) int {
	return len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
}
