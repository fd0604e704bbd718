package authz_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
)

// extractCases are the ExtractKey table and the FuzzExtractKey seeds.
// auth and apiKey are the Authorization and x-api-key values; "" means the
// header is absent.
var extractCases = []struct {
	name    string
	auth    string
	apiKey  string
	wantKey string
	wantOK  bool
}{
	{name: "no headers"},
	{name: "bearer", auth: "Bearer sk-a", wantKey: "sk-a", wantOK: true},
	{name: "x-api-key", apiKey: "sk-b", wantKey: "sk-b", wantOK: true},
	{name: "bearer wins over x-api-key", auth: "Bearer sk-a", apiKey: "sk-b", wantKey: "sk-a", wantOK: true},
	{name: "lowercase bearer", auth: "bearer sk-a", wantKey: "sk-a", wantOK: true},
	{name: "uppercase bearer", auth: "BEARER sk-a", wantKey: "sk-a", wantOK: true},
	{name: "surrounding and inner spaces", auth: " \tBearer   sk-a \t", wantKey: "sk-a", wantOK: true},
	{name: "tab after scheme", auth: "Bearer\tsk-a", wantKey: "sk-a", wantOK: true},
	{name: "bearer without token", auth: "Bearer"},
	{name: "bearer with blank token", auth: "Bearer   "},
	{name: "empty bearer does not fall back", auth: "Bearer ", apiKey: "sk-b"},
	{name: "two tokens", auth: "Bearer  two  tokens"},
	{name: "two tokens do not fall back", auth: "Bearer sk-a sk-c", apiKey: "sk-b"},
	{name: "basic falls back to x-api-key", auth: "Basic dXNlcjpwYXNz", apiKey: "sk-b", wantKey: "sk-b", wantOK: true},
	{name: "basic alone", auth: "Basic dXNlcjpwYXNz"},
	{name: "scheme glued to token is another scheme", auth: "Bearersk-a", apiKey: "sk-b", wantKey: "sk-b", wantOK: true},
	{name: "blank authorization falls back", auth: "  ", apiKey: "sk-b", wantKey: "sk-b", wantOK: true},
	{name: "x-api-key trimmed", apiKey: " \tsk-b\t ", wantKey: "sk-b", wantOK: true},
	{name: "x-api-key blank", apiKey: "   "},
	{name: "x-api-key with inner space", apiKey: "sk b"},
	{name: "x-api-key bearer-style", apiKey: "Bearer sk-b"},
	{name: "NUL", auth: "Bearer sk-\x00a"},
	{name: "DEL", apiKey: "sk-\x7fb"},
	{name: "newline", apiKey: "sk-\nb"},
	{name: "vertical tab", auth: "Bearer sk-\va"},
	{name: "non-ASCII", auth: "Bearer sk-é"},
	{name: "non-breaking space", apiKey: "sk-\u00a0b"},
	{name: "512 bytes", auth: "Bearer " + strings.Repeat("k", 512), wantKey: strings.Repeat("k", 512), wantOK: true},
	{name: "513 bytes bearer", auth: "Bearer " + strings.Repeat("k", 513)},
	{name: "513 bytes x-api-key", apiKey: strings.Repeat("k", 513)},
	{name: "printable punctuation", apiKey: "sk-ant_api03.A+b/c=~!", wantKey: "sk-ant_api03.A+b/c=~!", wantOK: true},
}

func header(auth, apiKey string) http.Header {
	h := http.Header{}
	if auth != "" {
		h.Set("Authorization", auth)
	}
	if apiKey != "" {
		h.Set("x-api-key", apiKey)
	}
	return h
}

func TestExtractKey(t *testing.T) {
	type result struct {
		Key string
		OK  bool
	}
	for _, tt := range extractCases {
		t.Run(tt.name, func(t *testing.T) {
			key, ok := authz.ExtractKey(header(tt.auth, tt.apiKey), keyHeaders, nil)
			if diff := cmp.Diff(result{key, ok}, result{tt.wantKey, tt.wantOK}); diff != "" {
				t.Errorf("ExtractKey mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestExtractKeyRepeatedHeaders(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
	}{
		{"two authorization headers", http.Header{"Authorization": {"Bearer sk-a", "Bearer sk-c"}}},
		{"two x-api-key headers", http.Header{"X-Api-Key": {"sk-b", "sk-b"}}},
		{"two authorization headers and x-api-key", http.Header{"Authorization": {"Bearer sk-a", "Basic x"}, "X-Api-Key": {"sk-b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if key, ok := authz.ExtractKey(tt.h, keyHeaders, nil); ok || key != "" {
				t.Errorf("ExtractKey = %q, %v; want \"\", false", key, ok)
			}
		})
	}
}

// FuzzExtractKey: no panic; an accepted key is non-empty, at most
// MaxKeyLength bytes of visible ASCII (so no whitespace of any kind), and
// taken from one of the two headers.
func FuzzExtractKey(f *testing.F) {
	for _, tc := range extractCases {
		f.Add(tc.auth, tc.apiKey)
	}
	f.Fuzz(func(t *testing.T, auth, apiKey string) {
		h := http.Header{"Authorization": {auth}, "X-Api-Key": {apiKey}}
		key, ok := authz.ExtractKey(h, keyHeaders, nil)
		if !ok {
			if key != "" {
				t.Fatalf("not ok but key %q returned", key)
			}
			return
		}
		if key == "" || len(key) > authz.MaxKeyLength {
			t.Fatalf("accepted key of length %d", len(key))
		}
		for i := range len(key) {
			if c := key[i]; c <= ' ' || c >= 0x7f {
				t.Fatalf("accepted key with byte %#x", c)
			}
		}
		if !strings.Contains(auth, key) && !strings.Contains(apiKey, key) {
			t.Fatalf("key %q comes from neither header", key)
		}
	})
}

// TestExtractKeyGoogAndQuery: the Gemini SDKs' x-goog-api-key and the
// API's key query parameter, after the other two, each once.
func TestExtractKeyGoogAndQuery(t *testing.T) {
	tests := []struct {
		name    string
		h       http.Header
		query   []string
		wantKey string
		wantOK  bool
	}{
		{"x-goog-api-key", http.Header{"X-Goog-Api-Key": {" sk-g "}}, nil, "sk-g", true},
		{"query", http.Header{}, []string{"sk-q"}, "sk-q", true},
		{"bearer before all", http.Header{"Authorization": {"Bearer sk-a"}, "X-Goog-Api-Key": {"sk-g"}}, []string{"sk-q"}, "sk-a", true},
		{"x-api-key before x-goog-api-key", http.Header{"X-Api-Key": {"sk-b"}, "X-Goog-Api-Key": {"sk-g"}}, nil, "sk-b", true},
		{"x-goog-api-key before the query", http.Header{"X-Goog-Api-Key": {"sk-g"}}, []string{"sk-q"}, "sk-g", true},
		{"api-key (Azure)", http.Header{"Api-Key": {" sk-z "}}, nil, "sk-z", true},
		{"x-goog-api-key before api-key", http.Header{"X-Goog-Api-Key": {"sk-g"}, "Api-Key": {"sk-z"}}, nil, "sk-g", true},
		{"api-key before the query", http.Header{"Api-Key": {"sk-z"}}, []string{"sk-q"}, "sk-z", true},
		{"api-key twice", http.Header{"Api-Key": {"sk-z", "sk-y"}}, []string{"sk-q"}, "", false},
		{"two x-goog-api-key", http.Header{"X-Goog-Api-Key": {"sk-g", "sk-h"}}, nil, "", false},
		{"two query keys", http.Header{}, []string{"sk-q", "sk-r"}, "", false},
		{"a bad x-goog-api-key does not fall back", http.Header{"X-Goog-Api-Key": {"sk g"}}, []string{"sk-q"}, "", false},
		{"empty query key", http.Header{}, []string{""}, "", false},
		{"query key with a space", http.Header{}, []string{"sk q"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, ok := authz.ExtractKey(tt.h, keyHeaders, tt.query)
			if key != tt.wantKey || ok != tt.wantOK {
				t.Errorf("ExtractKey = %q, %v; want %q, %v", key, ok, tt.wantKey, tt.wantOK)
			}
		})
	}
}

// keyHeaders are the key headers the node's catalog passes in today.
var keyHeaders = []string{"X-Api-Key", "X-Goog-Api-Key", "Api-Key"}

// TestExtractKeyHeadersGiven: the key headers are the caller's list, in
// its order: a header it does not name is never read, and a new API's
// header works once it is in the list, with no change here.
func TestExtractKeyHeadersGiven(t *testing.T) {
	h := http.Header{"Api-Key": {"sk-azure"}, "X-Goog-Api-Key": {"sk-g"}}
	tests := []struct {
		name    string
		headers []string
		wantKey string
		wantOK  bool
	}{
		{"none named", nil, "", false},
		{"not named", []string{"X-Api-Key"}, "", false},
		{"named", []string{"Api-Key"}, "sk-azure", true},
		{"in the list's order", []string{"X-Goog-Api-Key", "Api-Key"}, "sk-g", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, ok := authz.ExtractKey(h, tt.headers, nil)
			if key != tt.wantKey || ok != tt.wantOK {
				t.Errorf("ExtractKey = %q, %v; want %q, %v", key, ok, tt.wantKey, tt.wantOK)
			}
		})
	}
}
