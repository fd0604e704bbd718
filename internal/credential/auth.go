package credential

import "fmt"

// AuthHeader is how a credential is put on a provider request
// (docs/operations.md "Credentials"). The zero value is the
// protocol's own way: Authorization: Bearer for OpenAI, x-api-key for
// Anthropic, x-goog-api-key for Gemini.
type AuthHeader uint8

const (
	// AuthDefault sends the credential as the backend's protocol does.
	AuthDefault AuthHeader = iota
	// AuthBearer sends "Authorization: Bearer <credential>".
	AuthBearer
	// AuthXAPIKey sends "x-api-key: <credential>" (Anthropic's form).
	AuthXAPIKey
	// AuthAPIKey sends "api-key: <credential>" (Azure OpenAI's form).
	AuthAPIKey
	// AuthXGoogAPIKey sends "x-goog-api-key: <credential>" (Google's form).
	AuthXGoogAPIKey
)

// authHeaders are the names auth_header accepts, and the header each one
// sets (canonical form).
var authHeaders = [...]struct{ name, header string }{
	AuthBearer:      {"bearer", "Authorization"},
	AuthXAPIKey:     {"x-api-key", "X-Api-Key"},
	AuthAPIKey:      {"api-key", "Api-Key"},
	AuthXGoogAPIKey: {"x-goog-api-key", "X-Goog-Api-Key"},
}

// AuthHeaderNames lists the names auth_header accepts, for error messages.
const AuthHeaderNames = `"bearer", "x-api-key", "api-key" or "x-goog-api-key"`

// ParseAuthHeader reads an auth_header name.
func ParseAuthHeader(s string) (AuthHeader, error) {
	for a, h := range authHeaders {
		if a != 0 && h.name == s {
			return AuthHeader(a), nil
		}
	}
	return AuthDefault, fmt.Errorf("must be %s", AuthHeaderNames)
}

// String returns the auth_header name ("" for AuthDefault).
func (a AuthHeader) String() string {
	if int(a) < len(authHeaders) {
		return authHeaders[a].name
	}
	return ""
}

// CredentialHeaders are every header any AuthHeader, or a protocol's own
// way, puts a credential in: a request path that applies an AuthHeader
// removes them all first, so the credential is sent exactly once.
var CredentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// Header returns the header name and value that carry value, for an
// AuthHeader other than AuthDefault.
func (a AuthHeader) Header(value string) (name, v string) {
	if a == AuthBearer {
		return "Authorization", "Bearer " + value
	}
	if int(a) < len(authHeaders) {
		return authHeaders[a].header, value
	}
	return "", ""
}
