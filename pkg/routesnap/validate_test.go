package routesnap_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/routesnap"
)

// valid returns a small valid snapshot; tests mutate a fresh copy.
func valid() *routesnap.Snapshot {
	return &routesnap.Snapshot{
		Schema: 1, Version: 1,
		Backends: []routesnap.Backend{
			{ID: "oa", Protocol: "openai", BaseURL: "https://oa.example/v1", Credential: "c1", MaxInflightPerNode: 8},
			{ID: "an", Protocol: "anthropic", BaseURL: "https://an.example/v1", Credential: "c2", MaxInflightPerNode: 8},
		},
		Models: []routesnap.Model{
			{Name: "gpt", Targets: []routesnap.Target{{Backend: "oa", Model: "gpt-x", Weight: 1}}},
			{Name: "claude", Targets: []routesnap.Target{
				{Backend: "an", Model: "claude-x", Weight: 2, Stream: true},
				{Backend: "oa", Model: "claude-x", Weight: 1, Tier: 1},
			}},
		},
	}
}

const (
	gemName  = `a model with a gemini target is called at /v1beta/models/{model}:{method}; the name must be ` + routesnap.GeminiNameRule
	gemModel = `a gemini backend is sent {base_url}/models/{model}:{method}; the model must be ` + routesnap.GeminiNameRule
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *routesnap.Snapshot)
		want   []routesnap.Problem // nil = valid
	}{
		{name: "valid", mutate: func(*routesnap.Snapshot) {}},
		{
			name: "limits are inclusive",
			mutate: func(s *routesnap.Snapshot) {
				s.Backends[0].ID = strings.Repeat("b", 64)
				s.Backends[0].Credential = strings.Repeat("c", 64)
				s.Backends[0].MaxInflightPerNode = 100000
				s.Models[0].Name = strings.Repeat("é", 256)
				s.Models[0].Targets[0] = routesnap.Target{Backend: s.Backends[0].ID, Model: strings.Repeat("m", 256), Weight: 1000000, Tier: 1<<31 - 1}
				s.Models[1].Targets[1].Backend = s.Backends[0].ID
			},
		},
		{
			name: "patterns and their targets",
			mutate: func(s *routesnap.Snapshot) {
				s.Models = append(s.Models,
					routesnap.Model{Name: "claude-*", Targets: []routesnap.Target{{Backend: "an", Model: "claude-*", Weight: 1}}},
					routesnap.Model{Name: "claude-haiku-*", Targets: []routesnap.Target{{Backend: "an", Model: "claude-haiku-4-5", Weight: 1}}},
					routesnap.Model{Name: "openai/*", Targets: []routesnap.Target{{Backend: "oa", Model: "*", Weight: 1}}},
					routesnap.Model{Name: "*", Targets: []routesnap.Target{{Backend: "oa", Model: "x-*-y", Weight: 1}}},
				)
			},
		},
		{
			name: "pattern rules",
			mutate: func(s *routesnap.Snapshot) {
				s.Models = append(s.Models,
					routesnap.Model{Name: "claude-*-latest", Targets: []routesnap.Target{{Backend: "an", Model: "c", Weight: 1}}},
					routesnap.Model{Name: "**", Targets: []routesnap.Target{{Backend: "an", Model: "c", Weight: 1}}},
					routesnap.Model{Name: "claude-*", Targets: []routesnap.Target{{Backend: "an", Model: "*-*", Weight: 1}}},
					routesnap.Model{Name: "claude-*", Targets: []routesnap.Target{{Backend: "an", Model: "c", Weight: 1}}},
				)
				s.Models[0].Targets[0].Model = "gpt-*"
			},
			want: []routesnap.Problem{
				{Path: "models[0].targets[0].model", Msg: `"*" stands for what a pattern's star matched, and this model's name is no pattern (a name that ends in "*")`},
				{Path: "models[2].name", Msg: `"*" may appear only once, as the last character (a pattern: a literal prefix followed by "*")`},
				{Path: "models[3].name", Msg: `"*" may appear only once, as the last character (a pattern: a literal prefix followed by "*")`},
				{Path: "models[4].targets[0].model", Msg: `"*" may appear only once (it stands for what the pattern's star matched)`},
				{Path: "models[5].name", Msg: `duplicate of models[4]: two patterns with the same prefix "claude-" match the same names`},
			},
		},
		{
			name:   "same provider model on two backends is not a duplicate",
			mutate: func(s *routesnap.Snapshot) { s.Models[1].Targets[1].Backend = "oa" },
		},
		{
			name:   "include_usage on an openai backend",
			mutate: func(s *routesnap.Snapshot) { s.Backends[0].IncludeUsage = new(false) },
		},
		{
			name:   "include_usage on an anthropic backend",
			mutate: func(s *routesnap.Snapshot) { s.Backends[1].IncludeUsage = new(true) },
			want: []routesnap.Problem{
				{Path: "backends[1].include_usage", Msg: `only applies to protocol "openai" (stream_options.include_usage); remove it`},
			},
		},
		{
			name:   "schema and version",
			mutate: func(s *routesnap.Snapshot) { s.Schema, s.Version = 3, 0 },
			want: []routesnap.Problem{
				{Path: "schema", Msg: "must be 1..2, got 3"},
				{Path: "version", Msg: "must be at least 1"},
			},
		},
		{
			name:   "missing lists",
			mutate: func(s *routesnap.Snapshot) { s.Backends, s.Models = nil, nil },
			want: []routesnap.Problem{
				{Path: "backends", Msg: "required"},
				{Path: "models", Msg: "required"},
			},
		},
		{
			name:   "empty lists",
			mutate: func(s *routesnap.Snapshot) { s.Backends, s.Models = []routesnap.Backend{}, []routesnap.Model{} },
			want: []routesnap.Problem{
				{Path: "backends", Msg: "must list at least one backend"},
				{Path: "models", Msg: "must list at least one model"},
			},
		},
		{
			name: "every backend field",
			mutate: func(s *routesnap.Snapshot) {
				s.Backends[1] = routesnap.Backend{ID: "an/1", Protocol: "OpenAI", BaseURL: "http://an.example", Credential: "c 2", MaxInflightPerNode: 0}
				s.Models[1].Targets[0].Backend = "oa"
			},
			want: []routesnap.Problem{
				{Path: "backends[1].id", Msg: "must be 1-64 characters from [A-Za-z0-9._-]"},
				{Path: "backends[1].protocol", Msg: `must be "openai", "anthropic", "gemini" or "bedrock_converse"`},
				{Path: "backends[1].base_url", Msg: "plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https:// (docs/egress.md)"},
				{Path: "backends[1].credential", Msg: "must be a credential name: 1-64 characters from [A-Za-z0-9._-]"},
				{Path: "backends[1].max_inflight_per_node", Msg: "must be 1..100000, got 0"},
				{Path: "models[1].targets[1]", Msg: "duplicate of targets[0] (same backend and model); merge their weights"},
			},
		},
		{
			name: "over the limits",
			mutate: func(s *routesnap.Snapshot) {
				s.Backends[0].ID = strings.Repeat("b", 65)
				s.Backends[0].MaxInflightPerNode = 100001
				s.Models[0].Name = strings.Repeat("é", 257)
				s.Models[0].Targets[0] = routesnap.Target{Backend: "an", Model: "x\u0085", Weight: 1000001, Tier: -1}
			},
			want: []routesnap.Problem{
				{Path: "backends[0].id", Msg: "must be 1-64 characters from [A-Za-z0-9._-]"},
				{Path: "backends[0].max_inflight_per_node", Msg: "must be 1..100000, got 100001"},
				{Path: "models[0].name", Msg: "longer than 256 characters"},
				{Path: "models[0].targets[0].model", Msg: "must not contain control characters"},
				{Path: "models[0].targets[0].weight", Msg: "must be 1..1000000, got 1000001"},
				{Path: "models[0].targets[0].tier", Msg: "must be 0..2147483647, got -1"},
				{Path: "models[1].targets[1].backend", Msg: `unknown backend "oa"`},
			},
		},
		{
			name: "duplicates",
			mutate: func(s *routesnap.Snapshot) {
				s.Backends[1].ID = "oa"
				s.Models[1].Name = "gpt"
				s.Models[1].Targets[1] = s.Models[1].Targets[0]
				s.Models[1].Targets[1].Weight = 7
			},
			want: []routesnap.Problem{
				{Path: "backends[1].id", Msg: "duplicate of backends[0]"},
				{Path: "models[1].name", Msg: "duplicate of models[0]"},
				{Path: "models[1].targets[0].backend", Msg: `unknown backend "an"`},
				{Path: "models[1].targets[1].backend", Msg: `unknown backend "an"`},
				{Path: "models[1].targets[1]", Msg: "duplicate of targets[0] (same backend and model); merge their weights"},
			},
		},
		{
			name: "empty pools and bad references",
			mutate: func(s *routesnap.Snapshot) {
				s.Models[0].Targets = nil
				s.Models[1].Targets = []routesnap.Target{
					{Backend: "gone", Model: "x", Weight: 1},
					{Backend: "", Model: "", Weight: 0},
					{Backend: strings.Repeat("x", 1000), Model: "y", Weight: 1},
				}
			},
			want: []routesnap.Problem{
				{Path: "models[0].targets", Msg: "must list at least one target (an empty pool can serve nothing)"},
				{Path: "models[1].targets[0].backend", Msg: `unknown backend "gone"`},
				{Path: "models[1].targets[1].backend", Msg: "must be a backend id: 1-64 characters from [A-Za-z0-9._-]"},
				{Path: "models[1].targets[1].model", Msg: "must not be empty"},
				{Path: "models[1].targets[1].weight", Msg: "must be 1..1000000, got 0"},
				{Path: "models[1].targets[2].backend", Msg: "must be a backend id: 1-64 characters from [A-Za-z0-9._-]"},
			},
		},
		{
			name:   "model names must be UTF-8",
			mutate: func(s *routesnap.Snapshot) { s.Models[0].Name = "g\xffpt" },
			want:   []routesnap.Problem{{Path: "models[0].name", Msg: "must be valid UTF-8"}},
		},
		{
			name: "gemini names are path segments",
			mutate: func(s *routesnap.Snapshot) {
				s.Backends = append(s.Backends, routesnap.Backend{ID: "gm", Protocol: "gemini", BaseURL: "https://gm.example/v1beta", Credential: "c3", MaxInflightPerNode: 8})
				s.Models = append(s.Models,
					routesnap.Model{Name: "gemini-2.5:latest", Targets: []routesnap.Target{{Backend: "gm", Model: "gemini-2.5-pro", Weight: 1}}},
					routesnap.Model{Name: "google/gemini", Targets: []routesnap.Target{{Backend: "gm", Model: "tunedModels/x", Weight: 1}}},
					routesnap.Model{Name: "g/*", Targets: []routesnap.Target{{Backend: "gm", Model: "*", Weight: 1}, {Backend: "oa", Model: "a/b", Weight: 1}}},
					routesnap.Model{Name: "..", Targets: []routesnap.Target{{Backend: "gm", Model: "gemini%2Fpro", Weight: 1}, {Backend: "gm", Model: "x", Weight: 1}}},
					routesnap.Model{Name: "openai/only", Targets: []routesnap.Target{{Backend: "oa", Model: "a/b", Weight: 1}}},
				)
			},
			want: []routesnap.Problem{
				{Path: "models[3].name", Msg: gemName},
				{Path: "models[3].targets[0].model", Msg: gemModel},
				{Path: "models[4].name", Msg: gemName},
				{Path: "models[5].name", Msg: gemName},
				{Path: "models[5].targets[0].model", Msg: gemModel},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid()
			tt.mutate(s)
			err := s.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ve *routesnap.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(ve.Problems, tt.want); diff != "" {
				t.Errorf("problems mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	var s *routesnap.Snapshot
	var ve *routesnap.ValidationError
	if err := s.Validate(); !errors.As(err, &ve) {
		t.Fatalf("nil.Validate() = %v, want a *ValidationError", err)
	}
}

func TestValidationErrorString(t *testing.T) {
	var ps []routesnap.Problem
	for i := range 12 {
		ps = append(ps, routesnap.Problem{Path: "p" + string(rune('a'+i)), Msg: "bad"})
	}
	got := (&routesnap.ValidationError{Problems: ps}).Error()
	want := "routesnap: invalid snapshot: pa: bad; pb: bad; pc: bad; pd: bad; pe: bad; pf: bad; pg: bad; ph: bad; pi: bad; pj: bad; and 2 more"
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("Error() mismatch (-got +want):\n%s", diff)
	}
}

func TestCheckBaseURL(t *testing.T) {
	const (
		plaintext      = "plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https:// (docs/egress.md)"
		linkLocal      = "link-local address; not allowed (cloud metadata services live there)"
		metaHost       = "cloud metadata service host; not allowed"
		metaAddr       = "cloud metadata service address; not allowed"
		want           = "expected an https:// URL (http:// only for a loopback host)"
		badName        = "invalid host name; expected ASCII letters, digits, '-' and '_' in dot-separated labels (IDNs in punycode)"
		numeric        = "numeric host that is not a valid IP address"
		embedLinkLocal = "IPv6 address embedding a link-local IPv4 address; not allowed (cloud metadata services live there)"
		embedMeta      = "IPv6 address embedding a cloud metadata service address; not allowed"
	)
	tests := []struct {
		url  string
		want string // "" = accepted
	}{
		{"https://api.openai.com/v1", ""},
		{"https://api.openai.com/v1/", ""},
		{"https://api.openai.com:8443", ""},
		{"HTTPS://API.example.COM/v1", ""},
		{"https://10.1.2.3/v1", ""},
		{"https://[2001:db8::1]:443/v1", ""},
		{"https://llm_internal.corp/v1", ""},
		{"https://xn--bcher-kva.example/", ""},
		{"https://api.example.com./v1", ""},
		{"http://127.0.0.1:18080/v1", ""},
		{"http://127.9.9.9/v1", ""},
		{"http://[::1]:18080/v1", ""},
		{"http://LocalHost:1/v1", ""},
		{"http://localhost./v1", ""},
		{"http://[::ffff:127.0.0.1]/v1", ""},
		{"", "required"},
		{"api.openai.com/v1", want},
		{"ftp://api.example.com/", want},
		{"https:api.example.com", want + " with a host"},
		{"https:///v1", want + " with a host"},
		{"http://api.example.com/v1", plaintext},
		{"http://10.0.0.1/v1", plaintext},
		{"http://localhost.example.com/v1", plaintext},
		{"https://user:hunter2@api.example.com/v1", "must not contain user info; the backend's credential is named by credential"},
		{"https://api.example.com/v1?key=hunter2", "must not have a query or fragment"},
		{"https://api.example.com/v1?", "must not have a query or fragment"},
		{"https://api.example.com/v1#x", "must not have a query or fragment"},
		{"https://api.example.com/v1#", "must not have a query or fragment"},
		{"https://api.example.com:0/", "invalid port; expected 1..65535"},
		{"https://api.example.com:65536/", "invalid port; expected 1..65535"},
		{"https://api.example.com:/", "invalid port; expected 1..65535"},
		{"https://api.example.com:08/", "invalid port; expected 1..65535"},
		{"https://169.254.169.254/latest/meta-data", linkLocal},
		{"https://169.254.170.2/v2/credentials", linkLocal},
		{"https://[::ffff:169.254.169.254]/", linkLocal},
		{"https://[::ffff:a9fe:a9fe]/", linkLocal},
		{"https://[::169.254.169.254]/", embedLinkLocal},
		{"https://[::a9fe:a9fe]/", embedLinkLocal},
		{"https://[64:ff9b::a9fe:a9fe]/", embedLinkLocal},
		{"https://[64:ff9b::169.254.169.254]/", embedLinkLocal},
		{"https://[64:ff9b:1::a9fe:a9fe]/", embedLinkLocal},
		{"https://[2002:a9fe:a9fe::]/", embedLinkLocal},
		{"https://[2002:a9fe:a9fe:1::1]/", embedLinkLocal},
		{"https://[2001:0:a9fe:a9fe::1]/", embedLinkLocal},                  // Teredo server
		{"https://[2001:0:4136:e378:8000:63bf:5601:5601]/", embedLinkLocal}, // Teredo client 169.254.169.254, inverted
		{"https://[::ffff:0:a9fe:a9fe]/", embedLinkLocal},                   // SIIT IPv4-translated
		{"https://[::ffff:0:169.254.169.254]/", embedLinkLocal},             // the same, dotted
		{"https://[2001:db8::5efe:a9fe:a9fe]/", embedLinkLocal},             // ISATAP
		{"https://[2001:db8:1::200:5efe:a9fe:a9fe]/", embedLinkLocal},       // ISATAP, universal bit
		{"https://[2001:db8::5efe:a01:203]/v1", ""},                         // ISATAP of 10.1.2.3
		{"https://[64:ff9b::6464:64c8]/", embedMeta},                        // 100.100.100.200
		{"https://[2002:c000:00c0::]/", embedMeta},                          // 192.0.0.192
		{"https://[64:ff9b::a01:203]/v1", ""},                               // 10.1.2.3 behind NAT64
		{"https://[2002:0a01:0203::1]/v1", ""},                              // 10.1.2.3 over 6to4
		{"https://[fe80::1]/", linkLocal},
		{"https://[fe80::a9fe:a9fe%25eth0]/", linkLocal},
		{"https://[ff02::1]/", linkLocal},
		{"https://[fd00:ec2::254]/latest", metaAddr},
		{"https://100.100.100.200/latest", metaAddr},
		{"https://192.0.0.192/", metaAddr},
		{"https://metadata.google.internal/computeMetadata/v1", metaHost},
		{"https://METADATA.google.internal./", metaHost},
		{"https://metadata/", metaHost},
		{"https://metadata.goog/", metaHost},
		{"https://instance-data.ec2.internal/", metaHost},
		{"https://metadata.tencentyun.com/", metaHost},
		{"https://0.0.0.0/", "not a unicast address"},
		{"https://[::]/", "not a unicast address"},
		{"https://224.0.0.1/", linkLocal},
		{"https://239.1.1.1/", "not a unicast address"},
		{"https://0251.254.169.254/", numeric},
		{"https://2852039166/", numeric},
		{"https://0xa9fea9fe/", numeric},
		{"https://api.0x10/", numeric},
		{"https://[zz]/", "not a valid URL"},
		{"https://[127.0.0.1]/", "not a valid URL"},
		{"https://bücher.example/", badName},
		{"https://a..b/", badName},
		{"https://" + strings.Repeat("a", 64) + ".example/", badName},
		{"https://%61pi.example.com/", "not a valid URL"},
		{"https://api!.example.com/", badName},
		{"https://api .example/", "not a valid URL"},
	}
	for _, tt := range tests {
		got := ""
		if err := routesnap.CheckBaseURL(tt.url); err != nil {
			got = err.Msg
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("CheckBaseURL(%q): error %q repeats the URL", tt.url, err)
			}
		}
		if diff := cmp.Diff(got, tt.want); diff != "" {
			t.Errorf("CheckBaseURL(%q) mismatch (-got +want):\n%s", tt.url, diff)
		}
	}
}

// TestValidateCredentials: with the node's credentials, every name they
// do not define is listed at its backend, in document order, and a name
// that is not a valid id is reported once.
func TestValidateCredentials(t *testing.T) {
	defined := func(names ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	tests := []struct {
		name    string
		mutate  func(*routesnap.Snapshot)
		defined func(string) bool
		want    []routesnap.Problem
	}{
		{name: "valid", mutate: func(*routesnap.Snapshot) {}, defined: defined("c1", "c2")},
		{name: "nil skips the check", mutate: func(*routesnap.Snapshot) {}},
		{
			name: "every unknown credential is listed", mutate: func(*routesnap.Snapshot) {}, defined: defined(),
			want: []routesnap.Problem{
				{Path: "backends[0].credential", Msg: `unknown credential "c1"; this node's [credentials] does not define it`},
				{Path: "backends[1].credential", Msg: `unknown credential "c2"; this node's [credentials] does not define it`},
			},
		},
		{
			name: "in document order, no double report",
			mutate: func(s *routesnap.Snapshot) {
				s.Backends[0].Credential = "bad name"
				s.Backends[1].Credential = "missing"
				s.Models[0].Targets[0].Weight = 0
			},
			defined: defined("c1", "c2"),
			want: []routesnap.Problem{
				{Path: "backends[0].credential", Msg: "must be a credential name: 1-64 characters from [A-Za-z0-9._-]"},
				{Path: "backends[1].credential", Msg: `unknown credential "missing"; this node's [credentials] does not define it`},
				{Path: "models[0].targets[0].weight", Msg: "must be 1..1000000, got 0"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid()
			tt.mutate(s)
			err := s.ValidateCredentials(tt.defined)
			routesErr := routesnap.ValidateRoutes(s.Backends, s.Models, tt.defined)
			if tt.want == nil {
				if err != nil || routesErr != nil {
					t.Fatalf("ValidateCredentials = %v, ValidateRoutes = %v; want nil", err, routesErr)
				}
				return
			}
			for _, err := range []error{err, routesErr} {
				var ve *routesnap.ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("got %v; want *ValidationError", err)
				}
				if diff := cmp.Diff(ve.Problems, tt.want); diff != "" {
					t.Errorf("problems (-got +want):\n%s", diff)
				}
			}
		})
	}
	if err := (*routesnap.Snapshot)(nil).ValidateCredentials(defined()); err == nil {
		t.Error("ValidateCredentials on nil = nil")
	}
}
