package usageevent

// plainJSON reports whether b is JSON of the plain kind providers write
// their usage in: objects, arrays, strings without \u escapes, numbers and
// literals, at most maxPlainDepth deep, white space anywhere JSON allows
// it. It is [Event.Validate]'s fast path for provider_usage: true means b
// is valid JSON (FuzzPlainJSON holds it to json.Valid); false means only
// that json.Valid must decide. encoding/json's scanner costs ~50
// instructions a byte, this ~5: a node validates every event it records.
func plainJSON(b []byte) bool {
	p := plain{b: b}
	p.space()
	if !p.value(0) {
		return false
	}
	p.space()
	return p.i == len(b)
}

// maxPlainDepth bounds plainJSON's nesting (its recursion); deeper
// documents are left to json.Valid.
const maxPlainDepth = 16

type plain struct {
	b []byte
	i int
}

func (p *plain) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value reads one value at p.i (white space before it already read).
func (p *plain) value(depth int) bool {
	if p.i >= len(p.b) || depth > maxPlainDepth {
		return false
	}
	switch c := p.b[p.i]; {
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
func (p *plain) container(depth int, end byte, members bool) bool {
	p.i++
	p.space()
	if p.i < len(p.b) && p.b[p.i] == end {
		p.i++
		return true
	}
	for {
		if members {
			if p.i >= len(p.b) || p.b[p.i] != '"' || !p.str() {
				return false
			}
			p.space()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return false
			}
			p.i++
			p.space()
		}
		if !p.value(depth + 1) {
			return false
		}
		p.space()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
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

// str reads a string: no control character (JSON forbids them), and of
// the escapes only the one-letter ones.
func (p *plain) str() bool {
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(p.b) {
				return false
			}
			switch p.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			default:
				return false // \u, or not an escape: json.Valid decides
			}
		}
	}
	return false
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (p *plain) number() bool {
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i >= len(p.b):
		return false
	case p.b[p.i] == '0':
		p.i++
	case '1' <= p.b[p.i] && p.b[p.i] <= '9':
		p.digits()
	default:
		return false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if !p.digits() {
			return false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more digits.
func (p *plain) digits() bool {
	start := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

func (p *plain) literal(lit string) bool {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		return false
	}
	p.i += len(lit)
	return true
}
