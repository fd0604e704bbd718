package snapshot_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/snapshot"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

type loaded struct {
	Data    string
	Fetched time.Time
	Floor   uint64
	OK      bool
}

func load(t *testing.T, d *snapshot.DiskStore, kind string) (loaded, error) {
	t.Helper()
	data, fetched, floor, ok, err := d.Load(kind)
	return loaded{string(data), fetched, floor, ok}, err
}

func openStore(t *testing.T) (*snapshot.DiskStore, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	d, err := snapshot.OpenDiskStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d, dir
}

func TestDiskStoreRoundTrip(t *testing.T) {
	d, dir := openStore(t)
	if got, err := load(t, d, "routes"); err != nil || got != (loaded{}) {
		t.Fatalf("Load before Save = %+v, %v; want nothing, nil", got, err)
	}
	if err := d.Save("routes", []byte("doc-7\n"), 7, t0); err != nil {
		t.Fatal(err)
	}
	if err := d.Save("authz", []byte("{}"), 3, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]loaded{
		"routes": {"doc-7\n", t0, 7, true},
		"authz":  {"{}", t0.Add(time.Minute), 3, true},
	} {
		got, err := load(t, d, kind)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("Load(%s) mismatch (-got +want):\n%s", kind, diff)
		}
	}

	// A second store on the same directory (a restart) sees the same.
	d2, err := snapshot.OpenDiskStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := load(t, d2, "routes"); got != (loaded{"doc-7\n", t0, 7, true}) {
		t.Errorf("after reopen: %+v", got)
	}

	fi, err := os.Stat(filepath.Join(dir, "routes.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", di.Mode().Perm())
	}
}

func TestDiskStoreVersions(t *testing.T) {
	d, _ := openStore(t)
	if err := d.Save("routes", []byte("v5"), 5, t0); err != nil {
		t.Fatal(err)
	}
	if err := d.Save("routes", []byte("v4"), 4, t0.Add(time.Hour)); !errors.Is(err, snapshot.ErrRollback) {
		t.Errorf("Save of a lower version: error = %v, want ErrRollback", err)
	}
	if err := d.Save("routes", []byte("v5b"), 5, t0.Add(time.Hour)); err != nil {
		t.Errorf("Save of an equal version: %v", err)
	}
	if got, _ := load(t, d, "routes"); got != (loaded{"v5b", t0.Add(time.Hour), 5, true}) {
		t.Errorf("after saves: %+v", got)
	}

	// Touch moves the fetch time forward only, for the same version only.
	if err := d.Touch("routes", 5, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := d.Touch("routes", 5, t0); err != nil {
		t.Fatal(err)
	}
	if err := d.Touch("routes", 6, t0.Add(3*time.Hour)); err == nil {
		t.Error("Touch of another version succeeded")
	}
	if err := d.Touch("authz", 1, t0); err == nil {
		t.Error("Touch of a missing document succeeded")
	}
	if got, _ := load(t, d, "routes"); got != (loaded{"v5b", t0.Add(2 * time.Hour), 5, true}) {
		t.Errorf("after touches: %+v", got)
	}
}

// TestDiskStoreCorruption: a damaged file is reported, never used; when
// its header survived, the floor still is.
func TestDiskStoreCorruption(t *testing.T) {
	tests := []struct {
		name      string
		damage    func(content []byte) []byte
		wantFloor uint64
	}{
		{"torn payload", func(b []byte) []byte { return b[:len(b)-3] }, 9},
		{"flipped payload byte", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, 9},
		{"extra payload", func(b []byte) []byte { return append(b, 'x') }, 9},
		{"torn header", func(b []byte) []byte { return b[:20] }, 0},
		{"empty file", func([]byte) []byte { return nil }, 0},
		{"foreign file", func([]byte) []byte { return []byte(`{"schema":1}` + "\n{}") }, 0},
		{"header member in another letter case", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"version":9`, `"VERSION":9`, 1))
		}, 0},
		{"duplicate header member", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"version":9`, `"version":9,"version":2`, 1))
		}, 0},
		{"another kind's file", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"kind":"routes"`, `"kind":"authz"`, 1))
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, dir := openStore(t)
			if err := d.Save("routes", []byte(`{"version":9}`), 9, t0); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "routes.snapshot")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, tt.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := load(t, d, "routes")
			if !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("Load error = %v, want ErrCorrupt", err)
			}
			if diff := cmp.Diff(got, loaded{Floor: tt.wantFloor}); diff != "" {
				t.Errorf("Load mismatch (-got +want):\n%s", diff)
			}
			// A corrupt file does not block the next save.
			if err := d.Save("routes", []byte("fresh"), 10, t0); err != nil {
				t.Fatalf("Save over a corrupt file: %v", err)
			}
		})
	}
}

// TestDiskStoreLeftoverTemp: a crash after writing a temporary file and
// before renaming it leaves the old document valid; the next open removes
// the leftover.
func TestDiskStoreLeftoverTemp(t *testing.T) {
	d, dir := openStore(t)
	if err := d.Save("routes", []byte("old"), 1, t0); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "routes.snapshot.tmp-12345")
	if err := os.WriteFile(tmp, []byte(`{"format":"scootgate-snapshot/1","kind":"routes","vers`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := load(t, d, "routes"); err != nil || got != (loaded{"old", t0, 1, true}) {
		t.Fatalf("Load with a leftover temp file = %+v, %v", got, err)
	}
	d2, err := snapshot.OpenDiskStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover temp file still there after open: %v", err)
	}
	if got, err := load(t, d2, "routes"); err != nil || got != (loaded{"old", t0, 1, true}) {
		t.Errorf("Load after reopen = %+v, %v", got, err)
	}
}

func TestDiskStoreKinds(t *testing.T) {
	d, _ := openStore(t)
	for _, kind := range []string{"", "Routes", "../x", "a/b", "a.b", strings.Repeat("a", 33)} {
		if err := d.Save(kind, nil, 1, t0); err == nil {
			t.Errorf("Save(%q) succeeded", kind)
		}
		if _, _, _, _, err := d.Load(kind); err == nil {
			t.Errorf("Load(%q) succeeded", kind)
		}
	}
}

func TestOpenDiskStoreFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.OpenDiskStore(filepath.Join(file, "state")); err == nil {
		t.Error("OpenDiskStore under a regular file succeeded")
	}
}

func truncateFile(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)-n], 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDiskStoreResetFloor: ResetFloor removes the document and its floor,
// reports what they were, and a lower version can be saved afterwards.
func TestDiskStoreResetFloor(t *testing.T) {
	d, _ := openStore(t)
	if _, _, found, err := d.ResetFloor("routes"); found || err != nil {
		t.Fatalf("ResetFloor with nothing persisted = %v, %v", found, err)
	}
	if err := d.Save("routes", []byte("stuck"), 1<<63-1, t0); err != nil {
		t.Fatal(err)
	}
	if err := d.Save("routes", []byte("v7"), 7, t0); !errors.Is(err, snapshot.ErrRollback) {
		t.Fatalf("Save below the floor = %v, want ErrRollback", err)
	}
	floor, fetched, found, err := d.ResetFloor("routes")
	if err != nil || !found || floor != 1<<63-1 || !fetched.Equal(t0) {
		t.Fatalf("ResetFloor = %d, %v, %v, %v", floor, fetched, found, err)
	}
	if got, _ := load(t, d, "routes"); got != (loaded{}) {
		t.Errorf("after the reset: %+v, want nothing", got)
	}
	if err := d.Save("routes", []byte("v7"), 7, t0); err != nil {
		t.Errorf("Save after the reset: %v", err)
	}
	if _, _, _, err := d.ResetFloor("../x"); err == nil {
		t.Error("ResetFloor accepted a bad kind")
	}
}
