package jsonedit

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Errors returned by this package. A malformed document is reported as a
// *SyntaxError; the sentinels below are matched with errors.Is.
var (
	// ErrNotObject means the document's top-level value is not an object:
	// it starts with an array, string, number or literal (the rest is not
	// read). Like a *SyntaxError, it makes the request body unusable
	// (docs/api.md: 400 malformed JSON).
	ErrNotObject = errors.New("jsonedit: top-level value is not an object")

	// ErrKeyExists is returned by Insert when the object already has a
	// top-level member with the key; use Replace instead.
	ErrKeyExists = errors.New("jsonedit: key already present")

	// ErrInvalidKey is returned by Insert for a key that is not valid UTF-8:
	// it could not be written as a JSON string that decodes to the same key.
	ErrInvalidKey = errors.New("jsonedit: key is not valid utf-8")

	// ErrInvalidValue means the value passed to Replace or Insert is not
	// exactly one JSON value. It is a caller bug, not a client error.
	ErrInvalidValue = errors.New("jsonedit: replacement is not a single json value")
)

// SyntaxError reports a malformed document: invalid JSON, a truncated
// document, or bytes after the top-level object.
type SyntaxError struct {
	Offset int // byte offset of the first byte that could not be accepted
	msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("jsonedit: %s at offset %d", e.msg, e.Offset)
}

// Lookup returns the raw bytes of the value of the last top-level member of
// the object doc named key, exactly as they appear in doc (raw aliases doc).
// ok is false when there is no such member. The whole document is validated;
// a malformed document returns an error and ok false.
func Lookup(doc []byte, key string) (raw []byte, ok bool, err error) {
	it, err := newMembers(doc)
	if err != nil {
		return nil, false, err
	}
	for {
		m, more, err := it.next()
		if err != nil {
			return nil, false, err
		}
		if !more {
			return raw, ok, nil
		}
		if m.keyIs(doc, key) {
			raw, ok = doc[m.valStart:m.valEnd:m.valEnd], true
		}
	}
}

// span is a half-open byte range [start, end) of doc.
type span struct{ start, end int }

// Replace returns a copy of the object doc in which the value of every
// top-level member named key is replaced by value, and the number of members
// replaced. Every other byte of doc is copied unchanged. When n is 0, out is
// an unchanged copy of doc. doc is never modified.
//
// value must be exactly one JSON value (surrounding whitespace is kept as
// given); otherwise the error wraps ErrInvalidValue. A malformed document
// returns a *SyntaxError or ErrNotObject.
func Replace(doc []byte, key string, value []byte) (out []byte, n int, err error) {
	if err := checkValue(value); err != nil {
		return nil, 0, err
	}
	it, err := newMembers(doc)
	if err != nil {
		return nil, 0, err
	}
	// Almost every body has exactly one match; the array keeps the common
	// case off the heap so that the output is the only allocation.
	var buf [4]span
	spans := buf[:0]
	size := len(doc)
	for {
		m, more, err := it.next()
		if err != nil {
			return nil, 0, err
		}
		if !more {
			break
		}
		if m.keyIs(doc, key) {
			spans = append(spans, span{m.valStart, m.valEnd})
			size += len(value) - (m.valEnd - m.valStart)
		}
	}

	out = make([]byte, 0, size)
	prev := 0
	for _, s := range spans {
		out = append(out, doc[prev:s.start]...)
		out = append(out, value...)
		prev = s.end
	}
	out = append(out, doc[prev:]...)
	return out, len(spans), nil
}

// Insert returns a copy of the object doc with the member key:value added
// after its last member (or as the only member of an empty object). Every
// byte of doc is kept, in order; doc is never modified. If the object already
// has a top-level member named key the error is ErrKeyExists, so Insert never
// creates a duplicate key. value must be exactly one JSON value (the error
// wraps ErrInvalidValue otherwise). key must be valid UTF-8 (ErrInvalidKey).
func Insert(doc []byte, key string, value []byte) ([]byte, error) {
	if !utf8.ValidString(key) {
		return nil, ErrInvalidKey
	}
	if err := checkValue(value); err != nil {
		return nil, err
	}
	it, err := newMembers(doc)
	if err != nil {
		return nil, err
	}
	for {
		m, more, err := it.next()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		if m.keyIs(doc, key) {
			return nil, ErrKeyExists
		}
	}

	var kbuf [64]byte
	qkey := appendQuoted(kbuf[:0], key)
	at := it.insertAt
	size := len(doc) + len(qkey) + 1 + len(value)
	if it.count > 0 {
		size++ // the separating comma
	}
	out := make([]byte, 0, size)
	out = append(out, doc[:at]...)
	if it.count > 0 {
		out = append(out, ',')
	}
	out = append(out, qkey...)
	out = append(out, ':')
	out = append(out, value...)
	out = append(out, doc[at:]...)
	return out, nil
}

// checkValue reports whether value is one JSON value, optionally surrounded
// by whitespace, that may be placed as a member value of a top-level object.
func checkValue(value []byte) error {
	s := scanner{data: value}
	s.skipSpace()
	err := s.skipValue(1)
	if err == nil {
		s.skipSpace()
		if s.pos != len(s.data) {
			err = s.fail("invalid character after value")
		}
	}
	if err != nil {
		// The *SyntaxError is not wrapped: a bad replacement is the caller's
		// bug and must not be classified as a malformed client body.
		return fmt.Errorf("%w (offset %d)", ErrInvalidValue, s.pos)
	}
	return nil
}

// appendQuoted appends the valid UTF-8 string s to dst as a JSON string. It
// escapes only what JSON requires: quote, backslash and control characters.
func appendQuoted(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := range len(s) {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
