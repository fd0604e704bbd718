package contract

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Shape lists the object members a document may have, for [Exact]. A nil
// *Shape stands for any JSON value (its objects may have any members, but
// no duplicates).
type Shape struct {
	names  []string // object: the known member names, in field order
	fields []*Shape // object: the shape of each member's value
	open   bool     // object: members not in names are allowed
	opt    []bool   // object: the member's Go field has omitempty or omitzero
	req    bool     // object: members not in opt are required
	elem   *Shape   // array: the shape of each element
	object bool
	array  bool
}

// ShapeOf derives a Shape from a Go type, the way encoding/json decodes
// into it: a struct is an object of its json-tagged members (untagged
// exported fields by their Go name; "-" skipped), a slice or array is an
// array of its element, a pointer is its element. A type with its own
// UnmarshalJSON or UnmarshalText method (time.Time, json.RawMessage), a
// map, an interface and every scalar are any value.
func ShapeOf(t reflect.Type) *Shape {
	return shapeOf(t, map[reflect.Type]*Shape{})
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func shapeOf(t reflect.Type, seen map[reflect.Type]*Shape) *Shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	if s, ok := seen[t]; ok {
		return s // a recursive type
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is a base64 string
		}
		s := &Shape{array: true}
		seen[t] = s
		s.elem = shapeOf(t.Elem(), seen)
		return s
	case reflect.Struct:
		s := &Shape{object: true}
		seen[t] = s
		for f := range t.Fields() {
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-":
				continue
			case name == "":
				name = f.Name
			}
			s.names = append(s.names, name)
			s.fields = append(s.fields, shapeOf(f.Type, seen))
			s.opt = append(s.opt, strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,"))
		}
		return s
	default:
		return nil
	}
}

// index returns the index of name in s.names, or -1.
func (s *Shape) index(name []byte) int {
	for k, n := range s.names {
		if n == string(name) {
			return k
		}
	}
	return -1
}

// Open returns a copy of s in which every object also allows members it
// does not list (a document that later versions may extend). A member that
// differs from a listed one only in letter case is still refused.
func (s *Shape) Open() *Shape {
	return s.copyWith(map[*Shape]*Shape{}, func(c *Shape) { c.open = c.object })
}

// copyWith returns a deep copy of s with set applied to every shape.
func (s *Shape) copyWith(done map[*Shape]*Shape, set func(*Shape)) *Shape {
	if s == nil {
		return nil
	}
	if c, ok := done[s]; ok {
		return c
	}
	c := *s
	done[s] = &c
	set(&c)
	c.elem = s.elem.copyWith(done, set)
	c.fields = make([]*Shape, len(s.fields))
	for i, f := range s.fields {
		c.fields[i] = f.copyWith(done, set)
	}
	return &c
}

// Required returns a copy of s in which every object requires each member
// whose Go field has neither the omitempty nor the omitzero option (the
// members a producer that encodes the Go type always writes).
func (s *Shape) Required() *Shape {
	return s.copyWith(map[*Shape]*Shape{}, func(c *Shape) { c.req = c.object })
}

// Exact checks the member names of data, a JSON document, against s. It
// reports the first of these, in document order:
//
//   - a string, name or value, that holds an invalid UTF-8 byte or an
//     unpaired surrogate escape (which encoding/json reads as U+FFFD and
//     other parsers refuse or keep);
//   - a member name that appears twice in one object, at any depth
//     (compared after unescaping, as encoding/json compares them);
//   - in an object of s, a member that s does not list (unless s is
//     [Shape.Open]), with a hint when it differs from a listed one only in
//     letter case;
//   - in an object of a [Shape.Required] shape, a required member that is
//     missing.
//
// encoding/json matches member names to struct fields case-insensitively
// and lets the last of two duplicates win; a document that passes Exact has
// neither, so it decodes into the Go types as a JSON Schema validator reads
// it. ok is true when data passed. Exact stops at the end of the first JSON
// value; data after it is the caller's to reject.
//
// syntax is true when data is not well-formed JSON as far as Exact read it;
// the caller should then report encoding/json's own error, which is more
// precise. The failure is then not otherwise described.
func Exact(data []byte, s *Shape) (l Located, ok, syntax bool) {
	x := exact{data: data}
	x.skipSpace()
	if err := x.value(s, 0); err != nil {
		if err.syntax {
			return Located{}, false, true
		}
		line, col := Position(data, err.off)
		return Located{Path: err.path, Line: line, Column: col, Msg: err.msg}, false, false
	}
	return Located{}, true, false
}

// maxDepth is encoding/json's own nesting limit.
const maxDepth = 10000

// maxPathName bounds how much of a member name an error path repeats.
const maxPathName = 64

type exact struct {
	data []byte
	i    int
	path []segment // where the scan is, rendered only for an error
}

// segment is one step of a path: a member name, or an array index when
// name is empty and index ≥ 0.
type segment struct {
	name  string
	index int
}

func (x *exact) fail(off int, msg string) *exactError {
	var b strings.Builder
	for _, sg := range x.path {
		if sg.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(sg.index))
			b.WriteByte(']')
			continue
		}
		writeMember(&b, sg.name)
	}
	return &exactError{off: off, path: b.String(), msg: msg}
}

type exactError struct {
	syntax bool
	off    int // where the offending member name starts
	path   string
	msg    string
}

var errSyntax = &exactError{syntax: true}

var literals = [][]byte{[]byte("true"), []byte("false"), []byte("null")}

func (x *exact) skipSpace() {
	for x.i < len(x.data) {
		switch x.data[x.i] {
		case ' ', '\t', '\r', '\n':
			x.i++
		default:
			return
		}
	}
}

// value scans one value starting at x.i (whitespace already skipped) and
// the whitespace after it.
func (x *exact) value(s *Shape, depth int) *exactError {
	if x.i >= len(x.data) {
		return errSyntax
	}
	if depth >= maxDepth {
		return errSyntax
	}
	switch c := x.data[x.i]; {
	case c == '{':
		if s != nil && !s.object {
			s = nil // a type error encoding/json reports; check duplicates only
		}
		return x.object(s, depth)
	case c == '[':
		if s != nil && !s.array {
			s = nil
		}
		return x.array(s, depth)
	case c == '"':
		if _, _, err := x.str(); err != nil {
			return err
		}
	case c == '-' || c >= '0' && c <= '9':
		// Numbers end at the first byte that cannot be part of one;
		// encoding/json checks their grammar.
		for x.i < len(x.data) && strings.IndexByte("0123456789+-.eE", x.data[x.i]) >= 0 {
			x.i++
		}
	default:
		for _, lit := range literals {
			if bytes.HasPrefix(x.data[x.i:], lit) {
				x.i += len(lit)
				x.skipSpace()
				return nil
			}
		}
		return errSyntax
	}
	x.skipSpace()
	return nil
}

// str scans a string at x.i and returns its raw contents (between the
// quotes) and whether they contain an escape or a non-ASCII byte. A string
// whose text is not well-defined Unicode, an invalid UTF-8 byte or an
// unpaired surrogate escape ("\ud800"), is an error: encoding/json reads
// either as U+FFFD, other parsers refuse the document or keep the
// surrogate, so two readers would see different names or values (RFC 8259
// section 8.2, RFC 7493 section 2.1).
func (x *exact) str() (raw []byte, special bool, err *exactError) {
	start := x.i + 1
	for j := start; j < len(x.data); j++ {
		switch c := x.data[j]; {
		case c == '"':
			x.i = j + 1
			return x.data[start:j], special, nil
		case c == '\\':
			special = true
			if j+1 < len(x.data) && x.data[j+1] == 'u' {
				r, ok := hex4(x.data[j+2:])
				switch {
				case !ok:
					return nil, false, errSyntax
				case r >= 0xdc00 && r <= 0xdfff:
					return nil, false, x.fail(j, "unpaired surrogate escape in a string")
				case r >= 0xd800 && r <= 0xdbff:
					lo, ok := hex4(x.data[min(j+8, len(x.data)):])
					if j+7 >= len(x.data) || x.data[j+6] != '\\' || x.data[j+7] != 'u' || !ok || lo < 0xdc00 || lo > 0xdfff {
						return nil, false, x.fail(j, "unpaired surrogate escape in a string")
					}
					j += 6 // the low half; the loop skips the rest
				}
				j += 5
				continue
			}
			j++ // the escaped byte; encoding/json checks the rest
		case c < 0x20:
			return nil, false, errSyntax
		case c >= utf8.RuneSelf:
			special = true
			r, size := utf8.DecodeRune(x.data[j:])
			if r == utf8.RuneError && size <= 1 {
				return nil, false, x.fail(j, "invalid UTF-8 in a string")
			}
			j += size - 1
		}
	}
	return nil, false, errSyntax
}

// hex4 reads four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (x *exact) object(s *Shape, depth int) *exactError {
	start := x.i
	x.i++ // '{'
	x.skipSpace()
	var (
		seenKnown uint64              // known members seen, by index (the first 64)
		seen      map[string]struct{} // every other member name seen
	)
	if x.i < len(x.data) && x.data[x.i] == '}' {
		x.i++
		x.skipSpace()
		return x.missing(s, start, seenKnown, seen)
	}
	for {
		if x.i >= len(x.data) || x.data[x.i] != '"' {
			return errSyntax
		}
		keyOff := x.i
		raw, special, err := x.str()
		if err != nil {
			return err
		}
		known := -1 // index in s.names
		if s != nil && !special {
			known = s.index(raw)
		}
		var name string
		switch {
		case known >= 0:
			name = s.names[known]
		case special:
			// Unescape exactly as encoding/json does (invalid UTF-8 and
			// lone surrogates read as U+FFFD).
			var ok bool
			if name, ok = unquote(x.data[keyOff:x.i]); !ok {
				return errSyntax
			}
			if s != nil {
				known = s.index([]byte(name))
			}
		default:
			name = string(raw)
		}
		x.path = append(x.path, segment{name: name, index: -1})
		var child *Shape
		if known >= 0 {
			child = s.fields[known]
		} else if s != nil {
			for _, n := range s.names {
				if strings.EqualFold(n, name) {
					return x.fail(keyOff, "unknown member; did you mean "+strconv.Quote(n)+"?")
				}
			}
			if !s.open {
				return x.fail(keyOff, "unknown member")
			}
		}
		dup := false
		if known >= 0 && known < 64 {
			dup = seenKnown&(1<<known) != 0
			seenKnown |= 1 << known
		} else {
			if seen == nil {
				seen = map[string]struct{}{}
			}
			_, dup = seen[name]
			seen[name] = struct{}{}
		}
		if dup {
			return x.fail(keyOff, "duplicate member (each name may appear once)")
		}
		x.skipSpace()
		if x.i >= len(x.data) || x.data[x.i] != ':' {
			return errSyntax
		}
		x.i++
		x.skipSpace()
		if err := x.value(child, depth+1); err != nil {
			return err
		}
		x.path = x.path[:len(x.path)-1]
		if x.i >= len(x.data) {
			return errSyntax
		}
		switch x.data[x.i] {
		case ',':
			x.i++
			x.skipSpace()
		case '}':
			x.i++
			x.skipSpace()
			return x.missing(s, start, seenKnown, seen)
		default:
			return errSyntax
		}
	}
}

// missing reports the first member a Required object at start lacks.
func (x *exact) missing(s *Shape, start int, seenKnown uint64, seen map[string]struct{}) *exactError {
	if s == nil || !s.req {
		return nil
	}
	for k, n := range s.names {
		if s.opt[k] || k < 64 && seenKnown&(1<<k) != 0 {
			continue
		}
		if _, ok := seen[n]; ok && k >= 64 {
			continue
		}
		return x.fail(start, "missing member "+strconv.Quote(n))
	}
	return nil
}

func (x *exact) array(s *Shape, depth int) *exactError {
	x.i++ // '['
	x.skipSpace()
	var elem *Shape
	if s != nil {
		elem = s.elem
	}
	if x.i < len(x.data) && x.data[x.i] == ']' {
		x.i++
		x.skipSpace()
		return nil
	}
	x.path = append(x.path, segment{index: 0})
	for n := 0; ; n++ {
		x.path[len(x.path)-1].index = n
		if err := x.value(elem, depth+1); err != nil {
			return err
		}
		if x.i >= len(x.data) {
			return errSyntax
		}
		switch x.data[x.i] {
		case ',':
			x.i++
			x.skipSpace()
		case ']':
			x.i++
			x.skipSpace()
			x.path = x.path[:len(x.path)-1]
			return nil
		default:
			return errSyntax
		}
	}
}

// writeMember appends a member name to a path: ".name" for a plain name
// (no dot first), `["name"]` for any other, quoted in ASCII so that a
// look-alike such as U+212A KELVIN SIGN for "K" shows, and shortened.
func writeMember(b *strings.Builder, name string) {
	plain := name != ""
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			plain = false
			break
		}
	}
	switch {
	case plain && len(name) <= maxPathName:
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(name)
	case len(name) > maxPathName:
		cut := maxPathName
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		b.WriteString("[" + strconv.QuoteToASCII(name[:cut]) + "…]")
	default:
		b.WriteString("[" + strconv.QuoteToASCII(name) + "]")
	}
}

// unquote decodes a JSON string literal as encoding/json does. It is a
// function of its own so that the scan's locals stay on the stack.
func unquote(lit []byte) (string, bool) {
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err == nil
}
