package jsonedit

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of objects and arrays, counting the top-level
// object as 1. It is encoding/json's limit, so both accept the same documents.
const maxDepth = 10000

// scanner validates JSON text in data from pos onwards. Its methods leave pos
// just past what they accepted, or at the offending byte on error.
type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) fail(msg string) error {
	return &SyntaxError{Offset: s.pos, msg: msg}
}

// unexpected reports the byte at pos, or the end of the input.
func (s *scanner) unexpected() error {
	if s.pos >= len(s.data) {
		return s.fail("unexpected end of input")
	}
	return s.fail("invalid character")
}

func (s *scanner) skipSpace() {
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return // the usual case: no whitespace, and every JSON space is at most ' '
	}
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// plain marks the string bytes that need no attention: everything except
// the quote, the backslash and control characters.
var plain = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

// special8 marks the bytes of the little-endian word x that are not
// plain (a byte below 0x20, a quote, a backslash) with their high bit,
// eight bytes at a time: most of a body is string content. Each test is
// the classic "has a byte less than n" on the word, or on the word xor a
// byte (a zero byte where it was that byte). A borrow can mark a byte
// above a marked one, never below, so the lowest mark is the first byte
// that is not plain; bytes from 0x80 up are plain and excluded by &^ x.
func special8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	lt := x - 0x20*ones             // a byte below 0x20
	quote := (x ^ '"'*ones) - ones  // a '"'
	slash := (x ^ '\\'*ones) - ones // a '\\'
	return (lt | quote | slash) &^ x & highs
}

// scanString accepts a string starting at the opening quote. escaped reports
// whether it contains a backslash escape.
func (s *scanner) scanString() (escaped bool, err error) {
	s.pos++ // opening quote
	for {
		i, data := s.pos, s.data // locals keep the hot loop in registers
		for i+8 <= len(data) {
			if m := special8(binary.LittleEndian.Uint64(data[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8 // the first byte that is not plain
				break
			}
			i += 8
		}
		for i < len(data) && plain[data[i]] { // the last bytes of the document
			i++
		}
		s.pos = i
		if s.pos >= len(s.data) {
			return false, s.unexpected()
		}
		switch s.data[s.pos] {
		case '"':
			s.pos++
			return escaped, nil
		case '\\':
			escaped = true
			s.pos++
			if s.pos >= len(s.data) {
				return false, s.unexpected()
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				s.pos++
				for range 4 {
					if s.pos >= len(s.data) {
						return false, s.unexpected()
					}
					if hexVal(s.data[s.pos]) < 0 {
						return false, s.fail("invalid unicode escape")
					}
					s.pos++
				}
			default:
				return false, s.fail("invalid escape")
			}
		default:
			return false, s.fail("control character in string")
		}
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func (s *scanner) skipDigits() {
	for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
		s.pos++
	}
}

// scanNumber accepts -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) scanNumber() error {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos >= len(s.data):
		return s.unexpected()
	case s.data[s.pos] == '0':
		s.pos++
	case isDigit(s.data[s.pos]):
		s.skipDigits()
	default:
		return s.unexpected()
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if s.pos >= len(s.data) || !isDigit(s.data[s.pos]) {
			return s.unexpected()
		}
		s.skipDigits()
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if s.pos >= len(s.data) || !isDigit(s.data[s.pos]) {
			return s.unexpected()
		}
		s.skipDigits()
	}
	return nil
}

// scanLiteral accepts lit (true, false or null) at pos.
func (s *scanner) scanLiteral(lit string) error {
	for i := range len(lit) {
		if s.pos >= len(s.data) || s.data[s.pos] != lit[i] {
			return s.unexpected()
		}
		s.pos++
	}
	return nil
}

// scanKey accepts `"key" ws : ws` at pos and returns the bounds of the key
// between its quotes.
func (s *scanner) scanKey() (start, end int, escaped bool, err error) {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return 0, 0, false, s.unexpected()
	}
	start = s.pos + 1
	if escaped, err = s.scanString(); err != nil {
		return 0, 0, false, err
	}
	end = s.pos - 1
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return 0, 0, false, s.unexpected()
	}
	s.pos++
	s.skipSpace()
	return start, end, escaped, nil
}

// skipValue accepts one value at pos (whitespace before it already skipped).
// depth is the number of containers enclosing the value.
func (s *scanner) skipValue(depth int) error {
	if s.pos < len(s.data) {
		if c := s.data[s.pos]; c != '{' && c != '[' {
			return s.scanScalar(c) // most members: no container stack to set up
		}
	}
	return s.skipNested(depth)
}

// scanScalar accepts the string, number or literal that starts with c at
// pos.
func (s *scanner) scanScalar(c byte) error {
	switch c {
	case '"':
		_, err := s.scanString()
		return err
	case 't':
		return s.scanLiteral("true")
	case 'f':
		return s.scanLiteral("false")
	case 'n':
		return s.scanLiteral("null")
	}
	if c != '-' && !isDigit(c) {
		return s.unexpected()
	}
	return s.scanNumber()
}

// skipNested is skipValue for a value that may be a container. Nested
// containers are tracked on an explicit stack, one bit per level (set =
// object), never by recursion, so hostile nesting cannot exhaust the
// goroutine stack. The first 256 levels live in an array on the stack;
// deeper documents grow the bit stack on the heap, up to maxDepth bits.
func (s *scanner) skipNested(depth int) error {
	var inline [4]uint64
	stack := inline[:]
	n := 0 // containers opened by this call and not yet closed

	for {
		// A value starts at pos.
		if s.pos >= len(s.data) {
			return s.unexpected()
		}
		switch c := s.data[s.pos]; c {
		case '{', '[':
			if depth+n+1 > maxDepth {
				return s.fail("exceeded max nesting depth")
			}
			if k := uint(n); k/64 == uint(len(stack)) {
				stack = append(stack, 0)
			}
			if k := uint(n); c == '{' {
				stack[k/64] |= 1 << (k % 64)
			} else {
				stack[k/64] &^= 1 << (k % 64)
			}
			n++
			s.pos++
			s.skipSpace()
			if s.pos < len(s.data) && s.data[s.pos] == c+2 { // '}' or ']'
				s.pos++
				n--
				break
			}
			if c == '{' {
				if _, _, _, err := s.scanKey(); err != nil {
					return err
				}
			}
			continue
		default:
			if err := s.scanScalar(c); err != nil {
				return err
			}
		}

		// A value ended: close containers until one continues.
		for {
			if n == 0 {
				return nil
			}
			s.skipSpace()
			if s.pos >= len(s.data) {
				return s.unexpected()
			}
			k := uint(n - 1)
			obj := stack[k/64]&(1<<(k%64)) != 0 // the innermost container is an object
			c := s.data[s.pos]
			if c == ',' {
				s.pos++
				s.skipSpace()
				if obj {
					if _, _, _, err := s.scanKey(); err != nil {
						return err
					}
				}
				break
			}
			if (obj && c == '}') || (!obj && c == ']') {
				s.pos++
				n--
				continue
			}
			return s.unexpected()
		}
	}
}

// members iterates over the top-level members of an object.
type members struct {
	s        scanner
	count    int  // members seen so far
	insertAt int  // just past the last member's value, or past '{' if none
	done     bool // the closing '}' (and, at the top level, trailing whitespace) were accepted
	depth    int  // containers enclosing a member's value: 1 for the top-level object
	nested   bool // the object is a member's value: nothing is checked after its '}'
	pending  bool // nextKey returned a member whose value is not read yet
	valStart int  // where the pending value starts
}

// member is one top-level member: the key's bytes between its quotes and
// the value's bytes.
type member struct {
	keyStart, keyEnd int
	escaped          bool // the key contains a backslash escape
	valStart, valEnd int
}

func newMembers(doc []byte) (members, error) {
	it := members{s: scanner{data: doc}}
	it.s.skipSpace()
	if it.s.pos >= len(doc) {
		return members{}, it.s.unexpected()
	}
	switch c := doc[it.s.pos]; {
	case c == '{':
	case c == '[' || c == '"' || c == '-' || isDigit(c) || c == 't' || c == 'f' || c == 'n':
		return members{}, ErrNotObject
	default:
		return members{}, it.s.unexpected()
	}
	it.s.pos++
	it.insertAt = it.s.pos
	it.depth = 1
	return it, nil
}

// next returns the next member; more is false after the closing brace, once
// the rest of the document has been checked to be whitespace. It is
// nextKey and skipPending in one: every Lookup and Next runs it for each
// member, and the calls between them cost 9% of a Lookup.
func (it *members) next() (m member, more bool, err error) {
	if it.pending {
		if _, err := it.skipPending(); err != nil {
			return member{}, false, err
		}
	}
	if it.done {
		return member{}, false, nil
	}
	s := &it.s
	s.skipSpace()
	if s.pos >= len(s.data) {
		return member{}, false, s.unexpected()
	}
	switch c := s.data[s.pos]; {
	case c == '}':
		return member{}, false, it.end()
	case it.count > 0 && c != ',':
		return member{}, false, s.unexpected()
	case it.count > 0:
		s.pos++
		s.skipSpace()
	}
	if m.keyStart, m.keyEnd, m.escaped, err = s.scanKey(); err != nil {
		return member{}, false, err
	}
	m.valStart = s.pos
	if err := s.skipValue(it.depth); err != nil {
		return member{}, false, err
	}
	m.valEnd = s.pos
	it.count++
	it.insertAt = s.pos
	return m, true, nil
}

// end accepts the closing brace at pos and, at the top level, the
// white space to the end of the document.
func (it *members) end() error {
	s := &it.s
	s.pos++
	if !it.nested {
		s.skipSpace()
		if s.pos != len(s.data) {
			return s.fail("invalid character after top-level object")
		}
	}
	it.done = true
	return nil
}

// nextKey is next up to the member's value: it leaves pos at the value,
// which skipPending or an iterator over the value (Iter.Object) reads.
// A value still pending is skipped first.
func (it *members) nextKey() (m member, more bool, err error) {
	if it.pending {
		if _, err := it.skipPending(); err != nil {
			return member{}, false, err
		}
	}
	if it.done {
		return member{}, false, nil
	}
	s := &it.s
	s.skipSpace()
	if s.pos >= len(s.data) {
		return member{}, false, s.unexpected()
	}
	switch c := s.data[s.pos]; {
	case c == '}':
		return member{}, false, it.end()
	case it.count > 0 && c != ',':
		return member{}, false, s.unexpected()
	case it.count > 0:
		s.pos++
		s.skipSpace()
	}
	if m.keyStart, m.keyEnd, m.escaped, err = s.scanKey(); err != nil {
		return member{}, false, err
	}
	m.valStart = s.pos
	it.valStart, it.pending = s.pos, true
	return m, true, nil
}

// skipPending reads the value nextKey left pending and returns where it
// ends.
func (it *members) skipPending() (end int, err error) {
	if err := it.s.skipValue(it.depth); err != nil {
		return 0, err
	}
	it.endPending()
	return it.s.pos, nil
}

// endPending records that the pending value ends at pos.
func (it *members) endPending() {
	it.pending = false
	it.count++
	it.insertAt = it.s.pos
}

// keyIs reports whether the member's key, unescaped, is key.
func (m member) keyIs(doc []byte, key string) bool {
	return rawKeyIs(doc[m.keyStart:m.keyEnd], m.escaped, key)
}

// rawKeyIs reports whether raw, the contents of a JSON string (between
// the quotes, already validated; escaped when it holds a backslash),
// unescapes to exactly key. Without escapes each valid rune of raw reads
// as itself and each invalid byte as U+FFFD, three bytes: a key that
// matches is as long as raw, or longer by two bytes for each invalid one.
// So most comparisons, of different names, end at the lengths.
func rawKeyIs(raw []byte, escaped bool, key string) bool {
	switch {
	case escaped:
		return unquotedEqual(raw, key)
	case len(raw) == len(key):
		// No invalid byte can match: the same bytes, if they are valid.
		return string(raw) == key && (asciiString(key) || utf8.ValidString(key))
	case len(raw) > len(key):
		return false
	}
	// Shorter: only invalid bytes, each read as three, can make up the
	// difference, and an ASCII key (most) has none.
	return !ascii(raw) && !utf8.Valid(raw) && unquotedEqual(raw, key)
}

// ascii reports whether b is all ASCII, eight bytes at a time.
func ascii(b []byte) bool {
	const highs = 0x8080808080808080
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&highs != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// asciiString reports whether s is all ASCII: the names callers look
// for are, and need no UTF-8 validation.
func asciiString(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// unquotedEqual compares the contents of a JSON string (between the quotes,
// already validated) with key, decoding escapes the way encoding/json does:
// an unpaired surrogate escape and an invalid UTF-8 byte each read as U+FFFD.
// A key that is not valid UTF-8 matches nothing, as with encoding/json.
func unquotedEqual(raw []byte, key string) bool {
	for i := 0; i < len(raw); {
		var r rune
		switch c := raw[i]; {
		case c == '\\':
			r, i = decodeEscape(raw, i)
		case c < utf8.RuneSelf:
			r = rune(c)
			i++
		default:
			var size int
			r, size = utf8.DecodeRune(raw[i:])
			i += size
		}
		kr, size := utf8.DecodeRuneInString(key)
		if size == 0 || kr != r || (kr == utf8.RuneError && size == 1) {
			return false // a decoded key is valid UTF-8; an invalid key never matches
		}
		key = key[size:]
	}
	return key == ""
}

// decodeEscape decodes the validated escape sequence at raw[i] and returns
// the rune and the index just past it.
func decodeEscape(raw []byte, i int) (rune, int) {
	switch raw[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r := hex4(raw[i+2:])
		i += 6
		if !utf16.IsSurrogate(r) {
			return r, i
		}
		if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
			if dec := utf16.DecodeRune(r, hex4(raw[i+2:])); dec != utf8.RuneError {
				return dec, i + 6
			}
		}
		return utf8.RuneError, i
	default: // '"', '\\', '/'
		return rune(raw[i+1]), i + 2
	}
}

// hex4 decodes four validated hex digits.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r = r<<4 | rune(hexVal(c))
	}
	return r
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}
