package usageevent

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// Errors of [Event.AppendJSON], for the values json.Marshal refuses too.
var (
	errFloat = errors.New("usageevent: encode: ttfb_ms or duration_ms is NaN or infinite")
	errTime  = errors.New("usageevent: encode: started_at has a year outside [0,9999] or a zone offset of 24 hours or more")
	errRaw   = errors.New("usageevent: encode: provider_usage is not valid JSON (use nil, not empty, for null)")
)

// AppendJSON appends the JSON encoding of e to dst and returns the extended
// buffer. It writes exactly the bytes json.Marshal(e) writes (members in
// declaration order, encoding/json's HTML-safe string escaping, its float
// format, started_at as [time.Time.MarshalJSON], provider_usage validated
// and compacted), without reflection: it is what a node uses to encode
// every event, and tests hold it to json.Marshal on generated events.
//
// It fails where json.Marshal fails: a NaN or infinite float, a time that
// RFC 3339 cannot represent, provider_usage that is not valid JSON. On
// error dst is returned with its original length. A nil e encodes as null.
//
// AppendJSON does not validate the event's meaning; see [Event.Validate].
func (e *Event) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	if !finite(e.TTFBMs) || !finite(e.DurationMs) {
		return dst, errFloat
	}
	b := append(dst, `{"event_id":`...)
	b = appendString(b, e.EventID)
	b = append(b, `,"schema":`...)
	b = strconv.AppendInt(b, int64(e.Schema), 10)
	b = append(b, `,"authoritative":`...)
	b = strconv.AppendBool(b, e.Authoritative)
	b = append(b, `,"node_id":`...)
	b = appendString(b, e.NodeID)
	b = append(b, `,"request_id":`...)
	b = appendString(b, e.RequestID)
	b = append(b, `,"tenant_id":`...)
	b = appendString(b, e.TenantID)
	b = append(b, `,"key_id":`...)
	b = appendString(b, e.KeyID)
	b = append(b, `,"public_model":`...)
	b = appendString(b, e.PublicModel)
	b = append(b, `,"provider_model":`...)
	b = appendString(b, e.ProviderModel)
	b = append(b, `,"backend":`...)
	b = appendString(b, e.Backend)
	b = append(b, `,"protocol":`...)
	b = appendString(b, e.Protocol)
	if e.Endpoint != "" {
		b = append(b, `,"endpoint":`...)
		b = appendString(b, e.Endpoint)
	}
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, e.Stream)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	b = append(b, `,"send_state":`...)
	b = appendString(b, e.SendState)
	b = append(b, `,"failure_stage":`...)
	b = appendString(b, e.FailureStage)
	b = append(b, `,"http_status":`...)
	b = strconv.AppendInt(b, int64(e.HTTPStatus), 10)
	b = append(b, `,"request_bytes":`...)
	b = strconv.AppendInt(b, e.RequestBytes, 10)
	b = append(b, `,"response_bytes":`...)
	b = strconv.AppendInt(b, e.ResponseBytes, 10)
	b = append(b, `,"ttfb_ms":`...)
	b = appendFloat(b, e.TTFBMs)
	b = append(b, `,"duration_ms":`...)
	b = appendFloat(b, e.DurationMs)
	b = append(b, `,"started_at":"`...)
	// AppendText is MarshalJSON without the quotes: RFC 3339 with
	// nanoseconds, refusing what RFC 3339 cannot say (go.dev/issue/4556).
	// Its output needs no escaping. On error it returns nil.
	t, err := e.StartedAt.AppendText(b)
	if err != nil {
		return dst, errTime
	}
	b = append(t, `","usage":`...)
	if u := e.Usage; u == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"input_tokens":`...)
		b = strconv.AppendInt(b, u.InputTokens, 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, u.OutputTokens, 10)
		b = append(b, `,"cache_read_tokens":`...)
		b = strconv.AppendInt(b, u.CacheReadTokens, 10)
		b = append(b, `,"cache_write_tokens":`...)
		b = strconv.AppendInt(b, u.CacheWriteTokens, 10)
		b = append(b, `,"reasoning_tokens":`...)
		b = strconv.AppendInt(b, u.ReasoningTokens, 10)
		b = append(b, '}')
	}
	b = append(b, `,"provider_usage":`...)
	// json.RawMessage.MarshalJSON gives "null" for nil and the bytes as
	// they are otherwise (so empty is invalid JSON, and an error).
	if e.ProviderUsage == nil {
		b = append(b, "null"...)
	} else {
		if !validJSON(e.ProviderUsage) {
			return dst, errRaw
		}
		b = appendCompactHTML(b, e.ProviderUsage)
	}
	return append(b, '}'), nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// appendFloat formats f as encoding/json's floatEncoder does for float64:
// like ES6 Number.prototype.toString (go.dev/issue/6384, go.dev/issue/14135),
// plain decimals from 1e-6 up to 1e21, exponents outside, exponents not
// padded. f must be finite.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// htmlSafe reports the ASCII bytes that encoding/json (with HTML escaping,
// its default) copies into a string unchanged: printable, DEL included,
// except " \ < > &.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s as a JSON string the way encoding/json does by
// default: \" \\ \b \f \n \r \t, other controls and < > & as \u00XX,
// U+2028 and U+2029 escaped (JSONP safety), each byte of invalid UTF-8
// replaced by \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// rawSpecial marks the bytes appendCompactHTML looks at: string
// delimiters and escapes, white space, and what HTML escaping changes
// (0xE2 starts U+2028 and U+2029). Everything else is copied in runs.
var rawSpecial = func() (t [256]bool) {
	for _, c := range []byte("\"\\ \t\n\r<>&\xe2") {
		t[c] = true
	}
	return t
}()

// appendCompactHTML appends src, which must be valid JSON, with the white
// space between tokens dropped and < > & U+2028 U+2029 escaped: what
// encoding/json does to a Marshaler's output (appendCompact with escaping).
// Like encoding/json it copies everything else inside strings as it is,
// invalid UTF-8 included.
func appendCompactHTML(b, src []byte) []byte {
	start := 0
	inString := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if !rawSpecial[c] {
			continue
		}
		switch {
		case c == '<' || c == '>' || c == '&':
			b = append(b, src[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
		case c == 0xE2:
			if i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8 {
				b = append(b, src[start:i]...)
				b = append(b, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
				i += 2
				start = i + 1
			}
		case c == '"':
			inString = !inString
		case c == '\\':
			// Only inside strings in valid JSON; the escaped byte is
			// never white space, < > & or 0xE2, so skipping it is safe.
			i++
		case !inString: // white space
			b = append(b, src[start:i]...)
			start = i + 1
		}
	}
	return append(b, src[start:]...)
}

// maxDepth is encoding/json's nesting limit (its scanner's
// maxNestingDepth): more nested arrays and objects are an error.
const maxDepth = 10000

// validJSON reports whether src is exactly one JSON value with optional
// white space around it: json.Valid, without its byte-at-a-time state
// machine (it took two thirds of AppendJSON). Like encoding/json it lets
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
