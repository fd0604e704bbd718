package outbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

// fileGroups returns the sequence numbers of each group row in the file at
// path, in key order. The Store must be closed.
func fileGroups(t *testing.T, path string) [][]uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out [][]uint64
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketName)
		if b == nil {
			return fmt.Errorf("no bucket %q", bucketName)
		}
		return b.ForEach(func(k, v []byte) error {
			var group []uint64
			fs := frames{v: v}
			for f, ok := fs.next(); ok; f, ok = fs.next() {
				group = append(group, f.seq)
			}
			out = append(out, group)
			return fs.err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOneRowPerCommit: a commit writes its events as one row, not one row
// each (bbolt's work grows with the rows a commit inserts and deletes).
func TestOneRowPerCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := newStore(t, Options{Path: path, MaxBatch: 20}, hooks{})
	commitEach(s, 0, 40, 20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := fileGroups(t, path)
	want := [][]uint64{seqRange(1, 20), seqRange(21, 40)}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("rows (-got +want):\n%s", diff)
	}
}

// TestDeleteInsideGroups: deleting some of a group's events keeps the
// others, on disk and across a reopen, and whole groups go.
func TestDeleteInsideGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := newStore(t, Options{Path: path, MaxBatch: 10}, hooks{})
	commitEach(s, 0, 30, 10)
	// Group 1..10 loses its ends and a middle run, group 11..20 goes
	// whole, group 21..30 loses its first event; 99 never existed and 5
	// is deleted twice.
	dels := []uint64{1, 5, 4, 5, 10, 99, 21}
	dels = append(dels, seqRange(11, 20)...)
	if err := s.Delete(dels...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := [][]uint64{{2, 3, 6, 7, 8, 9}, seqRange(22, 30)}
	if diff := cmp.Diff(fileGroups(t, path), want); diff != "" {
		t.Errorf("rows (-got +want):\n%s", diff)
	}

	s2 := newStore(t, Options{Path: path}, hooks{})
	recs := s2.readAll()
	if diff := cmp.Diff(seqs(recs), slices.Concat(want...)); diff != "" {
		t.Errorf("reopened rows (-got +want):\n%s", diff)
	}
	for _, r := range recs {
		if want := string(payload(int(r.Seq) - 1)); string(r.Payload) != want {
			t.Errorf("row %d payload %q, want %q", r.Seq, r.Payload, want)
		}
	}
	st := s2.Stats()
	if st.Depth != 15 || st.Bytes != 15*int64(len(payload(0))) {
		t.Errorf("reopened Depth %d, Bytes %d; want 15, %d", st.Depth, st.Bytes, 15*len(payload(0)))
	}
}

// TestReadFromInsideGroups: Read after any sequence number, inside a
// group, between groups, before the first or past the last, and with any
// limit, returns the rows after it in order.
func TestReadFromInsideGroups(t *testing.T) {
	s := newStore(t, Options{MaxBatch: 5}, hooks{})
	commitEach(s, 0, 20, 5)
	// Gaps: a whole group (6..10) and parts of others, committed.
	dels := append([]uint64{1, 2, 13, 15, 16, 20}, seqRange(6, 10)...)
	if err := s.Delete(dels...); err != nil {
		t.Fatal(err)
	}
	commitEach(s, 20, 5, 5) // a commit that takes the deletes
	all := s.readAll()
	want := []uint64{3, 4, 5, 11, 12, 14, 17, 18, 19, 21, 22, 23, 24, 25}
	if diff := cmp.Diff(seqs(all), want); diff != "" {
		t.Fatalf("rows (-got +want):\n%s", diff)
	}
	for after := uint64(0); after <= 27; after++ {
		for _, limit := range []int{1, 2, 3, 100} {
			recs, err := s.Read(after, limit)
			if err != nil {
				t.Fatal(err)
			}
			var exp []uint64
			for _, q := range want {
				if q > after && len(exp) < limit {
					exp = append(exp, q)
				}
			}
			if diff := cmp.Diff(seqs(recs), exp, cmp.Comparer(func(a, b []uint64) bool { return slices.Equal(a, b) })); diff != "" {
				t.Errorf("Read(%d, %d) (-got +want):\n%s", after, limit, diff)
			}
		}
	}
}

// TestGroupsSplitLargeCommits: a commit larger than groupMax is written as
// several groups, and every event reads back.
func TestGroupsSplitLargeCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := newStore(t, Options{Path: path, MaxBatch: 6}, hooks{})
	big := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 100<<10) }
	for i := range 5 {
		s.Append(big(i))
	}
	s.Append(bytes.Repeat([]byte("z"), groupMax+1)) // larger than a group on its own
	s.waitCommitted(6)
	recs := s.readAll()
	if len(recs) != 6 {
		t.Fatalf("read %d rows, want 6", len(recs))
	}
	for i, r := range recs[:5] {
		if !bytes.Equal(r.Payload, big(i)) {
			t.Errorf("row %d: payload differs", r.Seq)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := [][]uint64{{1, 2}, {3, 4}, {5}, {6}}
	if diff := cmp.Diff(fileGroups(t, path), want); diff != "" {
		t.Errorf("rows (-got +want):\n%s", diff)
	}
}

// TestConvertsOldLayout: a file of the layout before groups (one row per
// event) is converted at Open: every event keeps its sequence number,
// append time and payload, new events are numbered after the old
// sequence, and the conversion is logged.
func TestConvertsOldLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 300 events of 2 KiB (more than two groups' worth), seqs with gaps
	// as deliveries leave them, and a sequence past the last row.
	type row struct {
		seq     uint64
		at      int64
		payload []byte
	}
	var rows []row
	for i := range 300 {
		seq := uint64(3 + 2*i)
		rows = append(rows, row{seq, 1_700_000_000_000_000_000 + int64(i), bytes.Repeat([]byte{byte(i)}, 2<<10)})
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(legacyBucket)
		if err != nil {
			return err
		}
		for _, r := range rows {
			v := binary.BigEndian.AppendUint64(nil, uint64(r.at))
			if err := b.Put(seqKey(r.seq), append(v, r.payload...)); err != nil {
				return err
			}
		}
		return b.SetSequence(1000)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	var logs syncBuf
	s := newStore(t, Options{Path: path, Logger: textLogger(&logs)}, hooks{})
	if !strings.Contains(logs.String(), `msg="outbox: converted the file to grouped rows"`) || !strings.Contains(logs.String(), "events=300") {
		t.Errorf("no conversion line in the log:\n%s", logs.String())
	}
	recs := s.readAll()
	if len(recs) != len(rows) {
		t.Fatalf("read %d rows, want %d", len(recs), len(rows))
	}
	for i, r := range recs {
		w := rows[i]
		if r.Seq != w.seq || !r.Appended.Equal(time.Unix(0, w.at)) || !bytes.Equal(r.Payload, w.payload) {
			t.Fatalf("row %d: seq %d at %v, want seq %d at %v (payload equal: %v)", i, r.Seq, r.Appended, w.seq, time.Unix(0, w.at), bytes.Equal(r.Payload, w.payload))
		}
	}
	if st := s.Stats(); st.Depth != 300 || st.Bytes != 300*2<<10 {
		t.Errorf("Depth %d, Bytes %d; want 300, %d", st.Depth, st.Bytes, 300*2<<10)
	}
	s.Append(payload(1))
	s.waitCommitted(1)
	recs, err = s.Read(rows[len(rows)-1].seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Seq != 1001 {
		t.Errorf("the new event reads as %+v, want seq 1001", recs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if g := fileGroups(t, path); len(g) < 3 {
		t.Errorf("%d groups, want the 600 KiB split into at least 3", len(g))
	}
	logs.Reset()
	s2 := newStore(t, Options{Path: path, Logger: textLogger(&logs)}, hooks{})
	if strings.Contains(logs.String(), "converted") {
		t.Errorf("converted again on reopen:\n%s", logs.String())
	}
	if n := len(s2.readAll()); n != 301 {
		t.Errorf("reopened: %d rows, want 301", n)
	}
}

// commitEach appends payloads from..from+n-1, waiting for a commit after
// each batch of per (MaxBatch, so that each batch is one commit).
func commitEach(s *tstore, from, n, per int) {
	for i := from; i < from+n; i++ {
		s.Append(payload(i))
		if (i-from+1)%per == 0 {
			s.waitCommitted(uint64(i + 1))
		}
	}
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for q := from; q <= to; q++ {
		out = append(out, q)
	}
	return out
}

// syncBuf is a log destination safe for the writer goroutine and the test.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (b *syncBuf) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Reset()
}

func textLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// FuzzCheckGroup: any row either fails the check with ErrCorrupt or is a
// group whose frames, written again, are the same bytes.
func FuzzCheckGroup(f *testing.F) {
	f.Add(seqKey(1), appendFrame(appendFrame(nil, 1, 5, []byte("a")), 2, 6, nil), uint64(2))
	f.Add(seqKey(3), appendFrame(nil, 3, 0, []byte("payload")), uint64(3))
	f.Add([]byte("abc"), []byte{0, 1, 2}, uint64(9))
	f.Fuzz(func(t *testing.T, k, v []byte, seqMax uint64) {
		last, events, size, _, err := checkGroup(k, v, 0, seqMax)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		var again []byte
		var n int
		var bytes int64
		fs := frames{v: v}
		for fr, ok := fs.next(); ok; fr, ok = fs.next() {
			again = appendFrame(again, fr.seq, fr.at, fr.payload)
			n++
			bytes += int64(len(fr.payload))
		}
		if fs.err != nil || !slices.Equal(again, v) || n != events || bytes != size || last != lastSeq(v) || last > seqMax {
			t.Fatalf("checked group does not read back: err %v, %d events (check said %d), %d bytes (%d), last %d (%d)", fs.err, n, events, bytes, size, lastSeq(v), last)
		}
	})
}

// TestGroupsAgainstAModel runs seeded random sequences of commits, deletes
// (scattered, repeated, unknown, spanning groups) and reopens against a
// model of the undelivered events: after every step Read returns exactly
// the model's events, by seq and payload, from any starting point.
func TestGroupsAgainstAModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 99))
			path := filepath.Join(t.TempDir(), "outbox.db")
			const batch = 7
			s := newStore(t, Options{Path: path, MaxBatch: batch}, hooks{})
			model := map[uint64]string{} // undelivered: seq → payload
			var next uint64              // the last seq handed out
			var gone []uint64            // deleted seqs
			appended := 0
			check := func(step string) {
				t.Helper()
				recs := s.readAll()
				var want []uint64
				for q := range model {
					want = append(want, q)
				}
				slices.Sort(want)
				if !slices.Equal(seqs(recs), want) {
					t.Fatalf("%s: read %v, want %v", step, seqs(recs), want)
				}
				for _, rec := range recs {
					if string(rec.Payload) != model[rec.Seq] {
						t.Fatalf("%s: event %d payload %q, want %q", step, rec.Seq, rec.Payload, model[rec.Seq])
					}
				}
				if len(want) > 0 {
					after := want[r.IntN(len(want))] - uint64(r.IntN(2))
					got, err := s.Read(after, 3)
					if err != nil {
						t.Fatal(err)
					}
					var exp []uint64
					for _, q := range want {
						if q > after && len(exp) < 3 {
							exp = append(exp, q)
						}
					}
					if !slices.Equal(seqs(got), exp) {
						t.Fatalf("%s: Read(%d, 3) = %v, want %v", step, after, seqs(got), exp)
					}
				}
			}
			for step := range 60 {
				switch op := r.IntN(10); {
				case op < 5: // a commit of one batch
					for range batch {
						p := fmt.Sprintf("s%d-e%d-%s", seed, appended, strings.Repeat("x", r.IntN(3000)))
						if !s.Append([]byte(p)) {
							t.Fatalf("step %d: Append refused: %+v", step, s.Stats().Dropped)
						}
						appended++
						next++
						model[next] = p
					}
					s.waitCommitted(uint64(appended))
				case op < 9: // deletes, committed with the next batch or at a reopen
					var dels []uint64
					for q := range model {
						if r.IntN(3) == 0 {
							dels = append(dels, q)
						}
					}
					dels = append(dels, 0) // never a seq
					if len(gone) > 0 {
						dels = append(dels, gone[r.IntN(len(gone))]) // deleted before
					}
					if len(dels) > 1 {
						dels = append(dels, dels[0]) // twice
					}
					if err := s.Delete(dels...); err != nil {
						t.Fatal(err)
					}
					for _, q := range dels {
						if _, ok := model[q]; ok {
							gone = append(gone, q)
						}
						delete(model, q)
					}
				default: // reopen: Close commits the pending deletes
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					s = newStore(t, Options{Path: path, MaxBatch: batch}, hooks{})
					appended = 0
				}
				check(fmt.Sprintf("step %d", step))
			}
		})
	}
}

// TestLargestPayloadFits: the largest payload Append accepts makes a group
// bbolt can store (its value limit is below a frame length's), so an
// oversized event is refused alone instead of failing the commit of the
// events queued with it.
func TestLargestPayloadFits(t *testing.T) {
	if maxPayload+frameHead > bolt.MaxValueSize {
		t.Fatalf("a payload of %d bytes makes a %d-byte group; bbolt stores at most %d", maxPayload, maxPayload+frameHead, bolt.MaxValueSize)
	}
	if uint64(maxPayload) > math.MaxUint32 {
		t.Fatalf("a payload of %d bytes does not fit a frame's 4-byte length", maxPayload)
	}
}
