package usage

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Errors of appendJSON, for the values json.Marshal refuses too.
var (
	errFloat = errors.New("usage: encode: ttfb_ms or duration_ms is NaN or infinite")
	errTime  = errors.New("usage: encode: started_at has a year outside [0,9999] or a zone offset of 24 hours or more")
	errRaw   = errors.New("usage: encode: provider_usage is empty (use nil, not empty, for null)")
)

// appendJSON appends the JSON encoding of e to dst and returns the
// extended buffer: the node's encoder of usage events (the contract
// package, pkg/usageevent, only describes, decodes and validates them).
// json.Marshal costs an event ~5 µs of reflection and two allocations on
// the request path, the largest part of what recording an event costs
// there (docs/performance.md "Usage delivery"). It
// writes exactly the bytes json.Marshal(e) writes (members in declaration
// order, encoding/json's HTML-safe string escaping, its float format,
// started_at as [time.Time.MarshalJSON], provider_usage compacted),
// without reflection; tests hold it to json.Marshal on generated events.
//
// e must have passed [usageevent.Event.Validate], as every event the
// Recorder encodes has: its provider_usage, when set, is then a valid JSON
// object, which appendJSON compacts without checking it again. Beyond
// that it fails where json.Marshal fails: a NaN or infinite float, a time
// that RFC 3339 cannot represent. On error dst is returned with its
// original length. A nil e encodes as null.
func appendJSON(dst []byte, e *usageevent.Event) ([]byte, error) {
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
	if e.ModelPattern != "" {
		b = append(b, `,"model_pattern":`...)
		b = appendString(b, e.ModelPattern)
	}
	if e.ServedModel != "" {
		b = append(b, `,"served_model":`...)
		b = appendString(b, e.ServedModel)
	}
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
	if e.Platform != "" {
		b = append(b, `,"platform":`...)
		b = appendString(b, e.Platform)
	}
	if e.Region != "" {
		b = append(b, `,"region":`...)
		b = appendString(b, e.Region)
	}
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, e.Stream)
	if e.Placement != "" {
		b = append(b, `,"placement":`...)
		b = appendString(b, e.Placement)
	}
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
	switch {
	case e.ProviderUsage == nil:
		b = append(b, "null"...)
	case len(e.ProviderUsage) == 0:
		return dst, errRaw
	default:
		b = appendCompactHTML(b, e.ProviderUsage) // valid: Validate checked it
	}
	if c := e.Cost; c != nil {
		b = append(b, `,"cost":{"usd":`...)
		b = appendString(b, c.USD)
		b = append(b, `,"price_version":`...)
		b = strconv.AppendUint(b, c.PriceVersion, 10)
		b = append(b, `,"estimated":`...)
		b = strconv.AppendBool(b, c.Estimated)
		b = append(b, '}')
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
// except " \ < > &. Every byte indexes it (those above ASCII are false), so
// appendString's scan over a run of them needs no other test.
var htmlSafe = func() (t [256]bool) {
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
		// The run of bytes copied as they are, in a loop of its own: ids
		// and names are nothing else, and a byte costs ~7 instructions
		// here against ~14 in the loop below.
		rest, n := s[i:], 0
		for n < len(rest) && htmlSafe[rest[n]] {
			n++
		}
		if i += n; i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
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
