package scootgate_test

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// maxTrackedBytes is the most a tracked file may hold: a source file,
// a fixture or a document is far below it, a compiled binary or a
// captured data set far above. Build outputs go to the ignored bin/.
const maxTrackedBytes = 1 << 20

// TestNoLargeTrackedFiles fails on a tracked file over 1 MiB (a
// committed binary, an accidental dump), as git ls-files lists them.
func TestNoLargeTrackedFiles(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout?)", err)
	}
	files := bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0})
	if len(files) < 100 {
		t.Fatalf("git ls-files listed %d files; expected the repository", len(files))
	}
	for _, f := range files {
		fi, err := os.Lstat(string(f))
		if err != nil {
			continue // deleted in the work tree, not yet committed
		}
		if fi.Mode().IsRegular() && fi.Size() > maxTrackedBytes {
			t.Errorf("%s is tracked and holds %d bytes, over the %d-byte limit: keep build outputs and data out of the repository", f, fi.Size(), maxTrackedBytes)
		}
	}
}
