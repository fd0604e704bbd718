package outbox

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The file's layout. A commit writes its events as one row (or a few, for
// a large commit) of bucketName rather than one row each: bbolt's work per
// commit grows with the rows it inserts and deletes (a B+tree insert, the
// rebalance of a delete, a page per leaf touched), and one row per event
// cost ~4 µs of CPU an event on top of the commit's fixed cost, against
// 0.5–0.8 µs for the same events as one row (docs/performance.md "Usage
// delivery").
//
// A row is a group of events with increasing sequence numbers. Its key is
// the first event's sequence number, 8 bytes big-endian, so cursor order is
// FIFO; its value is the events' frames back to back, each:
//
//	seq     8 bytes, big-endian: the event's sequence number
//	at      8 bytes, big-endian: unix-nano append time
//	length  4 bytes, big-endian: payload length
//	payload
//
// A delete that leaves some of a group's events rewrites the group with
// those alone (keyed by the first of them), so the file always holds
// exactly the undelivered events: nothing about deletes is kept in memory.
// The bucket's sequence is the last sequence number handed out.
var bucketName = []byte("groups")

// legacyBucket is the layout before groups: one row per event, key the
// event's sequence number, value the 8-byte append time and the payload.
// Open converts such a file to groups (convertLegacy).
var legacyBucket = []byte("events")

const (
	keyLen    = 8
	timeLen   = 8
	frameHead = 8 + 8 + 4
	// groupMax bounds a group's value: a commit's events go into groups
	// of at most this many bytes (an event larger than it is a group of
	// one). 256 KiB holds a 64-event commit of typical events several
	// times over; a commit of 1,024 batched events makes a few groups.
	groupMax = 256 << 10
	// maxPayload is the largest payload a group of one holds (bbolt's
	// value limit, less the frame's head; a frame's 4-byte length holds
	// more). Append refuses larger ones as beyond the byte bound, rather
	// than fail the commit of every event queued with it.
	maxPayload = bolt.MaxValueSize - frameHead
)

// frame is one event of a group.
type frame struct {
	seq     uint64
	at      int64 // unix nanos
	payload []byte
}

// frames iterates over the frames of a group value. The zero value is done.
type frames struct {
	v   []byte
	off int
	err error
}

// next returns the next frame, or false at the end of the value or on a
// malformed frame (err says which).
func (fs *frames) next() (frame, bool) {
	if fs.off >= len(fs.v) || fs.err != nil {
		return frame{}, false
	}
	rest := fs.v[fs.off:]
	if len(rest) < frameHead {
		fs.err = fmt.Errorf("%w: frame at byte %d: %d bytes, a frame header is %d", ErrCorrupt, fs.off, len(rest), frameHead)
		return frame{}, false
	}
	n := int(binary.BigEndian.Uint32(rest[16:frameHead]))
	if n > len(rest)-frameHead {
		fs.err = fmt.Errorf("%w: frame at byte %d: payload of %d bytes, %d remain", ErrCorrupt, fs.off, n, len(rest)-frameHead)
		return frame{}, false
	}
	f := frame{
		seq:     binary.BigEndian.Uint64(rest),
		at:      int64(binary.BigEndian.Uint64(rest[8:])),
		payload: rest[frameHead : frameHead+n : frameHead+n],
	}
	fs.off += frameHead + n
	return f, true
}

// appendFrame appends one frame to a group value.
func appendFrame(dst []byte, seq uint64, at int64, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(at))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// lastSeq returns the sequence number of a group's last frame. The value
// must be well formed (checked at Open, written by this package since).
func lastSeq(v []byte) uint64 {
	fs := frames{v: v}
	var last uint64
	for f, ok := fs.next(); ok; f, ok = fs.next() {
		last = f.seq
	}
	return last
}

// checkGroup checks a group row: its key, its frames, their sequence
// numbers (increasing, the first equal to the key, all after prev and at
// most seqMax). It returns the last sequence number, the group's events
// and payload bytes, and the first event's append time.
func checkGroup(k, v []byte, prev, seqMax uint64) (last uint64, events int, bytes int64, first int64, err error) {
	if len(k) != keyLen || v == nil {
		return 0, 0, 0, 0, fmt.Errorf("%w: malformed row %x", ErrCorrupt, k)
	}
	key := binary.BigEndian.Uint64(k)
	fs := frames{v: v}
	last = prev
	for f, ok := fs.next(); ok; f, ok = fs.next() {
		switch {
		case events == 0 && f.seq != key:
			return 0, 0, 0, 0, fmt.Errorf("%w: row %d starts with event %d", ErrCorrupt, key, f.seq)
		case f.seq <= last:
			return 0, 0, 0, 0, fmt.Errorf("%w: row %d: event %d after event %d", ErrCorrupt, key, f.seq, last)
		case f.seq > seqMax:
			return 0, 0, 0, 0, fmt.Errorf("%w: row %d: event %d is beyond the bucket sequence %d", ErrCorrupt, key, f.seq, seqMax)
		}
		if events == 0 {
			first = f.at
		}
		last = f.seq
		events++
		bytes += int64(len(f.payload))
	}
	if fs.err != nil {
		return 0, 0, 0, 0, fmt.Errorf("%w (row %d)", fs.err, key)
	}
	if events == 0 {
		return 0, 0, 0, 0, fmt.Errorf("%w: row %d holds no event", ErrCorrupt, key)
	}
	return last, events, bytes, first, nil
}

// groupAt returns the group that may hold seq: the last whose key is at or
// before it, or nil when every group starts after seq. The cursor is left
// on that group.
func groupAt(c *bolt.Cursor, seq uint64) (k, v []byte) {
	k, v = c.Seek(seqKey(seq))
	switch {
	case k == nil:
		return c.Last()
	case binary.BigEndian.Uint64(k) > seq:
		return c.Prev()
	}
	return k, v
}

// grouper writes frames into a bucket as groups of at most groupMax bytes
// (an event larger than that is a group of one). Its groups share one
// array, v: a group handed to Put is never written over, as bbolt keeps
// the value until the transaction ends.
type grouper struct {
	b     *bolt.Bucket
	v     []byte
	start int    // where the open group begins in v
	first uint64 // its first event's seq
}

// add appends one frame, putting the open group first if the frame would
// take it past groupMax.
func (g *grouper) add(seq uint64, at int64, payload []byte) error {
	if len(g.v) > g.start && len(g.v)-g.start+frameHead+len(payload) > groupMax {
		if err := g.flush(); err != nil {
			return err
		}
	}
	if len(g.v) == g.start {
		g.first = seq
	}
	g.v = appendFrame(g.v, seq, at, payload)
	return nil
}

// flush puts the open group, if it holds a frame.
func (g *grouper) flush() error {
	if len(g.v) == g.start {
		return nil
	}
	err := g.b.Put(seqKey(g.first), g.v[g.start:len(g.v):len(g.v)])
	g.start = len(g.v)
	return err
}
