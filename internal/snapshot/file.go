package snapshot

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// racyWindow is how recent a file's modification time may be before its
// size and mtime stop being proof that it is unchanged. A writer that
// replaces a file with one of the same size within the file system's
// timestamp granularity (1 s on ext3, 2 s on FAT) leaves both equal; such a
// file is re-read and hashed on every Fetch until it is older than this.
// Git's "racy git" problem is the same thing.
const racyWindow = 2 * time.Second

// FileSource reads a document from a local file. Change detection is
// cheap: the same file (inode) with an unchanged size and mtime is not read
// again, and a file that was read but has the same SHA-256 as last time is
// reported unchanged.
//
// Set Path before the first Fetch and do not change it afterwards.
// A FileSource must not be copied after first use; it is safe for
// concurrent use.
type FileSource struct {
	Path string

	mu   sync.Mutex
	last fileState // guarded by mu
}

// fileState identifies the content last returned by Fetch.
type fileState struct {
	known     bool        // false before the first Fetch and after Forget
	info      os.FileInfo // of the file that was read
	statValid bool        // info alone proves "unchanged" (not racy)
	sum       [sha256.Size]byte
}

var _ Forgetter = (*FileSource)(nil)

// Fetch implements [Source]. Errors name the path, never the content.
func (s *FileSource) Fetch(ctx context.Context) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.last.known && s.last.statValid {
		fi, err := os.Stat(s.Path)
		if err != nil {
			return nil, false, fmt.Errorf("snapshot: %w", err) // *fs.PathError names the path
		}
		if sameStat(fi, s.last.info) {
			return nil, false, nil
		}
	}

	data, fi, err := readFile(s.Path)
	if err != nil {
		return nil, false, err
	}
	cur := fileState{
		known:     true,
		info:      fi,
		statValid: time.Since(fi.ModTime()) > racyWindow,
		sum:       sha256.Sum256(data),
	}
	changed := !s.last.known || cur.sum != s.last.sum
	s.last = cur
	if !changed {
		return nil, false, nil
	}
	return data, true, nil
}

// sameStat reports whether a and b describe the same, unmodified file:
// same inode (a rename over the path changes it), size and mtime.
func sameStat(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// readFile reads path and returns the metadata of the same open file, so
// that size and mtime describe the bytes returned even if the path is
// renamed over meanwhile.
func readFile(path string) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("snapshot: %s is not a regular file", path)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: read %s: %w", path, err)
	}
	return data, fi, nil
}

// Forget implements [Forgetter].
func (s *FileSource) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = fileState{}
}

// String returns the source as a file: URL-like string for logs.
func (s *FileSource) String() string { return "file:" + s.Path }
