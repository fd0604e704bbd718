package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDiskStoreCrashBeforeRename: when the process dies (here: the rename
// fails) after the new file is written, the old document is what a restart
// finds, and no temporary file is left behind by a failed Save.
func TestDiskStoreCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDiskStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if err := d.Save("routes", []byte("old"), 1, t0); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("power cut")
	var renamed []string
	d.rename = func(oldpath, _ string) error {
		b, err := os.ReadFile(oldpath)
		if err != nil {
			t.Fatal(err)
		}
		renamed = append(renamed, string(b))
		return crash
	}
	if err := d.Save("routes", []byte("new"), 2, t0.Add(time.Minute)); !errors.Is(err, crash) {
		t.Fatalf("Save error = %v, want the rename error", err)
	}
	if len(renamed) != 1 || renamed[0][len(renamed[0])-3:] != "new" {
		t.Fatalf("the new document was not fully written before the rename: %q", renamed)
	}
	data, fetched, floor, ok, err := d.Load("routes")
	if err != nil || !ok || string(data) != "old" || floor != 1 || !fetched.Equal(t0) {
		t.Errorf("Load = %q, %v, %d, %v, %v; want the old document", data, fetched, floor, ok, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
