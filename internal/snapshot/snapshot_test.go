package snapshot_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/snapshot"
)

func TestParseSource(t *testing.T) {
	tests := []struct {
		name     string
		in, base string
		wantPath string // FileSource.Path when no error
		wantErr  string // fragment of the error
	}{
		{name: "absolute", in: "file:/etc/sg/authz.json", base: "/cfg", wantPath: "/etc/sg/authz.json"},
		{name: "absolute URL form", in: "file:///etc/sg/authz.json", base: "/cfg", wantPath: "/etc/sg/authz.json"},
		{name: "localhost", in: "file://localhost/etc/a.json", base: "/cfg", wantPath: "/etc/a.json"},
		{name: "scheme is case-insensitive", in: "FILE:/etc/a.json", base: "/cfg", wantPath: "/etc/a.json"},
		{name: "relative", in: "file:authz.json", base: "/cfg", wantPath: "/cfg/authz.json"},
		{name: "relative dot", in: "file:./dev/authz.json", base: "/cfg", wantPath: "/cfg/dev/authz.json"},
		{name: "relative parent", in: "file:../authz.json", base: "/cfg/node", wantPath: "/cfg/authz.json"},
		{name: "percent-decoded", in: "file:my%20dir/a.json", base: "/cfg", wantPath: "/cfg/my dir/a.json"},
		{name: "no base dir", in: "file:a.json", base: "", wantPath: "a.json"},
		{name: "empty", in: "", wantErr: "snapshot: unsupported source: empty"},
		{name: "plaintext http to a remote host", in: "http://cp.internal/authz", wantErr: "plaintext http:// is only allowed for a loopback host"},
		{name: "http user info", in: "https://u:p@cp.internal/authz", wantErr: "must not contain user info"},
		{name: "http fragment", in: "https://cp.internal/authz#x", wantErr: "must not have a fragment"},
		{name: "http without host", in: "https:///authz", wantErr: "has no host"},
		{name: "bare path", in: "/etc/a.json", wantErr: `no scheme (want "file:<path>" or an https:// URL)`},
		{name: "other scheme", in: "ftp://cp/a.json", wantErr: `scheme "ftp"`},
		{name: "remote host", in: "file://authz.json", wantErr: "must not name a remote host"},
		{name: "no path", in: "file:", wantErr: "has no path"},
		{name: "query", in: "file:/a.json?x=1", wantErr: "must not have a query or fragment"},
		{name: "fragment", in: "file:/a.json#x", wantErr: "must not have a query or fragment"},
		{name: "bad escape", in: "file:a%zz.json", wantErr: "snapshot: unsupported source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := snapshot.ParseSource(tt.in, tt.base, snapshot.HTTPOptions{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSource(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				if !errors.Is(err, snapshot.ErrUnsupportedSource) {
					t.Errorf("error %v does not wrap ErrUnsupportedSource", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSource(%q): %v", tt.in, err)
			}
			fsrc, ok := src.(*snapshot.FileSource)
			if !ok {
				t.Fatalf("ParseSource(%q) = %T, want *FileSource", tt.in, src)
			}
			if diff := cmp.Diff(fsrc.Path, tt.wantPath); diff != "" {
				t.Errorf("path mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

// TestParseSourceHTTP: http(s) URLs give an HTTPSource whose name drops
// user info, query and fragment.
func TestParseSourceHTTP(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://cp.internal/v1/routes", "https://cp.internal/v1/routes"},
		{"HTTPS://cp.internal:8443/v1/routes?node=a&sig=hunter2", "https://cp.internal:8443/v1/routes"},
		{"http://127.0.0.1:9000/authz", "http://127.0.0.1:9000/authz"},
		{"http://[::1]:9000/authz", "http://[::1]:9000/authz"},
		{"http://localhost/authz", "http://localhost/authz"},
	}
	for _, tt := range tests {
		src, err := snapshot.ParseSource(tt.in, "/cfg", snapshot.HTTPOptions{})
		if err != nil {
			t.Fatalf("ParseSource(%q): %v", tt.in, err)
		}
		hs, ok := src.(*snapshot.HTTPSource)
		if !ok {
			t.Fatalf("ParseSource(%q) = %T, want *HTTPSource", tt.in, src)
		}
		if diff := cmp.Diff(hs.String(), tt.want); diff != "" {
			t.Errorf("ParseSource(%q).String() mismatch (-got +want):\n%s", tt.in, diff)
		}
	}
}

// TestParseSourceHidesURL: a source URL may carry a token; errors must not
// repeat it.
func TestParseSourceHidesURL(t *testing.T) {
	for _, in := range []string{
		"https://user:hunter2-token@cp.internal/authz?token=hunter2-token",
		"gopher://hunter2-token@cp/",
		"file://hunter2-token/x",
		"%hunter2-token",
		"http://cp.example.com/authz?token=hunter2-token",
		"https://cp.example.com/authz?token=hunter2-token#hunter2-token",
	} {
		_, err := snapshot.ParseSource(in, "", snapshot.HTTPOptions{})
		if err == nil {
			t.Fatalf("ParseSource(%q) succeeded", in)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %q repeats the source string", err)
		}
	}
}

type fetchResult struct {
	Data    string
	Changed bool
}

func fetch(t *testing.T, s snapshot.Source) fetchResult {
	t.Helper()
	data, changed, err := s.Fetch(t.Context())
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	return fetchResult{string(data), changed}
}

func writeFile(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

var (
	longAgo = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	later   = longAgo.Add(time.Hour)
)

func TestFileSourceFetch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authz.json")
	s := &snapshot.FileSource{Path: path}
	steps := []struct {
		name string
		do   func()
		want fetchResult
	}{
		{"first fetch reports the document", func() { writeFile(t, path, "doc-A", longAgo) }, fetchResult{"doc-A", true}},
		{"nothing happened", func() {}, fetchResult{"", false}},
		{"same bytes, new mtime", func() { writeFile(t, path, "doc-A", later) }, fetchResult{"", false}},
		{"new bytes", func() { writeFile(t, path, "doc-BB", later) }, fetchResult{"doc-BB", true}},
		{
			"renamed over, same size and mtime",
			func() {
				tmp := path + ".tmp"
				writeFile(t, tmp, "doc-CC", later)
				if err := os.Rename(tmp, path); err != nil {
					t.Fatal(err)
				}
			},
			fetchResult{"doc-CC", true},
		},
		{"forget makes the next fetch report it again", func() { s.Forget() }, fetchResult{"doc-CC", true}},
		{"and then it is unchanged", func() {}, fetchResult{"", false}},
	}
	for _, st := range steps {
		st.do()
		if diff := cmp.Diff(fetch(t, s), st.want); diff != "" {
			t.Fatalf("%s: mismatch (-got +want):\n%s", st.name, diff)
		}
	}
}

// TestFileSourceStatCache shows both sides of the size+mtime shortcut: an
// old file whose size and mtime did not change is not read again (so an
// in-place edit that restores both goes unseen), while a file modified
// within racyWindow is always re-read and hashed.
func TestFileSourceStatCache(t *testing.T) {
	tests := []struct {
		name  string
		mtime time.Time
		want  fetchResult
	}{
		{"old mtime: trusted", longAgo, fetchResult{"", false}},
		{"recent mtime: racy, re-read", time.Now().Add(time.Hour), fetchResult{"doc-B", true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "authz.json")
			s := &snapshot.FileSource{Path: path}
			writeFile(t, path, "doc-A", tt.mtime)
			if diff := cmp.Diff(fetch(t, s), fetchResult{"doc-A", true}); diff != "" {
				t.Fatalf("first fetch mismatch (-got +want):\n%s", diff)
			}
			writeFile(t, path, "doc-B", tt.mtime) // same size, same inode, same mtime
			if diff := cmp.Diff(fetch(t, s), tt.want); diff != "" {
				t.Errorf("second fetch mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestFileSourceErrors(t *testing.T) {
	dir := t.TempDir()
	missing := &snapshot.FileSource{Path: filepath.Join(dir, "missing.json")}
	if _, _, err := missing.Fetch(t.Context()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: error = %v, want fs.ErrNotExist", err)
	}
	if _, _, err := (&snapshot.FileSource{Path: dir}).Fetch(t.Context()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: error = %v, want not a regular file", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := missing.Fetch(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: error = %v, want context.Canceled", err)
	}

	// A file that disappears after a good fetch is an error, and coming back
	// unchanged is not news.
	path := filepath.Join(dir, "authz.json")
	s := &snapshot.FileSource{Path: path}
	writeFile(t, path, "doc", longAgo)
	fetch(t, s)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Fetch(t.Context()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removed file: error = %v, want fs.ErrNotExist", err)
	}
	writeFile(t, path, "doc", later)
	if diff := cmp.Diff(fetch(t, s), fetchResult{"", false}); diff != "" {
		t.Errorf("restored file mismatch (-got +want):\n%s", diff)
	}
}

// TestFileSourceConcurrent: concurrent fetchers of one new document see it
// reported as changed exactly once.
func TestFileSourceConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authz.json")
	writeFile(t, path, "doc", longAgo)
	s := &snapshot.FileSource{Path: path}
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		changed int
	)
	for range n {
		wg.Go(func() {
			_, c, err := s.Fetch(t.Context())
			if err != nil {
				t.Error(err)
			}
			if c {
				mu.Lock()
				changed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if changed != 1 {
		t.Errorf("%d of %d fetchers saw a change, want 1", changed, n)
	}
}

func TestFileSourceString(t *testing.T) {
	if diff := cmp.Diff((&snapshot.FileSource{Path: "/etc/a.json"}).String(), "file:/etc/a.json"); diff != "" {
		t.Errorf("String mismatch (-got +want):\n%s", diff)
	}
}
