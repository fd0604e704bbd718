//go:build unix

package secret

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestNotRegularFile: a credential file swapped for a named pipe, or one
// that never was a regular file, is refused at once with ErrNotRegular
// instead of blocking in open(2) until a writer comes. The Watcher keeps
// the old value and counts the failure, and its Check returns: the reload
// loop and shutdown go on.
func TestNotRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	t.Cleanup(func() { unblock(fifo) })

	t.Run("FromFile", func(t *testing.T) {
		for _, path := range []string{fifo, dir, "/dev/zero"} {
			err := within(t, func() error { _, err := FromFile(path); return err })
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("FromFile(%s) = %v, want ErrNotRegular", path, err)
			}
		}
	})
	t.Run("Watcher", func(t *testing.T) {
		path := filepath.Join(dir, "key")
		write(t, path, "old-key\n", 0)
		s, err := FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got error
		w := NewWatcher(WatchOptions{OnError: func(_ string, err error) { got = err }}, s)
		if err := os.Rename(fifo, path); err != nil {
			t.Fatal(err)
		}
		fifo = path
		_ = within(t, func() error { w.Check(); return nil })
		if _, fails := w.Stats(); fails != 1 || !errors.Is(got, ErrNotRegular) {
			t.Errorf("failures %d, error %v; want 1, ErrNotRegular", fails, got)
		}
		if s.Reveal() != "old-key" {
			t.Errorf("value %q, want old-key kept", s.Reveal())
		}
	})
}

// within runs f and fails the test if it has not returned in 10 s (a
// blocked open); the pipe is then unblocked by the cleanup.
func within(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("blocked on a file that is not regular")
		return nil
	}
}

// unblock opens the pipe at path for writing without blocking, which
// releases a reader stuck in open(2), so a failing test ends.
func unblock(path string) {
	if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		_ = f.Close()
	}
}
