package authsnap_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/authsnap"
)

func TestValidate(t *testing.T) {
	valid := func() *authsnap.Snapshot {
		return &authsnap.Snapshot{Schema: 1, Version: 1, Keys: []authsnap.Key{
			{KeyID: "k_a", TenantID: "t_1", Digest: digestA},
			{KeyID: "k_b", TenantID: "t_1", Digest: digestB, Models: []string{"demo-gpt"}},
		}}
	}
	tests := []struct {
		name   string
		mutate func(s *authsnap.Snapshot)
		want   []authsnap.Problem // nil = valid
	}{
		{name: "valid", mutate: func(*authsnap.Snapshot) {}},
		{
			name:   "empty keys are valid",
			mutate: func(s *authsnap.Snapshot) { s.Keys = []authsnap.Key{} },
		},
		{
			name:   "empty allowlist is valid",
			mutate: func(s *authsnap.Snapshot) { s.Keys[0].Models = []string{} },
		},
		{
			name:   "ids of exactly 128 characters",
			mutate: func(s *authsnap.Snapshot) { s.Keys[0].KeyID = strings.Repeat("é", 128) },
		},
		{
			name: "limits and tenants, a listed tenant no key names, a named tenant not listed",
			mutate: func(s *authsnap.Snapshot) {
				s.Keys[0].Limits = authsnap.Limits{RequestsPerMinute: 1, TokensPerMinute: authsnap.MaxLimit, MaxConcurrent: 2}
				s.Keys[1].TenantID = "t_unlisted"
				s.Tenants = []authsnap.Tenant{{TenantID: "t_1", Limits: authsnap.Limits{MaxConcurrent: 5}}, {TenantID: "t_spare"}}
			},
		},
		{
			name: "limits out of range",
			mutate: func(s *authsnap.Snapshot) {
				s.Keys[1].Limits = authsnap.Limits{RequestsPerMinute: -1, TokensPerMinute: authsnap.MaxLimit + 1}
				s.Tenants = []authsnap.Tenant{{TenantID: "t_1", Limits: authsnap.Limits{MaxConcurrent: -5}}}
			},
			want: []authsnap.Problem{
				{Path: "keys[1].limits.requests_per_minute", Msg: "must be at least 1 (0 means no limit)"},
				{Path: "keys[1].limits.tokens_per_minute", Msg: "must be at most 9007199254740991"},
				{Path: "tenants[0].limits.max_concurrent", Msg: "must be at least 1 (0 means no limit)"},
			},
		},
		{
			name: "tenant listed twice, tenant without id",
			mutate: func(s *authsnap.Snapshot) {
				s.Tenants = []authsnap.Tenant{{TenantID: "t_1"}, {TenantID: ""}, {TenantID: "t_1", Limits: authsnap.Limits{MaxConcurrent: 1}}}
			},
			want: []authsnap.Problem{
				{Path: "tenants[1].tenant_id", Msg: "required"},
				{Path: "tenants[2].tenant_id", Msg: "duplicate of tenants[0]"},
			},
		},
		{
			name:   "schema",
			mutate: func(s *authsnap.Snapshot) { s.Schema = 3 },
			want:   []authsnap.Problem{{Path: "schema", Msg: "must be 1..2, got 3"}},
		},
		{
			name:   "version zero",
			mutate: func(s *authsnap.Snapshot) { s.Version = 0 },
			want:   []authsnap.Problem{{Path: "version", Msg: "must be at least 1"}},
		},
		{
			name:   "nil keys",
			mutate: func(s *authsnap.Snapshot) { s.Keys = nil },
			want:   []authsnap.Problem{{Path: "keys", Msg: "required (an empty array means no key is accepted)"}},
		},
		{
			name: "ids",
			mutate: func(s *authsnap.Snapshot) {
				s.Keys[0].KeyID = ""
				s.Keys[0].TenantID = strings.Repeat("t", 129)
				s.Keys[1].KeyID = "k\nforged log line"
				s.Keys[1].TenantID = "t\x7f"
			},
			want: []authsnap.Problem{
				{Path: "keys[0].key_id", Msg: "required"},
				{Path: "keys[0].tenant_id", Msg: "longer than 128 characters"},
				{Path: "keys[1].key_id", Msg: "must not contain control characters"},
				{Path: "keys[1].tenant_id", Msg: "must not contain control characters"},
			},
		},
		{
			name: "digests",
			mutate: func(s *authsnap.Snapshot) {
				s.Keys[0].Digest = strings.ToUpper(digestA)
				s.Keys[1].Digest = digestB[:63]
				s.Keys = append(s.Keys,
					authsnap.Key{KeyID: "k_c", TenantID: "t", Digest: ""},
					authsnap.Key{KeyID: "k_d", TenantID: "t", Digest: digestB[:63] + "g"},
					authsnap.Key{KeyID: "k_e", TenantID: "t", Digest: " " + digestB[1:]},
				)
			},
			want: []authsnap.Problem{
				{Path: "keys[0].digest", Msg: "must be 64 lowercase hex characters (sha256), found uppercase"},
				{Path: "keys[1].digest", Msg: "must be 64 lowercase hex characters (sha256)"},
				{Path: "keys[2].digest", Msg: "must be 64 lowercase hex characters (sha256)"},
				{Path: "keys[3].digest", Msg: "must be 64 lowercase hex characters (sha256)"},
				{Path: "keys[4].digest", Msg: "must be 64 lowercase hex characters (sha256)"},
			},
		},
		{
			name: "duplicates point at the first occurrence",
			mutate: func(s *authsnap.Snapshot) {
				s.Keys = append(s.Keys,
					authsnap.Key{KeyID: "k_a", TenantID: "t", Digest: authsnap.Digest("x")},
					authsnap.Key{KeyID: "k_c", TenantID: "t", Digest: digestA},
					authsnap.Key{KeyID: "k_a", TenantID: "t", Digest: digestA},
				)
			},
			want: []authsnap.Problem{
				{Path: "keys[2].key_id", Msg: "duplicate of keys[0]"},
				{Path: "keys[3].digest", Msg: "duplicate of keys[0]"},
				{Path: "keys[4].key_id", Msg: "duplicate of keys[0]"},
				{Path: "keys[4].digest", Msg: "duplicate of keys[0]"},
			},
		},
		{
			name:   "empty model name",
			mutate: func(s *authsnap.Snapshot) { s.Keys[1].Models = []string{"a", "", "b", ""} },
			want: []authsnap.Problem{
				{Path: "keys[1].models[1]", Msg: "must be non-empty"},
				{Path: "keys[1].models[3]", Msg: "must be non-empty"},
			},
		},
		{
			name:   "allowlist patterns",
			mutate: func(s *authsnap.Snapshot) { s.Keys[1].Models = []string{"claude-*", "*", "a*b", "**"} },
			want: []authsnap.Problem{
				{Path: "keys[1].models[2]", Msg: `"*" may appear only once, as the last character (a pattern: a literal prefix followed by "*")`},
				{Path: "keys[1].models[3]", Msg: `"*" may appear only once, as the last character (a pattern: a literal prefix followed by "*")`},
			},
		},
		{
			name: "every problem at once",
			mutate: func(s *authsnap.Snapshot) {
				s.Schema, s.Version = 0, 0
				s.Keys[1].Digest = "nope"
			},
			want: []authsnap.Problem{
				{Path: "schema", Msg: "must be 1..2, got 0"},
				{Path: "version", Msg: "must be at least 1"},
				{Path: "keys[1].digest", Msg: "must be 64 lowercase hex characters (sha256)"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid()
			tt.mutate(s)
			err := s.Validate()
			var got []authsnap.Problem
			if err != nil {
				var ve *authsnap.ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("Validate error = %v (%T), want *ValidationError", err, err)
				}
				got = ve.Problems
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("problems mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	var s *authsnap.Snapshot
	err := s.Validate()
	if diff := cmp.Diff(errString(err), "authsnap: invalid snapshot: snapshot is nil"); diff != "" {
		t.Errorf("mismatch (-got +want):\n%s", diff)
	}
}

func TestValidationErrorString(t *testing.T) {
	tests := []struct {
		name     string
		problems int
		want     string
	}{
		{"one", 1, "authsnap: invalid snapshot: keys[0].model: bad"},
		{"two", 2, "authsnap: invalid snapshot: keys[0].model: bad; keys[1].model: bad"},
		{
			"capped", 13,
			"authsnap: invalid snapshot: keys[0].model: bad; keys[1].model: bad; keys[2].model: bad; " +
				"keys[3].model: bad; keys[4].model: bad; keys[5].model: bad; keys[6].model: bad; " +
				"keys[7].model: bad; keys[8].model: bad; keys[9].model: bad; and 3 more",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &authsnap.ValidationError{}
			for i := range tt.problems {
				e.Problems = append(e.Problems, authsnap.Problem{Path: "keys[" + strconv.Itoa(i) + "].model", Msg: "bad"})
			}
			if diff := cmp.Diff(e.Error(), tt.want); diff != "" {
				t.Errorf("Error() mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

// TestValidateNeverEchoesDigests: digests identify keys; error text, which
// ends up in logs, names keys by index instead.
func TestValidateNeverEchoesDigests(t *testing.T) {
	upper := strings.ToUpper(digestB)
	s := &authsnap.Snapshot{Schema: 1, Version: 1, Keys: []authsnap.Key{
		{KeyID: "a", TenantID: "t", Digest: digestA},
		{KeyID: "b", TenantID: "t", Digest: digestA},
		{KeyID: "c", TenantID: "t", Digest: upper},
		{KeyID: "d", TenantID: "t", Digest: digestB + "0"},
	}}
	err := s.Validate()
	if err == nil {
		t.Fatal("Validate accepted duplicate and malformed digests")
	}
	for _, d := range []string{digestA, digestB, upper} {
		if strings.Contains(strings.ToLower(err.Error()), d[:12]) {
			t.Errorf("error %q contains (part of) a digest", err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
