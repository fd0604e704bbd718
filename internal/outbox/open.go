package outbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// maxCheckProblems caps how many of bbolt's consistency problems one error
// carries (the first few say enough; the file is moved aside anyway).
const maxCheckProblems = 5

// state is what Open learns from scanning the file: the bounds are kept in
// memory and rebuilt by this scan at every Open, so there is no second copy
// on disk that could disagree with the rows.
// Rows count events (a group row holds several).
type state struct {
	hasBucket bool
	legacy    bool // the layout before groups: convertLegacy converts it
	rows      int
	bytes     int64
	oldest    int64 // append time (unix nanos) of the first row
}

// openChecked opens the file and checks it (bbolt's consistency check, then
// every row), creating the bucket in a new file. A file that fails a check
// is ErrCorrupt; every other error is about the file system or the lock.
func openChecked(o Options) (*bolt.DB, state, error) {
	db, err := openBolt(o)
	if err != nil {
		return nil, state{}, err
	}
	st, err := scan(db, o.Logger)
	if err == nil && st.legacy {
		var converted int
		converted, err = convertLegacy(db, o.Logger)
		if err == nil {
			o.Logger.Info("outbox: converted the file to grouped rows", "path", o.Path, "events", converted)
			st, err = scan(db, o.Logger)
		} else if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("outbox: convert %s to grouped rows: %w", o.Path, err)
		}
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("%w (%s)", err, o.Path)
		}
	} else if !st.hasBucket {
		err = guard(o.Logger, func() error {
			return db.Update(func(tx *bolt.Tx) error {
				_, err := tx.CreateBucket(bucketName)
				return err
			})
		})
		if err != nil && !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("outbox: initialise %s: %w", o.Path, err)
		}
	}
	if err != nil {
		_ = guard(o.Logger, db.Close)
		return nil, state{}, err
	}
	return db, st, nil
}

// openBolt opens the bbolt file, classifying the failure.
func openBolt(o Options) (*bolt.DB, error) {
	var db *bolt.DB
	err := guard(o.Logger, func() error {
		var err error
		// bbolt fsyncs every commit (NoSync stays false): a row is durable
		// once its commit returns, which is what Notify announces.
		db, err = bolt.Open(o.Path, 0o600, &bolt.Options{Timeout: o.LockTimeout})
		return err
	})
	var (
		pe    *fs.PathError
		errno syscall.Errno
	)
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s (waited %s)", ErrLocked, o.Path, o.LockTimeout)
	case errors.As(err, &pe):
		// Missing directory, permission denied, read-only file system, a
		// directory at the path: the error already names the path.
		return nil, fmt.Errorf("outbox: %w", err)
	case errors.As(err, &errno):
		// Lock or mapping failures from the kernel say nothing about the
		// file's content: report them rather than move a good file aside.
		return nil, fmt.Errorf("outbox: open %s: %w", o.Path, err)
	case errors.Is(err, ErrCorrupt):
		return nil, fmt.Errorf("%w (%s)", err, o.Path)
	default:
		// ErrInvalid, ErrChecksum, ErrVersionMismatch, a file too small to
		// hold its meta pages, ...
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, o.Path, err)
	}
}

// scan checks the file: its size against the meta page, every row (keys are
// 8-byte sequence numbers within the bucket's sequence, else NextSequence
// could hand out a used key and overwrite a row; values hold at least the
// append time), then bbolt's consistency check.
func scan(db *bolt.DB, log *slog.Logger) (state, error) {
	var st state
	err := guard(log, func() error {
		return db.View(func(tx *bolt.Tx) error {
			// A truncated file maps pages that do not exist: touching one
			// raises SIGBUS. Check the size before touching any page.
			fi, err := os.Stat(db.Path())
			if err != nil {
				return err
			}
			if fi.Size() < tx.Size() {
				return fmt.Errorf("%w: file is %d bytes, its meta page says %d", ErrCorrupt, fi.Size(), tx.Size())
			}
			if err := scanRows(tx, &st); err != nil {
				return err
			}
			// bbolt's own check runs in its goroutine, where a fault would
			// not be recovered, so it comes after the walk above has touched
			// the pages in this goroutine.
			var problems []error
			for err := range tx.Check() { // drain it all: Check's goroutine sends until done
				if len(problems) < maxCheckProblems {
					problems = append(problems, err)
				}
			}
			if len(problems) > 0 {
				return fmt.Errorf("%w: consistency check: %w", ErrCorrupt, errors.Join(problems...))
			}
			return nil
		})
	})
	return st, err
}

// scanRows walks the groups, filling st (checkGroup says what it checks).
// A file of the layout before groups has its rows checked and st.legacy
// set; st counts nothing then, as the file is converted and scanned again.
func scanRows(tx *bolt.Tx, st *state) error {
	b, old := tx.Bucket(bucketName), tx.Bucket(legacyBucket)
	switch {
	case b != nil && old != nil:
		return fmt.Errorf("%w: buckets %q and %q both exist", ErrCorrupt, bucketName, legacyBucket)
	case old != nil:
		st.legacy = true
		return eachLegacyRow(old, func(uint64, []byte) error { return nil })
	case b == nil:
		return nil
	}
	st.hasBucket = true
	c := b.Cursor()
	var prev uint64
	for k, v := c.First(); k != nil; k, v = c.Next() {
		last, events, bytes, first, err := checkGroup(k, v, prev, b.Sequence())
		if err != nil {
			return err
		}
		if st.rows == 0 {
			st.oldest = first
		}
		prev = last
		st.rows += events
		st.bytes += bytes
	}
	return nil
}

// eachLegacyRow calls fn for each row of the layout before groups, in
// order, checking it as that layout's Open did: an 8-byte key within the
// bucket's sequence, a value holding at least the 8-byte append time.
func eachLegacyRow(old *bolt.Bucket, fn func(seq uint64, v []byte) error) error {
	c := old.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil || len(k) != keyLen || len(v) < timeLen {
			return fmt.Errorf("%w: malformed row %x", ErrCorrupt, k)
		}
		seq := binary.BigEndian.Uint64(k)
		if seq == 0 || seq > old.Sequence() {
			return fmt.Errorf("%w: row %d is beyond the bucket sequence %d", ErrCorrupt, seq, old.Sequence())
		}
		if err := fn(seq, v); err != nil {
			return err
		}
	}
	return nil
}

// convertLegacy converts a file of the layout before groups (one row per
// event in legacyBucket, checked by scanRows) to groups, in one
// transaction, keeping every event's sequence number and append time, and
// returns how many events it converted.
func convertLegacy(db *bolt.DB, log *slog.Logger) (int, error) {
	var n int
	err := guard(log, func() error {
		return db.Update(func(tx *bolt.Tx) error {
			old := tx.Bucket(legacyBucket)
			b, err := tx.CreateBucket(bucketName)
			if err != nil {
				return err
			}
			b.FillPercent = 1.0
			g := grouper{b: b}
			err = eachLegacyRow(old, func(seq uint64, v []byte) error {
				n++
				return g.add(seq, int64(binary.BigEndian.Uint64(v)), v[timeLen:])
			})
			if err == nil {
				err = g.flush()
			}
			if err == nil {
				err = b.SetSequence(old.Sequence())
			}
			if err == nil {
				err = tx.DeleteBucket(legacyBucket)
			}
			return err
		})
	})
	return n, err
}

// quarantine moves a corrupt file aside to <path>.corrupt-<UTC time>, adding
// -1, -2, ... if that name is taken, and returns the new path.
func quarantine(path string, now time.Time) (string, error) {
	base := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	dst := base
	for i := 1; ; i++ {
		_, err := os.Lstat(dst)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("outbox: move corrupt %s aside: %w", path, err)
		}
		if i > 1000 {
			return "", fmt.Errorf("outbox: move corrupt %s aside: no free name after %s", path, dst)
		}
		dst = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(path, dst); err != nil {
		return "", fmt.Errorf("outbox: move corrupt %s aside: %w", path, err)
	}
	return dst, nil
}
