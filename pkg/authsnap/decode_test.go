package authsnap_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/internal/contract"
)

const (
	digestA = "d1bd6a372daf2838113796bcdb5b3a21c27e86bb91741beb6b6e0335ac1d221f" // sk-test-alpha-0123456789abcdef
	digestB = "4b8825d233af905cd4221e89182af177bd5d847ab73118f94b2bb8234b2d899c" // sk-test-bravo-fedcba9876543210
)

func ptr[T any](v T) *T { return &v }

func TestDigest(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},    // FIPS 180-2 empty message
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}, // FIPS 180-2 example
		{"sk-test-alpha-0123456789abcdef", digestA},
		{"sk-test-bravo-fedcba9876543210", digestB},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(authsnap.Digest(tt.raw), tt.want); diff != "" {
			t.Errorf("Digest(%q) mismatch (-got +want):\n%s", tt.raw, diff)
		}
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    *authsnap.Snapshot
		wantErr *authsnap.DecodeError // Err is not compared
	}{
		{
			name: "full document",
			doc: `{"schema": 1, "version": 42, "generated_at": "2026-11-29T10:00:00Z",
			       "keys": [{"key_id": "k_123", "tenant_id": "t_9", "digest": "` + digestA + `",
			                 "models": ["demo-gpt"], "expires_at": "2027-01-01T00:00:00Z", "disabled": true}]}`,
			want: &authsnap.Snapshot{
				Schema: 1, Version: 42,
				GeneratedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
				Keys: []authsnap.Key{{
					KeyID: "k_123", TenantID: "t_9", Digest: digestA,
					Models:    []string{"demo-gpt"},
					ExpiresAt: ptr(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)),
					Disabled:  true,
				}},
			},
		},
		{
			name: "models omitted, null and empty stay distinct",
			doc: `{"schema": 1, "version": 1, "keys": [
			        {"key_id": "a", "tenant_id": "t", "digest": "x"},
			        {"key_id": "b", "tenant_id": "t", "digest": "x", "models": null, "expires_at": null},
			        {"key_id": "c", "tenant_id": "t", "digest": "x", "models": []}]}`,
			want: &authsnap.Snapshot{Schema: 1, Version: 1, Keys: []authsnap.Key{
				{KeyID: "a", TenantID: "t", Digest: "x"},
				{KeyID: "b", TenantID: "t", Digest: "x"},
				{KeyID: "c", TenantID: "t", Digest: "x", Models: []string{}},
			}},
		},
		{
			name: "empty keys array is kept non-nil",
			doc:  "\n {\"schema\": 1, \"version\": 3, \"keys\": [], \"generated_at\": null} \r\n\t",
			want: &authsnap.Snapshot{Schema: 1, Version: 3, Keys: []authsnap.Key{}},
		},
		{
			name: "missing keys decodes to nil (Validate rejects it)",
			doc:  `{"schema": 1, "version": 3}`,
			want: &authsnap.Snapshot{Schema: 1, Version: 3},
		},
		{
			name: "limits on keys and tenants",
			doc: `{"schema": 1, "version": 1,
			       "keys": [{"key_id": "a", "tenant_id": "t", "digest": "x",
			                 "limits": {"requests_per_minute": 60, "tokens_per_minute": 100000, "max_concurrent": 4}},
			                {"key_id": "b", "tenant_id": "t", "digest": "x", "limits": {"max_concurrent": 1, "tokens_per_minute": null}},
			                {"key_id": "c", "tenant_id": "t", "digest": "x", "limits": null},
			                {"key_id": "d", "tenant_id": "t", "digest": "x", "limits": {}}],
			       "tenants": [{"tenant_id": "t", "limits": {"requests_per_minute": 9007199254740991}},
			                   {"tenant_id": "u"}]}`,
			want: &authsnap.Snapshot{Schema: 1, Version: 1,
				Keys: []authsnap.Key{
					{KeyID: "a", TenantID: "t", Digest: "x", Limits: authsnap.Limits{RequestsPerMinute: 60, TokensPerMinute: 100000, MaxConcurrent: 4}},
					{KeyID: "b", TenantID: "t", Digest: "x", Limits: authsnap.Limits{MaxConcurrent: 1}},
					{KeyID: "c", TenantID: "t", Digest: "x"},
					{KeyID: "d", TenantID: "t", Digest: "x"},
				},
				Tenants: []authsnap.Tenant{
					{TenantID: "t", Limits: authsnap.Limits{RequestsPerMinute: authsnap.MaxLimit}},
					{TenantID: "u"},
				},
			},
		},
		{
			name: "tenants null and empty",
			doc:  `{"keys": [], "tenants": null}`,
			want: &authsnap.Snapshot{Keys: []authsnap.Key{}},
		},
		{
			name:    "a written zero limit is refused",
			doc:     `{"keys": [{"limits": {"requests_per_minute": 0}}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0].limits.requests_per_minute", Msg: "must be at least 1 (omit the member for no limit)"},
		},
		{
			name:    "a negative tenant limit is refused",
			doc:     `{"keys": [], "tenants": [{"tenant_id": "t"}, {"tenant_id": "u", "limits": {"max_concurrent": -3}}]}`,
			wantErr: &authsnap.DecodeError{Path: "tenants[1].limits.max_concurrent", Msg: "must be at least 1 (omit the member for no limit)"},
		},
		{
			name:    "a fractional limit",
			doc:     `{"keys": [{"limits": {"tokens_per_minute": 1.5}}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0].limits.tokens_per_minute", Msg: "expected an integer, got number 1.5"},
		},
		{
			name:    "a limit written as a string",
			doc:     `{"keys": [{"limits": {"tokens_per_minute": "100"}}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0].limits.tokens_per_minute", Msg: "expected an integer, got string"},
		},
		{
			name:    "a limit member twice",
			doc:     `{"keys": [{"limits": {"max_concurrent": 1, "max_concurrent": 100}}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0].limits.max_concurrent", Line: 1, Column: 44, Msg: "duplicate member (each name may appear once)"},
		},
		{
			name:    "a limit member in another letter case",
			doc:     `{"keys": [{"limits": {"max_concurrent": 1, "Max_Concurrent": 100}}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0].limits.Max_Concurrent", Line: 1, Column: 44, Msg: `unknown member; did you mean "max_concurrent"?`},
		},
		{
			name:    "an unknown limit",
			doc:     `{"keys": [], "tenants": [{"tenant_id": "t", "limits": {"requests_per_hour": 1}}]}`,
			wantErr: &authsnap.DecodeError{Path: "tenants[0].limits.requests_per_hour", Line: 1, Column: 56, Msg: "unknown member"},
		},
		{
			name:    "tenants twice",
			doc:     `{"keys": [], "tenants": [], "tenants": [{"tenant_id": "t"}]}`,
			wantErr: &authsnap.DecodeError{Path: "tenants", Line: 1, Column: 29, Msg: "duplicate member (each name may appear once)"},
		},
		{
			name:    "null tenant",
			doc:     `{"tenants": [null]}`,
			wantErr: &authsnap.DecodeError{Path: "tenants[0]", Msg: "expected an object, got null"},
		},
		{
			name:    "tenant not an object",
			doc:     `{"tenants": [{}, 1]}`,
			wantErr: &authsnap.DecodeError{Path: "tenants[1]", Msg: "expected an object, got number"},
		},
		{
			name:    "empty input",
			doc:     " \n ",
			wantErr: &authsnap.DecodeError{Msg: "empty document"},
		},
		{
			name:    "top-level null",
			doc:     "null",
			wantErr: &authsnap.DecodeError{Msg: "expected an object, got null"},
		},
		{
			name:    "top-level array",
			doc:     "[]",
			wantErr: &authsnap.DecodeError{Msg: "expected an object, got array"},
		},
		{
			name: "syntax error reports line and column",
			doc:  "{\n  \"schema\": 1,,\n}",
			wantErr: &authsnap.DecodeError{
				Line: 2, Column: 15,
				Msg: "invalid character ',' looking for beginning of object key string",
			},
		},
		{
			name:    "truncated",
			doc:     "{\"schema\": 1,\n \"keys\": [",
			wantErr: &authsnap.DecodeError{Line: 2, Column: 11, Msg: "unexpected end of document (truncated?)"},
		},
		{
			name:    "trailing data",
			doc:     "{\"schema\": 1}\n\n  x",
			wantErr: &authsnap.DecodeError{Line: 3, Column: 3, Msg: "unexpected data after the document"},
		},
		{
			name:    "two documents",
			doc:     `{"schema": 1}{"schema": 1}`,
			wantErr: &authsnap.DecodeError{Line: 1, Column: 14, Msg: "unexpected data after the document"},
		},
		{
			name:    "unknown top-level member",
			doc:     `{"schema": 1, "kyes": []}`,
			wantErr: &authsnap.DecodeError{Path: "kyes", Line: 1, Column: 15, Msg: "unknown member"},
		},
		{
			name:    "unknown key member names the index",
			doc:     `{"keys": [{}, {"key_id": "a", "colour": "blue"}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[1].colour", Line: 1, Column: 31, Msg: "unknown member"},
		},
		{
			name:    "schema of the wrong type",
			doc:     `{"schema": "1"}`,
			wantErr: &authsnap.DecodeError{Path: "schema", Msg: "expected an integer, got string"},
		},
		{
			name:    "negative version",
			doc:     `{"version": -1}`,
			wantErr: &authsnap.DecodeError{Path: "version", Msg: "expected a non-negative integer, got number -1"},
		},
		{
			name:    "keys not an array",
			doc:     `{"keys": {}}`,
			wantErr: &authsnap.DecodeError{Path: "keys", Msg: "expected an array, got object"},
		},
		{
			name:    "key not an object",
			doc:     `{"keys": [{}, {}, "k"]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[2]", Msg: "expected an object, got string"},
		},
		{
			name:    "null key",
			doc:     `{"keys": [null]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0]", Msg: "expected an object, got null"},
		},
		{
			name:    "digest of the wrong type",
			doc:     `{"keys": [{"digest": 12}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0].digest", Msg: "expected a string, got number"},
		},
		{
			name:    "model of the wrong type",
			doc:     `{"keys": [{"models": ["a", 1]}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0].models", Msg: "expected a string, got number"},
		},
		{
			name:    "models not an array",
			doc:     `{"keys": [{"models": "demo-gpt"}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0].models", Msg: "expected an array, got string"},
		},
		{
			name:    "bad expiry",
			doc:     `{"keys": [{"expires_at": "2027-01-01"}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0].expires_at", Msg: "expected an RFC 3339 timestamp string such as \"2026-11-29T10:00:00Z\" (upper-case T and Z, two-digit fields, no leap second)"},
		},
		{
			name:    "expiry of the wrong type",
			doc:     `{"keys": [{"expires_at": 1700000000}]}`,
			wantErr: &authsnap.DecodeError{Path: "keys[0].expires_at", Msg: "expected an RFC 3339 timestamp string such as \"2026-11-29T10:00:00Z\" (upper-case T and Z, two-digit fields, no leap second)"},
		},
		{
			name:    "bad generated_at",
			doc:     `{"generated_at": "yesterday"}`,
			wantErr: &authsnap.DecodeError{Path: "generated_at", Msg: "expected an RFC 3339 timestamp string such as \"2026-11-29T10:00:00Z\" (upper-case T and Z, two-digit fields, no leap second)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := authsnap.Decode([]byte(tt.doc))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Decode: unexpected error: %v", err)
				}
				if diff := cmp.Diff(got, tt.want); diff != "" {
					t.Errorf("Decode mismatch (-got +want):\n%s", diff)
				}
				return
			}
			var de *authsnap.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode error = %v (%T), want *DecodeError", err, err)
			}
			if got != nil {
				t.Errorf("Decode returned a snapshot with an error")
			}
			gotErr := *de
			gotErr.Err = nil
			if diff := cmp.Diff(&gotErr, tt.wantErr); diff != "" {
				t.Errorf("DecodeError mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestDecodeErrorString(t *testing.T) {
	tests := []struct {
		err  *authsnap.DecodeError
		want string
	}{
		{&authsnap.DecodeError{Msg: "empty document"}, "authsnap: decode: empty document"},
		{&authsnap.DecodeError{Path: "keys[1]", Msg: "m"}, "authsnap: decode: keys[1]: m"},
		{&authsnap.DecodeError{Line: 3, Column: 4, Msg: "m"}, "authsnap: decode: line 3, column 4: m"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.err.Error(), tt.want); diff != "" {
			t.Errorf("Error() mismatch (-got +want):\n%s", diff)
		}
	}
}

func TestDecodeErrorUnwraps(t *testing.T) {
	_, err := authsnap.Decode([]byte(`{"version": "x"}`))
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		t.Fatalf("Decode error = %v, want it to wrap *json.UnmarshalTypeError", err)
	}
}

// TestRoundTrip checks the promise to control-plane authors: a valid
// Snapshot encoded with encoding/json decodes back to the same value.
func TestRoundTrip(t *testing.T) {
	exp := time.Date(2027, 1, 1, 12, 30, 0, 500, time.UTC)
	in := &authsnap.Snapshot{
		Schema: authsnap.Schema, Version: 9,
		GeneratedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		Keys: []authsnap.Key{
			{KeyID: "all", TenantID: "t", Digest: digestA},
			{KeyID: "none", TenantID: "t", Digest: digestB, Models: []string{}, ExpiresAt: &exp, Disabled: true},
			{KeyID: "some", TenantID: "t", Digest: authsnap.Digest("c"), Models: []string{"m1", "m2"}},
		},
	}
	if err := in.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if strings.Contains(string(data), `"generated_at":"0001`) || !strings.Contains(string(data), `"models":[]`) {
		t.Errorf("encoded document lost a distinction: %s", data)
	}
	out, err := authsnap.Decode(data)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if diff := cmp.Diff(out, in); diff != "" {
		t.Errorf("round trip mismatch (-got +want):\n%s", diff)
	}

	// A zero GeneratedAt is omitted, not written as year 1.
	in.GeneratedAt = time.Time{}
	data, err = json.Marshal(in)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if strings.Contains(string(data), "generated_at") {
		t.Errorf("zero generated_at was encoded: %s", data)
	}
}

// The documents in testdata/authz are the shared contract examples.
const fixtures = "../../testdata/authz"

func TestValidFixture(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtures, "valid.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := authsnap.Decode(data)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := &authsnap.Snapshot{
		Schema: 1, Version: 42,
		GeneratedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		Keys: []authsnap.Key{
			{
				KeyID: "k_alpha", TenantID: "t_acme",
				Digest:    authsnap.Digest("sk-test-alpha-0123456789abcdef"),
				Models:    []string{"demo-gpt", "demo-claude"},
				ExpiresAt: ptr(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
				Limits:    authsnap.Limits{RequestsPerMinute: 600, TokensPerMinute: 200000, MaxConcurrent: 8},
			},
			{KeyID: "k_bravo", TenantID: "t_globex", Digest: authsnap.Digest("sk-test-bravo-fedcba9876543210")},
		},
		Tenants: []authsnap.Tenant{
			{TenantID: "t_acme", Limits: authsnap.Limits{RequestsPerMinute: 3000, TokensPerMinute: 1000000}},
		},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("valid.json mismatch (-got +want):\n%s", diff)
	}
}

// TestInvalidFixtures decodes and validates every file in
// testdata/authz/invalid and checks the error names the problem. A file
// without an entry here fails the test, so no fixture goes unchecked.
func TestInvalidFixtures(t *testing.T) {
	want := map[string][]string{
		"bad-schema.json": {"schema: must be 1..2, got 3"},
		"budgets.json": {
			`keys[0].limits.usd_per_day: "1e2" is not a non-negative decimal: want a budget in US dollars, a decimal string such as "200" or "12.5" with at most 12 digits after the point, up to 1000000`,
			"keys[0].limits.usd_per_month: must be above 0 (leave it out for no budget)",
			`tenants[0].limits.usd_per_day: "2000000" is too large: want a budget in US dollars, a decimal string such as "200" or "12.5" with at most 12 digits after the point, up to 1000000`,
			`tenants[0].limits.usd_per_month: "0.0000000000001" has too many digits after the point: want a budget in US dollars, a decimal string such as "200" or "12.5" with at most 12 digits after the point, up to 1000000`,
		},
		"budget-mode.json": {
			`keys[0].limits.budget_mode: "hold" is not a budget mode: want "charge" or "reserve"`,
			"keys[1].limits.budget_mode: holds no budget: set usd_per_day or usd_per_month beside it, or remove the member",
		},
		"budget-mode-schema1.json": {"keys[0].limits.budget_mode: needs schema 2 or later (this document is schema 1); raise schema or remove the member"},
		"budget-mode-empty.json":   {`keys[0].limits.budget_mode: must be "charge" or "reserve" (omit the member for "charge")`},
		"budgets-schema1.json":     {"keys[0].limits.usd_per_day: needs schema 2 or later (this document is schema 1); raise schema or remove the member"},
		"bad-digest.json": {
			"keys[0].digest: must be 64 lowercase hex characters (sha256), found uppercase",
			"keys[1].digest: must be 64 lowercase hex characters (sha256)",
		},
		"duplicate-key-id.json":   {"keys[1].key_id: duplicate of keys[0]"},
		"duplicate-digest.json":   {"keys[1].digest: duplicate of keys[0]"},
		"unknown-field.json":      {"line 6, column 123: keys[1].colour: unknown member"},
		"misspelled-keys.json":    {"line 4, column 3: kyes: unknown member"},
		"case-models.json":        {`line 5, column 147: keys[0].MODELS: unknown member; did you mean "models"?`},
		"case-disabled.json":      {`line 5, column 141: keys[0].Disabled: unknown member; did you mean "disabled"?`},
		"case-expires-at.json":    {`line 5, column 161: keys[0].Expires_At: unknown member; did you mean "expires_at"?`},
		"kelvin-key-id.json":      {`line 5, column 6: keys[0]["\u212aey_id"]: unknown member; did you mean "key_id"?`},
		"lone-surrogate.json":     {"line 5, column 41: keys[0].tenant_id: unpaired surrogate escape in a string"},
		"duplicate-disabled.json": {"line 5, column 141: keys[0].disabled: duplicate member"},
		"duplicate-version.json":  {"line 4, column 3: version: duplicate member"},
		"escaped-duplicate.json":  {"line 5, column 137: keys[0].models: duplicate member"},
		"missing-keys.json":       {"keys: required"},
		"version-zero.json":       {"version: must be at least 1"},
		"version-string.json":     {"version: expected a non-negative integer, got string"},
		"bad-expiry.json":         {"keys[0].expires_at: expected an RFC 3339 timestamp string"},
		"empty-model.json":        {"keys[0].models[1]: must be non-empty"},
		"truncated.json":          {"line 5, column 49: unexpected end of document"},
		"duplicate-tenant.json":   {"tenants[1].tenant_id: duplicate of tenants[0]"},
		"zero-limit.json":         {"keys[0].limits.requests_per_minute: must be at least 1 (omit the member for no limit)"},
		"case-limits.json":        {`keys[0].limits.MAX_CONCURRENT: unknown member; did you mean "max_concurrent"?`},
		"duplicate-limit.json":    {"keys[0].limits.tokens_per_minute: duplicate member"},
		"limit-too-large.json":    {"tenants[0].limits.tokens_per_minute: must be at most 9007199254740991"},
		"unknown-limit.json":      {"keys[0].limits.requests_per_day: unknown member"},
		"trailing-garbage.json":   {"line 2, column 1: unexpected data after the document"},
	}
	files, err := filepath.Glob(filepath.Join(fixtures, "invalid", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			frags, ok := want[name]
			if !ok {
				t.Fatalf("no expected error listed for %s", name)
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			err = decodeAndValidate(data)
			if err == nil {
				t.Fatalf("%s was accepted", name)
			}
			for _, frag := range frags {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("error %q does not contain %q", err, frag)
				}
			}
			for _, d := range []string{digestA, digestB, strings.ToUpper(digestA)} {
				if strings.Contains(err.Error(), d[:16]) {
					t.Errorf("error %q contains a digest", err)
				}
			}
		})
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("expected fixture %s is missing", name)
		}
	}
}

func decodeAndValidate(data []byte) error {
	s, err := authsnap.Decode(data)
	if err != nil {
		return err
	}
	return s.Validate()
}

// BenchmarkDecode measures Decode on a 10,000-key snapshot against its
// parts: the exact member-name pass alone, and encoding/json alone.
func BenchmarkDecode(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"schema":1,"version":7,"generated_at":"2026-11-29T10:00:00Z","keys":[`)
	for i := range 10000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"key_id":"k_%d","tenant_id":"t_%d","digest":"%064x","models":["demo-gpt","demo-claude"],"expires_at":"2030-01-01T00:00:00Z"}`, i, i%50, i)
	}
	sb.WriteString(`]}`)
	data := []byte(sb.String())
	b.Run("Decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := authsnap.Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exact-pass", func(b *testing.B) {
		shape := contract.ShapeOf(reflect.TypeFor[authsnap.Snapshot]())
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, _ := contract.Exact(data, shape); !ok {
				b.Fatal("not exact")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var s authsnap.Snapshot
			if err := json.Unmarshal(data, &s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
