package outbox

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// diskFullEnv names the directory, on a tiny file system, that the disk-full
// child writes to; the child test does nothing without it.
const diskFullEnv = "SCOOTGATE_OUTBOX_DISKFULL_DIR"

// TestDiskFull fills a real disk: the outbox lives on a
// 512 KiB tmpfs (mounted in a private mount namespace with unshare, so it
// needs root and vanishes with the child) and runs out of space. Commits
// fail with ENOSPC: drops are counted, nothing panics, Append keeps
// answering, and once delivered rows free pages inside the file, commits
// succeed again and the file reopens clean.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	unshare, err := exec.LookPath("unshare")
	if os.Geteuid() != 0 || err != nil {
		t.Skip("needs root and unshare(1) to mount a private tmpfs")
	}
	dir := t.TempDir()
	script := `mount -t tmpfs -o size=512k scootgate-outbox-test "$0" && exec "$1" -test.run='^TestDiskFullChild$' -test.count=1 -test.v`
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c", script, dir, os.Args[0])
	cmd.Env = append(os.Environ(), diskFullEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("mount:")) || bytes.Contains(out, []byte("unshare:")) {
			t.Skipf("cannot mount a private tmpfs here: %s", out)
		}
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestDiskFullChild")) {
		t.Fatalf("child did not run:\n%s", out)
	}
	t.Logf("child:\n%s", out)
}

// TestDiskFullChild is the child side of TestDiskFull.
func TestDiskFullChild(t *testing.T) {
	dir := os.Getenv(diskFullEnv)
	if dir == "" {
		t.Skip("helper process for TestDiskFull")
	}
	h, commits := commitLog()
	path := filepath.Join(dir, "outbox.db")
	s := newStore(t, Options{Path: path, CommitInterval: time.Millisecond}, h)
	p := bytes.Repeat([]byte("d"), 4000)

	// Fill the disk: append a batch at a time until a commit fails.
	var failed error
	for i := 0; failed == nil && i < 10000; i++ {
		if !s.Append(p) {
			t.Fatalf("Append %d refused before any failure: %+v", i, s.Stats())
		}
		failed = recv(t, commits)
	}
	if failed == nil {
		t.Fatal("the 512 KiB file system never filled up")
	}
	t.Logf("commit failed after %d rows: %v", s.Stats().Committed, failed)
	if s.Append(p) {
		t.Error("Append accepted while failing")
	}
	st := s.Stats()
	if st.Dropped.Failing != 2 {
		t.Errorf("Dropped.Failing = %d, want 2 (the failed commit's event and the refused one)", st.Dropped.Failing)
	}

	// Deliver everything: the deletes free pages inside the file.
	recs := s.readAll()
	if len(recs) != int(st.Committed) {
		t.Fatalf("Read returned %d rows, %d committed", len(recs), st.Committed)
	}
	if err := s.Delete(seqs(recs)...); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(failingBackoff)
	if !s.Append(p) {
		t.Fatal("Append after the backoff refused")
	}
	// The deletes and the new row (one commit or two) fit in freed pages.
	for s.Stats().Committed == st.Committed {
		if err := recv(t, commits); err != nil {
			t.Fatalf("commit after freeing rows: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newStore(t, Options{Path: path}, hooks{})
	if q := s2.Quarantined(); q != "" {
		t.Fatalf("the file did not reopen clean: moved to %s", q)
	}
	if got := len(s2.readAll()); got != 1 {
		t.Errorf("%d rows after reopen, want 1", got)
	}
}
