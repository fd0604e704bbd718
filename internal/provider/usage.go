package provider

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// What the provider packages share to read token usage (docs/usage-events.md
// "Token usage"). One convention for every provider (pkg/usageevent.Usage):
// InputTokens is the total input, cache reads and writes included; cache
// reads and writes are parts of it and ReasoningTokens is part of
// OutputTokens. Nothing is counted twice. Each provider package maps its
// own usage object onto it.
//
// A count that is absent, null, negative or not an integer reads as 0
// (integral floats such as 12.0 are accepted). A part larger than its whole
// (cached tokens above the prompt's) is clamped to the whole by [Clamp], so
// every event validates; the provider's own numbers stay in the raw object.

// MaxRawUsageBytes bounds a provider usage object the node keeps. A larger
// one is ignored as if the provider had reported no usage: it would push
// the event past the MQTT payload limit, and no real provider sends one
// (theirs are a few hundred bytes).
const MaxRawUsageBytes = 16 << 10

// Clamp enforces the subset rules of usageevent.Usage on provider numbers
// that break them.
func Clamp(u usageevent.Usage) usageevent.Usage {
	u.CacheReadTokens = min(u.CacheReadTokens, u.InputTokens)
	u.CacheWriteTokens = min(u.CacheWriteTokens, u.InputTokens-u.CacheReadTokens)
	u.ReasoningTokens = min(u.ReasoningTokens, u.OutputTokens)
	return u
}

// AddSat adds two non-negative counts, saturating at math.MaxInt64.
func AddSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Lookup4 returns, for each of keys, what jsonedit.Lookup(obj, key) returns
// (the value of the last top-level member of that name, nil when there is
// none), in one pass over obj instead of one per key; all nil when obj is
// malformed, where every Lookup fails.
func Lookup4(obj []byte, keys [4]string) (vals [4][]byte) {
	it, err := jsonedit.Members(obj)
	if err != nil {
		return vals
	}
	for {
		m, ok, err := it.Next()
		if err != nil {
			return [4][]byte{}
		}
		if !ok {
			return vals
		}
		// A key that starts with a plain ASCII byte (no escape) is only
		// one of keys that start with that byte: most members cost a
		// byte comparison per key instead of a key comparison.
		c := byte('\\')
		if len(m.RawKey) > 0 {
			c = m.RawKey[0]
		}
		for i, k := range keys {
			if c < utf8.RuneSelf && c != '\\' && (len(k) == 0 || k[0] != c) {
				continue
			}
			if m.KeyIs(k) {
				vals[i] = m.Value
			}
		}
	}
}

// Inner returns the count at the top-level member key of raw, 0 when raw is
// not an object (absent, null) or has no such count.
func Inner(raw []byte, key string) int64 {
	if !Object(raw) {
		return 0
	}
	v, ok, err := jsonedit.Lookup(raw, key)
	if err != nil || !ok {
		return 0
	}
	return Count(v)
}

// Count reads a JSON number that is a non-negative integer. Some
// OpenAI-compatible servers write counts as floats ("12.0"); those are
// accepted when integral. Anything else is 0.
func Count(raw []byte) int64 {
	var n int64
	digits := true
	for _, c := range raw {
		if c < '0' || c > '9' {
			digits = false
			break
		}
		if n > (math.MaxInt64-int64(c-'0'))/10 {
			return math.MaxInt64 // saturate: JSON allows any size
		}
		n = n*10 + int64(c-'0')
	}
	if digits && len(raw) > 0 {
		return n
	}
	if len(raw) == 0 || raw[0] == '-' || raw[0] == '"' {
		return 0
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	switch {
	case err != nil || f != math.Trunc(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(f)
}

// Usable reports whether raw is a usage object worth keeping: an object of
// at most MaxRawUsageBytes.
func Usable(raw []byte) bool { return Object(raw) && len(raw) <= MaxRawUsageBytes }

// A UsageForm says how to read a provider's usage object: which of its
// members hold counts, and how the counts make the normalized usage.
type UsageForm struct {
	// Names are the members whose values are the counts, in the order
	// Normalize takes them; "" is no member. When Inner[i] is set, the
	// member Names[i] is an object and the count is its member Inner[i]
	// (0 when it is not an object). As with jsonedit.Lookup, the last
	// member of a name counts, and one that is absent counts 0 (see Count).
	Names, Inner [5]string
	// Normalize maps the counts onto the normalized usage.
	Normalize func(c [5]int64) usageevent.Usage
}

// Read returns the normalized usage of raw, a usage object; all counts
// are 0 when raw is not a valid object.
func (f *UsageForm) Read(raw []byte) usageevent.Usage {
	var c [5]int64
	if it, err := jsonedit.Members(raw); err == nil {
		if f.counts(&it, &c) != nil {
			c = [5]int64{}
		}
	}
	return f.Normalize(c)
}

// counts reads the counts of f from the members of a usage object, one
// pass over them: a member that is an object of counts is read as the
// walk finds it, never looked up again.
func (f *UsageForm) counts(it *jsonedit.Iter, c *[5]int64) error {
	for {
		m, ok, err := it.NextKey()
		if err != nil || !ok {
			return err
		}
		i := f.index(m)
		if i < 0 {
			if _, err := it.Value(); err != nil {
				return err
			}
			continue
		}
		inner := f.Inner[i]
		if inner == "" {
			v, err := it.Value()
			if err != nil {
				return err
			}
			c[i] = Count(v)
			continue
		}
		obj, ok := it.Object()
		if !ok {
			if _, err := it.Value(); err != nil {
				return err
			}
			c[i] = 0
			continue
		}
		n, err := innerCount(&obj, inner)
		if err != nil {
			return err
		}
		if _, err := it.Leave(&obj); err != nil {
			return err
		}
		c[i] = n
	}
}

// index returns the i of f.Names[i] that is m's name, -1 when there is
// none. A name that starts with a plain ASCII byte (no escape) is only
// one of the names that start with that byte, as in Lookup4.
func (f *UsageForm) index(m jsonedit.Member) int {
	c := byte('\\')
	if len(m.RawKey) > 0 {
		c = m.RawKey[0]
	}
	for i, k := range f.Names {
		if k == "" || (c < utf8.RuneSelf && c != '\\' && k[0] != c) {
			continue
		}
		if m.KeyIs(k) {
			return i
		}
	}
	return -1
}

// innerCount reads the count of the last member named key of an object,
// the members of which it iterates over.
func innerCount(it *jsonedit.Iter, key string) (int64, error) {
	var n int64
	for {
		m, ok, err := it.Next()
		if err != nil || !ok {
			return n, err
		}
		if m.KeyIs(key) {
			n = Count(m.Value)
		}
	}
}

// FindUsage reads the usage object that is the last top-level member
// named key of doc in one pass: the normalized counts, the object (raw
// aliases doc), and true; or false when there is none, it is not
// [Usable], or doc is malformed. It is what jsonedit.Lookup(doc, key)
// followed by f.Read finds, without walking the object twice.
func FindUsage(doc []byte, key string, f *UsageForm) (u usageevent.Usage, raw []byte, ok bool) {
	it, err := jsonedit.Members(doc)
	if err != nil {
		return usageevent.Usage{}, nil, false
	}
	for {
		more, err := it.Seek(key)
		if err != nil {
			return usageevent.Usage{}, nil, false
		}
		if !more {
			break
		}
		obj, isObj := it.Object()
		if !isObj {
			if _, err := it.Value(); err != nil {
				return usageevent.Usage{}, nil, false
			}
			raw, ok = nil, false
			continue
		}
		var c [5]int64
		if err := f.counts(&obj, &c); err != nil {
			return usageevent.Usage{}, nil, false
		}
		if raw, err = it.Leave(&obj); err != nil {
			return usageevent.Usage{}, nil, false
		}
		ok = len(raw) <= MaxRawUsageBytes
		if ok {
			u = f.Normalize(c)
		}
	}
	if !ok {
		return usageevent.Usage{}, nil, false
	}
	return u, raw, true
}

// BodyUsage reads the top-level usage object of a non-stream answer: the
// normalized counts, a copy of the provider's object, and true; or false
// when the body has none (an error answer, or not JSON).
func BodyUsage(body []byte, f *UsageForm) (usageevent.Usage, json.RawMessage, bool) {
	u, raw, ok := FindUsage(body, "usage", f)
	if !ok {
		return usageevent.Usage{}, nil, false
	}
	return u, bytes.Clone(raw), true
}

// TailUsage reads the usage of a successful non-stream answer from tail,
// its last bytes, for an answer too large to be held whole: the value of
// the last member named key whose value is a complete object, read by
// body (the endpoint's BodyUsage) as if it were the whole answer.
// Providers write the usage last, so it is in the tail; false when it is
// not. A quoted name cannot occur inside a JSON string (its quotes would
// be escaped), so only a member of that name matches, at any depth: the
// last one is the top-level usage in every provider's answers (and the
// last chunk's in a Gemini JSON array of chunks).
func TailUsage(tail []byte, key string, body func([]byte) (usageevent.Usage, json.RawMessage, bool)) (usageevent.Usage, json.RawMessage, bool) {
	if key == "" {
		return usageevent.Usage{}, nil, false
	}
	name := make([]byte, 0, len(key)+2)
	name = append(append(append(name, '"'), key...), '"')
	for end := len(tail); ; {
		i := bytes.LastIndex(tail[:end], name)
		if i < 0 {
			return usageevent.Usage{}, nil, false
		}
		end = i
		v := skipSpace(tail[i+len(name):])
		if len(v) == 0 || v[0] != ':' {
			continue
		}
		v = skipSpace(v[1:])
		if len(v) == 0 || v[0] != '{' {
			continue
		}
		var raw json.RawMessage
		if json.NewDecoder(bytes.NewReader(v)).Decode(&raw) != nil || !Usable(raw) {
			continue
		}
		doc := make([]byte, 0, len(name)+len(raw)+3)
		doc = append(append(append(append(doc, '{'), name...), ':'), raw...)
		return body(append(doc, '}'))
	}
}

// NoUsage is BodyUsage for an endpoint whose answers carry no token usage.
func NoUsage([]byte) (usageevent.Usage, json.RawMessage, bool) {
	return usageevent.Usage{}, nil, false
}

var jsonNull = []byte("null")

// Key is a member name prepared for the byte filters [MayHaveValue] and
// [MayHaveMember]: the name with its quotes, and which of its bytes a
// search looks for. Build it once with [NewKey].
type Key struct {
	quoted   []byte
	nullTail []byte // quoted + `:null}`: how the usual chunk ends (endsWithNull)
	rare     int    // the offset in quoted of its rarest byte (see rarity)
}

// NewKey prepares the member name name for the byte filters.
func NewKey(name string) Key {
	k := Key{quoted: []byte(`"` + name + `"`), nullTail: []byte(`"` + name + `":null}`)}
	for i, c := range k.quoted {
		if rarity[c] > rarity[k.quoted[k.rare]] {
			k.rare = i
		}
	}
	return k
}

// MayHaveValue is the cheap filter in front of a JSON scan of a stream
// event: it reports false when data certainly has no non-null member named
// by key, because every occurrence of the quoted name (such as `"usage"`)
// is followed by :null. The bytes of a quoted name cannot
// occur inside a JSON string (its quotes would be escaped), so only a key
// or a string value of that text matches; a key spelled with escapes
// ("us\u0061ge") is not recognised.
//
// The search goes from one occurrence of the key's rarest byte to the
// next (the "g" of "usage"), comparing the key around each: a search
// that started from a common byte (a quote, or the "u", which every
// "output" and "status" has) would stop at many more places that are
// not the key.
func MayHaveValue(data []byte, k Key) bool {
	key, r := k.quoted, k.rare
	for off := r; off < len(data); {
		i := bytes.IndexByte(data[off:], key[r])
		if i < 0 {
			return false
		}
		at := off + i - r // where key would start
		off += i + 1
		if !bytes.HasPrefix(data[at:], key) {
			continue
		}
		rest := skipSpace(data[at+len(key):])
		if len(rest) == 0 || rest[0] != ':' {
			return true // the string value, or malformed: look closer
		}
		rest = skipSpace(rest[1:])
		if !bytes.HasPrefix(rest, jsonNull) {
			return true
		}
		off = len(data) - len(rest) + len(jsonNull) + r
	}
	return false
}

// rarity ranks bytes by how seldom they occur in the JSON of provider
// APIs: the punctuation of JSON itself, then lower-case letters roughly
// by their frequency in English and in member names, then digits; every
// other byte (upper-case letters among them) is rarest. It only steers
// MayHaveValue's search (NewKey), never its answer.
var rarity = func() (t [256]uint8) {
	const common = `":,_etaonisrlcdupmhgfyb0123456789.-{}[] wvkxjqz`
	for i := range t {
		t[i] = uint8(len(common))
	}
	for i := range len(common) {
		t[common[i]] = uint8(i)
	}
	return t
}()

// MayHaveMember is the cheap filter in front of jsonedit.Lookup(data,
// name), key being NewKey(name): it reports false when Lookup certainly
// finds no member of that name whose value is not null. It
// reports what MayHaveValue reports, except for an object whose last
// member is key:null, which it settles by its last bytes, without a
// search: Lookup returns the last member of a name, and that one is null
// (OpenAI writes "usage" last, and every chunk but the usage chunk says
// "usage":null). A key spelled with escapes is not recognised either.
func MayHaveMember(data []byte, key Key) bool {
	if n := len(data) - len(key.nullTail); n > 0 && key.nullTail != nil && string(data[n:]) == string(key.nullTail) && data[n-1] != '\\' {
		return false // the usual chunk, without white space: endsWithNull's answer in one compare
	}
	return !endsWithNull(data, key.quoted) && MayHaveValue(data, key)
}

// endsWithNull reports whether data ends with the member key:null (key
// being a quoted name) and the
// brace after it, with any white space between and after them. In a
// valid document that member is the last of the top-level object: the
// final brace closes that object, and the quoted name is a key (a string
// followed by a colon) when its opening quote is not escaped, which the
// byte before it shows: a backslash there would make the quote the end of
// a longer name such as "x\"usage". In any other document Lookup fails,
// so false is then right as well.
func endsWithNull(data, key []byte) bool {
	i := skipSpaceBack(data, len(data))
	if i == 0 || data[i-1] != '}' {
		return false
	}
	i = skipSpaceBack(data, i-1)
	if i < len("null") || string(data[i-len("null"):i]) != "null" {
		return false
	}
	i = skipSpaceBack(data, i-len("null"))
	if i == 0 || data[i-1] != ':' {
		return false
	}
	i = skipSpaceBack(data, i-1) - len(key)
	return i > 0 && string(data[i:i+len(key)]) == string(key) && data[i-1] != '\\'
}

// skipSpace drops leading JSON white space (RFC 8259 §2).
func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
