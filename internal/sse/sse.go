// Package sse reads a server-sent event stream one event at a time and keeps
// the exact bytes of every event, so a proxy can forward the stream unchanged
// while it looks at what passes through.
//
// # Basics
//
// Parsing follows the WHATWG HTML "event stream interpretation" rules, as
// required by docs/api.md "Streams":
//
//   - a line ends with CRLF, LF or CR; a CR and the LF after it are one line
//     ending even when they arrive in different reads;
//   - a blank line ends an event;
//   - "field:value" takes the field name up to the first colon and strips one
//     optional space from the start of the value; a line without a colon is
//     a field name with an empty value; names are case-sensitive;
//   - "data" lines are joined with "\n", "event" sets the type (the last one
//     wins), and "id", "retry" and unknown fields are ignored;
//   - a line starting with ':' is a comment (keepalives such as ": PROCESSING");
//   - a UTF-8 byte order mark at the very start of the stream is ignored.
//
// Reader.Next returns one Event per blank-line-terminated block. Event.Raw is
// the block's exact bytes including the blank line that ends it, and the
// concatenation of Raw over all events (plus the partial event returned with
// ErrTruncated) is exactly the input: a proxy that writes each Raw and
// flushes forwards the stream byte for byte (docs/api.md "Streams": bytes reach the
// client unchanged). Unlike a browser, the reader returns every block,
// including ones a browser would not dispatch: a block of only comments
// (Comment is set, so keepalives can be forwarded), a block of only ignored
// fields, and a lone blank line (an Event with only Raw set). Callers that
// care only about content skip events without Type and Data.
//
// A stream that ends inside an event returns the partial bytes with
// ErrTruncated; docs/api.md "Streams" counts such a stream as failed. Each event is bounded
// by maxEventBytes, so a provider cannot make the gateway buffer without limit
// (ErrTooLarge).
//
// Next reuses its buffers: in steady state it does not allocate, and Raw and
// Data are valid only until the next call. An event that is whole in the
// read buffer when Next looks (every event that arrived in one read, the
// usual case) is returned in place, each of its bytes looked at once and
// none copied; Data is a slice of Raw unless the event has several data
// lines. Event types are interned per Reader, so Type does not allocate
// either after a type's first event, nor at all for the types given to
// KnownTypes. Release gives the read buffer back when the stream is done.
//
// # Caveats
//
// To tell a CR line ending from a CRLF whose LF has not arrived yet, the
// reader needs one byte of lookahead after a CR that ends the data received
// so far. With LF or CRLF streams this never delays an event (the LF follows
// in the same write). With CR-only line endings, an event whose final CR is
// the last byte sent so far is returned only when the next byte or the end of
// the stream arrives.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxEventBytes bounds an event when NewReader is given no limit.
const DefaultMaxEventBytes = 1 << 20

// Errors returned by Next. Each ends the stream: every later call to Next
// returns io.EOF after ErrTruncated, and the same error after ErrTooLarge,
// ErrBadRead or a read error.
var (
	// ErrTruncated means the stream ended inside an event (no blank line
	// after its last bytes). Event.Raw holds the partial bytes; the proxy
	// treats a stream that ends without its terminator as failed.
	ErrTruncated = errors.New("sse: stream ended inside an event")

	// ErrTooLarge means an event exceeded the reader's maxEventBytes.
	ErrTooLarge = errors.New("sse: event too large")

	// ErrBadRead means the stream's reader broke the io.Reader contract:
	// a read returned more bytes than it was given, or fewer than none.
	ErrBadRead = errors.New("sse: read returned an invalid count")
)

// Event is one block of the stream, ended by a blank line.
type Event struct {
	Raw     []byte // exact bytes of the event including its terminating blank line (valid until next Next)
	Type    string // "event:" field, "" if absent
	Data    []byte // data lines joined with "\n"; nil if the block has no data line (valid until next Next)
	Comment bool   // the block held only comments (keepalive)
}

// The read buffer follows the stream's pace. A stream starts with a
// pooled 4 KiB buffer, so that a first burst of events is read at once. If
// that first read brought less than smallBuffer, the reader waits for the
// next bytes in a 512-byte buffer and gives the 4 KiB one back: an idle
// stream (one event, then a long silence) holds only the small one
// (docs/performance.md "Memory per idle stream"). A read that fills the
// small buffer switches to a 4 KiB one for good. A switch happens only
// when nothing is buffered, and the size changes nothing but how much one
// read can bring: a line longer than the buffer is taken in pieces.
const (
	smallBuffer = 512
	largeBuffer = 4096
)

// largeBuffers and smallBuffers hold read buffers of each size between
// streams (Release, resize).
var (
	largeBuffers = sync.Pool{New: func() any { return new([largeBuffer]byte) }}
	smallBuffers = sync.Pool{New: func() any { return new([smallBuffer]byte) }}
)

// maxEmptyReads bounds the reads in a row that bring nothing and no error
// before the stream fails with io.ErrNoProgress, as in bufio.
const maxEmptyReads = 100

// errReleased is what Next returns after Release.
var errReleased = errors.New("sse: reader released")

// bufState is where a Reader is in the buffer sizes above.
type bufState uint8

const (
	firstRead bufState = iota // the pooled large buffer, until the first read is in
	smallBuf                  // the small buffer, after a short first read
	largeBuf                  // a large buffer, for good
)

// maxInterned bounds the event types a Reader keeps, so that a stream of
// distinct types cannot grow it without limit.
const maxInterned = 16

var bom = []byte("\ufeff")

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	src      io.Reader
	srcErr   error  // the first error src returned; it is not read again
	buf      []byte // the read buffer, one of the pooled arrays; nil after Release
	pos, end int    // buf[pos:end] is read and not yet consumed
	state    bufState
	lastFill int // bytes the last read into an empty buf brought
	max      int

	raw     []byte   // bytes of the current event when it is not read in place; reused
	data    []byte   // joined data of an event with several data lines; reused
	known   []string // event types given by KnownTypes; shared, read only
	types   []string // other event types seen, interned
	last    string   // the type of the last event that had one
	started bool     // the first line of the stream (which may carry a BOM) was read
	pending error    // a read error seen while looking past a CR, reported on the next read
	err     error    // sticky: returned by every later Next
}

// NewReader returns a Reader of the stream r that rejects events longer than
// maxEventBytes (including the blank line that ends them) with ErrTooLarge. A
// maxEventBytes of zero or less means DefaultMaxEventBytes.
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	return &Reader{src: r, max: maxEventBytes, buf: largeBuffers.Get().(*[largeBuffer]byte)[:]}
}

// Release gives the reader's read buffer back for other streams to use.
// The last event's Raw and Data are no longer valid, and Next returns an
// error from then on.
func (r *Reader) Release() {
	if r.buf == nil {
		return
	}
	r.put()
	r.buf, r.pos, r.end, r.src, r.err = nil, 0, 0, nil, errReleased
}

// put gives buf back to its pool.
func (r *Reader) put() {
	if len(r.buf) == smallBuffer {
		smallBuffers.Put((*[smallBuffer]byte)(r.buf))
	} else {
		largeBuffers.Put((*[largeBuffer]byte)(r.buf))
	}
}

// fill reads once into the empty buffer, as bufio does: a read that
// brings bytes and an error gives the bytes now and the error at the next
// fill, and a read that brings neither is tried again, up to
// maxEmptyReads times.
func (r *Reader) fill() error {
	r.pos, r.end = 0, 0
	if r.srcErr != nil {
		return r.srcErr
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf)
		if n < 0 || n > len(r.buf) {
			n, err = 0, ErrBadRead
		}
		r.end = n
		if err != nil {
			r.srcErr = err
		}
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// block accumulates the fields of the event being read. The type and the
// first data line are kept as offsets into the event's bytes (Reader.raw,
// which may move while the event grows, or the read buffer).
type block struct {
	typeStart, typeEnd int
	dataStart, dataEnd int // the first data line's value
	dataLines          int
	comments, fields   bool // saw a comment line; saw a field line
}

// Next returns the next event. It returns io.EOF when the stream ends
// cleanly between events, ErrTruncated (with the partial bytes in Raw and
// the fields of its complete lines) when it ends inside one, an error
// wrapping ErrTooLarge when an event exceeds the limit, and other read
// errors wrapped, also with the partial bytes in Raw.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	var ev Event // filled in place: an Event is nine words, copied at each return
	if r.pending == nil && r.inPlace(&ev) {
		return ev, nil
	}
	r.raw = r.raw[:0]
	var b block
	for {
		start := len(r.raw)
		term, err := r.readLine()
		if err != nil {
			return r.fail(b, err)
		}
		end := len(r.raw) - term
		if !r.started {
			r.started = true
			if bytes.HasPrefix(r.raw[start:end], bom) {
				start += len(bom)
			}
		}
		if start == end {
			return r.event(r.raw, b), nil
		}
		r.parseLine(&b, r.raw, start, end)
	}
}

// inPlace returns the next event straight from the read buffer when the
// buffer holds all of it, reading once first if the buffer is empty; it
// reports false, having consumed nothing, when the event is not complete
// there (the line reader then takes over and copies it as it arrives).
// Each byte of an event read in place is looked at once, by the line
// search, and none is copied.
func (r *Reader) inPlace(ev *Event) bool {
	if r.pos == r.end {
		r.resize()
		if err := r.fill(); err != nil {
			r.pending = err // the line reader reports it, as if it had read it
			return false
		}
		r.lastFill = r.end
	}
	buf := r.buf[r.pos:r.end]
	if r.started && r.quick(ev, buf) {
		return true
	}
	var b block
	for pos := 0; ; {
		n, term := lineAt(buf[pos:])
		if term == 0 || pos+n+term > r.max {
			return false // incomplete, or too large: the line reader says which
		}
		start, end := pos, pos+n
		if !r.started && start == 0 && bytes.HasPrefix(buf[start:end], bom) { // the stream's first line
			start += len(bom)
		}
		if start == end {
			r.setEvent(ev, buf[:end+term], &b)
			r.started = true
			r.pos += end + term
			return true
		}
		r.parseLine(&b, buf, start, end)
		pos = end + term
	}
}

// quick takes the usual event from the start of buf: an optional event
// line, one data line and the blank line, each ended by an LF and none
// holding a CR ("event: delta\ndata: {…}\n\n", or only the data line).
// It returns in one step what the line loop of inPlace would, without
// its line-by-line bookkeeping, and reports false, having consumed
// nothing, for anything else.
func (r *Reader) quick(ev *Event, buf []byte) bool {
	var typ []byte
	pos := 0
	if len(buf) > len("event:") && string(buf[:len("event:")]) == "event:" {
		lf := bytes.IndexByte(buf, '\n')
		if lf < 0 || bytes.IndexByte(buf[:lf], '\r') >= 0 {
			return false
		}
		typ = value(buf[len("event:"):lf])
		pos = lf + 1
	}
	data := buf[pos:]
	if len(data) <= len("data:") || string(data[:len("data:")]) != "data:" {
		return false
	}
	lf := bytes.IndexByte(data, '\n')
	end := pos + lf + 2 // the event, with its blank line
	if lf < 0 || lf+1 >= len(data) || data[lf+1] != '\n' || end > r.max || bytes.IndexByte(data[:lf], '\r') >= 0 {
		return false
	}
	v := value(data[len("data:"):lf])
	*ev = Event{Raw: buf[:end:end], Data: v[:len(v):len(v)]}
	if typ != nil {
		ev.Type = r.intern(typ)
	}
	r.pos += end
	return true
}

// value is a field's value: what follows the colon, less one leading
// space.
func value(b []byte) []byte {
	if len(b) > 0 && b[0] == ' ' {
		return b[1:]
	}
	return b
}

// parseLine applies the complete, non-blank line ev[start:end] of the
// event whose bytes so far are ev.
func (r *Reader) parseLine(b *block, ev []byte, start, end int) {
	line := ev[start:end]
	if line[0] == ':' {
		b.comments = true
		return
	}
	b.fields = true
	// The usual lines, an event's first data line and its type, are
	// kept as offsets, as below, without a search for the colon.
	switch {
	case b.dataLines == 0 && len(line) >= len("data:") && string(line[:len("data:")]) == "data:":
		b.dataStart, b.dataEnd, b.dataLines = start+len("data:"), end, 1
		if b.dataStart < end && ev[b.dataStart] == ' ' {
			b.dataStart++
		}
		return
	case len(line) >= len("event:") && string(line[:len("event:")]) == "event:":
		b.typeStart, b.typeEnd = start+len("event:"), end
		if b.typeStart < end && ev[b.typeStart] == ' ' {
			b.typeStart++
		}
		return
	}
	name, value := line, line[len(line):]
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		b.typeStart, b.typeEnd = end-len(value), end
	case "data":
		switch b.dataLines {
		case 0:
			b.dataStart, b.dataEnd = end-len(value), end
		case 1:
			// A second data line: only now are the lines joined.
			r.data = append(r.data[:0], ev[b.dataStart:b.dataEnd]...)
			fallthrough
		default:
			r.data = append(append(r.data, '\n'), value...)
		}
		b.dataLines++
	}
}

// event is the event whose bytes are raw (non-nil), with the fields b.
func (r *Reader) event(raw []byte, b block) Event {
	var ev Event
	r.setEvent(&ev, raw, &b)
	return ev
}

// setEvent sets ev to the event whose bytes are raw (non-nil), with the
// fields b.
func (r *Reader) setEvent(ev *Event, raw []byte, b *block) {
	ev.Raw = raw[:len(raw):len(raw)]
	ev.Type = r.intern(raw[b.typeStart:b.typeEnd])
	ev.Comment = b.comments && !b.fields
	switch {
	case b.dataLines == 1:
		ev.Data = raw[b.dataStart:b.dataEnd:b.dataEnd] // non-nil even when empty: raw is not nil
	case b.dataLines > 1:
		ev.Data = r.data[:len(r.data):len(r.data)]
	}
}

// fail ends the stream with err, returning the partial event read so far.
func (r *Reader) fail(b block, err error) (Event, error) {
	switch {
	case errors.Is(err, ErrTooLarge):
		r.err = err
		return Event{}, err
	case err == io.EOF && len(r.raw) == 0:
		r.err = io.EOF
		return Event{}, io.EOF
	case err == io.EOF:
		r.err = io.EOF
		return r.event(r.raw, b), ErrTruncated
	case len(r.raw) == 0:
		r.err = fmt.Errorf("sse: read: %w", err)
		return Event{}, r.err
	default:
		r.err = fmt.Errorf("sse: read: %w", err)
		return r.event(r.raw, b), r.err
	}
}

// Buffered reports whether a complete event is already buffered, so that
// the next call to Next returns without reading from the stream. A relay
// that writes every event and flushes only when Buffered is false sends the
// events that arrived together in one write and still holds none back
// waiting for bytes that have not arrived. It errs on the side of false: a
// CR that is the last byte received (see the caveat on lookahead) does not
// count as a line ending yet.
func (r *Reader) Buffered() bool {
	if r.err != nil || r.pending != nil || r.pos == r.end {
		return false // the usual answer, when events come apart: nothing to look at
	}
	return hasBlankLine(r.buf[r.pos:r.end])
}

// hasBlankLine reports whether buf, which starts at the start of a line,
// holds a blank line whose line ending is complete, by the line rules of
// readLine.
func hasBlankLine(buf []byte) bool {
	for {
		n, term := lineAt(buf)
		switch {
		case term == 0:
			return false
		case n == 0:
			return true
		}
		buf = buf[n+term:]
	}
}

// lineAt finds the first line of buf, which starts at the start of a line,
// by the line rules of readLine: its length n and its terminator's length
// term; term is 0 when the line is not complete, or when it ends in a CR
// that is the last byte of buf (a CR, or the CR of a CRLF: not known yet).
func lineAt(buf []byte) (n, term int) {
	if len(buf) > 0 && buf[0] == '\n' {
		return 0, 1 // the blank line that ends an event, without a search
	}
	lf := bytes.IndexByte(buf, '\n')
	end := lf
	if lf < 0 {
		end = len(buf)
	}
	switch cr := bytes.IndexByte(buf[:end], '\r'); {
	case cr >= 0 && cr+1 == len(buf):
		return 0, 0
	case cr >= 0 && buf[cr+1] == '\n':
		return cr, 2
	case cr >= 0:
		return cr, 1
	case lf >= 0:
		return lf, 1
	}
	return 0, 0 // a partial line
}

// readLine appends the next line and its terminator to r.raw and returns the
// terminator's length. On error the partial line stays in r.raw.
func (r *Reader) readLine() (int, error) {
	if err := r.pending; err != nil {
		r.pending = nil
		return 0, err
	}
	for {
		if r.pos == r.end {
			r.resize()
			if err := r.fill(); err != nil {
				return 0, err
			}
			r.lastFill = r.end
		}
		buf := r.buf[r.pos:r.end]
		lf := bytes.IndexByte(buf, '\n')
		end := lf
		if lf < 0 {
			end = len(buf)
		}
		cr := bytes.IndexByte(buf[:end], '\r')
		switch {
		case cr >= 0 && cr+1 < len(buf):
			if buf[cr+1] == '\n' {
				return 2, r.take(buf[:cr+2])
			}
			return 1, r.take(buf[:cr+1])
		case cr >= 0:
			// The CR is the last byte received: an LF after it would be
			// part of the same line ending, so look at one more byte.
			if err := r.take(buf); err != nil {
				return 0, err
			}
			err := r.fill()
			if err == nil && r.buf[r.pos] == '\n' {
				return 2, r.take(r.buf[r.pos : r.pos+1])
			}
			r.pending = err // the line is complete; report err on the next read
			return 1, nil
		case lf >= 0:
			return 1, r.take(buf[:lf+1])
		default:
			if err := r.take(buf); err != nil {
				return 0, err
			}
		}
	}
}

// resize switches the read buffer by the last read (see smallBuffer);
// nothing is buffered. It does nothing once the source has returned an
// error: there is nothing more to read into a buffer of any size.
func (r *Reader) resize() {
	if r.srcErr != nil || r.lastFill == 0 {
		return
	}
	switch {
	case r.state == firstRead && r.lastFill < smallBuffer:
		r.put()
		r.buf = smallBuffers.Get().(*[smallBuffer]byte)[:]
		r.state = smallBuf
	case r.state == firstRead:
		r.state = largeBuf
	case r.state == smallBuf && r.lastFill == smallBuffer:
		r.put()
		r.buf = largeBuffers.Get().(*[largeBuffer]byte)[:]
		r.state = largeBuf
	}
}

// take moves p, a prefix of the buffered bytes, to r.raw.
func (r *Reader) take(p []byte) error {
	if len(r.raw)+len(p) > r.max {
		return fmt.Errorf("%w: over %d bytes", ErrTooLarge, r.max)
	}
	r.raw = append(r.raw, p...)
	r.pos += len(p)
	return nil
}

// KnownTypes gives the reader event types to return without allocating
// from the first event on: the types of the protocol being read. types is
// only read, so one list can serve every Reader; types not in it are
// interned as they come.
func (r *Reader) KnownTypes(types []string) { r.known = types }

// intern returns b as a string, without allocating for a known type or a
// type seen before.
func (r *Reader) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if r.last == string(b) { // runs of one type: the deltas
		return r.last
	}
	s, ok := find(r.known, b)
	if !ok {
		s, ok = find(r.types, b)
	}
	if !ok {
		s = string(b)
		if len(r.types) < maxInterned {
			r.types = append(r.types, s)
		}
	}
	r.last = s
	return s
}

func find(list []string, b []byte) (string, bool) {
	for _, s := range list {
		if s == string(b) {
			return s, true
		}
	}
	return "", false
}
