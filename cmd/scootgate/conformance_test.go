package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/schematest"
	"github.com/scootgate/scootgate/internal/secret"
)

// conformanceCreds are the credential names the routing fixtures use.
var conformanceCreds = []string{"openai-main", "anthropic-main"}

// doc is one document of the conformance set.
type conformanceDoc struct {
	name string
	data []byte
}

// conformanceDocs returns every fixture of dir (valid.json and invalid/*)
// and the extra documents, named.
func conformanceDocs(t *testing.T, dir string, extra map[string][]byte) []conformanceDoc {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "invalid", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(dir, "valid.json"))
	var docs []conformanceDoc
	for _, f := range files {
		docs = append(docs, conformanceDoc{f, readFile(t, f)})
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range extra {
			if !yield(k) {
				return
			}
		}
	}) {
		docs = append(docs, conformanceDoc{name, extra[name]})
	}
	return docs
}

// TestSchemaConformance runs every routing and authorization document in
// testdata (and a few built here) through a JSON Schema validator with
// proto/*.schema.json, through the node's decoder and validator, and
// through `scootgate check`, and compares the verdicts:
//
//   - the node and check agree, always;
//   - what the schema rejects, the node rejects;
//   - what the schema accepts and the node rejects is rejected only for
//     rules the schema cannot express (schematest.RouteRules, AuthRules),
//     each of which some document here exercises.
func TestSchemaConformance(t *testing.T) {
	valid := readFile(t, filepath.Join(routesDir, "valid.json"))
	validA := readFile(t, filepath.Join(authzDir, "valid.json"))
	routeExtra := map[string][]byte{
		"(built) undefined credential":           bytes.Replace(valid, []byte(`"credential": "openai-main"`), []byte(`"credential": "nobody"`), 1),
		"(built) integer written 42.0":           bytes.Replace(valid, []byte(`"version": 42`), []byte(`"version": 42.0`), 1),
		"(built) weight written 1e2":             bytes.Replace(valid, []byte(`"weight": 100`), []byte(`"weight": 1e2`), 1),
		"(built) lowercase t in a timestamp":     bytes.Replace(valid, []byte(`"2026-11-29T10:00:00Z"`), []byte(`"2026-11-29t10:00:00Z"`), 1),
		"(built) target names no backend":        bytes.Replace(valid, []byte(`"backend": "openai-eu"`), []byte(`"backend": "gone"`), 1),
		"(built) plaintext base_url":             bytes.Replace(valid, []byte(`"https://api.openai.com/v1"`), []byte(`"http://api.openai.com/v1"`), 1),
		"(built) metadata base_url":              bytes.Replace(valid, []byte(`"https://api.openai.com/v1"`), []byte(`"https://169.254.169.254/v1"`), 1),
		"(built) escaped T in a timestamp":       bytes.Replace(valid, []byte(`"2026-11-29T10:00:00Z"`), []byte(`"2026-11-29\u005410:00:00Z"`), 1),
		"(built) one-digit hour":                 bytes.Replace(valid, []byte(`"2026-11-29T10:00:00Z"`), []byte(`"2026-11-29T1:00:00Z"`), 1),
		"(built) endpoints twice":                bytes.Replace(valid, []byte(`"credential": "openai-main",`), []byte(`"credential": "openai-main", "endpoints": ["responses", "responses"],`), 1),
		"(built) endpoint of the other protocol": bytes.Replace(valid, []byte(`"credential": "openai-main",`), []byte(`"credential": "openai-main", "endpoints": ["messages"],`), 1),
		"(built) no endpoints":                   bytes.Replace(valid, []byte(`"credential": "openai-main",`), []byte(`"credential": "openai-main", "endpoints": [],`), 1),
		"(built) endpoints listed":               bytes.Replace(valid, []byte(`"credential": "openai-main",`), []byte(`"credential": "openai-main", "endpoints": ["chat_completions", "embeddings"],`), 1),
		"(built) leap second":                    bytes.Replace(valid, []byte(`"2026-11-29T10:00:00Z"`), []byte(`"2026-12-31T23:59:60Z"`), 1),
	}
	authExtra := map[string][]byte{
		"(built) version written 4.2e1":  bytes.Replace(validA, []byte(`"version": 42`), []byte(`"version": 4.2e1`), 1),
		"(built) lowercase z in expires": bytes.Replace(validA, []byte(`"2030-01-01T00:00:00Z"`), []byte(`"2030-01-01T00:00:00z"`), 1),
	}

	dir := t.TempDir()
	cfg := nodeConfig(t, dir, "static", "file:"+filepath.Join(authzDir, "valid.json"), conformanceCreds...)
	policy := credential.Policy{Credentials: map[string]credential.Credential{}}
	for _, c := range conformanceCreds {
		policy.Credentials[c] = credential.Credential{Secret: secret.New("x"), Hosts: fixtureHosts}
	}

	kinds := []struct {
		name   string
		schema string
		docs   []conformanceDoc
		rules  []schematest.Rule
		node   func([]byte) error
		check  []string // cmdCheck flags before the file
	}{
		{
			name: "routes", schema: "../../proto/routesnap.schema.json",
			docs: conformanceDocs(t, routesDir, routeExtra), rules: schematest.RouteRules,
			node:  func(b []byte) error { _, err := decodeRoutes(b, &policy); return err },
			check: []string{"--config", cfg, "--routes"},
		},
		{
			name: "authz", schema: "../../proto/authsnap.schema.json",
			docs: conformanceDocs(t, authzDir, authExtra), rules: schematest.AuthRules,
			node:  func(b []byte) error { _, err := decodeAuthz(b); return err },
			check: []string{"--authz"},
		},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			schema := schematest.MustLoad(k.schema)
			used := map[string]bool{}
			for i, d := range k.docs {
				schemaErr := schema.Check(d.data)
				nodeErr := k.node(d.data)

				path := filepath.Join(dir, k.name+"-"+strings.Repeat("x", i%3)+filepath.Base(strings.ReplaceAll(d.name, " ", "_")))
				writeFile(t, path, d.data)
				code := cmdCheck(append(slices.Clone(k.check), path), io.Discard, io.Discard)
				if (code == 0) != (nodeErr == nil) {
					t.Errorf("%s: scootgate check exits %d, the node's decoder says %v", d.name, code, nodeErr)
				}

				switch {
				case schemaErr != nil && nodeErr == nil:
					t.Errorf("%s: the schema rejects it (%s), the node accepts it", d.name, schematest.Short(schemaErr))
				case schemaErr == nil && nodeErr != nil:
					problems := problemList(nodeErr)
					if p, ok := schematest.Explained(problems, k.rules); !ok {
						t.Errorf("%s: the schema accepts it, the node rejects it for a rule not in the accounted set: %s", d.name, p)
					}
					for _, p := range problems {
						for _, r := range k.rules {
							if r.Match(p) {
								used[r.Name] = true
							}
						}
					}
				}
			}
			for _, r := range k.rules {
				if !used[r.Name] {
					t.Errorf("rule %q is exercised by no document; add one (or drop the rule)", r.Name)
				}
			}
		})
	}
}

// TestSchemaCommentsListRules keeps each schema's $comment, which tells a
// control-plane author what the node checks beyond the schema, in step
// with the rules the conformance test accounts for.
func TestSchemaCommentsListRules(t *testing.T) {
	for file, rules := range map[string][]schematest.Rule{
		"../../proto/routesnap.schema.json": schematest.RouteRules,
		"../../proto/authsnap.schema.json":  schematest.AuthRules,
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range schematest.Names(rules) {
			if !bytes.Contains(data, []byte(name)) {
				t.Errorf("%s: $comment does not state %q", file, name)
			}
		}
	}
}
