// Package contract holds what the wire-contract packages (pkg/authsnap,
// pkg/routesnap, pkg/usageevent) share: the validation problem type and
// its error text, and the reading of encoding/json errors into a member
// path, a line and column, and a message. It is standard library only, like
// the packages it serves, so that they stay free of other dependencies for
// outside authors.
package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"time"
)

// Problem is one reason a document is invalid.
type Problem struct {
	Path string // member path such as "keys[3].digest"; "" for the whole document
	Msg  string // what is wrong; never quotes a secret or a URL
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

// maxProblemsInError bounds ProblemsText's length; callers keep them all.
const maxProblemsInError = 10

// ProblemsText is a validation error's text: prefix, then the first ten
// problems joined by "; " and a count of the rest.
func ProblemsText(prefix string, ps []Problem) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i, p := range ps {
		if i == maxProblemsInError {
			fmt.Fprintf(&b, "; and %d more", len(ps)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Located is where and what a decode failure is.
type Located struct {
	Path         string // offending member; "" for the document
	Line, Column int    // 1-based; 0 when not known
	Msg          string // what was expected
}

// Text is a decode error's text: prefix, position, path, message.
func (l Located) Text(prefix string) string {
	b := []byte(prefix)
	if l.Line > 0 {
		b = fmt.Appendf(b, "line %d, column %d: ", l.Line, l.Column)
	}
	if l.Path != "" {
		b = append(b, l.Path...)
		b = append(b, ": "...)
	}
	b = append(b, l.Msg...)
	return string(b)
}

// JSONError reads an encoding/json error. data is the whole document when
// offsets in err are relative to it, nil otherwise; path prefixes the member
// path reported by encoding/json.
func JSONError(data []byte, path string, err error) Located {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, io.EOF):
		return Located{Path: path, Msg: "empty document"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := Position(data, len(data))
		return Located{Line: line, Column: col, Path: path, Msg: "unexpected end of document (truncated?)"}
	case errors.As(err, &syntax):
		// Offset counts the bytes read including the offending one.
		line, col := Position(data, int(syntax.Offset)-1)
		return Located{Line: line, Column: col, Path: path, Msg: syntax.Error()}
	case errors.As(err, &typ):
		return Located{Path: joinPath(path, typ.Field), Msg: "expected " + jsonKind(typ.Type) + outOfRange(typ) + ", got " + typ.Value}
	default:
		// DisallowUnknownFields reports `json: unknown field "x"` as a
		// plain error; its text is the most precise message there is.
		return Located{Path: path, Msg: err.Error()}
	}
}

// joinPath appends a dotted encoding/json field path ("keys" or
// "targets.weight") to prefix.
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

// outOfRange names the range of a number type when the value is a number
// it cannot hold: for an integer type, an integer written plainly
// (" from -128 to 127"), since "expected an integer, got number 300" would
// puzzle a reader; for a float type, any number (1e400). Otherwise "".
func outOfRange(typ *json.UnmarshalTypeError) string {
	lit, ok := strings.CutPrefix(typ.Value, "number ")
	switch {
	case !ok || typ.Type == nil:
		return ""
	case typ.Type.Kind() == reflect.Float32 || typ.Type.Kind() == reflect.Float64:
		return " within the range of a " + typ.Type.Kind().String()
	case strings.ContainsAny(lit, ".eE"):
		return ""
	}
	switch typ.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		hi := int64(math.MaxInt64 >> (64 - typ.Type.Bits()))
		return fmt.Sprintf(" from %d to %d", -hi-1, hi)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !strings.HasPrefix(lit, "-") {
			return fmt.Sprintf(" up to %d", uint64(math.MaxUint64>>(64-typ.Type.Bits())))
		}
	}
	return ""
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
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	default:
		return t.Kind().String()
	}
}

// Position converts a byte offset in data to a 1-based line and column.
// It returns 0, 0 when data is nil (offsets are not document-relative).
func Position(data []byte, off int) (line, col int) {
	if data == nil {
		return 0, 0
	}
	off = max(0, min(off, len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = off - bytes.LastIndexByte(before, '\n') // LastIndexByte is -1 on line 1
	return line, col
}

// ContentStart returns the index of the first non-whitespace byte in b, or
// len(b). JSON whitespace is exactly space, tab, CR and LF (RFC 8259 §2).
func ContentStart(b []byte) int {
	return len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
}

// ParseTime parses a JSON string holding an RFC 3339 timestamp in the one
// spelling the JSON Schemas in proto/ allow (their "pattern" for
// timestamps, beside "format": "date-time"): upper-case T and Z, two-digit
// fields, a '.' before any fraction, no leap second (Go's time cannot hold
// one), an offset of at most 23:59. The string's escapes are decoded
// first, as a schema validator decodes them. time.Time's own UnmarshalJSON
// does not decode escapes and falls back to a lenient parse (one-digit
// hours, ',' before the fraction, offsets of 24 hours and more) that the
// schemas reject.
func ParseTime(raw json.RawMessage) (time.Time, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil || !rfc3339(s) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// rfc3339 reports whether s matches
// ^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$
// (whether the day exists in its month is left to time.Parse).
func rfc3339(s string) bool {
	digits := func(s string, lo, hi int) bool {
		n := 0
		for i := range len(s) {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
			n = n*10 + int(s[i]-'0')
		}
		return n >= lo && n <= hi
	}
	if len(s) < len("2006-01-02T15:04:05Z") ||
		!digits(s[0:4], 0, 9999) || s[4] != '-' || !digits(s[5:7], 1, 12) || s[7] != '-' || !digits(s[8:10], 1, 31) ||
		s[10] != 'T' || !digits(s[11:13], 0, 23) || s[13] != ':' || !digits(s[14:16], 0, 59) || s[16] != ':' || !digits(s[17:19], 0, 59) {
		return false
	}
	s = s[19:]
	if s[0] == '.' {
		n := 1
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n == 1 {
			return false
		}
		s = s[n:]
	}
	if s == "Z" {
		return true
	}
	return len(s) == len("+07:00") && (s[0] == '+' || s[0] == '-') && digits(s[1:3], 0, 23) && s[3] == ':' && digits(s[4:6], 0, 59)
}

// TimePattern is rfc3339's grammar as a JSON Schema "pattern" (ECMA-262
// and RE2 read it alike); the schemas' timestamp members carry it.
const TimePattern = `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`

// OneOf is the words of a closed set as a message lists them: each quoted,
// the last after "or" (`"a", "b" or "c"`), so that a message follows the
// set it names instead of a copy typed by hand.
func OneOf(names []string) string {
	var b strings.Builder
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(fmt.Sprintf("%q", n))
	}
	return b.String()
}
