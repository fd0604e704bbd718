package usageevent

// maxDepth is encoding/json's nesting limit (its scanner's
// maxNestingDepth): more nested arrays and objects are an error.
const maxDepth = 10000

// validJSON reports whether src is exactly one JSON value with optional
// white space around it: json.Valid, without its byte-at-a-time state
// machine (it took two thirds of encoding an event). Like encoding/json it lets
// any byte from 0x20 up, invalid UTF-8 included, through in strings.
func validJSON(src []byte) bool {
	i, ok := skipValue(src, skipSpace(src, 0), 0)
	return ok && skipSpace(src, i) == len(src)
}

func skipSpace(s []byte, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the value that starts at s[i],
// and whether there is a valid one; depth counts the enclosing arrays and
// objects.
func skipValue(s []byte, i, depth int) (int, bool) {
	if i >= len(s) {
		return i, false
	}
	switch c := s[i]; {
	case c == '{':
		if depth++; depth > maxDepth {
			return i, false
		}
		if i = skipSpace(s, i+1); i < len(s) && s[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(s) || s[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = skipString(s, i); !ok {
				return i, false
			}
			if i = skipSpace(s, i); i >= len(s) || s[i] != ':' {
				return i, false
			}
			if i, ok = skipValue(s, skipSpace(s, i+1), depth); !ok {
				return i, false
			}
			if i = skipSpace(s, i); i >= len(s) {
				return i, false
			}
			switch s[i] {
			case ',':
				i = skipSpace(s, i+1)
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		if depth++; depth > maxDepth {
			return i, false
		}
		if i = skipSpace(s, i+1); i < len(s) && s[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = skipValue(s, i, depth); !ok {
				return i, false
			}
			if i = skipSpace(s, i); i >= len(s) {
				return i, false
			}
			switch s[i] {
			case ',':
				i = skipSpace(s, i+1)
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '"':
		return skipString(s, i)
	case c == 't':
		return skipLiteral(s, i, "true")
	case c == 'f':
		return skipLiteral(s, i, "false")
	case c == 'n':
		return skipLiteral(s, i, "null")
	case c == '-' || '0' <= c && c <= '9':
		return skipNumber(s, i)
	}
	return i, false
}

func skipLiteral(s []byte, i int, lit string) (int, bool) {
	if len(s)-i < len(lit) || string(s[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// skipString skips the string whose opening quote is s[i].
func skipString(s []byte, i int) (int, bool) {
	for i++; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(s) {
				return i, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(s)-i < 6 || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) || !isHex(s[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			i++
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipNumber skips -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? at s[i].
func skipNumber(s []byte, i int) (int, bool) {
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = skipDigits(s, i+1)
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(s []byte, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}
