package secret

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestWatcher: what a Check does after each kind of change to a watched
// file.
func TestWatcher(t *testing.T) {
	tests := []struct {
		name        string
		change      func(t *testing.T, path string)
		want        string
		wantReloads uint64
		wantFails   uint64
	}{
		{name: "unchanged", change: func(*testing.T, string) {}, want: "old-key"},
		{name: "rotated", change: func(t *testing.T, p string) { write(t, p, "new-key\n", 1) }, want: "new-key", wantReloads: 1},
		{name: "touched, same value", change: func(t *testing.T, p string) { write(t, p, "old-key\n", 1) }, want: "old-key"},
		{name: "half-written: empty", change: func(t *testing.T, p string) { write(t, p, "", 1) }, want: "old-key", wantFails: 1},
		{name: "two lines", change: func(t *testing.T, p string) { write(t, p, "a\nb\n", 1) }, want: "old-key", wantFails: 1},
		{name: "deleted", change: func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, want: "old-key", wantFails: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key")
			write(t, path, "old-key\n", 0)
			s, err := FromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			env, err := FromEnvFunc("K", func(string) (string, bool) { return "env-key", true })
			if err != nil {
				t.Fatal(err)
			}
			var errs []string
			w := NewWatcher(WatchOptions{OnError: func(p string, err error) { errs = append(errs, err.Error()) }}, s, env)
			if w.Len() != 1 {
				t.Fatalf("watching %d secrets, want 1: an env secret never changes", w.Len())
			}
			copied := s // a copy held elsewhere, as a routing table holds one
			tt.change(t, path)
			w.Check()
			reloads, fails := w.Stats()
			got := []any{copied.Reveal(), reloads, fails}
			if diff := cmp.Diff(got, []any{tt.want, tt.wantReloads, tt.wantFails}); diff != "" {
				t.Errorf("value, reloads, failures (-got +want):\n%s", diff)
			}
			for _, e := range errs {
				for _, v := range []string{"old-key", "new-key"} {
					if strings.Contains(e, v) {
						t.Errorf("error %q shows a value", e)
					}
				}
			}
			if env.Reveal() != "env-key" {
				t.Error("the env secret changed")
			}
		})
	}
}

// TestWatcherRetriesAfterFailure: a failed re-read is tried again at the
// next Check, and a later good file is taken.
func TestWatcherRetriesAfterFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	write(t, path, "old-key\n", 0)
	s, _ := FromFile(path)
	reads := 0
	w := NewWatcher(WatchOptions{Read: func(p string) ([]byte, error) {
		reads++
		if reads == 1 {
			return nil, &fs.PathError{Op: "read", Path: p, Err: errors.New("i/o error")}
		}
		return os.ReadFile(p)
	}}, s)
	write(t, path, "new-key\n", 1)
	w.Check()
	if s.Reveal() != "old-key" {
		t.Fatal("a failed read changed the value")
	}
	w.Check()
	if s.Reveal() != "new-key" {
		t.Fatalf("value %q after the retry, want new-key", s.Reveal())
	}
}

// TestWatcherSwapUnderLoad: readers never see anything but a whole old or
// new value while the file rotates under them (run with -race).
func TestWatcherSwapUnderLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	write(t, path, "key-0\n", 0)
	s, _ := FromFile(path)
	w := NewWatcher(WatchOptions{}, s)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	bad := make(chan string, 1)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if v := s.Reveal(); len(v) != 5 || v[:4] != "key-" {
					select {
					case bad <- v:
					default:
					}
					return
				}
			}
		})
	}
	for i := 1; i <= 50; i++ {
		write(t, path, "key-"+string(rune('0'+i%10))+"\n", i)
		w.Check()
	}
	close(stop)
	wg.Wait()
	select {
	case v := <-bad:
		t.Fatalf("a reader saw %q", v)
	default:
	}
	if r, f := w.Stats(); r == 0 || f != 0 {
		t.Fatalf("reloads %d failures %d", r, f)
	}
}

// write writes v to path with a modification time n seconds after a
// fixed base, so a Check sees the change whatever the file system's
// time resolution.
func write(t *testing.T, path, v string, n int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}
