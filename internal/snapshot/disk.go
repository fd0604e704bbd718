package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// diskFormat names the file layout; Load rejects any other.
const diskFormat = "scootgate-snapshot/1"

// maxDiskBytes bounds what Load reads, so that a damaged or foreign file
// cannot exhaust memory.
const maxDiskBytes = 1 << 30

// DiskStore keeps the last valid document of each kind on local disk, with
// the time it was last confirmed current and its version, which is also
// the highest version ever applied (the rollback floor). A restart while
// the control plane is down must not turn the node into a wall of 401s
// (docs/snapshots.md "Last good copy").
//
// Each kind is one file, <dir>/<kind>.snapshot: a one-line JSON header
// (format, kind, version, fetched_at, size, sha256) followed by the
// document's exact bytes. Files are replaced atomically: write a temporary
// file in the same directory, fsync it, rename it over the old one, fsync
// the directory. A crash at any point leaves either the old file or the
// new one, never a mix; a file damaged anyway fails the size and SHA-256
// check and is reported as [ErrCorrupt].
//
// A DiskStore is safe for concurrent use. One node owns a state directory;
// two nodes sharing one would overwrite each other's floor.
type DiskStore struct {
	dir string // immutable

	mu sync.Mutex // serializes writes
	// rename is os.Rename; tests replace it to simulate a crash.
	rename func(oldpath, newpath string) error
}

type diskHeader struct {
	Format    string    `json:"format"`
	Kind      string    `json:"kind"`
	Version   uint64    `json:"version"`
	FetchedAt time.Time `json:"fetched_at"`
	Size      int       `json:"size"`
	SHA256    string    `json:"sha256"`
}

// OpenDiskStore opens (creating it with mode 0700 if needed) the state
// directory dir and removes temporary files a crash left behind.
func OpenDiskStore(dir string) (*DiskStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot: state dir: %w", err)
	}
	leftovers, err := filepath.Glob(filepath.Join(dir, "*.snapshot.tmp-*"))
	if err != nil {
		return nil, fmt.Errorf("snapshot: state dir: %w", err)
	}
	for _, f := range leftovers {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("snapshot: state dir: remove leftover: %w", err)
		}
	}
	return &DiskStore{dir: dir, rename: os.Rename}, nil
}

// Dir returns the state directory.
func (d *DiskStore) Dir() string { return d.dir }

func (d *DiskStore) path(kind string) string { return filepath.Join(d.dir, kind+".snapshot") }

// Load returns the persisted document of kind, the time it was last
// confirmed current, and its version (the floor). ok is false when there
// is no usable document: none was ever saved (err nil), or the file is
// unreadable or corrupt (err set; floor is still returned when the header
// was intact, so rollback protection survives a damaged payload).
func (d *DiskStore) Load(kind string) (data []byte, fetched time.Time, floor uint64, ok bool, err error) {
	if err := checkKind(kind); err != nil {
		return nil, time.Time{}, 0, false, err
	}
	h, data, err := d.read(kind)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, time.Time{}, 0, false, nil
	case err != nil && h != nil:
		return nil, time.Time{}, h.Version, false, err
	case err != nil:
		return nil, time.Time{}, 0, false, err
	}
	return data, h.FetchedAt, h.Version, true, nil
}

// read reads and checks the file of kind. It returns the header alone when
// only the payload is bad.
func (d *DiskStore) read(kind string) (*diskHeader, []byte, error) {
	p := d.path(kind)
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxDiskBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: read %s: %w", p, err)
	}
	if len(raw) > maxDiskBytes {
		return nil, nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCorrupt, p, maxDiskBytes)
	}
	line, data, found := bytes.Cut(raw, []byte{'\n'})
	var h diskHeader
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if !found || dec.Decode(&h) != nil || h.Format != diskFormat || h.Kind != kind || !canonicalHeader(line, h) {
		return nil, nil, fmt.Errorf("%w: %s: bad header", ErrCorrupt, p)
	}
	sum := sha256.Sum256(data)
	if len(data) != h.Size || hex.EncodeToString(sum[:]) != h.SHA256 {
		return &h, nil, fmt.Errorf("%w: %s: size or checksum mismatch (torn or damaged file)", ErrCorrupt, p)
	}
	return &h, data, nil
}

// canonicalHeader reports whether line is exactly the header write makes
// of h. encoding/json matches member names case-insensitively and keeps the
// last of two duplicates, so without this a header such as
// {"version":1,…,"VERSION":9} would be read as another version than a
// reader that keeps the first one sees; write's own output is the only
// spelling accepted.
func canonicalHeader(line []byte, h diskHeader) bool {
	want, err := json.Marshal(h)
	return err == nil && bytes.Equal(line, want)
}

// Save persists data as the document of kind, with its version and the
// time it was fetched, replacing the previous one atomically. A version
// below the persisted one is refused with [ErrRollback]: the floor never
// goes down.
func (d *DiskStore) Save(kind string, data []byte, version uint64, fetched time.Time) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if h, _, err := d.read(kind); h != nil && h.Version > version {
		return fmt.Errorf("%w: saving version %d over %d", ErrRollback, version, h.Version)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrCorrupt) {
		return err
	}
	return d.write(kind, data, version, fetched)
}

// Touch records that the persisted document of kind, which must have the
// given version, was confirmed current at fetched (a 304 answer). It
// rewrites the file; callers rate-limit it. A missing, corrupt or
// different-version file is left alone and reported.
func (d *DiskStore) Touch(kind string, version uint64, fetched time.Time) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h, data, err := d.read(kind)
	switch {
	case err != nil:
		return err
	case h.Version != version:
		return fmt.Errorf("snapshot: touch %s: persisted version is %d, not %d", kind, h.Version, version)
	case !fetched.After(h.FetchedAt):
		return nil
	}
	return d.write(kind, data, version, fetched)
}

// ResetFloor removes the persisted document of kind and with it the
// rollback floor, for an operator recovering a node whose floor was raised
// beyond every document its publisher will serve (docs/snapshots.md). It
// returns the floor and fetch time that were recorded (0 and zero when the
// header was unreadable) and whether there was a file. The next document
// of any version is applied. The node must not be running: a running
// poller keeps its floor in memory and persists it again.
func (d *DiskStore) ResetFloor(kind string) (floor uint64, fetched time.Time, found bool, err error) {
	if err := checkKind(kind); err != nil {
		return 0, time.Time{}, false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h, _, _ := d.read(kind)
	if h != nil {
		floor, fetched = h.Version, h.FetchedAt
	}
	switch err := os.Remove(d.path(kind)); {
	case errors.Is(err, fs.ErrNotExist):
		return 0, time.Time{}, false, nil
	case err != nil:
		return floor, fetched, true, fmt.Errorf("snapshot: reset %s: %w", kind, err)
	}
	if err := syncDir(d.dir); err != nil {
		return floor, fetched, true, fmt.Errorf("snapshot: reset %s: fsync dir: %w", kind, err)
	}
	return floor, fetched, true, nil
}

// write replaces the file of kind atomically. d.mu is held.
func (d *DiskStore) write(kind string, data []byte, version uint64, fetched time.Time) (err error) {
	sum := sha256.Sum256(data)
	header, err := json.Marshal(diskHeader{
		Format:    diskFormat,
		Kind:      kind,
		Version:   version,
		FetchedAt: fetched.UTC(),
		Size:      len(data),
		SHA256:    hex.EncodeToString(sum[:]),
	})
	if err != nil {
		return fmt.Errorf("snapshot: save %s: %w", kind, err)
	}
	f, err := os.CreateTemp(d.dir, kind+".snapshot.tmp-*")
	if err != nil {
		return fmt.Errorf("snapshot: save %s: %w", kind, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(append(header, '\n')); err != nil {
		return fmt.Errorf("snapshot: save %s: %w", kind, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("snapshot: save %s: %w", kind, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("snapshot: save %s: fsync: %w", kind, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("snapshot: save %s: %w", kind, err)
	}
	if err = d.rename(tmp, d.path(kind)); err != nil {
		return fmt.Errorf("snapshot: save %s: %w", kind, err)
	}
	// The rename is durable only once the directory entry is.
	if err = syncDir(d.dir); err != nil {
		return fmt.Errorf("snapshot: save %s: fsync dir: %w", kind, err)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// checkKind accepts the kinds that make safe file names: 1-32 of [a-z0-9-].
func checkKind(kind string) error {
	if kind == "" || len(kind) > 32 || strings.Trim(kind, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return fmt.Errorf("snapshot: invalid kind %q; expected 1-32 of [a-z0-9-]", kind)
	}
	return nil
}
