package usageevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/scootgate/scootgate/pkg/internal/contract"
)

// DecodeError reports a member name [Decode] refuses (one that appears
// twice in one object, at any depth, or one that differs from a member of
// [Event] only in letter case), a started_at not spelled as the schema's
// date-time pattern says, or a member whose value its Go field cannot
// hold (a string for a number; 1.0, 1E87 or 9223372036854775808 for an
// int64; 1e400 for a float64).
type DecodeError struct {
	// Path names the offending member, such as "usage.Input_Tokens".
	Path string
	// Line and Column (1-based, column in bytes) locate the member name;
	// both are 0 when not known.
	Line, Column int
	// Msg says what is wrong.
	Msg string
	// Err is the encoding/json error behind a value of the wrong type
	// (a *json.UnmarshalTypeError), or nil.
	Err error
}

func (e *DecodeError) Error() string {
	return contract.Located{Path: e.Path, Line: e.Line, Column: e.Column, Msg: e.Msg}.Text("usageevent: decode: ")
}

// Unwrap returns Err.
func (e *DecodeError) Unwrap() error { return e.Err }

// eventFields is Event without its methods, for Decode.
type eventFields Event

// shape is the members an event has, all required but endpoint (the
// schema's "required"); others are allowed (a later node may add them),
// but not in another letter case.
var shape = contract.ShapeOf(reflect.TypeFor[Event]()).Open().Required()

// ErrUnsupportedSchema means the document's schema member is not [Schema].
// A consumer should set such an event aside rather than drop it: it comes
// from a node newer (or older) than the consumer (proto/VERSIONING.md).
var ErrUnsupportedSchema = errors.New("usageevent: unsupported schema")

// Decode reads one event as published by a node and validates it.
//
// Unknown members are ignored, so a consumer built with this package keeps
// working when a later node adds members (proto/VERSIONING.md). Member
// names are otherwise matched exactly, as the JSON Schema reads them: a
// name that appears twice in one object, at any depth (provider_usage
// included), or that differs from a member of [Event] only in letter case
// ("Tenant_ID"), or a missing member (every member but endpoint is
// required) returns a [*DecodeError] naming the member, once the schema
// member has been checked; so does an optional string member written as
// "" (a node omits it instead, and the schema refuses it). (encoding/json alone would read the last duplicate and
// match names case-insensitively, so a consumer would count what a schema
// validator of the same document does not.) Otherwise, a document
// whose schema is not [Schema] returns an error wrapping
// [ErrUnsupportedSchema] before anything else is checked. Malformed JSON
// returns the encoding/json error, wrapped. A member of the wrong JSON type,
// or a number its Go field cannot hold, returns a [*DecodeError] naming the
// member and wrapping the encoding/json error: an integer member written
// with a fraction or exponent (1.0, 1E87: integers to the JSON Schema, not to
// Go), an int64 beyond 9223372036854775807, or a float64 member of 2^1024 -
// 2^970 or more (the schema's maxima say the same). An event that decodes
// but breaks a rule returns a [*ValidationError]. On any error the event is
// nil.
//
// A provider_usage of null decodes to a nil ProviderUsage.
func Decode(data []byte) (*Event, error) {
	var head *struct { // a pointer, so that a top-level null stays visible
		Schema *json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("usageevent: decode: %w", err)
	}
	if head == nil {
		return nil, errors.New("usageevent: decode: expected an object, got null")
	}
	var schema int
	if head.Schema != nil && json.Unmarshal(*head.Schema, &schema) != nil && isNumber(*head.Schema) {
		// 2.0 or 2e0: the integer 2 to the schema's "const", a spelling
		// error here, as for every integer member; not another schema.
		return nil, typeError(json.Unmarshal(*head.Schema, &schema), "schema")
	}
	if head.Schema == nil || json.Unmarshal(*head.Schema, &schema) != nil || schema != Schema {
		got := "missing"
		if head.Schema != nil {
			got = string(*head.Schema)
		}
		return nil, fmt.Errorf("%w: schema %.20s, this package reads %d", ErrUnsupportedSchema, got, Schema)
	}

	if l, ok, syntax := contract.Exact(data, shape); !ok && !syntax {
		return nil, &DecodeError{Path: l.Path, Line: l.Line, Column: l.Column, Msg: l.Msg}
	}
	if err := presentEmpty(data); err != nil {
		return nil, err
	}

	// started_at is read apart: time.Time's own parser skips string
	// escapes and takes spellings the schema's date-time pattern refuses
	// (one-digit hours, ',' before the fraction).
	var e Event
	w := struct {
		*eventFields
		StartedAt json.RawMessage `json:"started_at"` // shadows Event's
	}{eventFields: (*eventFields)(&e)}
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, typeError(err, "")
	}
	if w.StartedAt != nil && string(w.StartedAt) != "null" {
		t, ok := contract.ParseTime(w.StartedAt)
		if !ok {
			return nil, &DecodeError{Path: "started_at", Msg: "expected an RFC 3339 timestamp string such as \"2026-11-29T10:00:00Z\" (upper-case T and Z, two-digit fields, no leap second)"}
		}
		e.StartedAt = t
	}
	if !e.HasProviderUsage() {
		e.ProviderUsage = nil
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return &e, nil
}

// optionalStrings is a struct of one *string per optional string member
// of [Event] (those a node omits when empty), for presentEmpty.
var optionalStrings = func() reflect.Type {
	var fields []reflect.StructField
	for f := range reflect.TypeFor[Event]().Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type.Kind() == reflect.String && strings.Contains(","+opts+",", ",omitempty,") {
			fields = append(fields, reflect.StructField{
				Name: f.Name,
				Type: reflect.TypeFor[*string](),
				Tag:  reflect.StructTag(`json:"` + name + `"`),
			})
		}
	}
	return reflect.StructOf(fields)
}()

// presentEmpty refuses an optional string member written as "": a node
// omits such a member when it has no value, and the schema refuses it
// present and empty (every one has minLength 1), while decoding alone
// would read it as absent.
func presentEmpty(data []byte) error {
	v := reflect.New(optionalStrings)
	if err := json.Unmarshal(data, v.Interface()); err != nil {
		return typeError(err, "")
	}
	for i := range optionalStrings.NumField() {
		if p := v.Elem().Field(i).Interface().(*string); p != nil && *p == "" {
			name, _, _ := strings.Cut(optionalStrings.Field(i).Tag.Get("json"), ",")
			return &DecodeError{Path: name, Msg: "must be absent or a non-empty string"}
		}
	}
	return nil
}

// typeError turns an encoding/json type error, a value its Go field cannot
// hold, into a [*DecodeError] naming the member (path, or the field
// encoding/json names) and the value: "response_bytes: expected an
// integer, got number 1E87". Any other error is wrapped as it is.
func typeError(err error, path string) error {
	var typ *json.UnmarshalTypeError
	if !errors.As(err, &typ) {
		return fmt.Errorf("usageevent: decode: %w", err)
	}
	l := contract.JSONError(nil, "", err)
	if path == "" {
		// Decode reads into a wrapper that embeds eventFields; that
		// name is no member of the document.
		path = strings.TrimPrefix(l.Path, "eventFields.")
	}
	return &DecodeError{Path: path, Msg: l.Msg, Err: err}
}

// isNumber reports whether raw is a JSON number.
func isNumber(raw json.RawMessage) bool {
	raw = raw[contract.ContentStart(raw):]
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

// BatchTopicSuffix ends the topic of batched messages: a node configured
// to batch (`[mqtt] batch_max` above 1) publishes every message to its
// topic plus this suffix, and only batches there.
const BatchTopicSuffix = "/batch"

// BatchError reports the event of a batch that [DecodeBatch] refused.
type BatchError struct {
	Line int   // 1-based line of the message
	Err  error // what Decode said of it
}

func (e *BatchError) Error() string { return fmt.Sprintf("batch line %d: %v", e.Line, e.Err) }

// Unwrap returns Err.
func (e *BatchError) Unwrap() error { return e.Err }

// DecodeBatch reads a batched message (one published to a topic ending in
// [BatchTopicSuffix]): events as published singly, each followed by a
// newline, in outbox order. Every line is decoded as by [Decode]; an empty
// message, an empty line or a last event without its newline is an error
// (a cut message, never a valid batch).
//
// On an error the events decoded before it are returned with it, so a
// consumer can keep them and set the rest of the message aside: a batch is
// acknowledged to the node as a whole, and every event in it carries its
// own event_id for de-duplication.
func DecodeBatch(data []byte) ([]*Event, error) {
	if len(data) == 0 {
		return nil, &BatchError{Line: 1, Err: errors.New("empty message")}
	}
	if data[len(data)-1] != '\n' {
		return nil, &BatchError{Line: bytes.Count(data, []byte{'\n'}) + 1, Err: errors.New("the last event does not end with a newline: the message is cut")}
	}
	evs := make([]*Event, 0, bytes.Count(data, []byte{'\n'}))
	for line := 1; len(data) > 0; line++ {
		i := bytes.IndexByte(data, '\n')
		ev, err := Decode(data[:i])
		if err != nil {
			return evs, &BatchError{Line: line, Err: err}
		}
		evs = append(evs, ev)
		data = data[i+1:]
	}
	return evs, nil
}
