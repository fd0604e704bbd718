package usageevent

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrUnsupportedSchema means the document's schema member is not [Schema].
// A consumer should set such an event aside rather than drop it: it comes
// from a node newer (or older) than the consumer (proto/VERSIONING.md).
var ErrUnsupportedSchema = errors.New("usageevent: unsupported schema")

// Decode reads one event as published by a node and validates it.
//
// Unknown members are ignored, so a consumer built with this package keeps
// working when a later node adds members (proto/VERSIONING.md). A document
// whose schema is not [Schema] returns an error wrapping
// [ErrUnsupportedSchema] before anything else is checked. Malformed JSON and
// members of the wrong JSON type return the encoding/json error, wrapped; an
// event that decodes but breaks a rule returns a [*ValidationError]. On any
// error the event is nil.
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
	if head.Schema == nil || json.Unmarshal(*head.Schema, &schema) != nil || schema != Schema {
		got := "missing"
		if head.Schema != nil {
			got = string(*head.Schema)
		}
		return nil, fmt.Errorf("%w: schema %.20s, this package reads %d", ErrUnsupportedSchema, got, Schema)
	}

	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("usageevent: decode: %w", err)
	}
	if !e.HasProviderUsage() {
		e.ProviderUsage = nil
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return &e, nil
}
