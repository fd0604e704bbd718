package scootgate_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/scootgate/scootgate"

// listedPackage is what `go list -json` says of one package of the module.
type listedPackage struct {
	ImportPath string
	Imports    []string // direct, non-test
	Deps       []string // transitive, non-test
}

// goList lists the node module's packages with their imports, as the go
// command sees them.
func goList(t *testing.T) map[string]listedPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Imports,Deps", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]listedPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = p
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func rel(path string) string { return strings.TrimPrefix(path, module+"/") }

// TestImportRules holds the package boundaries docs/architecture.md
// states ("Import rules") to the code's real imports.
func TestImportRules(t *testing.T) {
	pkgs := goList(t)
	type rule struct {
		name  string
		pkgs  func(string) bool // the packages the rule is about
		deps  bool              // check transitive imports, else direct ones
		allow func(string) bool // whether an import is allowed
	}
	under := func(prefixes ...string) func(string) bool {
		return func(p string) bool {
			return slices.ContainsFunc(prefixes, func(pre string) bool { return p == pre || strings.HasPrefix(p, pre+"/") })
		}
	}
	not := func(f func(string) bool) func(string) bool { return func(p string) bool { return !f(p) } }
	// providerAPI: a provider API's folder, internal/provider/<api>, and
	// anything below it; not the shared package or the catalog.
	providerAPI := func(p string) bool {
		rest, ok := strings.CutPrefix(p, "internal/provider/")
		return ok && rest != "" && rest != "catalog" && !strings.HasPrefix(rest, "catalog/")
	}
	inModule := func(f func(string) bool) func(string) bool {
		return func(imp string) bool { return f(rel(imp)) && strings.HasPrefix(imp, module+"/") }
	}
	rules := []rule{
		{
			// Contracts are vendored into control planes and consumers.
			name: "pkg/ imports only the standard library and pkg/", pkgs: under("pkg"), deps: true,
			allow: func(imp string) bool { return standard(imp) || strings.HasPrefix(imp, module+"/pkg/") },
		},
		{
			// The request path hands events to usage.Recorder's Appender;
			// the store and the delivery behind it are not its business.
			name: "the request path never imports the usage pipeline's internals", pkgs: under("internal/gateway", "internal/usage", "internal/provider"), deps: true,
			allow: not(inModule(under("internal/outbox", "internal/mqttpub", "internal/app"))),
		},
		{
			// A provider API is one folder: it knows no other provider API,
			// and nothing but the catalog lists them all.
			name: "a provider API imports no other provider API", pkgs: providerAPI, deps: true,
			allow: func(imp string) bool { return !providerAPI(rel(imp)) || !strings.HasPrefix(imp, module+"/") },
		},
		{
			name: "only the catalog and tests name a provider API", pkgs: not(under("internal/provider")), deps: false,
			allow: func(imp string) bool { return !providerAPI(rel(imp)) || !strings.HasPrefix(imp, module+"/") },
		},
		{
			// usage turns an attempt into an event; reading usage from an
			// answer is the provider APIs' business.
			name: "usage imports no provider internals, SSE reader or JSON editor", pkgs: under("internal/usage"), deps: true,
			allow: not(inModule(under("internal/provider", "internal/sse", "internal/jsonedit"))),
		},
		{
			name: "the request path switches on no provider API", pkgs: under("internal/gateway"), deps: false,
			allow: func(imp string) bool { return !providerAPI(rel(imp)) || !strings.HasPrefix(imp, module+"/") },
		},
		{
			name: "nothing imports the request path but app", pkgs: not(under("internal/gateway", "internal/app")), deps: false,
			allow: not(inModule(under("internal/gateway"))),
		},
		{
			name: "selection imports no networking", pkgs: under("internal/balance", "internal/routes", "internal/upstream"), deps: false,
			allow: func(imp string) bool {
				return !slices.Contains([]string{"net", "net/http", "crypto/tls", "golang.org/x/net/proxy"}, imp) &&
					!inModule(under("internal/egress", "internal/gateway", "internal/snapshot", "internal/outbox", "internal/mqttpub"))(imp)
			},
		},
		{
			name: "selection never reaches egress, the request path, control-plane I/O or the config file", pkgs: under("internal/balance", "internal/routes", "internal/upstream"), deps: true,
			allow: not(inModule(under("internal/egress", "internal/gateway", "internal/snapshot", "internal/outbox", "internal/mqttpub", "internal/app", "internal/config"))),
		},
		{
			name: "routes imports neither config nor snapshot", pkgs: under("internal/routes"), deps: false,
			allow: not(inModule(under("internal/config", "internal/snapshot"))),
		},
		{
			name: "the node never links the dev stack or the fake clock", pkgs: under("cmd/scootgate", "internal/app"), deps: true,
			allow: not(inModule(under("internal/devstack", "internal/schematest", "internal/clock"))),
		},
		{
			name: "the node module never imports the load harness", pkgs: func(string) bool { return true }, deps: true,
			allow: func(imp string) bool { return !strings.HasPrefix(imp, module+"/bench") },
		},
	}
	for _, r := range rules {
		checked := 0
		for name, p := range pkgs {
			if !r.pkgs(name) {
				continue
			}
			checked++
			imports := p.Imports
			if r.deps {
				imports = p.Deps
			}
			for _, imp := range imports {
				if !r.allow(imp) {
					t.Errorf("%s: %s imports %s", r.name, name, imp)
				}
			}
		}
		if checked == 0 {
			t.Errorf("%s: no package matched the rule", r.name)
		}
	}
}

// TestArchitecturePackageMap: the package map in docs/architecture.md
// lists every package of the node module (`go list ./...`) and nothing
// that is not there; "dir/..." covers every package under dir, and the
// bench/ entries name the directories of the load-harness module.
func TestArchitecturePackageMap(t *testing.T) {
	pkgs := goList(t)
	f, err := os.Open("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var entries []string
	inMap := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if inMap {
				break // the map is the first code block
			}
			inMap = true
			continue
		}
		if !inMap || line == "" || line[0] == ' ' {
			continue
		}
		entries = append(entries, strings.Fields(line)[0])
	}
	if len(entries) < 20 {
		t.Fatalf("found %d entries in the package map; is it still the first code block?", len(entries))
	}
	covers := func(entry, pkg string) bool {
		if dir, ok := strings.CutSuffix(entry, "/..."); ok {
			return pkg == dir || strings.HasPrefix(pkg, dir+"/")
		}
		return strings.TrimSuffix(entry, "/") == pkg
	}
	for name := range pkgs {
		if name == "" {
			continue // the repository root holds only tests like this one
		}
		if !slices.ContainsFunc(entries, func(e string) bool { return covers(e, name) }) {
			t.Errorf("package %s is missing from the package map in docs/architecture.md", name)
		}
	}
	for _, e := range entries {
		if strings.HasPrefix(e, "bench/") {
			if _, err := os.Stat(filepath.FromSlash(strings.TrimSuffix(e, "/"))); err != nil {
				t.Errorf("package map entry %s: %v", e, err)
			}
			continue
		}
		found := false
		for name := range pkgs {
			if covers(e, name) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("package map entry %s is not a package of the module (go list ./...)", e)
		}
	}
}
