package authsnap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/scootgate/scootgate/pkg/internal/contract"
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
	return contract.Located{Path: e.Path, Line: e.Line, Column: e.Column, Msg: e.Msg}.Text("authsnap: decode: ")
}

func (e *DecodeError) Unwrap() error { return e.Err }

// shape is the members a document may have, from the Go types.
var shape = contract.ShapeOf(reflect.TypeFor[Snapshot]())

// wireSnapshot and wireKey mirror the JSON document. Keys stay raw so that
// each one is decoded on its own and errors can name its index; times stay
// raw so that a bad timestamp can name its member (encoding/json reports
// errors from UnmarshalJSON methods without a field path).
type wireSnapshot struct {
	Schema      int               `json:"schema"`
	Version     uint64            `json:"version"`
	GeneratedAt json.RawMessage   `json:"generated_at"`
	Keys        []json.RawMessage `json:"keys"`
	Tenants     []json.RawMessage `json:"tenants"`
}

type wireTenant struct {
	TenantID string      `json:"tenant_id"`
	Limits   *wireLimits `json:"limits"`
}

// wireLimits keeps each member a pointer so that a written 0 (refused: it
// would read as "refuse everything") stays apart from an omitted member
// (no limit). null is the same as omitted, as for models and expires_at.
type wireLimits struct {
	RequestsPerMinute *int64  `json:"requests_per_minute"`
	TokensPerMinute   *int64  `json:"tokens_per_minute"`
	MaxConcurrent     *int64  `json:"max_concurrent"`
	USDPerDay         *string `json:"usd_per_day"`
	USDPerMonth       *string `json:"usd_per_month"`
	BudgetMode        *string `json:"budget_mode"`
}

type wireKey struct {
	KeyID     string          `json:"key_id"`
	TenantID  string          `json:"tenant_id"`
	Digest    string          `json:"digest"`
	Models    []string        `json:"models"`
	ExpiresAt json.RawMessage `json:"expires_at"`
	Disabled  bool            `json:"disabled"`
	Limits    *wireLimits     `json:"limits"`
}

// Decode reads one snapshot document. It rejects anything but exactly one
// JSON object with only known members and values of the right JSON types;
// errors are [*DecodeError]. Decode does not check meaning: call
// [Snapshot.Validate] on the result.
//
// Member names are matched exactly, as the JSON Schema
// (proto/authsnap.schema.json) reads them: a member name that appears
// twice in one object, at any depth, is an error, and so is one that
// differs from a known member only in letter case ("MODELS"). The error
// names the member's path. (encoding/json alone would read
// {"models":["a"],"MODELS":null} as a key allowed every model.)
func Decode(data []byte) (*Snapshot, error) {
	l, exact, syntax := contract.Exact(data, shape)
	if !exact && !syntax {
		return nil, &DecodeError{Path: l.Path, Line: l.Line, Column: l.Column, Msg: l.Msg}
	}
	var w *wireSnapshot // a pointer, so that a top-level null stays visible
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, jsonError(data, "", err)
	}
	if syntax {
		// Exact and encoding/json disagree on the grammar: refuse.
		return nil, &DecodeError{Msg: "malformed JSON"}
	}
	if rest := dec.InputOffset(); hasContent(data[rest:]) {
		line, col := contract.Position(data, int(rest)+contract.ContentStart(data[rest:]))
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
	if w.Tenants != nil {
		s.Tenants = make([]Tenant, len(w.Tenants))
	}
	for i, raw := range w.Tenants {
		t, err := decodeTenant(fmt.Sprintf("tenants[%d]", i), raw)
		if err != nil {
			return nil, err
		}
		s.Tenants[i] = t
	}
	return s, nil
}

// decodeTenant decodes one element of tenants, like decodeKey.
func decodeTenant(path string, raw json.RawMessage) (Tenant, error) {
	if string(raw) == "null" {
		return Tenant{}, &DecodeError{Path: path, Msg: "expected an object, got null"}
	}
	var w wireTenant
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Tenant{}, jsonError(nil, path, err)
	}
	l, err := w.Limits.limits(path + ".limits")
	if err != nil {
		return Tenant{}, err
	}
	return Tenant{TenantID: w.TenantID, Limits: l}, nil
}

// limits converts the wire form; a written value below 1 is an error
// naming the member. Values above MaxLimit are left to Validate, which
// checks them for documents built in Go as well.
func (w *wireLimits) limits(path string) (Limits, error) {
	if w == nil {
		return Limits{}, nil
	}
	var l Limits
	for _, m := range []struct {
		name string
		src  *int64
		dst  *int64
	}{
		{"requests_per_minute", w.RequestsPerMinute, &l.RequestsPerMinute},
		{"tokens_per_minute", w.TokensPerMinute, &l.TokensPerMinute},
		{"max_concurrent", w.MaxConcurrent, &l.MaxConcurrent},
	} {
		if m.src == nil {
			continue
		}
		if *m.src < 1 {
			return Limits{}, &DecodeError{Path: path + "." + m.name, Msg: limitMsg}
		}
		*m.dst = *m.src
	}
	for _, m := range []struct {
		name string
		src  *string
		dst  *string
	}{
		{"usd_per_day", w.USDPerDay, &l.USDPerDay},
		{"usd_per_month", w.USDPerMonth, &l.USDPerMonth},
	} {
		if m.src == nil {
			continue
		}
		if *m.src == "" {
			// "" is how Limits says "no budget": a written one is
			// refused, as a written 0 limit is.
			return Limits{}, &DecodeError{Path: path + "." + m.name, Msg: "must be a decimal string such as \"200\" (omit the member for no budget)"}
		}
		*m.dst = *m.src
	}
	if w.BudgetMode != nil {
		if *w.BudgetMode == "" {
			return Limits{}, &DecodeError{Path: path + ".budget_mode", Msg: `must be "charge" or "reserve" (omit the member for "charge")`}
		}
		l.BudgetMode = *w.BudgetMode
	}
	return l, nil
}

// limitMsg is the error for a limit below 1.
const limitMsg = "must be at least 1 (omit the member for no limit)"

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
	l, err := w.Limits.limits(path + ".limits")
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
		Limits:    l,
	}, nil
}

// timeMsg is the error for a timestamp contract.ParseTime refuses.
const timeMsg = "expected an RFC 3339 timestamp string such as \"2026-11-29T10:00:00Z\" (upper-case T and Z, two-digit fields, no leap second)"

// decodeTime parses an optional RFC 3339 timestamp member; absent and null
// both give nil.
func decodeTime(path string, raw json.RawMessage) (*time.Time, error) {
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	t, ok := contract.ParseTime(raw)
	if !ok {
		return nil, &DecodeError{Path: path, Msg: timeMsg}
	}
	return &t, nil
}

// jsonError turns an encoding/json error into a *DecodeError. data is the
// whole document when offsets in err are relative to it, nil otherwise;
// path prefixes the member path reported by encoding/json.
func jsonError(data []byte, path string, err error) error {
	l := contract.JSONError(data, path, err)
	return &DecodeError{Path: l.Path, Line: l.Line, Column: l.Column, Msg: l.Msg, Err: err}
}

// hasContent reports whether b holds anything but JSON whitespace.
func hasContent(b []byte) bool { return contract.ContentStart(b) < len(b) }
