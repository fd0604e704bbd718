package outbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Defaults for the zero fields of Options.
const (
	DefaultMaxEvents      = 100000
	DefaultMaxBytes       = 256 << 20
	DefaultCommitInterval = 100 * time.Millisecond
	DefaultMaxBatch       = 64
	DefaultLockTimeout    = 5 * time.Second

	// DefaultMaxUnsynced and DefaultMaxUnsyncedAge are the crash window.
	// While a commit runs, the events of the next one queue, so at a rate
	// R with commits taking D the window must hold about 2·R·D events
	// accepted 2·D apart. The defaults hold commits of up to ~1.3 s at
	// 1,600 events/s (BenchmarkSlowCommit: no drops with +500 ms per
	// commit at 1,000 and 1,600 events/s, where the old 256 events and
	// 1.1 s dropped 72 % and 80 %); 3 s rather than 2 s for disks
	// slower still: on a disk with 20 write IOPS, commits at 1,000
	// events/s took 0.5–1.1 s when each event was a row of its own, and
	// 2 s dropped up to 1.1 % of events; as one row a commit they take
	// 0.3 s and neither drops (TestSlowDisk).
	DefaultMaxUnsynced    = 4096
	DefaultMaxUnsyncedAge = 3 * time.Second
)

// notSentShare is the part of MaxUnsynced that definitely-not-sent events
// (AppendNotSent) may hold: 1/notSentShare of it. The rest is kept for
// events that may have reached a provider, so a flood of the former never
// drops one of the latter.
const notSentShare = 8

// dropLogInterval spaces the log lines that say why events are dropped
// because the crash window is full: the first drop logs at once, later ones
// are counted into the next line.
const dropLogInterval = 10 * time.Second

// failingBackoff is how long Append refuses events after a failed commit
// before it lets events through again to find out whether the disk is back.
const failingBackoff = time.Second

// chunkSize is the size of the chunks queued row values are packed into
// (rowLocked): a commit of 64 typical events fills about one.
// maxFreeChunks bounds the chunks kept for reuse between commits (1 MiB).
const (
	chunkSize     = 64 << 10
	maxFreeChunks = 16
)

// Read's allocation sizes: payload copies are packed into chunks of
// readChunk bytes, and the result starts with room for readRecords rows.
const (
	readChunk   = 64 << 10
	readRecords = 256
)

// Options configure a Store. Zero fields take the Default* values; Path is
// required.
type Options struct {
	Path           string        // the bbolt file; its directory must exist and be writable
	MaxEvents      int           // bound by event count (default 100000)
	MaxBytes       int64         // bound by payload bytes (default 256 MiB)
	CommitInterval time.Duration // group-commit window (default 100ms): one fsync per batch, never per event
	MaxBatch       int           // a commit starts at once when this many events wait (default 64)
	LockTimeout    time.Duration // bounded wait for the file lock (default 5s)

	// The crash window. An accepted event is unsynced until its commit
	// has been fsynced; a kill -9 or power loss loses the unsynced events.
	// Append drops new events (Dropped.Queue) rather than let them exceed
	// MaxUnsynced events (default 4096), or join a backlog whose oldest
	// event was accepted MaxUnsyncedAge ago (default 2s): so when the disk
	// cannot keep up, the node drops and counts instead of growing what a
	// crash would lose. Definitely-not-sent events (AppendNotSent) may hold
	// 1/8 of MaxUnsynced; events that may have reached a provider (Append)
	// the other 7/8, whatever the former do.
	MaxUnsynced    int
	MaxUnsyncedAge time.Duration

	Clock  func() time.Time // append times and the failing backoff (default time.Now)
	Logger *slog.Logger     // default: discard
}

func (o Options) withDefaults() (Options, error) {
	var errs []error
	if o.Path == "" {
		errs = append(errs, errors.New("outbox: Options.Path is empty"))
	}
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"MaxEvents", o.MaxEvents < 0},
		{"MaxBytes", o.MaxBytes < 0},
		{"CommitInterval", o.CommitInterval < 0},
		{"MaxBatch", o.MaxBatch < 0},
		{"MaxUnsynced", o.MaxUnsynced < 0},
		{"MaxUnsyncedAge", o.MaxUnsyncedAge < 0},
		{"LockTimeout", o.LockTimeout < 0},
	} {
		if f.neg {
			errs = append(errs, fmt.Errorf("outbox: Options.%s is negative", f.name))
		}
	}
	if len(errs) > 0 {
		return o, errors.Join(errs...)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxEvents, DefaultMaxEvents)
	def(&o.MaxBatch, DefaultMaxBatch)
	def(&o.MaxUnsynced, DefaultMaxUnsynced)
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.CommitInterval == 0 {
		o.CommitInterval = DefaultCommitInterval
	}
	if o.MaxUnsyncedAge == 0 {
		o.MaxUnsyncedAge = DefaultMaxUnsyncedAge
	}
	if o.MaxUnsynced < 2 {
		// One event for each class: a smaller window could hold no
		// definitely-not-sent event, or none of the others.
		errs = append(errs, fmt.Errorf("outbox: Options.MaxUnsynced is %d; want at least 2", o.MaxUnsynced))
	}
	if len(errs) > 0 {
		return o, errors.Join(errs...)
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Record is one committed row.
type Record struct {
	Seq      uint64    // FIFO position; unique for the life of the file
	Appended time.Time // when Append accepted it (UTC)
	Payload  []byte    // a copy (the rows of one Read share an allocation); the caller may keep it
}

// Dropped counts events refused, by reason. Each is a drop_newest (docs/usage-events.md).
type Dropped struct {
	Full    uint64 // the outbox was at MaxEvents or MaxBytes
	Queue   uint64 // the writer is behind: the crash window (MaxUnsynced or MaxUnsyncedAge) is full
	NotSent uint64 // a definitely-not-sent event (AppendNotSent) beyond its share of the crash window
	Failing uint64 // a commit failed (the event was in it), or Append came while failing
	Closed  uint64 // Append after Close
}

// Total is the sum over all reasons.
func (d Dropped) Total() uint64 { return d.Full + d.Queue + d.NotSent + d.Failing + d.Closed }

// Stats is a snapshot of a Store's state and counters, ready to be exported
// as metrics (scootgate_outbox_*).
type Stats struct {
	Depth       int           // events on disk, including events deleted but not yet committed
	Unsynced    int           // events accepted but not yet on disk: what a crash now would lose
	UnsyncedAge time.Duration // how long ago the oldest of them was accepted; 0 when none is
	Bytes       int64         // payload bytes of the events on disk
	OldestAge   time.Duration // age of the oldest event on disk; 0 when empty
	Appended    uint64        // events Append accepted (returned true)
	Dropped     Dropped
	Committed   uint64 // events written
	Deleted     uint64 // events removed after delivery
	Commits     uint64 // write transactions, each one fsync
	// Quarantined is the path a corrupt file was moved to at Open, or "".
	Quarantined string
}

// hooks let tests stall or fail the writer. Production code uses the zero
// value.
type hooks struct {
	// beforeCommit runs in the writer before each write transaction; an
	// error fails the commit as if bbolt had returned it.
	beforeCommit func() error
	// afterCommit runs in the writer after each commit attempt (one that
	// had rows to write or delete) with its result.
	afterCommit func(error)
	// wall replaces the writer's real clock.
	wall wall
	// kicked runs each time a full batch or Close kicks the writer (a
	// kick it did not yet have); idle runs when the writer starts to wait
	// with no deadline; woke each time its wait ends.
	kicked, idle, woke func()
}

// item is one accepted event on its way to the writer: the encoded row
// value, and when Append accepted it on the writer's clock.
type item struct {
	val     []byte
	at      time.Time
	notSent bool // from AppendNotSent: bounded by its share of the crash window
}

// Store is the outbox. All methods are safe for concurrent use.
type Store struct {
	// Immutable after Open.
	o           Options
	db          *bolt.DB
	hooks       hooks
	wall        wall
	quarantined string
	kick        chan struct{} // cap 1: wakes the writer (see Store.sleep and idle)
	alarm       alarm         // wakes the writer at its deadline; Set and Stop with mu held
	notify      chan struct{} // cap 1: a commit added rows
	stopped     chan struct{} // closed when the writer has returned
	closeDone   chan struct{} // closed when Close has finished

	// mu guards the fields below. It is never held across I/O: Append takes
	// it, so a holder must not wait for anything.
	mu     sync.Mutex
	closed bool
	// idle is set while the writer waits with no deadline (nothing
	// queued or pending): the first event or delete then sets its alarm
	// (armLocked). While it waits for a deadline, or commits, a new event
	// or delete only joins what that commit will take: the first one's
	// deadline is never later than theirs (one CommitInterval for both),
	// so setting or waking the writer for them would only cost work.
	idle     bool
	flushErr error // the last commit failure after Close began
	// queue holds accepted events, FIFO, until the writer takes them all
	// for a commit; committing counts the events of the commit running
	// now, committingSince is when its oldest was accepted. Together they
	// are the unsynced events, bounded by MaxUnsynced and MaxUnsyncedAge.
	// queuedNotSent and committingNotSent count the definitely-not-sent
	// events among them.
	queue             []item
	chunks            [][]byte // the chunks the queue's values are packed into; the last one fills (rowLocked)
	freeChunks        [][]byte // empty chunks, handed back after their commit
	committing        int
	committingSince   time.Time
	queuedNotSent     int
	committingNotSent int
	// dropLogAt is when a full crash window may be logged again;
	// dropsUnlogged counts the drops since the last line.
	dropLogAt     time.Time
	dropsUnlogged uint64
	pendingSince  time.Time // when pending became non-empty (writer clock)
	failing       bool
	retryAt       time.Time // Append refuses events until then while failing
	resRows       int       // events on disk + events queued: bounded by MaxEvents
	resBytes      int64     // their payload bytes: bounded by MaxBytes
	depth         int       // events on disk
	bytes         int64     // their payload bytes
	oldest        int64     // append time (unix nanos) of the first event on disk
	// pending holds the seqs passed to Delete, waiting for the next
	// commit, in call order (the publisher's: PUBACK order, nearly
	// sorted); deleting those of the commit running now, sorted. Slices,
	// not sets: a map insert, iteration and clear per deleted row cost
	// ~1.3k instructions an event, and the commit seeks each seq once
	// anyway (a repeated or unknown one is skipped there).
	pending     []uint64
	deleting    []uint64
	spare       []uint64 // empty; the next pending slice (writer's turn-taking)
	pendingMax  uint64   // the largest seq in pending, 0 if empty
	deletingMax uint64   // the largest seq in deleting, 0 if empty
	stats       Stats    // counters only; the rest is filled in by Stats

	groupBuf []byte // the writer's: the values of a commit's groups (write)
}

// Open opens (or creates) the outbox file and starts its writer goroutine,
// which Close stops.
//
// A file that cannot be opened (missing directory, no permission, read-only
// file system) is an error naming the path; so is a lock still held after
// LockTimeout (ErrLocked). A file that opens but is not a consistent outbox
// is moved aside to <path>.corrupt-<UTC time>, a fresh one is created, and
// Quarantined names the moved file (the node does not crash-loop, docs/usage-events.md "Outbox bounds").
func Open(o Options) (*Store, error) {
	return open(o, hooks{})
}

func open(o Options, h hooks) (*Store, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	db, st, err := openChecked(o)
	var moved string
	if errors.Is(err, ErrCorrupt) {
		reason := err
		moved, err = quarantine(o.Path, o.Clock())
		if err != nil {
			return nil, errors.Join(reason, err)
		}
		o.Logger.Error("outbox: corrupt file moved aside; starting with an empty outbox",
			"path", o.Path, "moved_to", moved, "reason", reason)
		db, st, err = openChecked(o)
	}
	if err != nil {
		return nil, err
	}
	s := &Store{
		o:           o,
		db:          db,
		hooks:       h,
		wall:        h.wall,
		quarantined: moved,
		queue:       make([]item, 0, o.MaxBatch),
		kick:        make(chan struct{}, 1),
		notify:      make(chan struct{}, 1),
		stopped:     make(chan struct{}),
		closeDone:   make(chan struct{}),
		resRows:     st.rows,
		resBytes:    st.bytes,
		depth:       st.rows,
		bytes:       st.bytes,
		oldest:      st.oldest,
	}
	if s.wall == nil {
		s.wall = realWall{}
	}
	s.alarm = s.wall.Alarm()
	s.stats.Quarantined = moved
	go s.run()
	return s, nil
}

// Append queues payload (copied) for the next group commit and returns at
// once: it never waits for the disk or for the writer. It returns false when
// the event is dropped (drop_newest, counted in Stats.Dropped): the outbox
// is at a bound, the writer is behind (the crash window is full: as many
// events not yet on disk as their class may hold, or the oldest of them
// accepted MaxUnsyncedAge ago), commits are failing, or the Store is
// closed.
//
// Bounds count queued events too, so an accepted event always fits. It can
// still be dropped later if its commit fails (Dropped.Failing); nothing
// accepted is lost without being counted, and Close writes every accepted
// event to disk.
//
// Append is for events that may have reached a provider; those that
// definitely did not go through AppendNotSent.
func (s *Store) Append(payload []byte) bool { return s.append(payload, false) }

// AppendNotSent is Append for the event of an attempt that definitely
// reached no provider. Such events may hold 1/8 of the crash window
// (MaxUnsynced); past that they are dropped (Dropped.NotSent), and they
// never take room from events appended with Append.
func (s *Store) AppendNotSent(payload []byte) bool { return s.append(payload, true) }

func (s *Store) append(payload []byte, notSent bool) bool {
	now := s.o.Clock()
	at := s.wall.Now()
	n := int64(len(payload))

	s.mu.Lock()
	switch {
	case s.closed:
		s.stats.Dropped.Closed++
		s.mu.Unlock()
		return false
	case s.failing && now.Before(s.retryAt):
		s.stats.Dropped.Failing++
		s.mu.Unlock()
		return false
	case s.resRows >= s.o.MaxEvents || s.resBytes+n > s.o.MaxBytes || n > maxPayload:
		s.stats.Dropped.Full++
		s.mu.Unlock()
		return false
	}
	if why := s.behindLocked(at, notSent); why != "" {
		if notSent {
			s.stats.Dropped.NotSent++
		} else {
			s.stats.Dropped.Queue++
		}
		s.dropLocked(at, why)
		return false
	}
	val := s.rowLocked(timeLen + len(payload))
	binary.BigEndian.PutUint64(val, uint64(now.UnixNano()))
	copy(val[timeLen:], payload)
	s.queue = append(s.queue, item{val: val, at: at, notSent: notSent})
	if notSent {
		s.queuedNotSent++
	}
	if len(s.queue) == s.o.MaxBatch {
		s.wakeLocked() // a batch to commit now
	} else {
		s.armLocked(at.Add(s.o.CommitInterval)) // the first event's deadline, if the writer has none
	}
	s.resRows++
	s.resBytes += n
	s.stats.Appended++
	s.mu.Unlock()
	return true
}

// rowLocked returns room for one queued row value of n bytes. Rows are
// packed into chunks of chunkSize that the writer hands back after the
// commit that wrote them (bbolt keeps a Put's value only until its
// transaction ends), so a steady stream of events allocates nothing here;
// a row larger than a quarter chunk gets its own allocation. s.mu must be
// held.
func (s *Store) rowLocked(n int) []byte {
	if n > chunkSize/4 {
		return make([]byte, n)
	}
	last := len(s.chunks) - 1
	if last < 0 || cap(s.chunks[last])-len(s.chunks[last]) < n {
		var c []byte
		if f := len(s.freeChunks) - 1; f >= 0 {
			c, s.freeChunks = s.freeChunks[f], s.freeChunks[:f]
		} else {
			c = make([]byte, 0, chunkSize)
		}
		s.chunks = append(s.chunks, c)
		last++
	}
	c := s.chunks[last]
	s.chunks[last] = c[:len(c)+n]
	return c[len(c) : len(c)+n : len(c)+n]
}

// Reasons a full crash window gives (behindLocked).
const (
	behindAge     = "the oldest unsynced event is as old as the crash window"
	behindCount   = "the crash window holds as many events as it may"
	behindNotSent = "definitely-not-sent events fill their share of the crash window"
)

// behindLocked says why the unsynced backlog is at its bound for a new
// event of its class at at, or returns "": by age, when its oldest event
// was accepted MaxUnsyncedAge before at; by count, when the class holds as
// many as it may. s.mu must be held.
func (s *Store) behindLocked(at time.Time, notSent bool) string {
	if oldest, ok := s.oldestUnsyncedLocked(); ok && at.Sub(oldest) >= s.o.MaxUnsyncedAge {
		return behindAge
	}
	share := s.notSentShare()
	ns := s.committingNotSent + s.queuedNotSent
	if notSent {
		if ns >= share {
			return behindNotSent
		}
		return ""
	}
	if s.committing+len(s.queue)-ns >= s.o.MaxUnsynced-share {
		return behindCount
	}
	return ""
}

// notSentShare is how many unsynced events AppendNotSent may hold.
func (s *Store) notSentShare() int { return max(1, s.o.MaxUnsynced/notSentShare) }

// oldestUnsyncedLocked returns when the oldest unsynced event was
// accepted, on the writer's clock, if there is one. s.mu must be held.
func (s *Store) oldestUnsyncedLocked() (time.Time, bool) {
	switch {
	case s.committing > 0:
		return s.committingSince, true
	case len(s.queue) > 0:
		return s.queue[0].at, true
	}
	return time.Time{}, false
}

// dropLocked logs that the crash window is full, at most once per
// dropLogInterval, and unlocks s.mu (the line is written without it).
func (s *Store) dropLocked(at time.Time, why string) {
	s.dropsUnlogged++
	if at.Before(s.dropLogAt) {
		s.mu.Unlock()
		return
	}
	s.dropLogAt = at.Add(dropLogInterval)
	oldest, _ := s.oldestUnsyncedLocked()
	args := []any{
		"path", s.o.Path, "reason", why,
		"dropped", s.dropsUnlogged, "unsynced", s.committing + len(s.queue),
		"unsynced_not_sent", s.committingNotSent + s.queuedNotSent,
		"unsynced_age", at.Sub(oldest).Round(time.Millisecond),
		"crash_window_events", s.o.MaxUnsynced, "crash_window", s.o.MaxUnsyncedAge,
		"committing", s.committing,
	}
	s.dropsUnlogged = 0
	s.mu.Unlock()
	s.o.Logger.Warn("outbox: crash window full; dropping new usage events", args...)
}

// Read returns up to limit committed events with Seq > after, in Seq
// (FIFO) order, leaving out events already passed to Delete. Fewer than
// limit means there are no more right now; wait on Notify.
func (s *Store) Read(after uint64, limit int) ([]Record, error) {
	if limit <= 0 || after == math.MaxUint64 {
		return nil, nil
	}
	// Copy the deleted-but-not-committed rows after `after` before the
	// read transaction starts: a delete committed after the snapshot was
	// taken is then still in the copy, one committed before is no longer
	// on disk. The publisher deletes only rows it has read, below its
	// cursor, so while it drains nothing needs copying.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	var skip map[uint64]struct{}
	if max(s.pendingMax, s.deletingMax) > after {
		skip = make(map[uint64]struct{})
		for _, m := range [][]uint64{s.pending, s.deleting} {
			for _, q := range m {
				if q > after {
					skip[q] = struct{}{}
				}
			}
		}
	}
	s.mu.Unlock()

	var (
		out   []Record
		chunk []byte // payload copies share chunks: one allocation per readChunk bytes, not per row
	)
	err := guard(s.o.Logger, func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketName)
			if b == nil {
				return fmt.Errorf("%w: bucket %q is missing", ErrCorrupt, bucketName)
			}
			// Start at the group holding after+1: the last whose key is at
			// or before it (its earlier events are skipped), else the first
			// after it.
			c := b.Cursor()
			from := func() ([]byte, []byte) {
				if k, v := groupAt(c, after+1); k != nil && lastSeq(v) > after {
					return k, v
				}
				return c.Seek(seqKey(after + 1))
			}
			// A first pass sizes the result: the events to copy and their
			// bytes, up to readRecords events and readChunk bytes. A
			// drain that keeps up reads the few dozen events of the last
			// commit, so sizing by the limit would allocate ~80 KiB per
			// commit for ~20 KiB of events.
			rows, size := 0, 0
		sizing:
			for k, v := from(); k != nil; k, v = c.Next() {
				fs := frames{v: v}
				for f, ok := fs.next(); ok; f, ok = fs.next() {
					if rows >= min(limit, readRecords) || size >= readChunk {
						break sizing
					}
					if _, gone := skip[f.seq]; gone || f.seq <= after {
						continue
					}
					rows++
					size += len(f.payload)
				}
				if fs.err != nil {
					return fs.err
				}
			}
			if rows == 0 {
				return nil
			}
			out = make([]Record, 0, rows) // more events than sized: append grows it
			chunk = make([]byte, 0, size)
			for k, v := from(); k != nil && len(out) < limit; k, v = c.Next() {
				fs := frames{v: v}
				for f, ok := fs.next(); ok && len(out) < limit; f, ok = fs.next() {
					if _, gone := skip[f.seq]; gone || f.seq <= after {
						continue
					}
					p := f.payload
					if cap(chunk)-len(chunk) < len(p) {
						// Past the sized events: room for the events still
						// wanted if they are the size of this one.
						chunk = make([]byte, 0, max(len(p), min(readChunk, len(p)*(limit-len(out)))))
					}
					at := len(chunk)
					chunk = append(chunk, p...)
					out = append(out, Record{
						Seq:      f.seq,
						Appended: time.Unix(0, f.at).UTC(),
						Payload:  chunk[at:len(chunk):len(chunk)], // full slice: an append by the caller copies
					})
				}
				if fs.err != nil {
					return fs.err
				}
			}
			return nil
		})
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return nil, ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: read: %w", err)
	}
	return out, nil
}

// Delete removes delivered rows (after their PUBACK, docs/usage-events.md). It returns at
// once: the rows vanish from Read immediately and from disk with the next
// group commit, without an fsync of its own. A delete lost in a crash only
// means the row is delivered again, which consumers absorb by event_id.
// Unknown sequence numbers are ignored.
func (s *Store) Delete(seqs ...uint64) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if len(s.pending) == 0 && len(seqs) > 0 {
		s.pendingSince = s.wall.Now()
		s.armLocked(s.pendingSince.Add(s.o.CommitInterval)) // their deadline, if the writer has none
	}
	s.pending = append(s.pending, seqs...)
	for _, q := range seqs {
		s.pendingMax = max(s.pendingMax, q)
	}
	s.mu.Unlock()
	return nil
}

// Notify returns a channel that receives after each commit that added rows.
// Sends never block and coalesce (capacity 1), so a receiver reads until Read
// comes back short. It is never closed.
func (s *Store) Notify() <-chan struct{} { return s.notify }

// Quarantined returns the path a corrupt file was moved to at Open, or "".
func (s *Store) Quarantined() string { return s.quarantined }

// Stats returns the current state and counters.
func (s *Store) Stats() Stats {
	now := s.o.Clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Depth = s.depth
	st.Bytes = s.bytes
	st.Unsynced = s.committing + len(s.queue)
	if oldest, ok := s.oldestUnsyncedLocked(); ok {
		st.UnsyncedAge = max(0, s.wall.Now().Sub(oldest))
	}
	if s.depth > 0 {
		st.OldestAge = max(0, now.Sub(time.Unix(0, s.oldest)))
	}
	return st
}

// Close stops accepting events, writes every queued event and pending delete
// to disk, and closes the file (docs/operations.md: the outbox is flushed before exit).
// The error reports a final commit that failed (its events are counted as
// dropped) or a failure to close the file. Calling Close again waits for the
// first call and returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.closeDone
		return nil
	}
	s.closed = true
	s.wakeLocked()
	s.mu.Unlock()

	<-s.stopped
	var err error
	s.mu.Lock()
	if s.flushErr != nil {
		err = fmt.Errorf("outbox: flush on close: %w", s.flushErr)
	}
	s.mu.Unlock()
	if cerr := s.db.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("outbox: close %s: %w", s.o.Path, cerr))
	}
	close(s.closeDone)
	return err
}

// seqKey encodes a sequence number as a row key.
func seqKey(seq uint64) []byte {
	k := make([]byte, keyLen)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// guard runs fn, turning a panic into an ErrCorrupt error and logging its
// stack. bbolt panics rather than erring on some bad pages
// of a damaged file; with SetPanicOnFault a fault on the
// memory-mapped file panics too instead of killing the process.
func guard(log *slog.Logger, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: panic: %v", ErrCorrupt, r)
			log.Error("outbox: recovered a panic from bbolt", "err", err, "stack", string(debug.Stack()))
		}
	}()
	return fn()
}
