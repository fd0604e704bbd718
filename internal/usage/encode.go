package usage

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Errors of appendJSON, for the values json.Marshal refuses too.
var (
	errFloat = errors.New("usage: encode: ttfb_ms or duration_ms is NaN or infinite")
	errTime  = errors.New("usage: encode: started_at has a year outside [0,9999] or a zone offset of 24 hours or more")
	errRaw   = errors.New("usage: encode: provider_usage is not JSON (use nil, not empty, for null)")
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
// valid reports that e is valid: [usageevent.Event.Validate] accepts it
// (FuzzVouched and TestVouchedGenerated hold it to Validate). The checks
// ride along the encoding, in the cheap form that the node's own events
// take (ids and names in printable ASCII, provider_usage of the plain
// kind, known enum values), so that the Recorder need not validate what
// the node built: Validate cost ~5.5k instructions an event, mostly a
// second pass over provider_usage. false says only that these checks
// could not tell: the caller must then ask Validate, and use the bytes only
// if it accepts e.
//
// Beyond that it fails where json.Marshal fails: a NaN or infinite float,
// a time that RFC 3339 cannot represent, a provider_usage that is not
// JSON. On error dst is returned with its
// original length. A nil e encodes as null.
func appendJSON(dst []byte, e *usageevent.Event) (out []byte, valid bool, err error) {
	if e == nil {
		return append(dst, "null"...), false, nil
	}
	if !finite(e.TTFBMs) || !finite(e.DurationMs) {
		return dst, false, errFloat
	}
	// unsure: a check failed, so Validate must decide.
	unsure := !vouchScalars(e)
	b := dst
	b = append(b, `{"event_id":`...)
	if canonicalUUID(e.EventID) {
		b = appendQuoted(b, e.EventID)
	} else {
		unsure = true
		b = appendString(b, e.EventID)
	}
	b = append(b, `,"schema":`...)
	b = strconv.AppendInt(b, int64(e.Schema), 10)
	b = append(b, `,"authoritative":`...)
	b = strconv.AppendBool(b, e.Authoritative)
	b = append(b, `,"node_id":`...)
	b = appendName(b, e.NodeID, &unsure)
	b = append(b, `,"request_id":`...)
	b = appendName(b, e.RequestID, &unsure)
	b = append(b, `,"tenant_id":`...)
	b = appendName(b, e.TenantID, &unsure)
	b = append(b, `,"key_id":`...)
	b = appendName(b, e.KeyID, &unsure)
	b = append(b, `,"public_model":`...)
	b = appendName(b, e.PublicModel, &unsure)
	if e.ModelPattern != "" {
		b = append(b, `,"model_pattern":`...)
		b = appendName(b, e.ModelPattern, &unsure)
	}
	if e.ServedModel != "" {
		b = append(b, `,"served_model":`...)
		b = appendName(b, e.ServedModel, &unsure)
	}
	b = append(b, `,"provider_model":`...)
	b = appendName(b, e.ProviderModel, &unsure)
	b = append(b, `,"backend":`...)
	b = appendName(b, e.Backend, &unsure)
	b = append(b, `,"protocol":`...)
	b, _ = appendWord(b, e.Protocol, '_') // vouchScalars checked it
	if e.Endpoint != "" {
		b = append(b, `,"endpoint":`...)
		b = appendWordSure(b, e.Endpoint, '_', &unsure)
	}
	if e.Platform != "" {
		b = append(b, `,"platform":`...)
		b = appendWordSure(b, e.Platform, '_', &unsure)
	}
	if e.Region != "" {
		b = append(b, `,"region":`...)
		b = appendWordSure(b, e.Region, '-', &unsure)
	}
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, e.Stream)
	if e.Placement != "" {
		b = append(b, `,"placement":`...)
		b, _ = appendWord(b, e.Placement, '_') // any string is valid here
	}
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	b = append(b, `,"send_state":`...)
	b, _ = appendWord(b, e.SendState, '_') // vouchScalars checked it
	b = append(b, `,"failure_stage":`...)
	if e.FailureStage == "" {
		b = append(b, `""`...)
	} else {
		b, _ = appendWord(b, e.FailureStage, '_') // vouchScalars checked it
	}
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
		return dst, false, errTime
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
		return dst, false, errRaw
	default:
		// Usage needs a provider_usage that is an object, and the plain
		// kind is vouched for by its one pass; anything else (null,
		// \u escapes, deep nesting, not JSON) Validate decides.
		var plain bool
		if b, plain = usageevent.AppendProviderUsage(b, e.ProviderUsage); !plain {
			// json.Marshal refuses what is not JSON, and so must this:
			// Validate passes provider_usage of white space only, as
			// absent, which appendCompactHTML would write as nothing.
			if !json.Valid(e.ProviderUsage) {
				return dst, false, errRaw
			}
			unsure = true
			b = appendCompactHTML(b, e.ProviderUsage)
		}
	}
	if c := e.Cost; c != nil {
		b = append(b, `,"cost":{"usd":`...)
		if canonicalUSD(c.USD) {
			b = appendQuoted(b, c.USD)
		} else {
			unsure = true
			b = appendString(b, c.USD)
		}
		b = append(b, `,"price_version":`...)
		b = strconv.AppendUint(b, c.PriceVersion, 10)
		b = append(b, `,"estimated":`...)
		b = strconv.AppendBool(b, c.Estimated)
		b = append(b, '}')
	}
	return append(b, '}'), !unsure, nil
}

// appendName appends an id or name as appendString does, and sets
// *unsure unless it is 1 to usageevent.MaxStringLength bytes of printable
// ASCII that JSON copies as it is (not " \\ < > &): what Validate's rule
// for ids and names (no control characters, at most MaxStringLength
// characters) accepts. One loop does both, as appendString's first would.
func appendName(b []byte, s string, unsure *bool) []byte {
	n := 0
	for n < len(s) && plainName[s[n]] {
		n++
	}
	if n == 0 || n < len(s) || n > usageevent.MaxStringLength {
		*unsure = true
		return appendString(b, s)
	}
	return appendQuoted(b, s)
}

// plainName marks the bytes name vouches for: htmlSafe without DEL, a
// control character to Validate.
var plainName = func() (t [256]bool) {
	t = htmlSafe
	t[0x7f] = false
	return t
}()

// vouchScalars reports whether e's members that appendJSON writes without
// looking at their bytes are valid, as Validate says (its rules in its
// order; the strings' rules are checked as they are written). Enum values
// are matched against the constants a node writes: a value known to
// Validate but not listed here is not vouched for, and Validate decides.
func vouchScalars(e *usageevent.Event) bool {
	if e.Schema != usageevent.Schema || e.Authoritative || e.StartedAt.IsZero() {
		return false
	}
	switch e.Protocol {
	case usageevent.ProtocolOpenAI, usageevent.ProtocolAnthropic, usageevent.ProtocolGemini, usageevent.ProtocolBedrockConverse:
	default:
		return false
	}
	if e.Attempt < 1 || e.Attempt > usageevent.MaxAttempt {
		return false
	}
	switch e.SendState {
	case usageevent.SendResponseReceived:
		if e.FailureStage != "" && !isWord(e.FailureStage, '_') {
			return false
		}
	case usageevent.SendDefinitelyNotSent, usageevent.SendPossiblySent:
		// No response: a failure, and nothing read from an answer.
		if !isWord(e.FailureStage, '_') || e.ResponseBytes != 0 || e.TTFBMs != 0 || e.Usage != nil {
			return false
		}
	default:
		return false
	}
	if e.HTTPStatus != 0 && (e.HTTPStatus < 100 || e.HTTPStatus > 599) {
		return false
	}
	// Finite: appendJSON checked.
	if e.RequestBytes < 0 || e.ResponseBytes < 0 || e.TTFBMs < 0 || e.DurationMs < 0 {
		return false
	}
	// Usage is vouched for with a provider_usage (its object checked as it
	// is written), none without.
	if u := e.Usage; u == nil {
		if e.ProviderUsage != nil {
			return false
		}
	} else if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 || u.ReasoningTokens < 0 ||
		u.CacheReadTokens > u.InputTokens || u.CacheWriteTokens > u.InputTokens-u.CacheReadTokens ||
		u.ReasoningTokens > u.OutputTokens || e.ProviderUsage == nil {
		return false
	}
	return e.Cost == nil || !e.Cost.Estimated || e.Usage == nil
}

// appendQuoted appends s in quotes as it is: s holds nothing JSON
// escapes (the caller checked).
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendWord appends s as appendString does, and reports whether s is a
// word (isWord), which it then appends as it is: most of an event's
// strings are enum values, and appendString's work per string is the
// larger part of what a short one costs.
func appendWord(b []byte, s string, sep byte) ([]byte, bool) {
	if !isWord(s, sep) {
		return appendString(b, s), false
	}
	return appendQuoted(b, s), true
}

// appendWordSure is appendWord for a member whose rule is isWord: it sets
// *unsure when s is not a word.
func appendWordSure(b []byte, s string, sep byte, unsure *bool) []byte {
	b, ok := appendWord(b, s, sep)
	if !ok {
		*unsure = true
	}
	return b
}

// canonicalUUID reports whether s is 8-4-4-4-12 lowercase hex digits.
func canonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// isWord reports whether s is 1-64 of [a-z0-9] and sep, starting with a
// letter: failure stages, endpoints and platforms (sep '_'), regions
// (sep '-').
func isWord(s string, sep byte) bool {
	if len(s) == 0 || len(s) > usageevent.MaxStageLength || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == sep) {
			return false
		}
	}
	return true
}

// canonicalUSD reports whether s is a cost as usd.Amount.String writes
// one below a million dollars: 0 or a whole part without a leading zero,
// and at most 12 digits after a point, the last not 0. Validate accepts
// up to usd.Max (~9.2 million); larger costs it decides.
func canonicalUSD(s string) bool {
	whole, frac, point := strings.Cut(s, ".")
	if len(whole) == 0 || len(whole) > 6 || len(whole) > 1 && whole[0] == '0' || !digits(whole) {
		return false
	}
	return !point || len(frac) > 0 && len(frac) <= 12 && frac[len(frac)-1] != '0' && digits(frac)
}

func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// appendFloat formats f as encoding/json's floatEncoder does for float64:
// like ES6 Number.prototype.toString (go.dev/issue/6384, go.dev/issue/14135),
// plain decimals from 1e-6 up to 1e21, exponents outside, exponents not
// padded. f must be finite.
func appendFloat(b []byte, f float64) []byte {
	// Milliseconds to the microsecond (ms), below a million seconds,
	// in a few instructions instead of strconv's shortest-digits search
	// (~600 an event each). n/1000 is then the shortest decimal that
	// reads back as f: it does (f is the float nearest to it), and every
	// other decimal of as few digits or fewer is at least 0.001 away,
	// where floats below 1e9 lie less than 1.2e-7 apart.
	if n := int64(math.Round(f * 1000)); f >= 0.001 && f < 1e9 && float64(n)/1000 == f {
		b = strconv.AppendInt(b, n/1000, 10)
		if frac := n % 1000; frac != 0 {
			b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
			for b[len(b)-1] == '0' {
				b = b[:len(b)-1]
			}
		}
		return b
	}
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
