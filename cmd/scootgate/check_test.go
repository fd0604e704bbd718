package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

const (
	routesDir = "../../testdata/routesnap"
	authzDir  = "../../testdata/authz"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeJSON(t *testing.T, path string, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, path, data)
}

func validRoutes(t *testing.T) *routesnap.Snapshot {
	t.Helper()
	doc, err := routesnap.Decode(readFile(t, filepath.Join(routesDir, "valid.json")))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func validAuthz(t *testing.T) *authsnap.Snapshot {
	t.Helper()
	doc, err := authsnap.Decode(readFile(t, filepath.Join(authzDir, "valid.json")))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// fixtureHosts are the base_url hosts of the routing fixtures
// (testdata/routesnap); every credential nodeConfig defines may go to each.
var fixtureHosts = []string{"api.openai.com", "eu.api.openai.com", "api.anthropic.com", "an.example", "b.example", "b2.example", "c.example", "oa.example"}

// nodeConfig writes a node config naming the two snapshot sources and
// defining the credentials in creds (values from the environment), each
// allowed to fixtureHosts.
func nodeConfig(t *testing.T, dir, routesSource, authzSource string, creds ...string) string {
	t.Helper()
	toml := "node_id = \"check-test\"\n[[egress.proxies]]\nname = \"p\"\nurl = \"socks5://127.0.0.1:11080\"\n"
	hosts, err := json.Marshal(fixtureHosts) // a JSON array of strings is a TOML array
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range creds {
		env := "SG_CHECK_TEST_" + strings.ToUpper(strings.ReplaceAll(c, "-", "_"))
		t.Setenv(env, "secret-value-of-"+c)
		toml += fmt.Sprintf("[credentials.%s]\nenv = %q\nhosts = %s\n", c, env, hosts)
	}
	if routesSource != "static" {
		toml += fmt.Sprintf("[routes]\nsource = %q\n", routesSource)
	} else {
		toml += "[backends.b]\nprotocol = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\ncredential = \"openai-main\"\nmax_inflight_per_node = 1\n" +
			"[models.m]\n[[models.m.targets]]\nbackend = \"b\"\nmodel = \"x\"\nweight = 1\n"
	}
	toml += fmt.Sprintf("[authz]\nsource = %q\n", authzSource)
	return writeFile(t, filepath.Join(dir, "node.toml"), []byte(toml))
}

func TestCheckSnapshotFiles(t *testing.T) {
	dir := t.TempDir()
	validR := filepath.Join(routesDir, "valid.json")
	validA := filepath.Join(authzDir, "valid.json")

	// Version 43 drops openai-eu (and gpt-4o's target on it), reweights
	// claude-sonnet and adds a model.
	next := validRoutes(t)
	next.Version = 43
	next.Backends = next.Backends[:1:1]
	next.Backends = append(next.Backends, validRoutes(t).Backends[2])
	next.Models[0].Targets = next.Models[0].Targets[:1]
	next.Models[1].Targets[0].Weight = 2
	next.Models = append(next.Models, routesnap.Model{Name: "haiku", Targets: []routesnap.Target{{Backend: "anthropic-1", Model: "claude-haiku-4-5", Weight: 1}}})
	routes43 := writeJSON(t, filepath.Join(dir, "routes43.json"), next)
	next.Version = 42
	routesSameVersion := writeJSON(t, filepath.Join(dir, "routes42b.json"), next)
	old := validRoutes(t)
	old.Version = 41
	routes41 := writeJSON(t, filepath.Join(dir, "routes41.json"), old)
	old.Version = 42
	old.GeneratedAt = old.GeneratedAt.Add(1)
	routesNoChange := writeJSON(t, filepath.Join(dir, "routes42c.json"), old)

	// Version 43 rotates k_alpha's key, removes k_bravo, adds k_charlie.
	keys := validAuthz(t)
	keys.Version = 43
	keys.Keys[0].Digest = authsnap.Digest("a rotated key")
	keys.Keys[1] = authsnap.Key{KeyID: "k_charlie", TenantID: "t_initech", Digest: authsnap.Digest("charlie"), Models: []string{}}
	authz43 := writeJSON(t, filepath.Join(dir, "authz43.json"), keys)
	digests := []string{validAuthz(t).Keys[0].Digest, validAuthz(t).Keys[1].Digest, keys.Keys[0].Digest, keys.Keys[1].Digest}

	// Credentials: the node defines openai-main only.
	cfg := nodeConfig(t, dir, "static", "file:authz.json", "openai-main")
	cfgBoth := nodeConfig(t, t.TempDir(), "static", "file:authz.json", "openai-main", "anthropic-main")

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{
			name:   "valid routes",
			args:   []string{"--routes", validR},
			stdout: validR + ": ok (routes version 42; credential names not checked without --config)\n",
		},
		{
			name:   "routes with the node's credentials",
			args:   []string{"--routes", validR, "--config", cfgBoth},
			stdout: validR + ": ok (routes version 42; credentials defined in " + cfgBoth + ")\n",
		},
		{
			name:   "routes naming a credential the node lacks",
			args:   []string{"--routes", validR, "--config", cfg},
			code:   1,
			stderr: validR + ": 1 problem(s):\n  backends[2].credential: unknown credential \"anthropic-main\"; this node's [credentials] does not define it\n",
		},
		{
			name: "routes diff",
			args: []string{"--routes", routes43, "--previous", validR},
			stdout: routes43 + ": ok (routes version 43; credential names not checked without --config)\n" +
				"routes: version 42 -> 43: 4 changes\n" +
				"- backend openai-eu\n" +
				"+ model haiku (1 target)\n" +
				"~ target claude-sonnet -> anthropic-1/claude-sonnet-4-5: weight 1 -> 2\n" +
				"- target gpt-4o -> openai-eu/gpt-4o-2024-08-06\n",
		},
		{
			name: "equal version, different contents",
			args: []string{"--routes", routesSameVersion, "--previous", validR},
			code: 1,
			stdout: "routes: version 42 -> 42: 4 changes\n" +
				"- backend openai-eu\n" +
				"+ model haiku (1 target)\n" +
				"~ target claude-sonnet -> anthropic-1/claude-sonnet-4-5: weight 1 -> 2\n" +
				"- target gpt-4o -> openai-eu/gpt-4o-2024-08-06\n",
			stderr: routesSameVersion + ": 1 problem(s):\n  version: 42 equals the previous version but the contents differ; nodes treat an equal version as no change and never apply it (raise the version)\n",
		},
		{
			name:   "equal version, same contents",
			args:   []string{"--routes", routesNoChange, "--previous", validR},
			stdout: routesNoChange + ": ok (routes version 42; credential names not checked without --config)\nroutes: version 42 -> 42: no changes\n",
		},
		{
			name:   "lower version",
			args:   []string{"--routes", routes41, "--previous", validR},
			code:   1,
			stdout: "routes: version 42 -> 41: no changes\n",
			stderr: routes41 + ": 1 problem(s):\n  version: 41 is lower than the previous version 42; nodes that applied the previous one reject it as a rollback\n",
		},
		{
			name:   "invalid previous",
			args:   []string{"--routes", validR, "--previous", filepath.Join(routesDir, "invalid", "truncated.json")},
			code:   1,
			stdout: validR + ": ok (routes version 42; credential names not checked without --config)\n",
			stderr: filepath.Join(routesDir, "invalid", "truncated.json") + " (previous): 1 problem(s):\n",
		},
		{
			name:   "missing file",
			args:   []string{"--routes", filepath.Join(dir, "nope.json")},
			code:   1,
			stderr: filepath.Join(dir, "nope.json") + ": 1 problem(s):\n  open " + filepath.Join(dir, "nope.json") + ": no such file or directory\n",
		},
		{
			name:   "valid authz",
			args:   []string{"--authz", validA},
			stdout: validA + ": ok (authz version 42)\n",
		},
		{
			name: "authz diff without digests",
			args: []string{"--authz", authz43, "--previous", validA},
			stdout: authz43 + ": ok (authz version 43)\n" +
				"authz: version 42 -> 43: 3 changes\n" +
				"~ key k_alpha: digest changed\n" +
				"- key k_bravo\n" +
				"+ key k_charlie (tenant t_initech, models [], expires never)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, "", append([]string{"check"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if diff := cmp.Diff(stdout, tt.stdout); diff != "" {
				t.Errorf("stdout (-got +want):\n%s", diff)
			}
			// A whole-document problem's message belongs to the decoder;
			// only the header line is pinned for it.
			if strings.HasSuffix(tt.stderr, "problem(s):\n") {
				stderr, _, _ = strings.Cut(stderr, "\n")
				stderr += "\n"
			}
			if diff := cmp.Diff(stderr, tt.stderr); diff != "" {
				t.Errorf("stderr (-got +want):\n%s", diff)
			}
			for _, d := range digests {
				if strings.Contains(stdout+stderr, d) {
					t.Errorf("output contains a digest")
				}
			}
		})
	}
}

// TestCheckInvalidFixtures: every invalid example is rejected, with each
// problem the node's own decoder and validator find, one per line.
func TestCheckInvalidFixtures(t *testing.T) {
	kinds := []struct {
		flag, dir string
		problems  func([]byte) []string
	}{
		{"--routes", routesDir, func(data []byte) []string {
			doc, err := routesnap.Decode(data)
			if err == nil {
				err = doc.Validate()
			}
			return wantProblems(t, err)
		}},
		{"--authz", authzDir, func(data []byte) []string {
			doc, err := authsnap.Decode(data)
			if err == nil {
				err = doc.Validate()
			}
			return wantProblems(t, err)
		}},
	}
	for _, k := range kinds {
		files, err := filepath.Glob(filepath.Join(k.dir, "invalid", "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no fixtures in %s: %v", k.dir, err)
		}
		for _, f := range files {
			t.Run(k.flag+" "+filepath.Base(f), func(t *testing.T) {
				code, stdout, stderr := runCmd(t, "", "check", k.flag, f)
				if code != 1 || stdout != "" {
					t.Fatalf("exit code %d, stdout %q; want 1 and nothing", code, stdout)
				}
				want := k.problems(readFile(t, f))
				header := fmt.Sprintf("%s: %d problem(s):\n", f, len(want))
				if !strings.HasPrefix(stderr, header) {
					t.Fatalf("stderr %q does not start with %q", stderr, header)
				}
				for _, p := range want {
					if !strings.Contains(stderr, p) {
						t.Errorf("stderr lacks %q:\n%s", p, stderr)
					}
				}
			})
		}
	}
}

// wantProblems is what check must list for a decode or validation error:
// every validation problem, or the decoder's one message.
func wantProblems(t *testing.T, err error) []string {
	t.Helper()
	var (
		rv *routesnap.ValidationError
		av *authsnap.ValidationError
		rd *routesnap.DecodeError
		ad *authsnap.DecodeError
		ps []string
	)
	switch {
	case errors.As(err, &rv):
		for _, p := range rv.Problems {
			ps = append(ps, p.String())
		}
	case errors.As(err, &av):
		for _, p := range av.Problems {
			ps = append(ps, p.String())
		}
	case errors.As(err, &rd):
		ps = []string{rd.Msg}
	case errors.As(err, &ad):
		ps = []string{ad.Msg}
	default:
		t.Fatalf("fixture is not rejected by the decoder or validator: %v", err)
	}
	return ps
}

// TestCheckConfigFetchesSources: check --config loads the config, then
// fetches each snapshot source once and checks the document as the node
// would at start, listing every problem of every source.
func TestCheckConfigFetchesSources(t *testing.T) {
	validR, _ := filepath.Abs(filepath.Join(routesDir, "valid.json"))
	validA, _ := filepath.Abs(filepath.Join(authzDir, "valid.json"))
	badDigest, _ := filepath.Abs(filepath.Join(authzDir, "invalid", "bad-digest.json"))
	files := map[string]string{
		"/valid/routes.json": validR,
		"/valid/authz.json":  validA,
		"/bad/authz.json":    badDigest,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		data, err := os.ReadFile(f)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(data)
	}))
	defer srv.Close()
	url := func(path string) string { return srv.URL + path }
	tests := []struct {
		name                 string
		routes, authz        string // sources
		creds                []string
		offline              bool
		code                 int
		stdout, stderrPrefix string
	}{
		{
			name: "file sources", routes: "file:" + validR, authz: "file:" + validA,
			creds:  []string{"openai-main", "anthropic-main"},
			stdout: "CFG: ok\nauthz snapshot file:" + validA + ": ok (version 42)\nroutes snapshot file:" + validR + ": ok (version 42)\n",
		},
		{
			name: "http sources", routes: url("/valid/routes.json"), authz: url("/valid/authz.json"),
			creds:  []string{"openai-main", "anthropic-main"},
			stdout: "CFG: ok\nauthz snapshot " + url("/valid/authz.json") + ": ok (version 42)\nroutes snapshot " + url("/valid/routes.json") + ": ok (version 42)\n",
		},
		{
			name: "static routes: only authz is fetched", routes: "static", authz: "file:" + validA,
			creds:  []string{"openai-main"},
			stdout: "CFG: ok\nauthz snapshot file:" + validA + ": ok (version 42)\n",
		},
		{
			name: "every source's problems", routes: url("/valid/routes.json"), authz: url("/bad/authz.json"),
			creds:  []string{"openai-main"},
			code:   1,
			stdout: "CFG: ok\n",
			stderrPrefix: "authz snapshot " + url("/bad/authz.json") + ": 2 problem(s):\n" +
				"  keys[0].digest: must be 64 lowercase hex characters (sha256), found uppercase\n" +
				"  keys[1].digest: must be 64 lowercase hex characters (sha256)\n" +
				"routes snapshot " + url("/valid/routes.json") + ": 1 problem(s):\n" +
				"  backends[2].credential: unknown credential \"anthropic-main\"; this node's [credentials] does not define it\n",
		},
		{
			name: "credential unknown to the node", routes: "file:" + validR, authz: "file:" + validA,
			creds:        []string{"openai-main"},
			code:         1,
			stdout:       "CFG: ok\nauthz snapshot file:" + validA + ": ok (version 42)\n",
			stderrPrefix: "routes snapshot file:" + validR + ": 1 problem(s):\n  backends[2].credential: unknown credential \"anthropic-main\"",
		},
		{
			name: "unreachable", routes: url("/missing/routes.json"), authz: "file:" + validA,
			creds:        []string{"openai-main"},
			code:         1,
			stdout:       "CFG: ok\nauthz snapshot file:" + validA + ": ok (version 42)\n",
			stderrPrefix: "routes snapshot " + url("/missing/routes.json") + ": 1 problem(s):\n  fetch: snapshot: GET " + url("/missing/routes.json") + ": unexpected status 404",
		},
		{
			name: "offline: the config only", routes: url("/missing/routes.json"), authz: url("/bad/authz.json"),
			creds:   []string{"openai-main"},
			offline: true,
			stdout:  "CFG: ok\n",
		},
		{
			name: "invalid config: nothing fetched", routes: "file:" + validR, authz: "ftp://x",
			code:         1,
			stderrPrefix: "CFG: 1 problem(s):\n  authz.source: ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := nodeConfig(t, t.TempDir(), tt.routes, tt.authz, tt.creds...)
			args := []string{"check", "--config", cfg}
			if tt.offline {
				args = append(args, "--offline")
			}
			code, stdout, stderr := runCmd(t, "", args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if diff := cmp.Diff(stdout, strings.ReplaceAll(tt.stdout, "CFG", cfg)); diff != "" {
				t.Errorf("stdout (-got +want):\n%s", diff)
			}
			if want := strings.ReplaceAll(tt.stderrPrefix, "CFG", cfg); !strings.HasPrefix(stderr, want) || (want == "") != (stderr == "") {
				t.Errorf("stderr %q, want it to start with %q", stderr, want)
			}
			if strings.Contains(stdout+stderr, "secret-value-of-") {
				t.Error("a credential value appeared in the output")
			}
		})
	}
}

func TestCheckUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "--config, --routes or --authz is required"},
		{[]string{"--routes", "a", "--authz", "b"}, "give --routes or --authz, not both"},
		{[]string{"--authz", "a", "--config", "c"}, "--config is not used with --authz"},
		{[]string{"--previous", "a"}, "--previous needs --routes or --authz"},
		{[]string{"--offline", "--routes", "a"}, "--offline applies to check --config alone"},
		{[]string{"--config", "c", "extra"}, `unexpected argument "extra"`},
		{[]string{"--bogus"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		code, _, stderr := runCmd(t, "", append([]string{"check"}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("check %v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}
