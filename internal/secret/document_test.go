package secret

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A document file (a multi-line JSON key) is kept byte for byte, which
// FromFile refuses, and a Watcher re-reads it the same way.
func TestFromDocumentFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key.json")
	doc := "{\n  \"type\": \"service_account\",\n  \"private_key\": \"-----BEGIN\\n\"\n}\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FromFile(path); !errors.Is(err, ErrControl) {
		t.Fatalf("FromFile: %v, want ErrControl", err)
	}
	s, err := FromDocumentFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Reveal() != doc || s.File() != path {
		t.Fatalf("got %q from %q", s.Reveal(), s.File())
	}

	w := NewWatcher(WatchOptions{}, s)
	doc2 := "{\n  \"type\": \"service_account\",\n  \"rotated\": true\n}\n"
	if err := os.WriteFile(path, []byte(doc2), 0o600); err != nil {
		t.Fatal(err)
	}
	w.Check()
	if s.Reveal() != doc2 {
		t.Fatalf("after rotation: %q", s.Reveal())
	}
	if _, failed := w.Stats(); failed != 0 {
		t.Fatalf("%d failed re-reads", failed)
	}

	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte("\n \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FromDocumentFile(empty); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := FromDocumentFile(dir); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("directory: %v", err)
	}
}
