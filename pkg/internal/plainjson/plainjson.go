// Package plainjson reads JSON of the plain kind providers write their
// usage objects in (objects, arrays, strings without \u escapes, numbers
// and literals, at most MaxDepth deep, white space anywhere JSON allows
// it) in one pass of ~5 instructions a byte, where encoding/json's scanner
// costs ~50. A node checks and copies every attempt's usage object:
// usageevent's Validate and AppendProviderUsage (which the node's event
// encoder calls) both read it here.
//
// Both functions are fast paths, never the judge: true means src is valid
// JSON (FuzzValid and FuzzAppendObject hold them to encoding/json); false
// means only that encoding/json must decide.
package plainjson

// MaxDepth bounds the nesting (the parser's recursion); deeper documents
// are left to encoding/json.
const MaxDepth = 16

// Valid reports whether b is plain JSON: any value, with white space
// around it.
func Valid(b []byte) bool {
	p := parser{src: b}
	p.space()
	if !p.value(0) {
		return false
	}
	p.space()
	return p.i == len(b)
}

// AppendObject appends src compacted and HTML-escaped, the bytes
// encoding/json writes for it as a json.RawMessage (white space between
// tokens dropped; < > & U+2028 U+2029 in strings escaped; invalid UTF-8
// copied as it is), when src is a plain JSON object: one pass that checks
// and writes. Otherwise it returns dst as it was and false.
func AppendObject(dst, src []byte) ([]byte, bool) {
	p := parser{src: src, b: dst, emit: true}
	p.space()
	if p.i >= len(src) || src[p.i] != '{' || !p.value(0) {
		return dst, false
	}
	if p.space(); p.i != len(src) {
		return dst, false
	}
	return append(p.b, src[p.from:]...), true
}

// parser reads src at i. With emit it also copies src to b in runs:
// src[from:i] is read and not yet copied, so white space and the bytes
// HTML escaping changes are where a run ends.
type parser struct {
	src  []byte
	i    int
	from int
	b    []byte
	emit bool
}

// space skips white space, which the copy leaves out.
func (p *parser) space() {
	j := p.i
	for j < len(p.src) && (p.src[j] == ' ' || p.src[j] == '\t' || p.src[j] == '\n' || p.src[j] == '\r') {
		j++
	}
	if p.emit && j > p.i {
		p.b = append(p.b, p.src[p.from:p.i]...)
		p.from = j
	}
	p.i = j
}

// value reads one value at p.i (white space before it already read).
func (p *parser) value(depth int) bool {
	if p.i >= len(p.src) || depth > MaxDepth {
		return false
	}
	switch c := p.src[p.i]; {
	case c == '{':
		return p.container(depth, '}', true)
	case c == '[':
		return p.container(depth, ']', false)
	case c == '"':
		return p.str()
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	}
	return false
}

// container reads an object (members true) or an array up to its end
// byte.
func (p *parser) container(depth int, end byte, members bool) bool {
	p.i++
	p.space()
	if p.i < len(p.src) && p.src[p.i] == end {
		p.i++
		return true
	}
	for {
		if members {
			if p.i >= len(p.src) || p.src[p.i] != '"' || !p.str() {
				return false
			}
			p.space()
			if p.i >= len(p.src) || p.src[p.i] != ':' {
				return false
			}
			p.i++
			p.space()
		}
		if !p.value(depth + 1) {
			return false
		}
		p.space()
		if p.i >= len(p.src) {
			return false
		}
		switch p.src[p.i] {
		case ',':
			p.i++
			p.space()
		case end:
			p.i++
			return true
		default:
			return false
		}
	}
}

// strSpecial marks the bytes str stops at inside a string: its end, an
// escape, a control character (JSON forbids them) and what HTML escaping
// changes (0xE2 starts U+2028 and U+2029).
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for _, c := range []byte("\"\\<>&\xe2") {
		t[c] = true
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// str reads a string: no control character, of the escapes only the
// one-letter ones. With emit, < > & U+2028 U+2029 are escaped as
// encoding/json escapes them.
func (p *parser) str() bool {
	src := p.src
	for j := p.i + 1; j < len(src); j++ {
		// The run of plain bytes in a loop of its own, on locals: most
		// of a usage object is its member names.
		for j < len(src) && !strSpecial[src[j]] {
			j++
		}
		if j == len(src) {
			return false
		}
		c := src[j]
		switch {
		case c == '"':
			p.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(src) {
				return false
			}
			switch src[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			default:
				return false // \u, or not an escape: encoding/json decides
			}
		case !p.emit:
		case c == 0xE2:
			if j+2 < len(src) && src[j+1] == 0x80 && src[j+2]&^1 == 0xA8 {
				p.b = append(p.b, src[p.from:j]...)
				p.b = append(p.b, '\\', 'u', '2', '0', '2', hexDigits[src[j+2]&0xF])
				j += 2
				p.from = j + 1
			}
		default: // < > &
			p.b = append(p.b, src[p.from:j]...)
			p.b = append(p.b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			p.from = j + 1
		}
	}
	return false
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (p *parser) number() bool {
	if p.src[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i >= len(p.src):
		return false
	case p.src[p.i] == '0':
		p.i++
	case '1' <= p.src[p.i] && p.src[p.i] <= '9':
		p.digits()
	default:
		return false
	}
	if p.i < len(p.src) && p.src[p.i] == '.' {
		p.i++
		if !p.digits() {
			return false
		}
	}
	if p.i < len(p.src) && (p.src[p.i] == 'e' || p.src[p.i] == 'E') {
		p.i++
		if p.i < len(p.src) && (p.src[p.i] == '+' || p.src[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more digits.
func (p *parser) digits() bool {
	start := p.i
	for p.i < len(p.src) && '0' <= p.src[p.i] && p.src[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

func (p *parser) literal(lit string) bool {
	if len(p.src)-p.i < len(lit) || string(p.src[p.i:p.i+len(lit)]) != lit {
		return false
	}
	p.i += len(lit)
	return true
}
