package sse_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/sse"
)

// readAll reads events until an error and returns copies of them (Raw and
// Data are only valid until the next call) and the error. A partial event
// returned with an error is included.
func readAll(r io.Reader, maxEventBytes int) ([]sse.Event, error) {
	rd := sse.NewReader(r, maxEventBytes)
	var evs []sse.Event
	for {
		ev, err := rd.Next()
		if ev.Raw != nil || ev.Data != nil || ev.Type != "" || ev.Comment {
			ev.Raw = bytes.Clone(ev.Raw)
			ev.Data = bytes.Clone(ev.Data)
			evs = append(evs, ev)
		}
		if err != nil {
			return evs, err
		}
	}
}

// concatRaw joins the Raw bytes of evs.
func concatRaw(evs []sse.Event) []byte {
	var b []byte
	for _, ev := range evs {
		b = append(b, ev.Raw...)
	}
	return b
}

func data(s string) []byte { return []byte(s) }

type readerCase struct {
	name    string
	in      string
	max     int // 0 = default
	want    []sse.Event
	wantErr error // io.EOF for a clean end
}

var readerCases = []readerCase{
	{name: "empty stream", in: "", wantErr: io.EOF},
	{
		name: "openai chunks and done",
		in:   "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n",
		want: []sse.Event{
			{Raw: data("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"), Data: data(`{"choices":[{"delta":{"content":"Hi"}}]}`)},
			{Raw: data("data: [DONE]\n\n"), Data: data("[DONE]")},
		},
		wantErr: io.EOF,
	},
	{
		name: "anthropic event and data pairs",
		in:   "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		want: []sse.Event{
			{Raw: data("event: message_start\ndata: {\"type\":\"message_start\"}\n\n"), Type: "message_start", Data: data(`{"type":"message_start"}`)},
			{Raw: data("event: ping\ndata: {\"type\": \"ping\"}\n\n"), Type: "ping", Data: data(`{"type": "ping"}`)},
			{Raw: data("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), Type: "message_stop", Data: data(`{"type":"message_stop"}`)},
		},
		wantErr: io.EOF,
	},
	{
		name:    "comment keepalive",
		in:      ": PROCESSING\n\n:\n: two\n\n",
		want:    []sse.Event{{Raw: data(": PROCESSING\n\n"), Comment: true}, {Raw: data(":\n: two\n\n"), Comment: true}},
		wantErr: io.EOF,
	},
	{
		name:    "comment with data is not a keepalive",
		in:      ": note\ndata: x\n\n",
		want:    []sse.Event{{Raw: data(": note\ndata: x\n\n"), Data: data("x")}},
		wantErr: io.EOF,
	},
	{
		name:    "comment with id is not a keepalive",
		in:      ": note\nid: 1\n\n",
		want:    []sse.Event{{Raw: data(": note\nid: 1\n\n")}},
		wantErr: io.EOF,
	},
	{
		name:    "multi-line data",
		in:      "data: a\ndata:b\ndata:  c\ndata\ndata:\n\n",
		want:    []sse.Event{{Raw: data("data: a\ndata:b\ndata:  c\ndata\ndata:\n\n"), Data: data("a\nb\n c\n\n")}},
		wantErr: io.EOF,
	},
	{
		name:    "empty data line",
		in:      "data\n\ndata:\n\ndata: \n\n",
		want:    []sse.Event{{Raw: data("data\n\n"), Data: data("")}, {Raw: data("data:\n\n"), Data: data("")}, {Raw: data("data: \n\n"), Data: data("")}},
		wantErr: io.EOF,
	},
	{
		name:    "colons in value",
		in:      "data: {\"a\":\"b:c\"}\ndata::x\n\n",
		want:    []sse.Event{{Raw: data("data: {\"a\":\"b:c\"}\ndata::x\n\n"), Data: data("{\"a\":\"b:c\"}\n:x")}},
		wantErr: io.EOF,
	},
	{
		name:    "last event field wins",
		in:      "event: a\nevent: b\ndata: x\n\n",
		want:    []sse.Event{{Raw: data("event: a\nevent: b\ndata: x\n\n"), Type: "b", Data: data("x")}},
		wantErr: io.EOF,
	},
	{
		name:    "event without colon is empty type",
		in:      "event: a\nevent\n\n",
		want:    []sse.Event{{Raw: data("event: a\nevent\n\n")}},
		wantErr: io.EOF,
	},
	{
		name:    "type does not carry over",
		in:      "event: a\ndata: 1\n\ndata: 2\n\n",
		want:    []sse.Event{{Raw: data("event: a\ndata: 1\n\n"), Type: "a", Data: data("1")}, {Raw: data("data: 2\n\n"), Data: data("2")}},
		wantErr: io.EOF,
	},
	{
		name:    "id retry and unknown fields ignored but kept",
		in:      "id: 42\nretry: 1000\nfoo: bar\ndata: x\n\nid: 7\n\n",
		want:    []sse.Event{{Raw: data("id: 42\nretry: 1000\nfoo: bar\ndata: x\n\n"), Data: data("x")}, {Raw: data("id: 7\n\n")}},
		wantErr: io.EOF,
	},
	{
		name:    "field names are case-sensitive",
		in:      "Data: x\nEVENT: y\n\n",
		want:    []sse.Event{{Raw: data("Data: x\nEVENT: y\n\n")}},
		wantErr: io.EOF,
	},
	{
		name:    "unknown event type passed through",
		in:      "event: future_thing\ndata: {}\n\n",
		want:    []sse.Event{{Raw: data("event: future_thing\ndata: {}\n\n"), Type: "future_thing", Data: data("{}")}},
		wantErr: io.EOF,
	},
	{
		name:    "cr only",
		in:      "event: e\rdata: a\rdata: b\r\rdata: c\r\r",
		want:    []sse.Event{{Raw: data("event: e\rdata: a\rdata: b\r\r"), Type: "e", Data: data("a\nb")}, {Raw: data("data: c\r\r"), Data: data("c")}},
		wantErr: io.EOF,
	},
	{
		name:    "crlf",
		in:      "event: e\r\ndata: a\r\ndata: b\r\n\r\n: k\r\n\r\n",
		want:    []sse.Event{{Raw: data("event: e\r\ndata: a\r\ndata: b\r\n\r\n"), Type: "e", Data: data("a\nb")}, {Raw: data(": k\r\n\r\n"), Comment: true}},
		wantErr: io.EOF,
	},
	{
		name:    "mixed line endings",
		in:      "data: a\r\ndata: b\rdata: c\n\r\ndata: d\n\r",
		want:    []sse.Event{{Raw: data("data: a\r\ndata: b\rdata: c\n\r\n"), Data: data("a\nb\nc")}, {Raw: data("data: d\n\r"), Data: data("d")}},
		wantErr: io.EOF,
	},
	{
		name:    "cr then crlf is two line endings",
		in:      "data: a\r\r\n",
		want:    []sse.Event{{Raw: data("data: a\r\r\n"), Data: data("a")}},
		wantErr: io.EOF,
	},
	{
		name:    "lf then cr is two line endings",
		in:      "data: a\n\rdata: b\n\n",
		want:    []sse.Event{{Raw: data("data: a\n\r"), Data: data("a")}, {Raw: data("data: b\n\n"), Data: data("b")}},
		wantErr: io.EOF,
	},
	{
		name:    "stray blank lines",
		in:      "\n\r\ndata: a\n\n\n",
		want:    []sse.Event{{Raw: data("\n")}, {Raw: data("\r\n")}, {Raw: data("data: a\n\n"), Data: data("a")}, {Raw: data("\n")}},
		wantErr: io.EOF,
	},
	{
		name:    "byte order mark at start",
		in:      "\ufeffdata: a\n\n",
		want:    []sse.Event{{Raw: data("\ufeffdata: a\n\n"), Data: data("a")}},
		wantErr: io.EOF,
	},
	{
		name:    "byte order mark before blank line",
		in:      "\ufeff\ndata: a\n\n",
		want:    []sse.Event{{Raw: data("\ufeff\n")}, {Raw: data("data: a\n\n"), Data: data("a")}},
		wantErr: io.EOF,
	},
	{
		name:    "only one byte order mark ignored",
		in:      "\ufeff\ufeffdata: a\n\n",
		want:    []sse.Event{{Raw: data("\ufeff\ufeffdata: a\n\n")}},
		wantErr: io.EOF,
	},
	{
		// Only the stream's first line may start with one: the second
		// line here is a field named U+FEFF, not a blank line.
		name:    "byte order mark on the first event's second line",
		in:      "data: a\n\ufeff\ndata: b\n\n",
		want:    []sse.Event{{Raw: data("data: a\n\ufeff\ndata: b\n\n"), Data: data("a\nb")}},
		wantErr: io.EOF,
	},
	{
		name:    "byte order mark later is data",
		in:      "data: a\n\n\ufeffdata: b\n\ndata: \ufeffc\n\n",
		want:    []sse.Event{{Raw: data("data: a\n\n"), Data: data("a")}, {Raw: data("\ufeffdata: b\n\n")}, {Raw: data("data: \ufeffc\n\n"), Data: data("\ufeffc")}},
		wantErr: io.EOF,
	},
	{
		name:    "binary data passes through",
		in:      "data: \x00\xff\xfe\n\n",
		want:    []sse.Event{{Raw: data("data: \x00\xff\xfe\n\n"), Data: data("\x00\xff\xfe")}},
		wantErr: io.EOF,
	},
	{
		name:    "missing final blank line",
		in:      "data: a\n\nevent: e\ndata: b\n",
		want:    []sse.Event{{Raw: data("data: a\n\n"), Data: data("a")}, {Raw: data("event: e\ndata: b\n"), Type: "e", Data: data("b")}},
		wantErr: sse.ErrTruncated,
	},
	{
		name:    "missing final line ending",
		in:      "data: a\n\ndata: b",
		want:    []sse.Event{{Raw: data("data: a\n\n"), Data: data("a")}, {Raw: data("data: b")}},
		wantErr: sse.ErrTruncated,
	},
	{
		name:    "final cr ends the line",
		in:      "data: a\r",
		want:    []sse.Event{{Raw: data("data: a\r"), Data: data("a")}},
		wantErr: sse.ErrTruncated,
	},
	{
		name:    "truncated keepalive",
		in:      ": ka\n",
		want:    []sse.Event{{Raw: data(": ka\n"), Comment: true}},
		wantErr: sse.ErrTruncated,
	},
	{
		name:    "event at the size limit",
		in:      "data: 012\n\n", // 11 bytes
		max:     11,
		want:    []sse.Event{{Raw: data("data: 012\n\n"), Data: data("012")}},
		wantErr: io.EOF,
	},
	{
		name:    "event over the size limit",
		in:      "data: 0\n\ndata: 0123\n\n",
		max:     11,
		want:    []sse.Event{{Raw: data("data: 0\n\n"), Data: data("0")}},
		wantErr: sse.ErrTooLarge,
	},
	{
		name:    "line over the size limit",
		in:      "data: 0123456789",
		max:     11,
		wantErr: sse.ErrTooLarge,
	},
	{
		name:    "crlf over the size limit by its lf",
		in:      "data: 012\r\n\r\n",
		max:     12,
		wantErr: sse.ErrTooLarge,
	},
}

// oneShot parses in with a single read.
func oneShot(in []byte, maxEventBytes int) ([]sse.Event, error) {
	return readAll(bytes.NewReader(in), maxEventBytes)
}

func TestReader(t *testing.T) {
	for _, tc := range readerCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := oneShot([]byte(tc.in), tc.max)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("final error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("events (-got +want):\n%s", diff)
			}
			if tc.wantErr != sse.ErrTooLarge {
				if diff := cmp.Diff(string(concatRaw(got)), tc.in); diff != "" {
					t.Errorf("concatenated Raw (-got +want):\n%s", diff)
				}
			}
		})
	}
}

// readerMakers build readers that split the input into reads differently.
var readerMakers = []struct {
	name string
	make func([]byte) io.Reader
}{
	{"one byte", func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
	{"half", func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }},
	{"data with eof", func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) }},
	{"one byte with eof", func(b []byte) io.Reader { return iotest.DataErrReader(iotest.OneByteReader(bytes.NewReader(b))) }},
	{"chunks of 3", func(b []byte) io.Reader { return &chunkReader{b: b, n: 3} }},
}

// checkSame fails unless reading in through r gives the one-shot result and
// the events' Raw bytes add up to in.
func checkSame(t *testing.T, what string, in []byte, maxEventBytes int, r io.Reader) {
	t.Helper()
	want, wantErr := oneShot(in, maxEventBytes)
	got, err := readAll(r, maxEventBytes)
	if errClass(err) != errClass(wantErr) {
		t.Fatalf("%s: final error = %v, want %v", what, err, wantErr)
	}
	if !eventsEqual(got, want) { // cmp.Diff only on failure: this runs for every split point
		t.Fatalf("%s: events (-got +want):\n%s", what, cmp.Diff(got, want))
	}
	if !errors.Is(wantErr, sse.ErrTooLarge) && !bytes.Equal(concatRaw(got), in) {
		t.Fatalf("%s: concatenated Raw = %q, want the input %q", what, concatRaw(got), in)
	}
}

func TestReaderSplitReads(t *testing.T) {
	inputs := map[string][]byte{}
	for _, tc := range readerCases {
		if tc.max == 0 {
			inputs[tc.name] = []byte(tc.in)
		}
	}
	for name, in := range goldenInputs(t) {
		inputs[name] = in
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			for _, rm := range readerMakers {
				checkSame(t, rm.name, in, 0, rm.make(in))
			}
			for i := range len(in) + 1 {
				r := io.MultiReader(bytes.NewReader(in[:i]), bytes.NewReader(in[i:]))
				checkSame(t, fmt.Sprintf("split at %d", i), in, 0, r)
			}
			if len(in) > 300 {
				return // every pair of split points is quadratic; small inputs suffice
			}
			for i := range len(in) + 1 {
				for j := i; j <= len(in); j++ {
					r := io.MultiReader(bytes.NewReader(in[:i]), bytes.NewReader(in[i:j]), bytes.NewReader(in[j:]))
					checkSame(t, fmt.Sprintf("split at %d and %d", i, j), in, 0, r)
				}
			}
		})
	}
}

func eventsEqual(a, b []sse.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Raw, b[i].Raw) || a[i].Type != b[i].Type || !bytes.Equal(a[i].Data, b[i].Data) ||
			(a[i].Data == nil) != (b[i].Data == nil) || a[i].Comment != b[i].Comment {
			return false
		}
	}
	return true
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// scriptReader returns its chunks one Read at a time, then fails the test if
// read again: it proves that Next returned without waiting for more input.
type scriptReader struct {
	t      *testing.T
	chunks []string
}

func (s *scriptReader) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		s.t.Errorf("Next read past the end of the script, so it would have blocked")
		return 0, errors.New("read past script")
	}
	n := copy(p, s.chunks[0])
	if n < len(s.chunks[0]) {
		s.t.Fatalf("script chunk larger than the read buffer")
	}
	s.chunks = s.chunks[1:]
	return n, nil
}

// TestNextDoesNotWaitForMoreInput checks that a complete event is returned
// as soon as its last byte arrives, which the proxy needs to flush per event.
func TestNextDoesNotWaitForMoreInput(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []string // Raw of the events to read, all from the script
	}{
		{name: "lf", chunks: []string{"data: a\n\n"}, want: []string{"data: a\n\n"}},
		{name: "crlf", chunks: []string{"data: a\r\n\r\n"}, want: []string{"data: a\r\n\r\n"}},
		{name: "two events in one read", chunks: []string{"data: a\n\ndata: b\n\n"}, want: []string{"data: a\n\n", "data: b\n\n"}},
		{name: "event split over reads", chunks: []string{"da", "ta: a\n", "\n"}, want: []string{"data: a\n\n"}},
		{name: "crlf split after cr", chunks: []string{"data: a\r\n\r", "\n"}, want: []string{"data: a\r\n\r\n"}},
		// Documented caveat: a final CR needs one byte of lookahead.
		{name: "cr only needs lookahead", chunks: []string{"data: a\r\r", "d"}, want: []string{"data: a\r\r"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd := sse.NewReader(&scriptReader{t: t, chunks: tc.chunks}, 0)
			for _, want := range tc.want {
				ev, err := rd.Next()
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				if diff := cmp.Diff(string(ev.Raw), want); diff != "" {
					t.Errorf("Raw (-got +want):\n%s", diff)
				}
			}
		})
	}
}

// TestBuffered: after the first event of a read, Buffered says whether the
// rest of that read holds a complete event, and when it says so, Next
// returns one without reading (the script fails the test otherwise).
func TestBuffered(t *testing.T) {
	tests := []struct {
		name string
		in   string // one read; its first event is read before asking
		want bool
	}{
		{"nothing more", "data: a\n\n", false},
		{"lf event", "data: a\n\ndata: b\n\n", true},
		{"partial line", "data: a\n\nda", false},
		{"lines without the blank one", "data: a\n\nevent: x\ndata: b\n", false},
		{"crlf event", "data: a\n\ndata: b\r\n\r\n", true},
		{"crlf, lf not here yet", "data: a\n\ndata: b\r\n\r", false},
		{"cr event, last byte", "data: a\n\ndata: b\r\r", false},
		{"cr event, byte after", "data: a\n\ndata: b\r\rd", true},
		{"lf then cr blank line", "data: a\n\ndata: b\n\rx", true},
		{"comment block", "data: a\n\n: ping\n\n", true},
		{"lone blank line", "data: a\n\n\n", true},
		{"cr inside a line ending later", "data: a\n\nx\ry\n\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd := sse.NewReader(&scriptReader{t: t, chunks: []string{tc.in}}, 0)
			if rd.Buffered() {
				t.Fatal("Buffered before anything was read")
			}
			if _, err := rd.Next(); err != nil {
				t.Fatalf("first Next: %v", err)
			}
			if got := rd.Buffered(); got != tc.want {
				t.Fatalf("Buffered = %v, want %v", got, tc.want)
			}
			if tc.want {
				if _, err := rd.Next(); err != nil {
					t.Fatalf("Next after Buffered: %v", err)
				}
			}
		})
	}
}

// watchReader fails the test when read while forbid is set.
type watchReader struct {
	t      *testing.T
	r      io.Reader
	forbid bool
}

func (w *watchReader) Read(p []byte) (int, error) {
	if w.forbid {
		w.t.Fatalf("Next read the stream although Buffered reported a complete event")
	}
	return w.r.Read(p)
}

// checkBuffered reads in through r and fails when Next reads after
// Buffered reported true.
func checkBuffered(t *testing.T, r io.Reader, maxEventBytes int) {
	t.Helper()
	w := &watchReader{t: t, r: r}
	rd := sse.NewReader(w, maxEventBytes)
	for {
		w.forbid = rd.Buffered()
		_, err := rd.Next()
		w.forbid = false
		if err != nil {
			if rd.Buffered() {
				t.Fatalf("Buffered after %v", err)
			}
			return
		}
	}
}

// errAfterReader returns data, then err with the last chunk.
type errAfterReader struct {
	data string
	err  error
}

func (e *errAfterReader) Read(p []byte) (int, error) {
	n := copy(p, e.data)
	e.data = e.data[n:]
	if e.data == "" {
		return n, e.err
	}
	return n, nil
}

// countReader returns n and no error from every Read, whatever it read.
type countReader struct{ n int }

func (c countReader) Read([]byte) (int, error) { return c.n, nil }

func TestReaderErrors(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		r       io.Reader
		want    []sse.Event
		wantErr error
	}{
		{
			name:    "read error mid-event keeps partial bytes",
			r:       &errAfterReader{data: "data: a\n\ndata: b\n", err: errBoom},
			want:    []sse.Event{{Raw: data("data: a\n\n"), Data: data("a")}, {Raw: data("data: b\n"), Data: data("b")}},
			wantErr: errBoom,
		},
		{
			name:    "read error after a final cr",
			r:       &errAfterReader{data: "data: a\r", err: errBoom},
			want:    []sse.Event{{Raw: data("data: a\r"), Data: data("a")}},
			wantErr: errBoom,
		},
		{
			name:    "read error between events",
			r:       &errAfterReader{data: "data: a\n\n", err: io.ErrUnexpectedEOF},
			want:    []sse.Event{{Raw: data("data: a\n\n"), Data: data("a")}},
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			name:    "timeout",
			r:       iotest.TimeoutReader(bytes.NewReader([]byte("data: a\n\ndata: b\n\n"))),
			want:    []sse.Event{{Raw: data("data: a\n\n"), Data: data("a")}, {Raw: data("data: b\n\n"), Data: data("b")}},
			wantErr: iotest.ErrTimeout, // the second Read fails
		},
		{
			name:    "error first",
			r:       iotest.ErrReader(errBoom),
			wantErr: errBoom,
		},
		{
			name:    "reads that bring nothing",
			r:       countReader{n: 0},
			wantErr: io.ErrNoProgress,
		},
		{
			name:    "a read that claims more than it was given",
			r:       countReader{n: 1 << 20},
			wantErr: sse.ErrBadRead,
		},
		{
			name:    "a read that claims fewer than no bytes",
			r:       countReader{n: -1},
			wantErr: sse.ErrBadRead,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(tc.r, 0)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("final error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("events (-got +want):\n%s", diff)
			}
		})
	}
}

func TestErrorsAreSticky(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		max       int
		first     error
		afterward error
	}{
		{name: "eof", in: "data: a\n\n", first: nil, afterward: io.EOF},
		{name: "truncated", in: "data: a", first: sse.ErrTruncated, afterward: io.EOF},
		{name: "too large", in: "data: 0123\n\ndata: a\n\n", max: 8, first: sse.ErrTooLarge, afterward: sse.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd := sse.NewReader(bytes.NewReader([]byte(tc.in)), tc.max)
			if _, err := rd.Next(); !errors.Is(err, tc.first) {
				t.Fatalf("first Next error = %v, want %v", err, tc.first)
			}
			for range 2 {
				if ev, err := rd.Next(); !errors.Is(err, tc.afterward) || ev.Raw != nil {
					t.Fatalf("later Next = %q, %v, want no event and %v", ev.Raw, err, tc.afterward)
				}
			}
		})
	}
}

// TestBuffersReused documents that Raw and Data alias the Reader's buffers
// and checks that the slices are capped, so appending to them is safe.
func TestBuffersReused(t *testing.T) {
	rd := sse.NewReader(bytes.NewReader([]byte("data: a\n\ndata: b\n\n")), 0)
	first, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if cap(first.Raw) != len(first.Raw) || cap(first.Data) != len(first.Data) {
		t.Errorf("Raw and Data must be capped to their length; caps %d and %d", cap(first.Raw), cap(first.Data))
	}
	_ = append(first.Raw, 'x')
	_ = append(first.Data, 'x')
	second, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(second.Raw), "data: b\n\n"); diff != "" {
		t.Errorf("second Raw after appending to the first (-got +want):\n%s", diff)
	}
}

// loopReader repeats b forever.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.b[l.off:])
	l.off = (l.off + n) % len(l.b)
	return n, nil
}

func TestNextAllocs(t *testing.T) {
	stream := append(openAIStream(20), anthropicSample...)
	rd := sse.NewReader(&loopReader{b: stream}, 0)
	for range 100 { // warm up: grow buffers, intern types
		if _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if got := testing.AllocsPerRun(1000, func() {
		if _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
	}); got != 0 {
		t.Errorf("Next allocations per event = %v, want 0", got)
	}
}

// TestKnownTypes: a known type is returned without allocating from its
// first event on, an unknown one after its first; both read as written.
func TestKnownTypes(t *testing.T) {
	// The first event warms up (AllocsPerRun calls once more first); it is
	// the longest, so that buffers need not grow after it.
	in := []byte("event: some_longer_unknown_type\ndata: {}\n\nevent: message_start\ndata: {}\n\n")
	known := []string{"message_start"}
	rd := sse.NewReader(&loopReader{b: in}, 0)
	rd.KnownTypes(known)
	want := "some_longer_unknown_type"
	if got := testing.AllocsPerRun(1, func() {
		if ev, err := rd.Next(); err != nil || ev.Type != want {
			t.Fatalf("Next = %q, %v; want %q", ev.Type, err, want)
		}
		want = "message_start"
	}); got != 0 {
		t.Errorf("a known type's first event: %v allocations, want 0", got)
	}
	for _, want := range []string{"some_longer_unknown_type", "message_start", "some_longer_unknown_type"} {
		if ev, err := rd.Next(); err != nil || ev.Type != want {
			t.Fatalf("Next = %q, %v; want %q", ev.Type, err, want)
		}
	}
	if known[0] != "message_start" || len(known) != 1 {
		t.Fatalf("KnownTypes changed its list: %q", known)
	}
}
