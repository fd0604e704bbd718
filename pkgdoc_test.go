package scootgate_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs fails when a package of this module has no package doc
// comment (docs/architecture.md; tailscale pkgdoc_test.go).
func TestPackageDocs(t *testing.T) {
	dirs := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("found only %d packages; is the walk broken?", len(dirs))
	}
	for dir := range dirs {
		// A package is documented when one of its non-test files carries
		// a package doc comment.
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		documented := map[string]bool{} // package name → has a doc comment
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			name := af.Name.Name
			documented[name] = documented[name] || (af.Doc != nil && strings.TrimSpace(af.Doc.Text()) != "")
		}
		for name, ok := range documented {
			if !ok {
				t.Errorf("package %s (%s) has no package doc comment", name, dir)
			}
		}
	}
}
