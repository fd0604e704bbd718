package jsonedit

import (
	"errors"
	"unicode"
	"unicode/utf8"
)

// Iter walks the top-level members of an object in one pass, validating the
// whole document as it goes. Create one with [Members].
type Iter struct {
	it  members
	doc []byte
}

// errNotPending is a caller bug: Value or Leave without a member from
// NextKey whose value is still to be read.
var errNotPending = errors.New("jsonedit: no member value to read")

// Member is one top-level member of an object.
type Member struct {
	// RawKey is the key as written between its quotes, escapes not decoded.
	// Compare keys with KeyIs or KeyFold.
	RawKey []byte
	// Value is the member's value exactly as written, without surrounding
	// whitespace. It is one valid JSON value.
	Value []byte
	// At is the offset of Value in the document, for edits that splice
	// the document without walking it again.
	At      int
	escaped bool // RawKey contains a backslash escape
}

// Members returns an iterator over the top-level members of the object doc.
// A document whose top-level value is not an object returns ErrNotObject
// (the rest of doc is not read); a document that does not start a value
// returns a *SyntaxError. Members does not allocate, and neither does
// Next; RawKey and Value alias doc.
func Members(doc []byte) (Iter, error) {
	it, err := newMembers(doc)
	if err != nil {
		return Iter{}, err
	}
	return Iter{it: it, doc: doc}, nil
}

// Next returns the next member in document order. ok is false after the
// last member, once the closing brace and the rest of the document have been
// checked: only then is the whole document known to be valid. A malformed
// document returns a *SyntaxError (and ok false) when the scan reaches the
// problem, possibly after members have been returned.
func (it *Iter) Next() (m Member, ok bool, err error) {
	raw, ok, err := it.it.next()
	if !ok || err != nil {
		return Member{}, false, err
	}
	return Member{
		RawKey:  it.doc[raw.keyStart:raw.keyEnd:raw.keyEnd],
		Value:   it.doc[raw.valStart:raw.valEnd:raw.valEnd],
		At:      raw.valStart,
		escaped: raw.escaped,
	}, true, nil
}

// NextKey is Next without the value: the member's Value is nil and At is
// where the value starts. The value is read by exactly one of Value, or
// Object followed by Leave, before the next call of Next or NextKey (which
// otherwise skip it). A document read this way is validated as with Next,
// in the same single pass: a value entered with Object is not scanned
// again.
func (it *Iter) NextKey() (m Member, ok bool, err error) {
	raw, ok, err := it.it.nextKey()
	if !ok || err != nil {
		return Member{}, false, err
	}
	return Member{
		RawKey:  it.doc[raw.keyStart:raw.keyEnd:raw.keyEnd],
		At:      raw.valStart,
		escaped: raw.escaped,
	}, true, nil
}

// Seek is NextKey for the next member whose key, unescaped, is key (as
// KeyIs compares), skipping the members before it; ok is false after the
// last member, as with Next.
func (it *Iter) Seek(key string) (ok bool, err error) {
	for {
		m, more, err := it.it.nextKey()
		if !more || err != nil {
			return false, err
		}
		if m.keyIs(it.doc, key) {
			return true, nil
		}
	}
}

// Value reads the value of the member NextKey returned and returns it
// exactly as written, like Member.Value; a malformed value returns a
// *SyntaxError.
func (it *Iter) Value() ([]byte, error) {
	if !it.it.pending {
		return nil, errNotPending
	}
	end, err := it.it.skipPending()
	if err != nil {
		return nil, err
	}
	return it.doc[it.it.valStart:end:end], nil
}

// Object returns an iterator over the members of the value of the member
// NextKey returned, and true, when that value is an object; false (and
// nothing read) when it is not, or is nested deeper than the decoding
// limit. Read the members with child's Next or NextKey, then give child
// back to Leave, which finishes the value: the object is scanned once.
func (it *Iter) Object() (child Iter, ok bool) {
	m := &it.it
	if !m.pending || m.s.pos >= len(m.s.data) || m.s.data[m.s.pos] != '{' || m.depth+1 > maxDepth {
		return Iter{}, false
	}
	start := m.s.pos + 1
	return Iter{
		it: members{
			s:        scanner{data: m.s.data, pos: start},
			insertAt: start,
			depth:    m.depth + 1,
			nested:   true,
		},
		doc: it.doc,
	}, true
}

// Leave finishes the value that Object entered, reading whatever members
// of child are left, and returns the object exactly as written, like
// Member.Value.
func (it *Iter) Leave(child *Iter) ([]byte, error) {
	if !it.it.pending {
		return nil, errNotPending
	}
	for {
		_, more, err := child.it.next()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	it.it.s.pos = child.it.s.pos
	it.it.endPending()
	return it.doc[it.it.valStart:it.it.s.pos:it.it.s.pos], nil
}

// Tail reports where a member added to the object would go: at is the
// offset just after the last member's value (just after the opening brace
// of an empty object), and empty says that the object has no member, so
// that the new member needs no separating comma. It is meaningful once
// Next has returned ok false with a nil error.
func (it *Iter) Tail() (at int, empty bool) { return it.it.insertAt, it.it.count == 0 }

// KeyIs reports whether the member's key, unescaped, is exactly key. This is
// how [Lookup] and encoding/json decoding into a map match keys.
func (m Member) KeyIs(key string) bool { return rawKeyIs(m.RawKey, m.escaped, key) }

// KeyFold reports whether the member's key, unescaped, matches name the way
// encoding/json matches an object key to a struct field name: equal under
// Unicode simple case folding, so "Stream", "STREAM" and "ſtream" (U+017F)
// all match "stream". As in encoding/json, an unpaired surrogate escape or an
// invalid UTF-8 byte in the key reads as U+FFFD, and so does an invalid
// UTF-8 byte in name.
func (m Member) KeyFold(name string) bool {
	key := m.RawKey
	i, j := 0, 0
	for i < len(key) && j < len(name) {
		kc, nc := key[i], name[j]
		if kc < utf8.RuneSelf && kc != '\\' && nc < utf8.RuneSelf {
			// Both ASCII: encoding/json folds only a-z, byte by byte.
			if upperASCII(kc) != upperASCII(nc) {
				return false
			}
			i++
			j++
			continue
		}
		var kr rune
		switch {
		case kc == '\\':
			kr, i = decodeEscape(key, i)
		case kc < utf8.RuneSelf:
			kr = rune(kc)
			i++
		default:
			var size int
			kr, size = utf8.DecodeRune(key[i:])
			i += size
		}
		nr, size := utf8.DecodeRuneInString(name[j:])
		j += size
		if foldRune(kr) != foldRune(nr) {
			return false
		}
	}
	return i == len(key) && j == len(name)
}

// KeyLike reports whether the member's key, unescaped, would be read as
// name by a lax reader: KeyFold's case folding, and also a key cut at its
// first NUL (as a C string is: "stream\u0000" is "stream") and the Turkish
// dotless and dotted I (U+0131, U+0130) read as "i" (as a locale-aware
// lower-casing does: "funct\u0131ons" is "functions"). A key that is
// exactly name is alike too.
func (m Member) KeyLike(name string) bool {
	key := m.RawKey
	i, j := 0, 0
	for j < len(name) {
		if i >= len(key) {
			return false
		}
		var kr rune
		switch kc := key[i]; {
		case kc == '\\':
			kr, i = decodeEscape(key, i)
		case kc < utf8.RuneSelf:
			kr = rune(kc)
			i++
		default:
			var size int
			kr, size = utf8.DecodeRune(key[i:])
			i += size
		}
		switch kr {
		case 0:
			return false // the key ends here for a C-string reader: shorter than name
		case '\u0131', '\u0130':
			kr = 'i'
		}
		nr, size := utf8.DecodeRuneInString(name[j:])
		j += size
		if foldRune(kr) != foldRune(nr) {
			return false
		}
	}
	if i == len(key) {
		return true
	}
	// name is read; what is left of the key must start with a NUL.
	if key[i] == 0 {
		return true
	}
	if key[i] == '\\' {
		r, _ := decodeEscape(key, i)
		return r == 0
	}
	return false
}

func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// foldRune returns the smallest rune of r's simple case folding orbit, as
// encoding/json's fold.go does.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		return rune(upperASCII(byte(r)))
	}
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// Unquote decodes raw, which must be exactly one JSON string with its quotes
// and no surrounding whitespace, with encoding/json's rules: an unpaired
// surrogate escape or an invalid UTF-8 byte reads as U+FFFD. ok is false
// when raw is not such a string. A string without escapes that is valid
// UTF-8 costs one allocation, the result.
func Unquote(raw []byte) (s string, ok bool) {
	escaped, ok := isString(raw)
	if !ok {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	if !escaped && utf8.Valid(body) {
		return string(body), true
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		var r rune
		switch c := body[i]; {
		case c == '\\':
			r, i = decodeEscape(body, i)
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
			continue
		default:
			var size int
			r, size = utf8.DecodeRune(body[i:])
			i += size
		}
		out = utf8.AppendRune(out, r)
	}
	return string(out), true
}

// EqualString reports whether raw is one JSON string (as for [Unquote]) that
// decodes to s. It does not allocate.
func EqualString(raw []byte, s string) bool {
	escaped, ok := isString(raw)
	if !ok {
		return false
	}
	body := raw[1 : len(raw)-1]
	if !escaped && utf8.Valid(body) {
		return string(body) == s
	}
	return unquotedEqual(body, s)
}

// isString reports whether raw is exactly one valid JSON string.
func isString(raw []byte) (escaped, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return false, false
	}
	s := scanner{data: raw}
	escaped, err := s.scanString()
	return escaped, err == nil && s.pos == len(raw)
}
