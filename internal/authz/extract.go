package authz

import (
	"net/http"
	"strings"
)

// MaxKeyLength is the longest key ExtractKey accepts, in bytes. Real keys
// are well under 200 bytes; the bound keeps hashing cheap and garbage out.
const MaxKeyLength = 512

// ExtractKey returns the client key a request presents
// (docs/authorization.md "Presenting a key"), the first of, in order:
//
//   - Authorization: Bearer <key>. The scheme is case-insensitive; spaces
//     and tabs around the header value and between scheme and key are
//     ignored. A Bearer credential decides the outcome: when it is empty or
//     holds more than one token, ok is false and nothing else is
//     consulted, because Bearer wins. Authorization with another scheme
//     (Basic, …) is ignored, so clients that send both still work.
//   - each of headers in order (canonical names: the provider APIs' key
//     headers, which the wiring passes in from the catalog: x-api-key for
//     the Anthropic SDKs, then x-goog-api-key for the Gemini SDKs, then
//     api-key for the Azure OpenAI clients), with surrounding spaces and
//     tabs ignored.
//   - query, the values of the query parameter that the request's API
//     names for a key (Gemini's ?key=); nil for an API without one. The
//     request path never forwards a client's query, and never logs it.
//
// A key must be 1 to [MaxKeyLength] bytes of visible ASCII (0x21–0x7E): no
// whitespace, control characters or non-ASCII bytes. A repeated header or
// query parameter is ambiguous and yields ok false; the first place that
// is present decides.
func ExtractKey(h http.Header, headers, query []string) (key string, ok bool) {
	if vs := h.Values("Authorization"); len(vs) > 0 {
		if len(vs) > 1 {
			return "", false
		}
		if key, isBearer := bearer(vs[0]); isBearer {
			return checked(key)
		}
	}
	for _, name := range headers {
		switch vs := h.Values(name); len(vs) {
		case 0:
			continue
		case 1:
			return checked(trimOWS(vs[0]))
		default:
			return "", false
		}
	}
	if len(query) != 1 {
		return "", false
	}
	return checked(query[0])
}

// checked returns key, true if it is a valid key, and "", false otherwise.
func checked(key string) (string, bool) {
	if !validKey(key) {
		return "", false
	}
	return key, true
}

// bearer splits an Authorization value. isBearer reports whether its scheme
// is Bearer (RFC 6750 §2.1; schemes are case-insensitive, RFC 9110 §11.1);
// token is the rest, trimmed.
func bearer(v string) (token string, isBearer bool) {
	v = trimOWS(v)
	scheme, rest := v, ""
	if i := strings.IndexAny(v, " \t"); i >= 0 {
		scheme, rest = v[:i], v[i:]
	}
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return trimOWS(rest), true
}

// trimOWS trims HTTP optional whitespace (RFC 9110 §5.6.3).
func trimOWS(s string) string { return strings.Trim(s, " \t") }

// validKey reports whether key is 1 to MaxKeyLength bytes of visible ASCII.
func validKey(key string) bool {
	if key == "" || len(key) > MaxKeyLength {
		return false
	}
	for i := range len(key) {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}
