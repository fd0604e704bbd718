package jsonedit

import "errors"

// ErrNotArray is returned by [Elements] for a document whose top-level
// value is not an array.
var ErrNotArray = errors.New("jsonedit: top-level value is not an array")

// Elems walks the elements of an array in one pass, validating the whole
// document as it goes, as [Iter] walks an object's members. Create one
// with [Elements].
type Elems struct {
	s     scanner
	count int
	done  bool
}

// Elements returns an iterator over the elements of the array doc. A
// document whose top-level value is not an array returns ErrNotArray; one
// that does not start a value returns a *SyntaxError. Neither Elements nor
// Next allocates; the values alias doc.
func Elements(doc []byte) (Elems, error) {
	it := Elems{s: scanner{data: doc}}
	it.s.skipSpace()
	if it.s.pos >= len(doc) {
		return Elems{}, it.s.unexpected()
	}
	switch c := doc[it.s.pos]; {
	case c == '[':
	case c == '{' || c == '"' || c == '-' || isDigit(c) || c == 't' || c == 'f' || c == 'n':
		return Elems{}, ErrNotArray
	default:
		return Elems{}, it.s.unexpected()
	}
	it.s.pos++
	return it, nil
}

// Next returns the next element, exactly as written, and its offset in
// the document. ok is false after the last element, once the closing
// bracket and the rest of the document have been checked. A malformed
// document returns a *SyntaxError when the scan reaches the problem.
func (it *Elems) Next() (value []byte, at int, ok bool, err error) {
	if it.done {
		return nil, 0, false, nil
	}
	s := &it.s
	s.skipSpace()
	if s.pos >= len(s.data) {
		return nil, 0, false, s.unexpected()
	}
	switch c := s.data[s.pos]; {
	case c == ']':
		s.pos++
		s.skipSpace()
		if s.pos != len(s.data) {
			return nil, 0, false, s.fail("invalid character after top-level array")
		}
		it.done = true
		return nil, 0, false, nil
	case it.count > 0 && c != ',':
		return nil, 0, false, s.unexpected()
	case it.count > 0:
		s.pos++
		s.skipSpace()
	}
	at = s.pos
	if err := s.skipValue(1); err != nil {
		return nil, 0, false, err
	}
	it.count++
	return s.data[at:s.pos:s.pos], at, true, nil
}
