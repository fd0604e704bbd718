package logline

import (
	"context"
	"log/slog"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// LogAttrs writes a line as lg.LogAttrs(ctx, level, msg, attrs...) does.
//
// When lg's handler is a *Handler (one from NewHandler, without
// attributes or groups added) and every attribute is a string, a number,
// a bool or a duration with a key, it writes the line's bytes itself:
// the bytes slog writes for the same line (TestLogAttrsSameBytes,
// FuzzLogAttrsSameBytes), at a fraction of the instructions, because it
// builds no slog.Record, asks the runtime for no caller, calls no
// ReplaceAttr per attribute and encodes no float with encoding/json.
// Any other line is slog's.
func LogAttrs(ctx context.Context, lg *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	if h, ok := lg.Handler().(*Handler); ok && h.Enabled(ctx, level) && h.write(level, msg, attrs) {
		return
	}
	lg.LogAttrs(ctx, level, msg, attrs...)
}

// maxPooledLine is the largest line buffer kept for reuse, as slog's own
// buffer pool does, so that one huge line does not pin its memory.
const maxPooledLine = 16 << 10

// write writes the line as slog's JSON handler with replaceAttr would,
// and reports false, having written nothing, for a line it leaves to
// slog.
func (h *Handler) write(level slog.Level, msg string, attrs []slog.Attr) bool {
	t := h.now()
	st := h.stampOf(t)
	if st == nil {
		return false // slog writes an error in place of the time
	}
	bp, _ := h.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 0, 1024)
		bp = &b
	}
	defer func() {
		if cap(*bp) <= maxPooledLine {
			h.bufs.Put(bp)
		}
	}()

	// The built-in attributes, in slog's order: time, level, msg.
	b := append((*bp)[:0], `{"time":"`...)
	b = st.append(b, t.Nanosecond()) // t.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":`...)
	b = appendJSONString(b, level.String())
	b = append(b, `,"msg":`...)
	b = appendString(b, msg)
	for _, a := range attrs {
		if a.Key == "" {
			return false // slog leaves out an empty attribute
		}
		b = append(b, ',')
		b = appendJSONString(b, a.Key) // keys are not replaceAttr's
		b = append(b, ':')
		v := a.Value
		switch v.Kind() {
		case slog.KindString:
			b = appendString(b, v.String())
		case slog.KindInt64:
			b = strconv.AppendInt(b, v.Int64(), 10)
		case slog.KindUint64:
			b = strconv.AppendUint(b, v.Uint64(), 10)
		case slog.KindFloat64:
			f := v.Float64()
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return false // slog writes encoding/json's error
			}
			b = appendFloat(b, f)
		case slog.KindBool:
			b = strconv.AppendBool(b, v.Bool())
		case slog.KindDuration:
			b = appendJSONString(b, v.Duration().String()) // as replaceAttr writes it
		default:
			return false // times, groups, values of any type: slog's
		}
	}
	b = append(b, '}', '\n')
	*bp = b
	_, _ = h.out.Write(b) // as slog's handler, a failed write loses the line
	return true
}

// stamp is a line's time up to its second, in RFC 3339 as slog writes it
// (time.RFC3339Nano): the part before the fraction and the zone after
// it. The lines of one second share it.
type stamp struct {
	sec  int64 // Unix seconds
	loc  *time.Location
	head []byte // "2006-01-02T15:04:05"
	zone []byte // "Z" or "-07:00"
}

// stampOf returns the stamp of t's second, formatting it when t is in
// another second (or zone) than the last line's; nil for a year slog
// does not write (outside 0 to 9999).
func (h *Handler) stampOf(t time.Time) *stamp {
	sec, loc := t.Unix(), t.Location()
	if st := h.stamp.Load(); st != nil && st.sec == sec && st.loc == loc {
		return st
	}
	if y := t.Year(); y < 0 || y >= 10000 {
		return nil
	}
	st := &stamp{sec: sec, loc: loc, head: t.AppendFormat(nil, "2006-01-02T15:04:05"), zone: t.AppendFormat(nil, "Z07:00")}
	h.stamp.Store(st)
	return st
}

// append appends the time of the stamp's second at ns nanoseconds:
// the fraction as RFC3339Nano writes it, without trailing zeros (none
// for a whole second).
func (st *stamp) append(b []byte, ns int) []byte {
	b = append(b, st.head...)
	if ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i > 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, st.zone...)
}

// appendString appends the string value s as replaceAttr and slog's JSON
// handler write it: the reordering controls as \uXXXX text, then quoted.
func appendString(b []byte, s string) []byte {
	i := plainPrefix(s)
	if i == len(s) {
		// Plain ASCII (most values): no reordering control, no escape.
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	if mayReorder(s[i:]) && strings.ContainsFunc(s[i:], reorders) {
		return appendJSONString(b, escapeReordering(s))
	}
	return appendEscaped(b, s, i)
}

// appendJSONString appends s quoted and escaped as slog's JSON handler
// escapes: no HTML escaping, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped.
func appendJSONString(b []byte, s string) []byte {
	i := plainPrefix(s)
	if i == len(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	return appendEscaped(b, s, i)
}

// plainPrefix returns the length of the longest prefix of s that is
// plain ASCII (safe), eight bytes at a time: a plain string of eight
// bytes or more costs one test per eight bytes, its last eight bytes
// tested last (again, in part).
func plainPrefix(s string) int {
	if len(s) < 8 {
		return plainBytes(s, 0)
	}
	for i := 0; ; i += 8 {
		if i+8 > len(s) {
			i = len(s) - 8 // the bytes before i are plain
		}
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if m := special8(x); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		if i+8 == len(s) {
			return len(s)
		}
	}
}

// plainBytes returns the end of the plain ASCII bytes of s from i, one
// byte at a time.
func plainBytes(s string, i int) int {
	for i < len(s) && s[i] < utf8.RuneSelf && safe[s[i]] {
		i++
	}
	return i
}

// appendEscaped is appendJSONString for s whose first i bytes are plain.
func appendEscaped(b []byte, s string, i int) []byte {
	b = append(b, '"')
	start := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
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
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
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

const hex = "0123456789abcdef"

// special8 marks the bytes of the little-endian word x that are not
// plain ASCII (below 0x20, a quote, a backslash, from 0x80 up) with
// their high bit. Each test is the classic "has a byte less than n" on
// the word or on the word xor a byte; a borrow can mark a byte above a
// marked one, never below, so the lowest mark is the first byte that is
// not plain.
func special8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	lt := x - 0x20*ones             // a byte below 0x20
	quote := (x ^ '"'*ones) - ones  // a '"' (xor leaves a zero byte)
	slash := (x ^ '\\'*ones) - ones // a '\\'
	return ((lt|quote|slash)&^x | x) & highs
}

// safe marks the ASCII bytes a JSON string holds as they are: all but the
// controls, the quote and the backslash.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

// appendFloat appends the finite f as encoding/json writes a float64
// (which is what slog's JSON handler calls): the shortest decimal that
// reads back as f, in exponent form below 1e-6 and from 1e21, with the
// exponent's leading zero dropped ("1e-7", not "1e-07").
func appendFloat(b []byte, f float64) []byte {
	if b, ok := appendMillis(b, f); ok {
		return b
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendMillis appends f when it is n/1000 for a whole n from 0 to
// 10^15 (the durations of a request line: microseconds in
// milliseconds), as the digits of n with the point three places from
// the end and trailing zeros dropped. That is what strconv writes, at a
// tenth of the work: f is the float64 nearest to the decimal n/1000, and
// that decimal has at most 15 significant digits, so no other decimal
// as short rounds to f (any 15 digits survive a trip through a float64).
func appendMillis(b []byte, f float64) ([]byte, bool) {
	if !(f > 0 && f < 1e12) {
		return b, false
	}
	n := int64(math.Round(f * 1000))
	if float64(n)/1000 != f {
		return b, false
	}
	b = strconv.AppendInt(b, n/1000, 10)
	frac := n % 1000
	if frac == 0 {
		return b, true
	}
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	for b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	return b, true
}

var _ slog.Handler = (*Handler)(nil)
